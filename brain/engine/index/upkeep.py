"""What a write changes in the retrieval indexes, in the write's own transaction.

Indexed documents are statements and memories (spec/04-retrieval.md §1). A document is
indexed when its record is written, and stays indexed while superseded,
tombstoned or softly forgotten: RECALL's as-of step must be able to restore it.
It leaves the indexes when its text leaves the store: a statement's retraction
(also by a hard forget's cascade) or a memory's hard forget. No record rule
calls the functions here: :func:`brain.engine.index.derive.index_entries`
reads which of them a write needs off its record changes, for every write.

Indexing puts the lexical postings (:mod:`brain.engine.index.lexical`) and an
``embed_queue`` entry for the indexer. Removal deletes the postings and the
stored vector at once, so the text and its embedding leave LMDB's live pages
in the same transaction as the record's own text, and queues the removal of
the vector's HNSW entry.

A statement's text names entities (:mod:`brain.engine.index.documents`), so it
changes when one of them is renamed, merged or unmerged, or when a pending
name is decided. Such a write gets :func:`reindex_entity_documents`, which
puts one small ``embed_queue`` entry (:data:`REINDEX`) per statement naming
the entity and does no text work: the indexer takes the new text, and in its
own logged write replaces the postings and the vector (under the same label)
when the text's tokens changed. Until it has, RECALL waits for it as for a
new document, so a rename is cheap to write even for an entity named by a
hundred thousand statements, and recalls after it see the new name only.

``embed_queue`` values, and how a new entry combines with a pending one:

- ``ADD`` (``"+" ‖ CBOR [namespace, space]``): embed a new document;
- ``REINDEX`` (``"~" ‖ u64 LSN ‖ CBOR [namespace, space]``): bring the
  document's postings and vector to its current text, embedding it under a new
  label when it has no vector yet. It does everything an ADD does, so it
  replaces a pending ADD (or an older REINDEX) without losing it. The LSN of
  the write that queued it makes every such entry differ from the one before,
  so the indexer, which consumes an entry only while it is still the value it
  read, never consumes a newer request with the text of an older one;
- ``REMOVE`` (``"-" ‖ u64 label``): drop a label from the HNSW index. The
  document is gone, so a pending REMOVE is never replaced by a REINDEX.
"""

from __future__ import annotations

from typing import Final

import lmdb

from brain import cbor
from brain.engine.index import lexical
from brain.engine.index.documents import STATEMENT_DOC
from brain.engine.index.vectors import LABEL_BYTES
from brain.engine.records.refs import ENTITY_TAG, keys_answering_as
from brain.engine.store.scan import scan_keys
from brain.engine.store.scope import Scope
from brain.engine.store.tables import (
    EMBED_QUEUE,
    PURGE_QUEUE,
    STATEMENT_BY_OBJECT,
    STATEMENT_BY_SUBJECT,
    VECTOR_LABELS,
    VECTORS,
)
from brain.engine.write.plan import Change, Delete, Put
from brain.engine.write.writer import PlanContext
from brain.errors import OverBudget

# PURGE_QUEUE is re-exported: readers of the queues import it from here.
__all__ = [
    "ADD",
    "MAX_REINDEX_DOCUMENTS",
    "PURGE_QUEUE",
    "REINDEX",
    "REMOVE",
    "index_document",
    "queued_scope",
    "reindex_entity_documents",
    "unindex_document",
]

ADD = b"+"
"""An ``embed_queue`` value's first byte: embed this document."""
REMOVE = b"-"
"""An ``embed_queue`` value's first byte: drop this label from the HNSW index."""
REINDEX = b"~"
"""An ``embed_queue`` value's first byte: bring this document's lexical postings and
vector to its current text (its words changed: an entity it names was renamed)."""

MAX_REINDEX_DOCUMENTS: Final = 200_000
"""Statements one write may queue for re-indexing: about 93 bytes of logged plan
each, so at most about 19 MiB of one WAL record (which holds at most 64 MiB),
leaving room for the rest of a transaction. A rename of an entity named by more
answers OVER_BUDGET rather than a write the log cannot hold."""

