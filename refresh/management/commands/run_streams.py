"""`manage.py run_streams`: a streaming host of continuous materialized tables (see
refresh.streams and refresh.stream_hosts). `make run` starts one; docker-compose runs the
`streams` service; any number of them share the tables through leases in the database."""

from __future__ import annotations

import signal
from typing import Any

from django.core.management.base import BaseCommand

from refresh.streams.supervisor import Supervisor
from runtime import engine


class Command(BaseCommand):
    help = (
        "Host the streaming queries of active continuous materialized tables (this host's "
        "fair share of them, through leases shared with the other streaming hosts)."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--poll", type=float, default=2.0, help="seconds between looks at the database"
        )
        parser.add_argument(
            "--name", default=None, help="the host's name on pages (default hostname:pid)"
        )

    def handle(self, *args: Any, poll: float, name: str | None, **options: Any) -> None:
        supervisor = Supervisor(
            engine.session_config("lakeview-streams"), poll_seconds=poll, host_name=name
        )

        def stop(signum: int, frame: Any) -> None:
            # Queries stop between micro-batches, keeping their checkpoints.
            supervisor.stopping.set()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        supervisor.run_forever()
