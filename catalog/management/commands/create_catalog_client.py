"""Create credentials an engine uses to reach the Iceberg REST catalog."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from catalog.services.credentials import create_client


class Command(BaseCommand):
    help = "Create an Iceberg REST client for a user and print its credential (shown once)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("username", help="the user whose roles the client acts with")
        parser.add_argument("--name", default="engine", help="a label for the client")

    def handle(self, *args, username: str, name: str, **options) -> None:
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user named {username!r}")
        client, secret = create_client(name=name, user=user)
        self.stdout.write(f"{client.client_id}:{secret}")