_LSN_BYTES: Final = 8
_ID_BYTES: Final = 16
"""A statement id's length: the last bytes of every ``statement_by_subject`` and
``statement_by_object`` key."""


def index_document(scope: Scope, key: bytes, text: str) -> list[Change]:
    """Index a new document ``key`` whose text is ``text``."""
    changes = lexical.index_changes(scope, key, text)
    changes.append(
        Put(EMBED_QUEUE, scope.key(key), ADD + cbor.encode([scope.namespace, scope.space]))
    )
    return changes


def unindex_document(ctx: PlanContext, scope: Scope, key: bytes) -> list[Change]:
    """Take document ``key`` out of every index, and note its text for the next purge."""
    store, txn = ctx.store, ctx.txn
    changes = lexical.remove_changes(store, txn, scope, key)
    changes.append(Put(PURGE_QUEUE, scope.key(key), b""))
    stored = txn.get(scope.key(key), db=store.table(VECTORS))
    if stored is None:
        # Never embedded: forget the queued request, if any.
        changes.append(Delete(EMBED_QUEUE, scope.key(key)))
        return changes
    label = bytes(stored)[:LABEL_BYTES]
    changes += [
        Delete(VECTORS, scope.key(key)),
        Delete(VECTOR_LABELS, scope.key(label)),
        Put(EMBED_QUEUE, scope.key(key), REMOVE + label),
    ]
    return changes


def queued_scope(value: bytes) -> Scope:
    """The scope an ``ADD`` or ``REINDEX`` queue value names."""
    names = cbor.decode_stored(value[1:] if value[:1] == ADD else value[1 + _LSN_BYTES :])
    assert isinstance(names, list) and len(names) == 2
    return Scope(str(names[0]), str(names[1]))


def reindex_entity_documents(
    ctx: PlanContext, scope: Scope, entity_keys: list[bytes]
) -> list[Change]:
    """The queue entries that re-index every statement whose subject or object answers
    as one of ``entity_keys`` (subject keys: an entity, or a pending name), found
    through the indexes the reads use. Call it in the write that changes what those
    keys are called, with ``ctx`` seeing the store as before that write: the keys
    that answer as an entity before a merge or unmerge are the ones whose text it
    changes. One put per statement; the indexer does the rest."""
    store, txn = ctx.store, ctx.txn
    found: dict[bytes, None] = {}
    by_subject = store.table(STATEMENT_BY_SUBJECT)
    by_object = store.table(STATEMENT_BY_OBJECT)
    for key in entity_keys:
        for each in keys_answering_as(store, txn, scope, key):
            _collect(txn, by_subject, scope.key(each), found)
            if each[:1] == ENTITY_TAG:
                _collect(txn, by_object, scope.key(each[1:]), found)
            if len(found) > MAX_REINDEX_DOCUMENTS:
                raise OverBudget(
                    f"the write changes the words of more than {MAX_REINDEX_DOCUMENTS} "
                    "statements, more than one write may re-index"
                )
    value = REINDEX + ctx.lsn.to_bytes(_LSN_BYTES, "big")
    value += cbor.encode([scope.namespace, scope.space])
    queue = store.table(EMBED_QUEUE)
    changes: list[Change] = []
    for statement_id in found:
        queue_key = scope.key(STATEMENT_DOC, statement_id)
        pending = txn.get(queue_key, db=queue)
        if pending is not None and bytes(pending)[:1] == REMOVE:
            continue  # the document is gone; its removal stands
        changes.append(Put(EMBED_QUEUE, queue_key, value))
    return changes


def _collect(
    txn: lmdb.Transaction, table: lmdb._Database, prefix: bytes, found: dict[bytes, None]
) -> None:
    """Add the statement id ending each key of ``table`` under ``prefix`` to ``found``."""
    for key in scan_keys(txn, table, prefix):
        if len(found) > MAX_REINDEX_DOCUMENTS:
            return  # past what the caller will refuse anyway
        found[key[-_ID_BYTES:]] = None
