"""Outcomes other apps may act on (alerts/ connects to them; refresh/lineage_events.py too).
Sent inside the transaction that records the outcome: a receiver writes in it, and acts
outside on commit."""

from django.dispatch import Signal

#: A refresh run started (`run`, RUNNING): claimed by a worker or a streaming host, or a
#: streaming host's load. A micro-batch, recorded once it committed, only finishes.
run_started = Signal()
#: A refresh run ended (`run`, its state final; the table already counted the failure and
#: may have suspended itself).
run_finished = Signal()
#: A snapshot of a materialized table was verified (`verification`).
verified = Signal()
