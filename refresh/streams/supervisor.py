"""The streaming host's loop (`Supervisor`, run by `manage.py run_streams`): every few seconds
a pass reads the desired state from the database and makes it so, through the jobs of
refresh.streams: the host's leases settled (hosting), pending rebuilds and manual refreshes
done (rebuilds), each running query checked (stops, catch_up, batches' progress), the
missing ones started (starts), the history folded (batches). It also starts a new Spark JVM
when this host's died, and stops every stream while the warehouse's disk is at its floor."""

from __future__ import annotations

import logging
import time

from django.db import close_old_connections

from catalog.watch import warehouse_floor
from refresh import stream_hosts
from refresh.spark import stream_queries
from refresh.streams import batches, catch_up, hosting, rebuilds, starts, stops
from refresh.streams.state import HostState, desired_tables, set_status, signature
from runtime.spark.session import forget_jvm, jvm_gone

logger = logging.getLogger(__name__)


class Supervisor(HostState):
    """One streaming host: its state, and the loop over its passes."""

    def run_forever(self) -> None:
        """Pass after pass until `stopping` is set; then stop the streams and leave."""
        hosting.join(self)
        logger.info("Streaming host %s (%s) started", self.host, self.host.token)
        try:
            while not self.stopping.is_set():
                close_old_connections()
                try:
                    self.sync_once()
                except Exception:  # noqa: BLE001 - the process keeps serving the other tables
                    logger.exception("A pass over the continuous tables failed")
                self.stopping.wait(hosting.pause(self))
        finally:
            self.stop_all()
            hosting.leave(self)

    def _recover_lost_jvm(self) -> None:
        """When this host's Spark JVM has exited (an OutOfMemoryError in a micro-batch ends
        it), start a new one: the host keeps its leases, which its heartbeat renews, so no
        other host would take its tables; their streams start again from their checkpoints
        in this pass, as after a restart of the process."""
        if self._spark is None or not jvm_gone():
            return
        logger.error(
            "This host's Spark JVM has exited; starting a new one, and the streams of %s "
            "again from their checkpoints",
            sorted(self.running),
        )
        self.running.clear()  # their queries lived in the dead JVM
        forget_jvm()
        self._spark = None

    def _paused_for_room(self) -> bool:
        """When the warehouse's disk is at its floor (catalog.watch.warehouse_floor), this
        host's streams stop and none starts until there is room again: a runaway stream
        must not fill the disk the other tables and the database live on. A micro-batch
        running is given a few seconds, then cut short (its replay finds its marker)."""
        full = warehouse_floor()
        if full is None:
            return False
        if self.running:
            logger.error("Stopping the streams of %s: %s", sorted(self.running), full)
            stream_queries.stop_all_between_batches(
                [running.query for running in self.running.values()], timeout=5.0
            )
            for mt_id in list(self.running):
                del self.running[mt_id]
                set_status(
                    mt_id, "FAILED", error=f"Stopped: {full}; it starts again once there is room"
                )
        return True

    def stop_all(self) -> None:
        """Stop every query of this host between micro-batches (a clean stop)."""
        for running in list(self.running.values()):
            stops.stop(running)
        self.running.clear()

    def sync_once(self) -> None:
        """One pass: settle the leases, do the pending rebuilds and manual refreshes, check
        each running query (ended, changed, its progress, a view or static source moved),
        start the missing ones, fold the history now and then."""
        host = hosting.join(self)
        self._recover_lost_jvm()
        active = desired_tables()
        held = hosting.assign(self, host, active)
        # Taken before the rebuilds and starts below, which take seconds: a lease ending
        # meanwhile makes the next pass come at once.
        ends_in = stream_hosts.next_expiry(host, active)
        self.next_expiry = None if ends_in is None else time.monotonic() + ends_in
        if self._paused_for_room():
            return
        rebuilds.rebuild_pending(self, held)
        # Read again: a rebuild or manual refresh just gave its table a new checkpoint and
        # new pins, which its stream must start from.
        desired = desired_tables()
        for mt_id, running in list(self.running.items()):
            mt = desired.get(mt_id)
            if not running.query.isActive:
                stops.ended(self, running, mt, held=mt_id in held)
                continue
            if mt is None or signature(mt) != running.signature:
                stops.stop(running)
                del self.running[mt_id]
                stops.stopped(mt_id, running)
                continue
            batches.progress(running, mt)
            if not catch_up.follow_views(self, running, mt):
                catch_up.follow_static(self, running, mt)
        if self.restarting:
            # A catch-up or a recompute just gave its table a new checkpoint and pins (or
            # none): its stream starts from those, not from the ones read above.
            self.restarting = False
            desired = desired_tables()
        starts.start_all(
            self,
            [
                mt
                for mt_id, mt in desired.items()
                if mt_id in held
                and mt_id not in self.running
                and time.monotonic() >= self.retry_after.get(mt_id, 0)
            ],
        )
        if time.monotonic() - self.last_compaction > batches.COMPACT_EVERY_SECONDS:
            batches.compact_history(periodic=True)
            self.last_compaction = time.monotonic()
