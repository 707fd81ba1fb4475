"""The rows an import of a JSONL export rebuilds: every index, counter and queue entry
the records imply, as the write path would have left them.

A JSONL export holds records only (:mod:`brain.engine.admin.jsonl_format`), so an
import derives the rest of each space from them, calling the same functions the
writes call wherever there is one, so that the layouts are written in one place:

- ``memory_by_text`` for every memory, ``memory_by_sha`` for the one not forgotten
  with each text, under its text key (:mod:`brain.engine.store.text_keys`); the
  name index and its counts from each mention row
  (:func:`~brain.engine.records.mentions.name_index_changes`);
- ``entity_by_name`` from each entity row (its :func:`index_names`),
  ``entity_absorbed`` from each merged entity's ``merged_into`` and each decided
  ambiguous name's ``resolved_to``;
- the statement and relation indexes from their content and state (a statement's
  chain position from its state row where a decided contradiction moved it,
  :func:`~brain.engine.records.statements.chained_row`;
  :func:`~brain.engine.records.statements.index_rows`,
  :func:`~brain.engine.records.relation_rows.insert_changes`): current ones in the
  current indexes, retracted husks in the record-order and chain indexes only;
- ``reviews_open`` and ``reviews_by_name`` for the open items;
- the lexical index of every document whose text is stored (a memory with its
  text, a statement not retracted), with each statement's words named as it
  answers now, as the indexer's re-index leaves them; and for each the vector the
  file holds (labels given in document order) or, without one, an embedding
  request the importing server's indexer takes up.

What it cannot rebuild as it was is what no read can see: the term versions of
the lexical index (each counts the term's documents afresh), the vector labels,
and the LSN a space's vectors last changed at (0).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from brain import cbor
from brain.engine.admin.jsonl_format import REBUILT_TABLES
from brain.engine.index import lexical
from brain.engine.index.documents import MEMORY_DOC, STATEMENT_DOC, statement_words
from brain.engine.index.upkeep import index_document
from brain.engine.index.vectors import LABEL_BYTES
from brain.engine.records.entity_history import history_entries
from brain.engine.records.entity_rows import MAX_MERGE_HOPS, index_changes, index_names
from brain.engine.records.mentions import name_index_changes
from brain.engine.records.refs import ENTITY_TAG, PENDING_TAG, absorb, pending_name_key, release
from brain.engine.records.relation_rows import insert_changes
from brain.engine.records.review_queue import open_key
from brain.engine.records.statements import chained_row, index_rows
from brain.engine.store.scope import Scope
from brain.engine.store.tables import (
    MEMORY_BY_SHA,
    MEMORY_BY_TEXT,
    RELATION_CURRENT,
    REVIEWS_BY_NAME,
    REVIEWS_OPEN,
    VECTOR_LABELS,
    VECTOR_SCOPES,
    VECTORS,
)
from brain.engine.store.text_keys import text_key
from brain.engine.write.plan import COUNTER_BYTES, Add, Change, Delete, Put, read_counter
from brain.errors import InvalidArgument

__all__ = ["SpaceRecords", "Versions", "rebuilt_rows"]

Versions = dict[bytes, tuple[dict[str, object], dict[str, object]]]
"""Statements or relations by id: (content row, state row, ``{}`` when it has none)."""

_IMPORTED_LSN: Final = 0
"""The ``lsn`` of a rebuilt ``vector_scopes`` row: no write of this database has
changed the space's vectors yet."""


@dataclass
class SpaceRecords:
    """The records of one space that an import's rebuild reads."""

    scope: Scope
    memories: dict[bytes, dict[str, object]] = field(default_factory=dict)
    mentions: dict[bytes, dict[str, object]] = field(default_factory=dict)
    entities: dict[bytes, dict[str, object]] = field(default_factory=dict)
    entity_versions: dict[bytes, list[tuple[int, dict[str, object]]]] = field(default_factory=dict)
    """Each entity's versions, oldest first, with their ``recorded_at``."""
    reviews: dict[bytes, dict[str, object]] = field(default_factory=dict)
    statements: Versions = field(default_factory=dict)
    relations: Versions = field(default_factory=dict)
    vectors: dict[bytes, bytes] = field(default_factory=dict)
    """Document key -> the float32 bytes of its vector, as the file holds them."""


