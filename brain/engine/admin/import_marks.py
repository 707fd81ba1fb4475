"""Where an import stands: the ``imports`` marks, and the row counts that prove it whole.

Each space an import fills holds one mark in ``imports`` (key: the scope
prefix), a CBOR map ``{export, next, complete}``: the id of the export that
filled it, how many of the export's rows (in the file's order) were committed
when the mark was last written, and whether the import was finished
(:func:`~brain.engine.admin.transfer.finish_import`). Every batch rewrites the
marks of the spaces it touches in its own logged write, so the furthest
``next`` among an export's marks in a namespace is exactly where the import
stopped, whatever stopped it. A mark of 16 bytes (the bare export id) was
written before progress was kept: that import is resumed from its first row,
which re-puts rows already there (the same keys, the same values).

The counts are the rows of every exported table in each space; an import is
whole when they equal what the export file holds (:func:`count_mismatches`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

import lmdb

from brain import cbor
from brain.engine.store.env import Store
from brain.engine.store.scan import scan, scan_keys
from brain.engine.store.scope import ID_BYTES, namespace_id
from brain.engine.store.tables import (
    CHANGE_LOG,
    EMBED_QUEUE,
    IDEMPOTENCY,
    IDEMPOTENCY_BY_TIME,
    IDEMPOTENCY_MARKS,
    IMPORTS,
    LEX_DOCS,
    LEX_POSTINGS,
    LEX_STATS,
    META,
    PURGE_QUEUE,
    STATEMENT_BY_SUBJECT_TIME,
    TABLES,
    VECTOR_LABELS,
    VECTOR_SCOPES,
    VECTORS,
)

__all__ = [
    "DERIVED",
    "EXCLUDED",
    "EXPORTED",
    "INDEXER_TABLES",
    "ImportProgress",
    "Mark",
    "count_mismatches",
    "count_rows",
    "decode_mark",
    "encode_mark",
    "import_progress",
]

EXCLUDED: Final = frozenset(
    {
        META,
        IDEMPOTENCY,
        IDEMPOTENCY_BY_TIME,
        IDEMPOTENCY_MARKS,
        CHANGE_LOG,
        PURGE_QUEUE,
        IMPORTS,
    }
)
"""Tables an export leaves out: they belong to one database's life, not to its
records (:mod:`brain.engine.admin.transfer`)."""

DERIVED: Final = frozenset({STATEMENT_BY_SUBJECT_TIME})
"""Tables an export leaves out because each of their rows follows from a row of another
table it holds: an import writes them from those rows
(:mod:`brain.engine.store.statement_keys`), so an export made before such a table
existed imports the same."""

EXPORTED: Final = tuple(table for table in TABLES if table not in EXCLUDED | DERIVED)
"""The tables an export holds, in the order it writes them."""

INDEXER_TABLES: Final = frozenset(
    {EMBED_QUEUE, VECTORS, VECTOR_LABELS, VECTOR_SCOPES, LEX_POSTINGS, LEX_DOCS, LEX_STATS}
)
"""The tables the indexer changes as it works through queued documents: once an
export carrying a backlog is imported, the importing server embeds it, so these
counts move on their own (:func:`count_mismatches`)."""


@dataclass(frozen=True, slots=True)
class Mark:
    """One space's ``imports`` row."""

    export_id: bytes
    next_row: int
    """Rows of the export committed when the mark was written."""
    complete: bool


def encode_mark(mark: Mark) -> bytes:
    """The stored form of a mark."""
    return cbor.encode({"export": mark.export_id, "next": mark.next_row, "complete": mark.complete})


def decode_mark(raw: bytes) -> Mark:
    """A stored mark (a bare 16-byte export id: an import from before progress was kept)."""
    if len(raw) == ID_BYTES:
        return Mark(raw, 0, False)
    value = cbor.decode(raw)
    assert isinstance(value, dict)
    export_id, next_row, complete = value["export"], value["next"], value["complete"]
    assert isinstance(export_id, bytes) and isinstance(next_row, int)
    return Mark(export_id, next_row, complete is True)


@dataclass(frozen=True, slots=True)
class ImportProgress:
    """Where the import of one export into a namespace stands."""

    next_row: int
    """Rows of the export committed so far, in the file's order: the first one a
    resumed import sends."""
    complete: bool
    """Finished: every row in, counted, and the vector indexes built."""
    scopes: tuple[bytes, ...]
    """The spaces (scope prefixes) it has filled so far."""


def import_progress(
    store: Store, txn: lmdb.Transaction, namespace: str, export_id: bytes
) -> ImportProgress:
    """The progress of the import of ``export_id`` into ``namespace``, as ``txn`` sees it."""
    furthest, complete, scopes = 0, True, []
    for prefix, raw in scan(txn, store.table(IMPORTS), namespace_id(namespace)):
        mark = decode_mark(raw)
        if mark.export_id != export_id:
            continue
        scopes.append(prefix)
        furthest = max(furthest, mark.next_row)
        complete = complete and mark.complete
    return ImportProgress(furthest, complete and bool(scopes), tuple(scopes))


def count_rows(
    store: Store, txn: lmdb.Transaction, prefixes: Iterable[bytes]
) -> dict[bytes, dict[bytes, int]]:
    """The rows of every exported table in each space, the tables with none left out."""
    counts: dict[bytes, dict[bytes, int]] = {}
    for prefix in prefixes:
        tables: dict[bytes, int] = {}
        for table in EXPORTED:
            count = sum(1 for _ in scan_keys(txn, store.table(table), prefix))
            if count:
                tables[table] = count
        counts[prefix] = tables
    return counts


def _indexer_may_explain(table: str, held: int, found: int, queued: int) -> bool:
    """Whether the importing server's indexer, working through ``queued`` documents
    the export carried, can turn ``held`` rows of ``table`` into ``found``."""
    if table == EMBED_QUEUE.decode():
        return found <= held
    if table in (VECTORS.decode(), VECTOR_LABELS.decode()):
        return held <= found <= held + queued
    if table == VECTOR_SCOPES.decode():
        return held <= found <= held + 1
    return True  # a re-indexed document swaps its postings: any count


def count_mismatches(
    expected: Mapping[str, Mapping[str, int]], found: Mapping[str, Mapping[str, int]]
) -> list[str]:
    """What differs between the rows an export file holds and the rows the server
    counts, per space (scope prefix in hex) and table; empty when they agree.

    Every table must match exactly, except that in a space whose export carried
    queued documents (``embed_queue`` rows) the indexer tables may have moved the
    way embedding that backlog moves them (:data:`INDEXER_TABLES`).
    """
    problems: list[str] = []
    indexer = {table.decode() for table in INDEXER_TABLES}
    for scope in sorted(set(expected) | set(found)):
        held, counted = expected.get(scope, {}), found.get(scope, {})
        queued = held.get(EMBED_QUEUE.decode(), 0)
        for table in sorted(set(held) | set(counted)):
            want, have = held.get(table, 0), counted.get(table, 0)
            if want == have:
                continue
            if queued and table in indexer and _indexer_may_explain(table, want, have, queued):
                continue
            problems.append(
                f"space {scope[2 * ID_BYTES :][:16]}…, table {table}: "
                f"the file holds {want} rows, the server {have}"
            )
    return problems
