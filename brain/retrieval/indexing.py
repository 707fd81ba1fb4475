"""What a write changes in the retrieval indexes, in the write's own transaction.

Indexed documents are statements and memories (SEMANTICS.md §6). A document is
indexed once, when its record is written, and stays indexed while superseded,
tombstoned or softly forgotten: RECALL's as-of step must be able to restore it.
It leaves the indexes when its text leaves the store: a statement's retraction
(also by a hard forget's cascade) or a memory's hard forget.

Indexing puts the lexical postings (:mod:`brain.retrieval.lexical`) and an
``embed_queue`` entry for the indexer. Removal deletes the postings and the
stored vector at once, so the text and its embedding leave LMDB's live pages
in the same transaction as the record's own text, and queues the removal of
the vector's HNSW entry.
"""

from __future__ import annotations

from brain.engine.plan import Change, Delete, Put
from brain.engine.scope import Scope
from brain.engine.writer import PlanContext
from brain.retrieval import lexical
from brain.retrieval.vectors import EMBED_QUEUE, LABEL_BYTES, VECTOR_LABELS, VECTORS
from brain.wire import cbor

__all__ = ["ADD", "PURGE_QUEUE", "REMOVE", "index_document", "unindex_document"]

PURGE_QUEUE = b"purge_queue"
"""Documents whose text left the store since the last purge (their old bytes may
linger in the WAL, LMDB's free pages and the HNSW indexes until it runs)."""

ADD = b"+"
"""An ``embed_queue`` value's first byte: embed this document."""
REMOVE = b"-"
"""An ``embed_queue`` value's first byte: drop this label from the HNSW index."""


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
