"""Export and import: a namespace's stored rows, moved exactly (`brain export`, `brain import`).

This is the exact form; the readable JSONL form is written by
:mod:`brain.engine.admin.jsonl_export` and read back into rows for the same
import path by :mod:`brain.engine.admin.jsonl_import` (``spec/06-operations.md`` §9).

An export is JSON Lines: a header, then one line per stored row of the
namespace, ``{"table", "key", "value"}`` with key and value in hex, exactly as
stored, then a trailer with the row count and the scopes seen, so a cut file is
refused. Rows are read in one snapshot. Every table holding the namespace's
records, their history on both time axes, the retrieval indexes (postings and
vectors, so recalls answer the same without embedding anything again), the
audit log and the embedding backlog are exported. Left out, because they belong
to one database's life rather than to the records: the idempotency table (the
request ids of that database's clients), the change log (its LSNs), the purge
queue, and ``meta``. A namespace of which the database holds no row is
``NOT_FOUND``: there is nothing to export.

An import writes rows through the writer as ordinary logged writes, batch by
batch, each batch naming the index in the export of its first row. A scope
receives an import only while it is empty, or when it already holds rows of
the same export (its ``imports`` mark, :mod:`brain.engine.admin.import_marks`),
and each batch records in those marks how far the import has come, so a batch
is written from the import's progress on: rows already committed are skipped,
never written twice, and a batch that would leave a gap is refused. An
interrupted import is resumed by sending the rest from where it stopped
(:func:`import_progress_of`). The vectors a batch brings are added to the HNSW
indexes before the batch answers. :func:`finish_import` closes an import: it
refuses while rows are missing, counts each space's rows for the caller to
compare with the file, makes sure each HNSW index holds every stored vector and
marks the import complete. The record clock is moved past the export's, so
later writes are recorded after everything imported.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final

import lmdb
import numpy as np
from numpy.typing import NDArray

from brain.engine.admin.import_marks import (
    EXCLUDED,
    EXPORTED,
    ImportProgress,
    Mark,
    count_rows,
    decode_mark,
    encode_mark,
    import_progress,
)
from brain.engine.index.service import Retrieval
from brain.engine.index.vectors import LABEL_BYTES, decode_vector_row, scope_state
from brain.engine.store.env import Store
from brain.engine.store.meta import get_progress
from brain.engine.store.scan import scan, scan_keys
from brain.engine.store.scope import ID_BYTES, SCOPE_PREFIX_BYTES, namespace_id
from brain.engine.store.statement_keys import BY_SUBJECT_KEY_BYTES, subject_time_key
from brain.engine.store.tables import (
    ENTITIES,
    IMPORTS,
    MEMORIES,
    RELATIONS,
    SCHEMA,
    STATEMENT_BY_SUBJECT,
    STATEMENT_BY_SUBJECT_TIME,
    STATEMENTS,
    VECTORS,
)
from brain.engine.write.plan import Change, Plan, Put
from brain.engine.write.writer import PlanContext, Replay, Writer
from brain.errors import Conflict, InvalidArgument, NotFound

__all__ = [
    "EXCLUDED",
    "EXPORT_FORMAT",
    "Header",
    "ImportBatch",
    "ImportProgress",
    "Row",
    "Written",
    "export_lines",
    "export_rows",
    "finish_import",
    "import_batch",
    "import_plan",
    "import_progress_of",
]

EXPORT_FORMAT: Final = "brain-export/1"
"""The ``format`` of an export's header line."""

_RECORD_TABLES: Final = (MEMORIES, ENTITIES, STATEMENTS, RELATIONS, SCHEMA)
"""A scope holding a row in any of these is not empty."""

_FLOAT_BYTES: Final = 4
"""A stored vector's values are little-endian float32."""


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


@dataclass(frozen=True, slots=True)
class ImportBatch:
    """What one import batch did."""

    imported: int
    """Rows it wrote (rows the import had already committed are skipped)."""
    next_row: int
    """The import's progress after it: the index in the export of the next row to send."""


def export_rows(store: Store, txn: lmdb.Transaction, namespace: str) -> Iterator[Row]:
    """Every exported row of ``namespace`` in ``txn``'s snapshot, table by table."""
    prefix = namespace_id(namespace)
    for table in EXPORTED:
        for key, value in scan(txn, store.table(table), prefix):
            yield Row(table, key, value)


def export_id(namespace: str, applied_lsn: int, clock: int) -> bytes:
    """A name for one export: which namespace, at which point of which history."""
    material = f"{namespace}/{applied_lsn}/{clock}".encode()
    return hashlib.sha256(material).digest()[:ID_BYTES]


def _holds_rows(store: Store, txn: lmdb.Transaction, namespace: str) -> bool:
    prefix = namespace_id(namespace)
    return any(
        next(scan_keys(txn, store.table(table), prefix), None) is not None for table in EXPORTED
    )


