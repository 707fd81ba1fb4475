"""Which index changes a write makes, derived from its record changes.

No record rule writes an index row. :func:`index_entries` reads a write's
physical changes and the store as it was before them, as
:func:`brain.engine.write.change_log.change_entries` does for the change log,
and :func:`brain.engine.planner.plan_write` calls both for every write, so no
planner can forget either. The rules (:mod:`brain.engine.index.upkeep` does
the work):

- a put of a new ``memories`` row indexes the memory's text;
- a put of a ``memories`` row that drops the text the stored row holds (a hard
  forget) takes the memory out of the indexes;
- a put of a new ``statements`` row indexes the statement's text. Its subject
  may be stored by the same write (a new entity, a new pending name): the
  write's own row names it, so no nested transaction is needed;
- a put of a ``statements`` row without a subject over one with content (a
  retraction, also by a hard forget's cascade) takes the statement out;
- a put of an ``entities`` row whose name differs from the stored one (a
  rename), and every put or delete of an ``entity_absorbed`` row (a merge, an
  unmerge, a decided pending name) re-indexes the statements naming the key
  whose words change: the renamed entity, or the absorbed key.

Re-index entries come first and removals last, so a document both queued for
re-indexing and removed by one write stays removed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from brain.engine.index import lexical
from brain.engine.index.documents import MEMORY_DOC, STATEMENT_DOC, statement_text
from brain.engine.index.upkeep import index_document, reindex_entity_documents, unindex_document
from brain.engine.records.entity_rows import ENTITY_ID_BYTES
from brain.engine.records.refs import ENTITY_TAG, PENDING_TAG
from brain.engine.store.rows import decode_row
from brain.engine.store.scope import SCOPE_PREFIX_BYTES, Scope
from brain.engine.store.tables import ENTITIES, ENTITY_ABSORBED, MEMORIES, REVIEWS, STATEMENTS
from brain.engine.write.plan import Change, Delete, Put
from brain.engine.write.writer import PlanContext

__all__ = ["index_entries"]

_ROW_KEY_BYTES: Final = SCOPE_PREFIX_BYTES + ENTITY_ID_BYTES
"""A content row's key: the scope prefix and a 16-byte record id."""

_ABSORBED_AT: Final = SCOPE_PREFIX_BYTES + ENTITY_ID_BYTES
"""Where the absorbed subject key starts in an ``entity_absorbed`` key
(``scope ‖ entity id ‖ subject key``)."""

_SUBJECT_ROWS: Final = {ENTITY_TAG: ENTITIES, PENDING_TAG: REVIEWS}
"""The table whose row names a subject key of each tag (its ``name`` field)."""

Row = dict[str, object]


def index_entries(ctx: PlanContext, scope: Scope, changes: Sequence[Change]) -> list[Change]:
    """The index changes of a write of ``scope`` whose record changes are ``changes``;
    ``ctx.txn`` holds the state before them (with the earlier writes of its batch or
    transaction applied)."""
    store, txn = ctx.store, ctx.txn
    reindexed: dict[bytes, None] = {}
    indexed: list[Change] = []
    removed: list[Change] = []
    for change in changes:
        table = change.table
        if table == ENTITY_ABSORBED and isinstance(change, Put | Delete):
            reindexed[change.key[_ABSORBED_AT:]] = None
            continue
        if not isinstance(change, Put) or len(change.key) != _ROW_KEY_BYTES:
            continue
        if table not in (MEMORIES, STATEMENTS, ENTITIES):
            continue
        assert change.key[:SCOPE_PREFIX_BYTES] == scope.prefix, "a write stays in its scope"
        record_id = change.key[SCOPE_PREFIX_BYTES:]
        stored = txn.get(change.key, db=store.table(table))
        before = None if stored is None else decode_row(bytes(stored))
        if table == ENTITIES:
            if before is not None and decode_row(change.value).get("name") != before.get("name"):
                reindexed[ENTITY_TAG + record_id] = None
            continue
        row = decode_row(change.value)
        if table == MEMORIES:
            text = row.get("text")
            if before is None and isinstance(text, str):
                indexed += index_document(scope, MEMORY_DOC + record_id, text)
            elif before is not None and "text" in before and text is None:
                removed += unindex_document(ctx, scope, MEMORY_DOC + record_id)
        elif before is None and "subject" in row:
            name = _subject_named_by(scope, row, changes)
            text = statement_text(store, txn, scope, row, name)
            indexed += index_document(scope, STATEMENT_DOC + record_id, text)
        elif before is not None and "subject" in before and "subject" not in row:
            removed += unindex_document(ctx, scope, STATEMENT_DOC + record_id)
    entries = reindex_entity_documents(ctx, scope, list(reindexed)) if reindexed else []
    derived = entries + indexed + removed
    # Every lexical change of the write is here: a term left without a posting by
    # all of them together loses its version row (lexical.settle).
    return derived + lexical.settle(store, txn, derived)


def _subject_named_by(scope: Scope, row: Row, changes: Sequence[Change]) -> str | None:
    """The name of a statement's subject when the same write stores the row naming it
    (an entity or a pending name it creates, which the store does not hold yet);
    None lets :func:`statement_text` read it from the store."""
    subject = row.get("subject")
    table = _SUBJECT_ROWS.get(subject[:1]) if isinstance(subject, bytes) else None
    if table is None or not isinstance(subject, bytes):
        return None
    key = scope.key(subject[1:])
    for change in reversed(changes):
        if isinstance(change, Put) and change.table == table and change.key == key:
            name = decode_row(change.value).get("name")
            return name if isinstance(name, str) else None
    return None