class _Rows:
    """Rows built by applying changes in memory, as a write applies them to LMDB."""

    def __init__(self, tables: frozenset[bytes]) -> None:
        self.rows: dict[tuple[bytes, bytes], bytes] = {}
        self._tables = tables

    def apply(self, changes: Iterable[Change]) -> None:
        for change in changes:
            if change.table not in self._tables:
                # A record row (the lines hold it), or statement_by_subject_time, which
                # every import writes from statement_by_subject (transfer.import_plan).
                continue
            at = (change.table, change.key)
            if isinstance(change, Put):
                self.rows[at] = change.value
            elif isinstance(change, Add):
                value = read_counter(self.rows.get(at)) + change.delta
                self.rows[at] = value.to_bytes(COUNTER_BYTES, "big", signed=True)
            elif isinstance(change, Delete):
                self.rows.pop(at, None)


def rebuilt_rows(space: SpaceRecords) -> dict[tuple[bytes, bytes], bytes]:
    """The rows of the rebuilt tables (and the vectors the file holds) the records of
    ``space`` imply, by (table, key)."""
    rows = _Rows(REBUILT_TABLES | {VECTORS})
    scope = space.scope
    _memories(space, rows)
    for memory_id, mention in space.mentions.items():
        rows.apply(name_index_changes(scope, memory_id, mention))
    for entity_id, entity in space.entities.items():
        rows.apply(index_changes(scope, entity_id, set(), index_names(entity)))
        kept = entity.get("merged_into")
        if isinstance(kept, bytes):
            rows.apply([absorb(scope, kept, ENTITY_TAG + entity_id)])
        rows.apply(_entity_events(scope, entity_id, space.entity_versions.get(entity_id, [])))
    _reviews(space, rows)
    for statement_id, (content, state) in space.statements.items():
        chained = chained_row(content, state)
        rows.apply(index_rows(scope, statement_id, chained, current=_current(state)))
    for relation_id, (content, state) in space.relations.items():
        made = insert_changes(scope, relation_id, content)
        rows.apply(c for c in made if _current(state) or c.table != RELATION_CURRENT)
    _documents(space, rows)
    return rows.rows


def _current(state: dict[str, object]) -> bool:
    return "superseded_by" not in state and "tombstoned_at" not in state


def _memories(space: SpaceRecords, rows: _Rows) -> None:
    """``memory_by_text`` and ``memory_by_sha`` under each memory's text key (a
    hard-forgotten memory, whose text is gone, under its ``sha256``: no forget looks
    for it again). Two active memories of the same bytes are refused; of texts that
    only normalise alike (an export of a server that compared exact bytes), the one
    recorded first is the text's memory, as the upgrade of such a store decides."""
    scope = space.scope
    active: dict[bytes, tuple[bytes, bytes]] = {}
    shas: dict[bytes, bytes] = {}
    for memory_id, memory in space.memories.items():
        sha, text = memory["sha256"], memory.get("text")
        assert isinstance(sha, bytes)
        key = text_key(text) if isinstance(text, str) else sha
        rows.apply([Put(MEMORY_BY_TEXT, scope.key(key, memory_id), b"")])
        if "forgotten" in memory:
            continue
        if sha in shas:
            raise InvalidArgument(
                f"memories {shas[sha].hex()} and {memory_id.hex()} of space "
                f"{scope.space!r} both hold the same text and neither is forgotten: a "
                "space stores a text once",
                field="memory",
            )
        shas[sha] = memory_id
        order = _u64_of(memory["recorded_at"]) + memory_id
        if key not in active or order < active[key][0]:
            active[key] = (order, memory_id)
    rows.apply([Put(MEMORY_BY_SHA, scope.key(key), first) for key, (_, first) in active.items()])