def export_lines(store: Store, namespace: str) -> Iterator[dict[str, object]]:
    """The export of ``namespace``, line by line: the header, every row of one
    snapshot, the trailer. NOT_FOUND (raised by the first line) when the database
    holds no row of the namespace."""
    with store.read() as txn:
        if not _holds_rows(store, txn, namespace):
            raise NotFound(
                f"namespace {namespace!r} holds no records in this database: nothing to export",
                field="namespace",
            )
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


def import_progress_of(store: Store, header: Header) -> ImportProgress:
    """Where the import of ``header``'s export stands now."""
    with store.read() as txn:
        return import_progress(store, txn, header.namespace, header.export_id)


def import_batch(
    writer: Writer,
    store: Store,
    retrieval: Retrieval,
    header: Header,
    rows: list[Row],
    *,
    start: int | None = None,
) -> ImportBatch:
    """Write one batch of an export's rows (:func:`import_plan`) through ``writer``.

    ``start`` is the index in the export of ``rows[0]`` (None: the import's
    progress). The record clock moves past the export's first; the vectors
    written are in the HNSW indexes when this returns."""
    writer.clock.observe(header.clock)
    outcome: list[tuple[ImportBatch, Written]] = []

    def plan(ctx: PlanContext) -> Plan | Replay:
        made, batch, written = import_plan(
            ctx, header, rows, start, dimensions=retrieval.indexes.dimensions
        )
        # The last planning is the one committed (a batch is planned again after
        # the map grows), so each replaces what an earlier one found.
        outcome[:] = [(batch, written)]
        return made

    writer.submit(plan).result()
    batch, written = outcome[0]
    if batch.imported:
        _index_vectors(store, retrieval, written)
        retrieval.indexer.notify()
    return batch


def _scope_is_empty(store: Store, txn: lmdb.Transaction, prefix: bytes) -> bool:
    return not any(
        next(scan_keys(txn, store.table(table), prefix), None) is not None
        for table in _RECORD_TABLES
    )


def _check_row(index: int, row: Row, expected: bytes, namespace: str, dimensions: int) -> None:
    if row.table not in EXPORTED:
        raise InvalidArgument(f"row {index} names a table an import cannot fill: {row.table!r}")
    if len(row.key) < SCOPE_PREFIX_BYTES or not row.key.startswith(expected):
        raise InvalidArgument(f"row {index} belongs to another namespace than {namespace!r}")
    if row.table == STATEMENT_BY_SUBJECT and len(row.key) != BY_SUBJECT_KEY_BYTES:
        raise InvalidArgument(f"row {index} is not a statement_by_subject key: the file is damaged")
    if row.table == VECTORS and len(row.value) != LABEL_BYTES + _FLOAT_BYTES * dimensions:
        held = (len(row.value) - LABEL_BYTES) // _FLOAT_BYTES
        raise InvalidArgument(
            f"row {index} holds a vector of {held} dimensions, and this server's embedder "
            f"makes {dimensions}: the file is damaged, or the export was made with another "
            "embedder (import it into a server configured with that one)"
        )


@dataclass(frozen=True, slots=True)
class Written:
    """Where one import batch wrote: what its HNSW indexes need to know."""

    scopes: frozenset[bytes]
    vectors: tuple[bytes, ...]
    """The keys of the ``vectors`` rows it wrote."""


def import_plan(
    ctx: PlanContext, header: Header, rows: list[Row], start: int | None, *, dimensions: int
) -> tuple[Plan | Replay, ImportBatch, Written]:
    """The logged write of one import batch, what it does, and where it writes.
    Rows before the import's progress are skipped; a batch starting past it is
    CONFLICT (it would leave rows out)."""
    progress = import_progress(ctx.store, ctx.txn, header.namespace, header.export_id)
    first = progress.next_row if start is None else start
    if first > progress.next_row:
        raise Conflict(
            f"this batch starts at row {first}, but the import of this export has reached "
            f"row {progress.next_row}: send the rows from there",
            field="start",
        )
    skipped = progress.next_row - first
    end = first + len(rows)
    if skipped >= len(rows):
        return Replay(b""), ImportBatch(0, progress.next_row), Written(frozenset(), ())
    expected = namespace_id(header.namespace)
    changes: list[Change] = []
    vectors: list[bytes] = []
    scopes: set[bytes] = set()
    marks = ctx.store.table(IMPORTS)
    for index, row in enumerate(rows[skipped:], start=progress.next_row):
        _check_row(index, row, expected, header.namespace, dimensions)
        prefix = row.key[:SCOPE_PREFIX_BYTES]
        if prefix not in scopes:
            raw = ctx.txn.get(prefix, db=marks)
            if raw is None:
                if not _scope_is_empty(ctx.store, ctx.txn, prefix):
                    raise Conflict(
                        "an import only fills an empty space (or resumes the same import); "
                        f"space {prefix[ID_BYTES:].hex()} of {header.namespace!r} has records",
                        field="namespace",
                    )
            elif decode_mark(bytes(raw)).export_id != header.export_id:
                raise Conflict(
                    "this space was filled by another import; import into an empty database",
                    field="namespace",
                )
            scopes.add(prefix)
        changes.append(Put(row.table, row.key, row.value))
        if row.table == STATEMENT_BY_SUBJECT:
            # A derived table (import_marks.DERIVED) is written from the row it follows from.
            changes.append(Put(STATEMENT_BY_SUBJECT_TIME, subject_time_key(row.key), b""))
        if row.table == VECTORS:
            vectors.append(row.key)
    mark = encode_mark(Mark(header.export_id, end, complete=False))
    changes.extend(Put(IMPORTS, prefix, mark) for prefix in sorted(scopes))
    written = Written(frozenset(scopes), tuple(vectors))
    return Plan(tuple(changes), ()), ImportBatch(len(rows) - skipped, end), written


