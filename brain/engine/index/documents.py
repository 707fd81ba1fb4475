"""What RECALL searches: documents, their keys and their text (spec/04-retrieval.md §1).

A document is a statement or a memory of one scope, named by a *document key*:
a tag byte (``s`` statement, ``m`` memory) and the record's 16-byte id.

A memory's text is its own. A statement's text is ``subject predicate
object`` with names resolved: the name of the entity the subject answers as
(a pending name's text while it waits; nothing for a memory subject), the
predicate with underscores read as spaces (``works_at`` → ``works at``), and
the name of the entity the object answers as, or its text, number, truth
value or ISO 8601 date as written.

The text is taken when the statement is written, and again whenever a write
changes what an entity it names is called (a rename, a merge or unmerge, a
decided pending name): that write queues the statement for re-indexing
(:func:`brain.engine.index.upkeep.reindex_entity_documents`) and the indexer
calls :func:`document_text` for its current text. A recall, as of any
instant, searches that current text (spec/04 §1).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Final

import lmdb

from brain import cbor
from brain.engine.records.entity_rows import entity_row
from brain.engine.records.refs import ENTITY_TAG, PENDING_TAG, answers_as
from brain.engine.records.review_queue import review_row
from brain.engine.store.env import Store
from brain.engine.store.scope import Scope
from brain.engine.store.tables import MEMORIES, STATEMENTS

__all__ = [
    "DOC_KEY_BYTES",
    "MEMORY_DOC",
    "STATEMENT_DOC",
    "NameOf",
    "document_text",
    "memory_text",
    "statement_text",
    "statement_words",
]

STATEMENT_DOC: Final = b"s"
"""The tag of a statement's document key."""
MEMORY_DOC: Final = b"m"
"""The tag of a memory's document key."""
DOC_KEY_BYTES: Final = 17
"""A tag byte and a 16-byte record id."""

NameOf = Callable[[bytes], str]
"""The name a subject key answers as, for a statement's text ("" when it has none)."""


def _entity_name(store: Store, txn: lmdb.Transaction, scope: Scope, key: bytes) -> str:
    shown = answers_as(store, txn, scope, key)
    if shown[:1] == ENTITY_TAG:
        row = entity_row(store, txn, scope, shown[1:])
        return "" if row is None else str(row["name"])
    if shown[:1] == PENDING_TAG:
        row = review_row(store, txn, scope, shown[1:])
        return "" if row is None else str(row.get("name", ""))
    return ""


def _iso(nanos: int) -> str:
    seconds = nanos / 1e9
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    return moment.date().isoformat() if moment.time() == datetime.time() else moment.isoformat()


def _object_text(name_of: NameOf, value: object) -> str:
    if not isinstance(value, dict):
        return ""
    if isinstance(value.get("entity"), bytes):
        return name_of(ENTITY_TAG + value["entity"])
    if isinstance(value.get("text"), str):
        return str(value["text"])
    if isinstance(value.get("bool"), bool):
        return "true" if value["bool"] else "false"
    if isinstance(value.get("int"), int):
        return str(value["int"])
    if isinstance(value.get("float"), float):
        return repr(value["float"])
    if isinstance(value.get("time"), int):
        return _iso(value["time"])
    return ""  # a memory or statement reference has no words of its own


def statement_text(
    store: Store,
    txn: lmdb.Transaction,
    scope: Scope,
    content: dict[str, object],
    subject_name: str | None = None,
) -> str:
    """The indexed text of a statement's content row. ``subject_name`` gives the name
    of a subject the store does not hold yet (an entity or a pending name the same
    write creates)."""

    def name_of(key: bytes) -> str:
        return _entity_name(store, txn, scope, key)

    return statement_words(content, name_of, subject_name)


def statement_words(
    content: dict[str, object], name_of: NameOf, subject_name: str | None = None
) -> str:
    """:func:`statement_text` with the names looked up by ``name_of``: the name a
    subject key answers as (the entity it answers as, a waiting name's text, or
    nothing). An import rebuilding the lexical index from an export's records
    names them from the file (:mod:`brain.engine.admin.jsonl_rebuild`)."""
    subject = content.get("subject")
    if subject_name is None and isinstance(subject, bytes):
        subject_name = name_of(subject)
    predicate = str(content.get("predicate", "")).replace("_", " ")
    parts = (subject_name or "", predicate, _object_text(name_of, content.get("object")))
    return " ".join(p for p in parts if p)


def memory_text(row: dict[str, object]) -> str:
    """The indexed text of a memory row (empty once hard-forgotten)."""
    text = row.get("text")
    return text if isinstance(text, str) else ""


def document_text(store: Store, txn: lmdb.Transaction, scope: Scope, key: bytes) -> str | None:
    """The text of the document ``key`` as stored now, or None when it is gone (a
    retracted statement, a hard-forgotten memory, an unknown id)."""
    table = MEMORIES if key[:1] == MEMORY_DOC else STATEMENTS
    raw = txn.get(scope.key(key[1:]), db=store.table(table))
    if raw is None:
        return None
    content = cbor.decode_stored(bytes(raw))
    assert isinstance(content, dict)
    row = {str(k): v for k, v in content.items()}
    if key[:1] == MEMORY_DOC:
        return memory_text(row) if "text" in row else None
    if "subject" not in row:
        return None  # a retracted statement's husk
    return statement_text(store, txn, scope, row)
