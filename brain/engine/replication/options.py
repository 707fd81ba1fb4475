"""Where a replicated log lives: :class:`JetStreamLogOptions`.

Apart from :mod:`brain.engine.replication.jetstream_log` so that naming a log in
:class:`~brain.engine.database.DatabaseOptions` does not load the NATS client,
which only a database that uses the replicated log needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["DEFAULT_LEASE_TERM_S", "DEFAULT_TRIM_AFTER_BYTES", "REPLICAS", "JetStreamLogOptions"]

REPLICAS: Final = 3
"""Copies of every record: a quorum of two acknowledges it, so one server may be
lost (crashed, restarted, partitioned) without losing or refusing a write."""

DEFAULT_LEASE_TERM_S: Final = 10.0
"""How long a planner lease holds without a renewal: several times a stream leader
election (a few seconds), so a cluster that loses a server does not depose a healthy
planner, and short enough that writes resume within seconds of a planner's crash."""

DEFAULT_TRIM_AFTER_BYTES: Final = 1 << 30
"""The stream's size (1 GiB) below which the planner never trims it
(spec/05-durability.md §14.10): a stream that only grows is compacted once it holds
this much and twice the store's bytes, so a fresh node replays at most about that
much, and a small store is not copied again and again."""


@dataclass(frozen=True, slots=True)
class JetStreamLogOptions:
    """Where a :class:`JetStreamLog` lives: the cluster's servers and the shard."""

    servers: tuple[str, ...]
    """``nats://host:port`` of the cluster's servers (any one is enough to connect;
    the client moves to another when its server goes)."""
    shard: str = "0"
    """The shard whose log this is: the stream ``BRAIN_LOG_<shard>``."""
    replicas: int = REPLICAS
    """Replicas of a stream this log creates (an existing stream keeps its own)."""
    node: str | None = None
    """This node's id among the shard's database nodes. None (the default): no
    planner lease, the database writes while the fence lets it. Set: the database
    takes the shard's planner lease when it is free and plans writes only while it
    holds it; otherwise it opens as a follower that applies the stream, serves
    reads and takes the lease over when its holder stops renewing it
    (spec/05-durability.md §14.3, §14.4)."""
    lease_term_s: float = DEFAULT_LEASE_TERM_S
    """The planner lease's term (with :attr:`node`)."""
    trim_after_bytes: int = DEFAULT_TRIM_AFTER_BYTES
    """The planner compacts the stream (spec/05-durability.md §14.10) once it holds
    this many bytes and twice the store's; 0 never trims (only a purge compacts)."""
