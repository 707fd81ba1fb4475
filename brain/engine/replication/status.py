"""Where a node stands in its shard's replication: :class:`ReplicationStatus`
(spec/05-durability.md §14.6).

Built by :meth:`Database.replication_status <brain.engine.database.Database.replication_status>`
from what the writer, the log, the planner lease and the follower already know,
without a request to the cluster and without reading the store, so the node
registry's heartbeat, ``/v1/cluster``, ``/v1/stats`` and ``/metrics`` may ask
for it as often as they like.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Final

from brain.engine.wal import RecordLog, WriteAheadLog

if TYPE_CHECKING:
    from brain.engine.replication.follower import Follower
    from brain.engine.replication.lease import PlannerLease

__all__ = ["ROLES", "STATES", "ReplicationStatus", "replication_status"]

ROLES: Final = ("single", "planner", "follower", "read-only")
"""A node's roles: ``single`` keeps its own local WAL (no cluster); ``planner``
plans its shard's writes; ``follower`` applies the stream and serves reads;
``read-only`` takes no writes and follows nothing (a storage fault: it stays so
until a restart; a planner that lost its lease or whose append failed is so only
until it follows again, spec/05-durability.md §14.3)."""

STATES: Final = ("live", "stale", "stopped")
"""A node registry entry's state (:mod:`brain.engine.replication.registry`):
heartbeating, silent past ``STALE_AFTER_S``, or stopped cleanly."""


@dataclass(frozen=True, slots=True)
class ReplicationStatus:
    """One node's place in its shard's replication, as it sees it now."""

    cluster: bool
    """Whether the log is a shard's JetStream stream (False: the local WAL)."""
    role: str
    """One of :data:`ROLES`."""
    node: str | None
    """This node's id (None without a planner lease)."""
    shard: str | None
    stream: str | None
    """The shard's stream, ``BRAIN_LOG_<shard>``."""
    log_generation: int
    """The generation of the stream holding the log now: 0 until its first
    compaction, then one more at each (spec/05-durability.md §14.10); 0 on a single
    node."""
    planner: str | None
    """The node that holds the shard's planner lease as this node last saw it."""
    applied_lsn: int
    """The last LSN applied to this node's store."""
    last_lsn: int
    """The last LSN of the log as this node knows it: its own appends on a planner
    (or a single node), the stream's last sequence at its last look on a follower
    (at most ``FOLLOW_POLL_S`` old while following)."""
    lag_records: int
    """``last_lsn - applied_lsn``: records this node knows of and has not applied."""
    lag_seconds: float
    """0 while caught up (at its last look it had applied everything the stream
    held); else the time since it last was. That bounds from above how long the
    oldest record it has not applied has waited, since that record was stored
    after the last look that found nothing new."""
    read_only_reason: str | None
    """Why this node takes no writes (a follower's names the planner), or None."""
    lease_renewals: int
    """Renewals of the planner lease this node made since it started."""
    takeovers: int
    """Times this node took the lease over from a holder that let its term pass."""
    promotions: int
    """Times this node began planning its shard's writes since it started: at open
    with the lease free, after taking it, and again after each rejoin (spec/05 §14.3).
    One spell of planning keeps one count, so a monitor (or a history checker) that
    sees ``planner`` twice with the same count knows the node planned throughout."""

    def to_json(self) -> dict[str, object]:
        """The status as ``/v1/cluster`` and the node registry show it."""
        return asdict(self)


def replication_status(
    wal: RecordLog,
    *,
    applied: int,
    fault: str | None,
    read_only: str | None,
    lease: PlannerLease | None,
    follower: Follower | None,
    promotions: int = 0,
) -> ReplicationStatus:
    """The status of the database whose log, lease and follower these are, whose
    writer has applied up to ``applied``, failed for ``fault`` (a storage fault) and
    refuses writes for ``read_only`` (the fault, or standing by)."""
    renewals = 0 if lease is None else lease.renewals
    takeovers = 0 if lease is None else lease.takeovers
    if isinstance(wal, WriteAheadLog):
        return ReplicationStatus(
            cluster=False,
            role="single" if fault is None else "read-only",
            node=None,
            shard=None,
            stream=None,
            log_generation=0,
            planner=None,
            applied_lsn=applied,
            last_lsn=wal.last_lsn,
            lag_records=max(0, wal.last_lsn - applied),
            lag_seconds=0.0,
            read_only_reason=read_only,
            lease_renewals=0,
            takeovers=0,
            promotions=0,
        )
    # A JetStream log (imported lazily by the database: the NATS client is slow to load).
    stream = str(getattr(wal, "stream", "")) or None
    options = getattr(wal, "options", None)
    shard = None if options is None else str(options.shard)
    following = follower is not None and not follower.promoted.is_set()
    if following:
        assert follower is not None
        last = max(follower.stream_last, applied)
        behind = last - applied
        lag_s = 0.0 if behind == 0 else max(0.0, time.monotonic() - follower.caught_up_at)
        role = "follower"
    else:
        last = max(wal.last_lsn, applied)
        behind = last - applied
        lag_s = 0.0
        role = "planner" if read_only is None else "read-only"
    if fault is not None:
        role = "read-only"
    return ReplicationStatus(
        cluster=True,
        role=role,
        node=None if lease is None else lease.node,
        shard=shard,
        stream=stream,
        log_generation=int(getattr(wal, "generation", 0)),
        planner=None if lease is None else lease.holder,
        applied_lsn=applied,
        last_lsn=last,
        lag_records=behind,
        lag_seconds=lag_s,
        read_only_reason=read_only,
        lease_renewals=renewals,
        takeovers=takeovers,
        promotions=promotions,
    )
