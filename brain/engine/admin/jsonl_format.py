"""The JSONL export form's lines and which stored tables they hold (``spec/06-operations.md`` §9.2).

A file is a header line, one line per record, and a trailer line. Records come
type by type in :data:`LINE_TYPES` order (the records a later type names come
first), and within a type in key order: space by space, then by id. Every
exported table is either held by the lines (:data:`LINE_TABLES`) or rebuilt from
them by an import (:data:`REBUILT_TABLES`); ``tests/unit/admin/test_jsonl_form.py``
holds every exported table to exactly one of the two, so a new table needs a decision here.

The file says only what its records say: no LSN, no export time, no clock of
the database it came from. So an export of what an import made is the same file,
byte for byte, and the import's id, which its resumption and its safety checks
go by, is the head of the file's checksum (:func:`export_id_of`).
"""

from __future__ import annotations

import hashlib
import json
from typing import Final

from brain.engine.store.tables import (
    AUDIT,
    EMBED_QUEUE,
    ENTITIES,
    ENTITY_ABSORBED,
    ENTITY_ABSORBED_EVENTS,
    ENTITY_BY_NAME,
    ENTITY_MERGES,
    ENTITY_NAME_EVENTS,
    ENTITY_VERSIONS,
    FORGET_LEDGER,
    LEX_DOCS,
    LEX_POSTINGS,
    LEX_STATS,
    MEMORIES,
    MEMORY_BY_SHA,
    MEMORY_BY_TEXT,
    MENTION_BY_NAME,
    MENTION_STATS,
    MENTIONS,
    RELATION_BY_FROM,
    RELATION_BY_TIME,
    RELATION_BY_TO,
    RELATION_CURRENT,
    RELATION_STATE,
    RELATIONS,
    REVIEWS,
    REVIEWS_BY_NAME,
    REVIEWS_OPEN,
    SCHEMA,
    STATEMENT_BY_EVIDENCE,
    STATEMENT_BY_OBJECT,
    STATEMENT_BY_SUBJECT,
    STATEMENT_BY_TIME,
    STATEMENT_CHAIN,
    STATEMENT_CURRENT,
    STATEMENT_STATE,
    STATEMENTS,
    VECTOR_LABELS,
    VECTOR_SCOPES,
    VECTORS,
)

__all__ = [
    "CHECKSUM_BYTES",
    "HEADER",
    "JSONL_FORMAT",
    "LINE_TABLES",
    "LINE_TYPES",
    "NAMESPACE_SCHEMA",
    "REBUILT_TABLES",
    "TRAILER",
    "TYPE_TABLES",
    "checksum_of",
    "dump_line",
    "export_id_of",
]

JSONL_FORMAT: Final = "brain-jsonl/1"
"""The ``format`` of a JSONL export's header line; the number changes with any change
to a line's fields that an older reader would misread."""

HEADER: Final = "header"
"""The ``type`` of the first line."""
TRAILER: Final = "trailer"
"""The ``type`` of the last line: how many record lines there are and their checksum."""

TYPE_TABLES: Final = {
    "schema": SCHEMA,
    "entity": ENTITIES,
    "merge": ENTITY_MERGES,
    "review": REVIEWS,
    "memory": MEMORIES,
    "forgotten": FORGET_LEDGER,
    "statement": STATEMENTS,
    "relation": RELATIONS,
    "audit": AUDIT,
}
"""Each record line type and the table with one row per line of it."""

LINE_TYPES: Final = tuple(TYPE_TABLES)
"""The record line types in the order a file holds them."""

LINE_TABLES: Final = frozenset(
    {*TYPE_TABLES.values(), MENTIONS, STATEMENT_STATE, RELATION_STATE, VECTORS, ENTITY_VERSIONS}
)
"""The tables whose rows the lines hold: one row per line, and the rows of the same
id beside it (a memory's mentions, a statement's or relation's state, an entity's
versions; the vectors only when the export writes them, else the importing server
embeds again)."""

REBUILT_TABLES: Final = frozenset(
    {
        MEMORY_BY_SHA,
        MEMORY_BY_TEXT,
        MENTION_BY_NAME,
        MENTION_STATS,
        ENTITY_BY_NAME,
        ENTITY_ABSORBED,
        ENTITY_NAME_EVENTS,
        ENTITY_ABSORBED_EVENTS,
        STATEMENT_BY_SUBJECT,
        STATEMENT_BY_TIME,
        STATEMENT_CURRENT,
        STATEMENT_CHAIN,
        STATEMENT_BY_OBJECT,
        STATEMENT_BY_EVIDENCE,
        RELATION_BY_FROM,
        RELATION_BY_TO,
        RELATION_BY_TIME,
        RELATION_CURRENT,
        REVIEWS_OPEN,
        REVIEWS_BY_NAME,
        LEX_POSTINGS,
        LEX_DOCS,
        LEX_STATS,
        VECTOR_LABELS,
        VECTOR_SCOPES,
        EMBED_QUEUE,
    }
)
"""The exported tables an import rebuilds from the records the lines hold
(:mod:`brain.engine.admin.jsonl_rebuild`): indexes, counters and the embedding queue."""

NAMESPACE_SCHEMA: Final = "*"
"""The ``space`` of the line holding the namespace's own schema (in force in every
space without one of its own); no space can have this name."""

CHECKSUM_BYTES: Final = 16
"""Bytes of the file's SHA-256 that name its import: as unlikely to repeat as a record id."""


def dump_line(line: dict[str, object]) -> str:
    """One line's JSON: compact, the fields in the form's order, text as UTF-8 (not
    ``\\u`` escapes), so one record is one line and one export one sequence of bytes."""
    return json.dumps(line, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def export_id_of(checksum: str) -> bytes:
    """The import id of a file whose trailer holds ``checksum`` (SHA-256 in hex)."""
    return bytes.fromhex(checksum)[:CHECKSUM_BYTES]


def checksum_of(head: bytes) -> str:
    """The trailer's ``sha256``: of every byte of the file before the trailer line."""
    return hashlib.sha256(head).hexdigest()
