"""What the writer and recovery need from a log of records: :class:`RecordLog`.

The writer appends each planned batch, makes it durable (group commit), and
only then applies it to LMDB; recovery replays what the store has not applied.
Any log that keeps records in LSN order, dense from its first LSN, and says
truthfully when they are durable can stand behind the writer: the local
:class:`~brain.engine.wal.log.WriteAheadLog` (segment files and fsync) and the
replicated :class:`~brain.engine.replication.jetstream_log.JetStreamLog` (a
JetStream stream, durable once a quorum of its servers stored a record) both
do. The protocol is structural, so the local log implements it unchanged: the
hot path (``append`` then ``sync`` once per batch) is the same two calls it
always was.

Failure rule shared by every implementation: a failed append or sync raises
:class:`~brain.errors.WalSyncFailed` (or a subclass) and the log then takes no
more writes, so a write that is not durable is never reported as durable.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol

from brain.engine.wal.format import WalRecord

__all__ = ["RecordLog"]


class RecordLog(Protocol):
    """An ordered, durable log of :class:`~brain.engine.wal.format.WalRecord`.

    Owned by one thread (the writer's, after recovery); not thread-safe.
    """

    @property
    def location(self) -> str:
        """Where the log lives, for messages to the operator (a directory, a stream)."""
        ...

    @property
    def next_lsn(self) -> int:
        """The LSN the next appended record must carry."""
        ...

    @property
    def first_lsn(self) -> int:
        """The lowest LSN still held (:attr:`next_lsn` when no record is held)."""
        ...

    @property
    def last_lsn(self) -> int:
        """The LSN of the last record appended; 0 for a log that never held one."""
        ...

    @property
    def failed(self) -> bool:
        """Whether an append or sync failed; the log then takes no more writes."""
        ...

    @property
    def segments(self) -> list[Path]:
        """Local files holding the records, oldest first (empty for a remote log):
        what statistics report and a snapshot copies."""
        ...

    @property
    def max_record_payload(self) -> int:
        """The largest payload one record may hold here: a larger plan is logged as
        parts (:mod:`brain.engine.wal.parts`)."""
        ...

    @property
    def sync_count(self) -> int:
        """Group commits made durable by :meth:`sync` (fsyncs for the local log)."""
        ...

    @property
    def bytes_written(self) -> int:
        """Bytes this handle wrote to the log (record frames and any headers)."""
        ...

    def append(self, records: Sequence[WalRecord]) -> None:
        """Append ``records``, whose LSNs must run :attr:`next_lsn`, +1, ….

        A log may make them durable here already; the caller still calls
        :meth:`sync` before it relies on them. A failure raises
        :class:`~brain.errors.WalSyncFailed` and fails the log.
        """
        ...

    def sync(self) -> None:
        """Return once every appended record is durable (the group commit)."""
        ...

    def rotate(self) -> None:
        """Let the next :meth:`checkpoint` drop every record appended so far (a purge
        forces forgotten text out of the log this way)."""
        ...

    def checkpoint(self, durable_lsn: int) -> object:
        """The store is durable up to ``durable_lsn``: records at or below it may be
        dropped (the log decides which it actually drops)."""
        ...

    def read_from(self, lsn: int) -> Iterator[WalRecord]:
        """Every record with LSN ≥ ``lsn`` appended up to this call, in order."""
        ...

    def cut_torn_tail(self, applied_lsn: int) -> None:
        """Before the first append: repair the end of the log, knowing the store has
        applied up to ``applied_lsn`` (a log without torn tails does nothing)."""
        ...

    def close(self) -> None:
        """Release the log; does not sync. Idempotent."""
        ...
