"""Outcomes other apps may act on (alerts/ connects to them)."""

from django.dispatch import Signal

#: A maintenance run ended (`run`, its state final).
run_finished = Signal()
