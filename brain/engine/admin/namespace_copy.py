"""Copying a namespace from another shard's log into this store (spec/05-durability.md
§14.9), the engine's half of a move.

A shard's store is its log applied from LSN 1, and every key of a namespace starts
with the namespace's id, so the namespace's part of the store is the log's changes
to those keys applied in order. The copy reads the source shard's records, keeps each
plan's changes to the namespace's keys and logs them here as plans of their own
(:func:`plan_copy`), so this shard's followers, and a node rebuilt from this log,
copy the same rows. Left out: the ``meta`` table (no namespace's), and the change log,
whose keys carry the source log's LSNs, which mean nothing on this log (a subscriber
of a moved namespace starts again on its new shard). A ``vector_scopes`` row names the
LSN of its vectors' last write, which the vector index files are checked against:
it takes the LSN of the copy's own record.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Final

from brain import cbor
from brain.engine.index.vectors import VectorIndexes
from brain.engine.store.scope import namespace_id
from brain.engine.store.tables import CHANGE_LOG, META, VECTOR_SCOPES
from brain.engine.wal.format import WalRecord
from brain.engine.wal.parts import join_parts
from brain.engine.write.plan import PLAN_RECORD_KIND, Change, Plan, Put, decode_plan
from brain.engine.write.writer import PlanContext, PlanFn
from brain.errors import StorageFault

__all__ = ["COPY_PLAN_BYTES", "CopyBatch", "copy_batches", "plan_copy"]

COPY_PLAN_BYTES: Final = 256 * 1024
"""Bytes of keys and values one copy record carries at most (one source record's
changes may make it larger: they fitted in the source log, so they fit here): well
under the NATS servers' default 1 MiB ``max_payload``, and a batch the writer
commits in milliseconds."""

_LEFT_OUT: Final = frozenset({META, CHANGE_LOG})


@dataclass(frozen=True, slots=True)
class CopyBatch:
    """The changes to one namespace's keys of a run of source records."""

    changes: tuple[Change, ...]
    last_lsn: int
    """The source LSN of the run's last record."""
    record_time: int
    """The latest record time of the run (this store's clock must not fall behind it)."""


def copy_batches(namespace: str, records: Iterable[WalRecord]) -> Iterator[CopyBatch]:
    """The source ``records``' changes to ``namespace``'s keys, in order, in batches of
    about :data:`COPY_PLAN_BYTES`; a batch may hold no change (records of other
    namespaces only), so the caller sees the copy's progress through the source."""
    prefix = namespace_id(namespace)
    changes: list[Change] = []
    size = 0
    latest = 0
    last = 0
    for record in join_parts(records):
        if record.kind != PLAN_RECORD_KIND:
            raise StorageFault(
                f"source record {record.lsn} has kind {record.kind}, which this build does "
                "not know; refusing to copy past it"
            )
        for change in decode_plan(record.payload).changes:
            if change.table in _LEFT_OUT or not change.key.startswith(prefix):
                continue
            changes.append(change)
            size += len(change.key) + (len(change.value) if isinstance(change, Put) else 8)
        last, latest = record.last, max(latest, record.record_time)
        if size >= COPY_PLAN_BYTES:
            yield CopyBatch(tuple(changes), last, latest)
            changes, size = [], 0
    if last:
        yield CopyBatch(tuple(changes), last, latest)


def plan_copy(batch: CopyBatch, indexes: VectorIndexes | None = None) -> PlanFn:
    """The plan function logging ``batch`` here. Its answer is CBOR ``{copied: n}``.
    Once committed, the vectors it wrote join ``indexes`` (the planner's in-memory
    graphs), as they join a follower's when it applies the record."""

    def plan(ctx: PlanContext) -> Plan:
        changes = tuple(_here(change, ctx.lsn) for change in batch.changes)
        lsn = ctx.lsn
        after = None if indexes is None else (lambda: indexes.follow(lsn, changes))
        return Plan(changes, (cbor.encode({"copied": len(changes)}),), after)

    return plan


def _here(change: Change, lsn: int) -> Change:
    if not (isinstance(change, Put) and change.table == VECTOR_SCOPES):
        return change
    state = cbor.decode(change.value)
    if not isinstance(state, dict):
        raise StorageFault("a copied vector_scopes row is not a map")
    return replace(change, value=cbor.encode({**state, "lsn": lsn}))
