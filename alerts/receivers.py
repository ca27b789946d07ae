"""What alerts does when refresh or maintenance announce an outcome (apps.py connects
them). Inside the outcome's transaction, in a savepoint: an error here is logged and never
undoes the outcome itself."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.db import transaction

from alerts import services

logger = logging.getLogger(__name__)


def _guarded(action: Callable[[], int], what: str) -> None:
    try:
        with transaction.atomic():
            action()
    except Exception:
        logger.exception("Notifications of %s could not be recorded", what)


def refresh_run_finished(sender: Any, run: Any, **kwargs: Any) -> None:
    _guarded(lambda: services.refresh_run_finished(run), f"refresh run {run.pk}")


def maintenance_run_finished(sender: Any, run: Any, **kwargs: Any) -> None:
    _guarded(lambda: services.maintenance_run_finished(run), f"maintenance run {run.pk}")


def verified(sender: Any, verification: Any, **kwargs: Any) -> None:
    _guarded(lambda: services.verified(verification), f"verification {verification.pk}")
