"""Outcomes other apps may act on (alerts/ connects to them). Sent inside the transaction
that records the outcome: a receiver writes in it, and acts outside on commit."""

from django.dispatch import Signal

#: A refresh run ended (`run`, its state final; the table already counted the failure and
#: may have suspended itself).
run_finished = Signal()
#: A snapshot of a materialized table was verified (`verification`).
verified = Signal()
