"""Where a replicated log lives: :class:`JetStreamLogOptions`.

Apart from :mod:`brain.engine.replication.jetstream_log` so that naming a log in
:class:`~brain.engine.database.DatabaseOptions` does not load the NATS client,
which only a database that uses the replicated log needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["REPLICAS", "JetStreamLogOptions"]

REPLICAS: Final = 3
"""Copies of every record: a quorum of two acknowledges it, so one server may be
lost (crashed, restarted, partitioned) without losing or refusing a write."""


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