def _entity_events(
    scope: Scope, entity_id: bytes, found: list[tuple[int, dict[str, object]]]
) -> list[Change]:
    """The name-index and absorbed-key history of an entity, from its versions: what
    the writes that made each version logged beside it (:func:`history_entries`)."""
    events: list[Change] = []
    names: set[str] = set()
    kept: object = None
    for at, row in found:
        now = index_names(row)
        changes = index_changes(scope, entity_id, names, now)
        target = row.get("merged_into")
        if target != kept:
            if isinstance(kept, bytes):
                changes.append(release(scope, kept, ENTITY_TAG + entity_id))
            if isinstance(target, bytes):
                changes.append(absorb(scope, target, ENTITY_TAG + entity_id))
        events += history_entries(changes, at)
        names, kept = now, target
    return events


def _u64_of(value: object) -> bytes:
    """A record time as the big-endian bytes that sort as it does."""
    assert isinstance(value, int)
    return value.to_bytes(8, "big")


def _reviews(space: SpaceRecords, rows: _Rows) -> None:
    scope = space.scope
    for review_id, review in space.reviews.items():
        ambiguous = review.get("kind") == "ambiguous_entity"
        if review.get("status") == "open":
            created = review["created_at"]
            assert isinstance(created, int)
            rows.apply([Put(REVIEWS_OPEN, open_key(scope, created, review_id), b"")])
            if ambiguous:
                name, type_ = review.get("name"), review.get("type")
                assert isinstance(name, str) and (type_ is None or isinstance(type_, str))
                rows.apply([Put(REVIEWS_BY_NAME, pending_name_key(scope, name, type_), review_id)])
        chosen = review.get("resolved_to")
        if ambiguous and isinstance(chosen, bytes):
            given = [absorb(scope, chosen, PENDING_TAG + review_id)]
            rows.apply(given)
            decided = review.get("decided_at")
            if isinstance(decided, int):
                rows.apply(history_entries(given, decided))


def _answers_as_name(space: SpaceRecords, key: bytes) -> str:
    """The name subject key ``key`` answers as, from the records (what
    :func:`brain.engine.index.documents.statement_text` reads from the store)."""
    tag, raw = key[:1], key[1:]
    if tag == PENDING_TAG:
        review = space.reviews.get(raw)
        chosen = None if review is None else review.get("resolved_to")
        if not isinstance(chosen, bytes):
            name = None if review is None else review.get("name")
            return name if isinstance(name, str) else ""
        tag, raw = ENTITY_TAG, chosen
    if tag != ENTITY_TAG:
        return ""
    for _ in range(MAX_MERGE_HOPS + 1):
        entity = space.entities.get(raw)
        kept = None if entity is None else entity.get("merged_into")
        if not isinstance(kept, bytes):
            break
        raw = kept
    entity = space.entities.get(raw)
    return "" if entity is None else str(entity.get("name", ""))


def _documents(space: SpaceRecords, rows: _Rows) -> None:
    """The lexical index, the vectors and the embedding queue of the space's documents."""
    scope = space.scope
    texts: dict[bytes, str] = {}
    for memory_id, memory in space.memories.items():
        text = memory.get("text")
        if isinstance(text, str):
            texts[MEMORY_DOC + memory_id] = text

    def name_of(key: bytes) -> str:
        return _answers_as_name(space, key)

    for statement_id, (content, _) in space.statements.items():
        if "subject" in content:
            texts[STATEMENT_DOC + statement_id] = statement_words(content, name_of)
    label = 0
    for doc in sorted(texts):
        vector = space.vectors.get(doc)
        if vector is None:
            rows.apply(index_document(scope, doc, texts[doc]))
            continue
        rows.apply(lexical.index_changes(scope, doc, texts[doc]))
        raw_label = label.to_bytes(LABEL_BYTES, "big")
        rows.apply(
            [
                Put(VECTORS, scope.key(doc), raw_label + vector),
                Put(VECTOR_LABELS, scope.key(raw_label), doc),
            ]
        )
        label += 1
    if label:
        state = {"next_label": label, "lsn": _IMPORTED_LSN}
        rows.apply([Put(VECTOR_SCOPES, scope.prefix, cbor.encode(state))])
