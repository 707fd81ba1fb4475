"""Export and import: a namespace's stored rows, moved exactly (`brain export`, `brain import`).

An export is JSON Lines: a header, then one line per stored row of the
namespace, ``{"table", "key", "value"}`` with key and value in hex, exactly as
stored, then a trailer with the row count and the scopes seen, so a cut file is
refused. Rows are read in one snapshot. Every table holding the namespace's
records, their history on both time axes, the retrieval indexes (postings and
vectors, so recalls answer the same without embedding anything again), the
audit log and the embedding backlog are exported. Left out, because they belong
to one database's life rather than to the records: the idempotency table (the
request ids of that database's clients), the change log (its LSNs), the purge
queue, and ``meta``.

An import writes rows through the writer as an ordinary logged write, batch by
batch. A scope receives an import only while it is empty, or when it already
holds rows of the same export (its id is recorded in ``imports``), so running
the same import again, whole or from any batch, completes it and changes
nothing else: an interrupted import is resumed by running it again. The record
clock is moved past the export's, so later writes are recorded after
everything imported.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

import lmdb

from brain.engine.index.service import Retrieval
from brain.engine.store.env import Store
from brain.engine.store.meta import get_progress
from brain.engine.store.scan import scan, scan_keys
from brain.engine.store.scope import ID_BYTES, SCOPE_PREFIX_BYTES, namespace_id
from brain.engine.store.tables import (
    CHANGE_LOG,
    ENTITIES,
    IDEMPOTENCY,
    IDEMPOTENCY_BY_TIME,
    IMPORTS,
    MEMORIES,
    META,
    PURGE_QUEUE,
    RELATIONS,
    SCHEMA,
    STATEMENTS,
    TABLES,
)
from brain.engine.write.plan import Change, Plan, Put
from brain.engine.write.writer import PlanContext, Writer
from brain.errors import Conflict, InvalidArgument

__all__ = [
    "EXCLUDED",
    "EXPORT_FORMAT",
    "Header",
    "Row",
    "export_lines",
    "export_rows",
    "import_batch",
    "import_plan",
]

EXPORT_FORMAT: Final = "brain-export/1"
"""The ``format`` of an export's header line."""

EXCLUDED: Final = frozenset(
    {META, IDEMPOTENCY, IDEMPOTENCY_BY_TIME, CHANGE_LOG, PURGE_QUEUE, IMPORTS}
)
"""Tables an export leaves out (see the module docstring)."""

_RECORD_TABLES: Final = (MEMORIES, ENTITIES, STATEMENTS, RELATIONS, SCHEMA)
"""A scope holding a row in any of these is not empty."""


@dataclass(frozen=True, slots=True)
class Header:
    """What an import needs from an export's header line."""

    namespace: str
    export_id: bytes
    clock: int


@dataclass(frozen=True, slots=True)
class Row:
    """One stored row."""

    table: bytes
    key: bytes
    value: bytes


def export_rows(store: Store, txn: lmdb.Transaction, namespace: str) -> Iterator[Row]:
    """Every exported row of ``namespace`` in ``txn``'s snapshot, table by table."""
    prefix = namespace_id(namespace)
    for table in TABLES:
        if table in EXCLUDED:
            continue
        for key, value in scan(txn, store.table(table), prefix):
            yield Row(table, key, value)


def export_id(namespace: str, applied_lsn: int, clock: int) -> bytes:
    """A name for one export: which namespace, at which point of which history."""
    material = f"{namespace}/{applied_lsn}/{clock}".encode()
    return hashlib.sha256(material).digest()[:ID_BYTES]


def export_lines(store: Store, namespace: str) -> Iterator[dict[str, object]]:
    """The export of ``namespace``, line by line: the header, every row of one
    snapshot, the trailer."""
    with store.read() as txn:
        progress = get_progress(store, txn)
        clock = progress.last_record_time
        yield {
            "format": EXPORT_FORMAT,
            "namespace": namespace,
            "export_id": export_id(namespace, progress.applied_lsn, clock).hex(),
            "applied_lsn": progress.applied_lsn,
            "clock": clock,
        }
        count = 0
        scopes: set[bytes] = set()
        for row in export_rows(store, txn, namespace):
            count += 1
            scopes.add(row.key[:SCOPE_PREFIX_BYTES])
            yield {"table": row.table.decode(), "key": row.key.hex(), "value": row.value.hex()}
        yield {"end": True, "rows": count, "scopes": sorted(p.hex() for p in scopes)}


def import_batch(
    writer: Writer, store: Store, retrieval: Retrieval, header: Header, rows: list[Row]
) -> int:
    """Write one batch of an export's rows (:func:`import_plan`) through ``writer``;
    return how many. The record clock moves past the export's first, and the HNSW
    indexes of the scopes filled are rebuilt from the vectors imported."""
    writer.clock.observe(header.clock)
    filled: list[set[bytes]] = []

    def plan(ctx: PlanContext) -> Plan:
        made, scopes = import_plan(ctx, header, rows)
        # The last planning is the one committed (a batch is planned again after
        # the map grows), so each replaces what an earlier one found.
        filled[:] = [scopes]
        return made

    writer.submit(plan).result()
    if filled:
        retrieval.indexes.rebuild(store, sorted(filled[0]))
        retrieval.indexer.notify()
    return len(rows)


def _scope_is_empty(store: Store, txn: lmdb.Transaction, prefix: bytes) -> bool:
    return not any(
        next(scan_keys(txn, store.table(table), prefix), None) is not None
        for table in _RECORD_TABLES
    )


def import_plan(ctx: PlanContext, header: Header, rows: list[Row]) -> tuple[Plan, set[bytes]]:
    """The logged write of one import batch and the scope prefixes it fills."""
    expected = namespace_id(header.namespace)
    changes: list[Change] = []
    scopes: set[bytes] = set()
    marks = ctx.store.table(IMPORTS)
    for index, row in enumerate(rows):
        if row.table not in TABLES or row.table in EXCLUDED:
            raise InvalidArgument(f"row {index} names a table an import cannot fill: {row.table!r}")
        if len(row.key) < SCOPE_PREFIX_BYTES or not row.key.startswith(expected):
            raise InvalidArgument(
                f"row {index} belongs to another namespace than {header.namespace!r}"
            )
        prefix = row.key[:SCOPE_PREFIX_BYTES]
        if prefix not in scopes:
            mark = ctx.txn.get(prefix, db=marks)
            if mark is None:
                if not _scope_is_empty(ctx.store, ctx.txn, prefix):
                    raise Conflict(
                        "an import only fills an empty space (or resumes the same import); "
                        f"space {prefix[ID_BYTES:].hex()} of {header.namespace!r} has records",
                        field="namespace",
                    )
                changes.append(Put(IMPORTS, prefix, header.export_id))
            elif bytes(mark) != header.export_id:
                raise Conflict(
                    "this space was filled by another import; import into an empty database",
                    field="namespace",
                )
            scopes.add(prefix)
        changes.append(Put(row.table, row.key, row.value))
    return Plan(tuple(changes), ()), scopes
