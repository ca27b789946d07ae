"""The streaming hosts as monitoring shows them: each registered host, whether it is live,
and how many continuous tables it holds."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import (
    Count,
)
from django.utils import timezone

from refresh.models import StreamHost


def streaming_hosts(*, now: datetime | None = None) -> list[dict[str, Any]]:
    """Every registered streaming host (manage.py run_streams), oldest first: its name,
    start, last beat, whether it is live (a beat within STREAM_LEASE_SECONDS) and how many
    continuous tables it holds. One query."""
    now = now or timezone.now()
    lease = timedelta(seconds=float(settings.STREAM_LEASE_SECONDS))
    hosts = StreamHost.objects.annotate(held=Count("tables")).order_by("started_at", "id")
    return [
        {
            "name": host.name,
            "started_at": host.started_at,
            "heartbeat_at": host.heartbeat_at,
            "live": now - host.heartbeat_at < lease,
            "tables": host.held,
        }
        for host in hosts
    ]
