"""Replicated logs: the engine's record log kept by a cluster instead of one disk.

:class:`~brain.engine.replication.jetstream_log.JetStreamLog` keeps one shard's
records in a NATS JetStream stream with three replicas; it implements
:class:`~brain.engine.wal.interface.RecordLog`, so the writer and recovery use
it as they use the local WAL. See ``spec/05-durability.md`` §14.

Only the options are loaded here; the log itself (and with it the NATS client) is
imported from its module by the one who opens it.
"""

from brain.engine.replication.options import DEFAULT_LEASE_TERM_S, REPLICAS, JetStreamLogOptions

__all__ = ["DEFAULT_LEASE_TERM_S", "REPLICAS", "JetStreamLogOptions"]
