"""Dropping a namespace: every key of every space of it, as logged plans.

Every table but ``meta`` keys its rows by the scope prefix, whose first 16 bytes are
the namespace id (:mod:`brain.engine.store.scope`), so the keys of one namespace are
one contiguous range per table: the records, their indexes (vectors, lexical
postings and statistics), the idempotency records, the change log. A drop is planned
as physical plans of deletes, logged like any write, so that a follower applying the
log and a node rebuilt from it drop the same keys (``spec/05-durability.md`` §14).
A large namespace is dropped in batches of at most :data:`DROP_BATCH_KEYS` keys, one
logged record each, so no record or transaction outgrows the log's limits.
"""

from __future__ import annotations

from typing import Final

from brain import cbor
from brain.engine.index.vectors import VectorIndexes
from brain.engine.store.scope import namespace_id
from brain.engine.store.tables import META, TABLES
from brain.engine.write.plan import Delete, Plan
from brain.engine.write.writer import PlanContext, PlanFn, Writer
from brain.errors import StorageFault

__all__ = ["DROP_BATCH_KEYS", "DROP_WAIT_S", "drop_namespace", "plan_drop_batch"]

DROP_BATCH_KEYS: Final = 2_000
"""Keys one drop record deletes at most: a record of this many deletes stays well
under the log's largest message (each delete carries a key of at most a few hundred
bytes), and one batch does not hold the writer long."""

DROP_WAIT_S: Final = 60.0
"""How long a drop waits for one of its batches to be written before giving up."""


def _namespace_keys(ctx: PlanContext, prefix: bytes, limit: int) -> list[Delete]:
    """Up to ``limit`` deletes of keys starting with ``prefix``, table by table."""
    deletes: list[Delete] = []
    for table in TABLES:
        if table == META:
            continue
        cursor = ctx.txn.cursor(db=ctx.store.table(table))
        if not cursor.set_range(prefix):
            continue
        for key in cursor.iternext(keys=True, values=False):
            raw = bytes(key)
            if not raw.startswith(prefix):
                break
            deletes.append(Delete(table, raw))
            if len(deletes) >= limit:
                return deletes
    return deletes


def plan_drop_batch(
    namespace: str, indexes: VectorIndexes | None = None, limit: int = DROP_BATCH_KEYS
) -> PlanFn:
    """The plan function of one drop batch: deletes of up to ``limit`` keys of
    ``namespace``, found when planned (so a batch sees every earlier write). Its answer
    is CBOR ``{deleted: n}``; ``n == 0`` means nothing of the namespace is left.
    Once committed, the labels whose ``vector_labels`` rows it deleted leave
    ``indexes`` (the planner's in-memory graphs), as they leave a follower's when it
    applies the record (:meth:`VectorIndexes.follow`)."""
    prefix = namespace_id(namespace)

    def plan(ctx: PlanContext) -> Plan:
        deletes = tuple(_namespace_keys(ctx, prefix, limit))
        lsn = ctx.lsn
        after = None if indexes is None else (lambda: indexes.follow(lsn, deletes))
        return Plan(deletes, (cbor.encode({"deleted": len(deletes)}),), after)

    return plan


def drop_namespace(
    writer: Writer,
    namespace: str,
    indexes: VectorIndexes | None = None,
    limit: int = DROP_BATCH_KEYS,
) -> int:
    """Delete every key of ``namespace`` through ``writer``, batch after batch, until
    a batch finds none; returns how many keys were deleted. The caller keeps the
    namespace's writes refused meanwhile (the write gate), or a write between two
    batches would survive the drop."""
    total = 0
    while True:
        batch = plan_drop_batch(namespace, indexes, limit)
        answer = writer.submit(batch, namespace).result(DROP_WAIT_S)
        body = cbor.decode(answer)
        deleted = body["deleted"] if isinstance(body, dict) else None
        if not isinstance(deleted, int):
            raise StorageFault("a drop batch answered without its count")
        total += deleted
        if deleted == 0:
            return total
