"""A follower: the thread that keeps a database current from its shard's stream, and
takes the planner lease over when its holder stops renewing it
(spec/05-durability.md §14.3, §14.4).

Every :data:`FOLLOW_POLL_S` the thread asks the stream for its last sequence, reads
the records after the store's applied LSN and has the database apply them (in
batches of :data:`FOLLOW_BATCH`, each one LMDB transaction on the writer thread, as
recovery does), then looks at the lease. When the lease is free or its holder let a
whole term pass (:meth:`~brain.engine.replication.lease.PlannerLease.try_take`),
the follower takes it, applies what the stream holds up to its last sequence, and
hands over to the writer (``promote``): its appends are then fenced at that
sequence, and the thread ends.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Final

import nats.errors
import nats.js.errors

from brain.engine.replication.jetstream_log import JetStreamLog
from brain.engine.replication.lease import PlannerLease
from brain.engine.wal.parts import Whole, join_parts
from brain.errors import BrainError

__all__ = ["FOLLOW_BATCH", "FOLLOW_POLL_S", "FOLLOW_RETRY_S", "Follower"]

log = logging.getLogger("brain.engine")

FOLLOW_POLL_S: Final = 0.1
"""How often a follower asks the stream for new records and looks at the lease: one
small request to the stream's leader ten times a second, and a read on a follower
lags the planner by about this much."""

FOLLOW_BATCH: Final = 1000
"""Records applied per LMDB transaction while following (as in recovery)."""

FOLLOW_RETRY_S: Final = 1.0
"""Pause after a failed round (the cluster electing a leader, a damaged record)
before the next: the failure is logged once a round, not ten times a second."""


class Follower:
    """Applies the stream to the database until this node takes the planner lease.

    ``applied()`` is the store's applied LSN; ``apply(records)`` applies the next
    records (on the writer thread, returning once committed); ``restart()`` starts
    the store again from the base of a compacted log (spec/05-durability.md §14.10),
    when the log moved to a generation compacted past what the store applied;
    ``on_taken()`` runs
    as soon as this node takes the lease (it starts renewing it, so that a long
    catch-up does not let it run out); ``promote()`` makes
    the writer plan (once the lease is held and the stream applied to its end);
    ``planner(holder)`` is told who holds the lease at each look.
    """

    def __init__(
        self,
        log_: JetStreamLog,
        lease: PlannerLease,
        *,
        applied: Callable[[], int],
        apply: Callable[[list[Whole]], None],
        restart: Callable[[], None],
        on_taken: Callable[[], None],
        promote: Callable[[], None],
        planner: Callable[[str], None],
    ) -> None:
        self._log = log_
        self._lease = lease
        self._applied = applied
        self._apply = apply
        self._restart = restart
        self._on_taken = on_taken
        self._promote = promote
        self._planner = planner
        self._stop = threading.Event()
        self.promoted = threading.Event()
        """Set once this node took the lease and plans writes."""
        self.rounds = 0
        self.failures = 0
        self.restarts = 0
        """Times the store started again from a compacted log's base while following."""
        self.stream_last = 0
        """The stream's last sequence at this follower's last look."""
        self.caught_up_at = time.monotonic()
        """Monotonic time of the last look after which everything the stream held was
        applied (the replication status's ``lag_seconds`` counts from it)."""
        self._thread = threading.Thread(target=self._run, name="brain-follower", daemon=True)

    def start(self) -> None:
        """Start following."""
        self._thread.start()

    def close(self) -> None:
        """Stop after the current round. Idempotent."""
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if self._round():
                    return
            except (BrainError, TimeoutError, nats.errors.Error, nats.js.errors.Error) as exc:
                self.failures += 1
                log.warning("following the log %s: %s", self._log.location, exc)
                self._stop.wait(FOLLOW_RETRY_S)
                continue
            except Exception:  # a bug, or LMDB failing: logged, and the next round tries again
                self.failures += 1
                log.exception("following the log %s failed", self._log.location)
                self._stop.wait(FOLLOW_RETRY_S)
                continue
            self._stop.wait(FOLLOW_POLL_S)

    def _round(self) -> bool:
        """Apply what the stream holds, then look at the lease; True once promoted."""
        self.rounds += 1
        self._catch_up()
        holder = self._lease.try_take()
        if holder is not None:
            self._planner(holder)
            return False
        self._on_taken()
        # Held now: nobody else appends (the old holder's term ended before this
        # node could take it, and the fence refuses it if it has not noticed), so
        # the stream's last sequence is final until this node appends.
        self._catch_up()
        if self._stop.is_set():
            return True  # closing: the lease is released by the database's close
        self._promote()
        self.promoted.set()
        log.info(
            "node %s plans the writes of shard %s from LSN %d",
            self._lease.node,
            self._lease.key,
            self._log.next_lsn,
        )
        return True

    def _catch_up(self) -> None:
        last = self._log.refresh()
        self.stream_last = last
        made = self._log.compaction
        if made is not None and self._applied() < made.compacted_to:
            # Counted first: the restart wakes the reads waiting for it.
            self.restarts += 1
            self._restart()
        applied = self._applied()
        if last <= applied:
            self.caught_up_at = time.monotonic()
            return
        batch: list[Whole] = []
        for record in join_parts(self._log.read_from(applied + 1)):
            batch.append(record)
            if len(batch) >= FOLLOW_BATCH:
                self._apply(batch)
                batch = []
            if self._stop.is_set():
                return
        if batch:
            self._apply(batch)
        if self._applied() >= last:
            self.caught_up_at = time.monotonic()
