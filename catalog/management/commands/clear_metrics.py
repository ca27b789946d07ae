"""Empty PROMETHEUS_MULTIPROC_DIR of the metrics files processes left there: what a
deployment's `migrate` step runs before the app's processes start (docker-compose.yml), so
that GET /metrics counts from zero after each start (infra/metrics.py)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from infra import metrics


class Command(BaseCommand):
    help = "Delete the metrics files in PROMETHEUS_MULTIPROC_DIR (nothing when it is unset)."

    def handle(self, *args, **options) -> None:
        removed = metrics.clear()
        self.stdout.write(f"{removed} metrics files removed")
