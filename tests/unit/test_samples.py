"""The sample data is generated, not shipped: the same rows on every machine and run, about
a million of them, consistent across tables."""

from __future__ import annotations

import pyarrow.compute as pc

from catalog.core import samples


def test_the_samples_are_the_same_rows_on_every_run():
    # Fixed seeds: figures a tutorial can quote.
    [orders] = samples.orders()
    assert str(pc.sum(orders["amount"])) == "202254977.21"
    assert orders.slice(0, 1).to_pylist()[0]["customer_id"] == 10769


def test_the_samples_hold_about_a_million_consistent_rows():
    [customers] = samples.customers()
    [orders] = samples.orders()
    events = samples.events()
    total = customers.num_rows + orders.num_rows + sum(batch.num_rows for batch in events)
    assert 900_000 <= total <= 1_100_000

    assert pc.count_distinct(orders["order_id"]).as_py() == orders.num_rows
    assert pc.min(orders["customer_id"]).as_py() >= 1
    assert pc.max(orders["customer_id"]).as_py() <= customers.num_rows
    assert pc.all(pc.equal(pc.cast(orders["order_ts"], "date32"), orders["order_date"])).as_py()
    # Each batch of events comes after the one before: a table appended to over time.
    for earlier, later in zip(events, events[1:], strict=False):
        assert pc.max(earlier["event_ts"]).as_py() < pc.min(later["event_ts"]).as_py()
