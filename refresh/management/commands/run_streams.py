"""`manage.py run_streams`: the streaming process of continuous materialized tables (see
refresh.streams). `make run` starts it; docker-compose runs it as the `streams` service."""

from __future__ import annotations

import signal
from typing import Any

from django.core.management.base import BaseCommand

from refresh import engine
from refresh.streams import Supervisor


class Command(BaseCommand):
    help = "Run the streaming queries of every active continuous materialized table."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--poll", type=float, default=2.0, help="seconds between looks at the database"
        )

    def handle(self, *args: Any, poll: float, **options: Any) -> None:
        supervisor = Supervisor(engine.session_config("lakeview-streams"), poll_seconds=poll)

        def stop(signum: int, frame: Any) -> None:
            # Queries stop between micro-batches, keeping their checkpoints.
            supervisor.stopping.set()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        supervisor.run_forever()
