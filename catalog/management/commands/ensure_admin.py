"""Make the first administrator from the environment, once: what a deployment's `migrate`
step runs (docker-compose.yml), so that a new installation can be signed in to.

DJANGO_SUPERUSER_USERNAME, DJANGO_SUPERUSER_PASSWORD and DJANGO_SUPERUSER_EMAIL are the
names Django's own `createsuperuser --noinput` reads. Unlike that command, this one succeeds
when the user already exists and leaves it as it is (its password included: one changed in
the app is not reset on every start), so it can run on every deployment."""

from __future__ import annotations

import os

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import IntegrityError, transaction


class Command(BaseCommand):
    help = (
        "Create a superuser from DJANGO_SUPERUSER_USERNAME, DJANGO_SUPERUSER_PASSWORD and "
        "DJANGO_SUPERUSER_EMAIL unless one by that name exists; do nothing without a username."
    )

    def handle(self, *args, **options) -> None:
        username = os.environ.get("DJANGO_SUPERUSER_USERNAME", "").strip()
        if not username:
            self.stdout.write("DJANGO_SUPERUSER_USERNAME is not set: no administrator made")
            return
        users = get_user_model().objects
        if users.filter(username=username).exists():
            self.stdout.write(f"The user {username!r} exists: left as it is")
            return
        password = os.environ.get("DJANGO_SUPERUSER_PASSWORD", "")
        if not password:
            raise CommandError(
                f"DJANGO_SUPERUSER_PASSWORD is not set: the administrator {username!r} needs one"
            )
        try:
            with transaction.atomic():
                users.create_superuser(
                    username, os.environ.get("DJANGO_SUPERUSER_EMAIL", ""), password
                )
        except IntegrityError:
            # Another deployment step made it between the check and the insert.
            self.stdout.write(f"The user {username!r} exists: left as it is")
            return
        self.stdout.write(f"Administrator {username!r} created")