def _index_vectors(store: Store, retrieval: Retrieval, written: Written) -> None:
    """Bring the HNSW indexes of the scopes a batch wrote up to their stored vectors.

    A scope whose index holds nothing while LMDB holds vectors of it (the first
    vectors of the import, or an import resumed after a restart, whose start
    loads only the scopes with a ``vector_scopes`` row) is rebuilt from LMDB,
    once; the other scopes get the batch's vectors added."""
    added: dict[bytes, list[tuple[int, NDArray[np.float32]]]] = {}
    rebuild: list[bytes] = []
    with store.read() as txn:
        table = store.table(VECTORS)
        for prefix in sorted(written.scopes):
            stored = next(scan_keys(txn, table, prefix), None) is not None
            if stored and retrieval.indexes.size(prefix) == 0:
                rebuild.append(prefix)
        for key in written.vectors:
            raw = txn.get(key, db=table)
            prefix = key[:SCOPE_PREFIX_BYTES]
            if raw is not None and prefix not in rebuild:  # None: removed since, by a forget
                added.setdefault(prefix, []).append(decode_vector_row(bytes(raw)))
        lsns = {prefix: _vector_lsn(store, txn, prefix) for prefix in added}
    retrieval.indexes.rebuild(store, rebuild)
    for prefix, labelled in added.items():
        retrieval.indexes.apply(prefix, lsns[prefix], labelled, [])


def _vector_lsn(store: Store, txn: lmdb.Transaction, prefix: bytes) -> int:
    lsn = scope_state(store, txn, prefix).get("lsn", 0)
    assert isinstance(lsn, int)
    return lsn


def finish_import(
    writer: Writer,
    store: Store,
    retrieval: Retrieval,
    header: Header,
    *,
    total: int,
    scopes: Iterable[bytes],
) -> dict[bytes, dict[bytes, int]]:
    """Close the import of an export of ``total`` rows in ``scopes`` and return the
    rows of each exported table in each space it filled.

    CONFLICT while rows are missing (the message says where to resume). Each
    space's HNSW index is made to hold exactly its stored vectors (rebuilt when
    its size differs), then the marks say the import is complete."""
    expected = namespace_id(header.namespace)
    named = set(scopes)
    for prefix in named:
        if len(prefix) != SCOPE_PREFIX_BYTES or not prefix.startswith(expected):
            raise InvalidArgument(
                f"scope {prefix.hex()} is not a space of {header.namespace!r}", field="trailer"
            )
    with store.read() as txn:
        progress = import_progress(store, txn, header.namespace, header.export_id)
        if progress.next_row < total:
            raise Conflict(
                f"{progress.next_row} of the export's {total} rows are imported: run the "
                f"import again to continue from row {progress.next_row}",
                field="trailer",
            )
        if progress.next_row > total:
            raise InvalidArgument(
                f"{progress.next_row} rows of this export are imported, more than the "
                f"{total} its trailer counts",
                field="trailer",
            )
        prefixes = sorted(named | set(progress.scopes))
        counts = count_rows(store, txn, prefixes)
        lsns = {prefix: _vector_lsn(store, txn, prefix) for prefix in prefixes}
    stale = [p for p in prefixes if retrieval.indexes.size(p) != counts[p].get(VECTORS, 0)]
    retrieval.indexes.rebuild(store, stale)
    for prefix in prefixes:
        if prefix not in stale and counts[prefix].get(VECTORS, 0):
            # The index holds every vector already; it now reflects the scope's LSN,
            # so the file saved from it is used at the next start.
            retrieval.indexes.apply(prefix, lsns[prefix], [], [])

    def complete(ctx: PlanContext) -> Plan | Replay:
        mark = encode_mark(Mark(header.export_id, total, complete=True))
        marks = ctx.store.table(IMPORTS)
        changes: list[Change] = []
        for prefix in progress.scopes:
            raw = ctx.txn.get(prefix, db=marks)
            if raw is None or bytes(raw) == mark:
                continue
            if decode_mark(bytes(raw)).export_id == header.export_id:
                changes.append(Put(IMPORTS, prefix, mark))
        return Plan(tuple(changes), ()) if changes else Replay(b"")

    writer.submit(complete).result()
    return counts
