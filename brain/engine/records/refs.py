"""How a ``ref`` names a subject, and what a subject answers as (spec/02-data-model.md §4.2).

Statements and relations store their subject (or end) as a *subject key*: a
tag byte and a 16-byte id, naming an entity (``e``), a memory (``m``) or an
ambiguous name waiting for review (``p``, the review item's id). The key is
written once with the record and never rewritten; what it *answers as* can
change later:

- an entity merged into another answers as the kept one (following chains);
- a pending name, once its review is decided, answers as the entity the
  decision chose (itself followed through merges).

``entity_absorbed`` records both: ``scope ‖ entity id ‖ absorbed subject key``
for every merged entity and every decided pending name, so reading an entity's
records reads the records stored under every key that answers as it
(:func:`keys_answering_as`).

Writes keep what the request named, so that an unmerge restores exactly: an
``{"entity": id}`` of a merged-away entity stores that id (the end of its
chain must be live), and a name that a merge moved from the merged entity to
the kept one stores the merged entity's id (:func:`named_owner`). Either
answers as the kept entity while the merge stands, like records written
before it.

Name refs in writes (:func:`resolve_for_write`): the exact normalised name,
else an alias, as spec/01-wire.md §9 says; when nothing matches, a new entity is
created, unless the fuzzy tier (:mod:`brain.engine.records.resolution`) finds a tie, in
which case the write is stored with a pending subject and an
``ambiguous_entity`` review item is queued instead of guessing. Two live
entities with the same exact name (or alias) are a tie too. One open item
serves every write that names the same (name, type) until it is decided.
Where the schema declares entity types, a name whose type is not one of them
makes neither: the write is INVALID_ARGUMENT (``….type``).
"""

from __future__ import annotations

import hashlib
from typing import Final

import lmdb

from brain import cbor
from brain.engine.records.audit import audit_entry
from brain.engine.records.entity_history import held_at, members_at
from brain.engine.records.entity_rows import (
    ENTITY_ID_BYTES,
    MAX_MERGE_HOPS,
    canonical_entity,
    entity_row,
    exact_candidates,
    index_changes,
    index_names,
    name_owners,
    new_row,
    normalise_name,
    row_change,
    type_matches,
)
from brain.engine.records.resolution import is_ambiguous, resolve_name, tied
from brain.engine.records.review_queue import queue_review, review_row
from brain.engine.records.schema import check_entity_type
from brain.engine.store.env import Store
from brain.engine.store.scan import scan_keys
from brain.engine.store.scope import Scope
from brain.engine.store.statement_keys import SUBJECT_KEY_BYTES
from brain.engine.store.tables import ENTITY_ABSORBED, MEMORIES, REVIEWS, REVIEWS_BY_NAME
from brain.engine.write.plan import Change, Delete, Put
from brain.engine.write.writer import PlanContext
from brain.errors import Conflict, Internal, NotFound
from brain.wire.messages.values import EntityRef, MemoryRef, NameRef, PendingRef, SubjectRef

__all__ = [
    "ENTITY_TAG",
    "MAX_ABSORBED",
    "MEMORY_TAG",
    "PENDING_TAG",
    "SUBJECT_KEY_BYTES",
    "AnswersAs",
    "absorb",
    "answers_as",
    "keys_answering_as",
    "named_owner",
    "pending_name_key",
    "ref_of_key",
    "release",
    "resolve_for_read",
    "resolve_for_write",
]

ENTITY_TAG: Final = b"e"
"""The tag byte of a subject key that names an entity."""
MEMORY_TAG: Final = b"m"
"""The tag byte of a subject key that names a memory."""
PENDING_TAG: Final = b"p"
"""The tag byte of a subject key that names an ambiguous name's review item."""

MAX_ABSORBED: Final = 10_000
"""Most subject keys one entity's reads follow (merged entities and decided names):
a bound on the work one read does, far above any real merge history."""


def absorb(scope: Scope, entity_id: bytes, key: bytes) -> Put:
    """Record that subject key ``key`` answers as entity ``entity_id``."""
    return Put(ENTITY_ABSORBED, scope.key(entity_id, key), b"")


def release(scope: Scope, entity_id: bytes, key: bytes) -> Delete:
    """Undo :func:`absorb` (an unmerge)."""
    return Delete(ENTITY_ABSORBED, scope.key(entity_id, key))


def answers_as(
    store: Store, txn: lmdb.Transaction, scope: Scope, key: bytes, *, as_of: int | None = None
) -> bytes:
    """The subject key ``key`` answers as now (or as believed at ``as_of``): the kept
    entity of a merged one, the chosen entity of a decided name, else ``key`` itself."""
    tag, raw = key[:1], key[1:]
    if tag == PENDING_TAG:
        row = review_row(store, txn, scope, raw)
        chosen = None if row is None else row.get("resolved_to")
        if not isinstance(chosen, bytes):
            return key
        # The decision gave the name to the chosen entity: at an instant before it, the
        # absorbed-key history does not hold the name there yet.
        if as_of is not None and not held_at(
            store, txn, ENTITY_ABSORBED, scope.key(chosen, key), as_of
        ):
            return key
        tag, raw = ENTITY_TAG, chosen
    if tag == ENTITY_TAG:
        return ENTITY_TAG + canonical_entity(store, txn, scope, raw, as_of=as_of)
    return key


class AnswersAs:
    """:func:`answers_as` within one read: each subject key is worked out once, however
    many of the read's rows show it (every row of a LIST of one subject's statements
    shows that subject). Hold one only as long as the transaction it was made with."""

    __slots__ = ("_as_of", "_known", "_scope", "_store", "_txn")

    def __init__(
        self, store: Store, txn: lmdb.Transaction, scope: Scope, *, as_of: int | None = None
    ) -> None:
        self._store, self._txn, self._scope, self._as_of = store, txn, scope, as_of
        self._known: dict[bytes, bytes] = {}

    def __call__(self, key: bytes) -> bytes:
        """What ``key`` answers as in this read's snapshot (at its ``as_of``)."""
        known = self._known.get(key)
        if known is None:
            known = answers_as(self._store, self._txn, self._scope, key, as_of=self._as_of)
            self._known[key] = known
        return known


def keys_answering_as(
    store: Store, txn: lmdb.Transaction, scope: Scope, key: bytes, *, as_of: int | None = None
) -> list[bytes]:
    """``key`` and, for an entity, every subject key that answers as it (now, or as
    believed at ``as_of``): the entities merged into it (through chains) and the
    decided names given to any of them."""
    found = [key]
    if key[:1] != ENTITY_TAG:
        return found
    table = store.table(ENTITY_ABSORBED)
    frontier = [key[1:]]
    while frontier and len(found) < MAX_ABSORBED:
        prefix = scope.key(frontier.pop())
        if as_of is None:
            rests = [raw[len(prefix) :] for raw in scan_keys(txn, table, prefix)]
        else:
            rests = list(members_at(store, txn, ENTITY_ABSORBED, prefix, as_of))
        for absorbed in rests:
            found.append(absorbed)
            if absorbed[:1] == ENTITY_TAG:
                frontier.append(absorbed[1:])
    return found


def ref_of_key(key: bytes) -> SubjectRef:
    """The ref an answer shows for a subject key (give it :func:`answers_as` first)."""
    tag, raw = key[:1], key[1:]
    if tag == ENTITY_TAG:
        return EntityRef(entity=raw)
    if tag == MEMORY_TAG:
        return MemoryRef(memory=raw)
    if tag == PENDING_TAG:
        return PendingRef(pending=raw)
    raise Internal(f"a stored subject key has the unknown tag {tag!r}")


# --- refs in requests ---------------------------------------------------------------------


def pending_name_key(scope: Scope, name: str, type_: str | None) -> bytes:
    """The ``reviews_by_name`` key of an open ambiguous-name item for (name, type)."""
    identity = cbor.encode([normalise_name(name), type_])
    return scope.key(hashlib.sha256(identity).digest()[:ENTITY_ID_BYTES])


def _live_entity(store: Store, txn: lmdb.Transaction, scope: Scope, entity_id: bytes) -> bool:
    row = entity_row(store, txn, scope, entity_id)
    return row is not None and row.get("tombstoned_at") is None


def resolve_for_write(
    ctx: PlanContext, scope: Scope, ref: EntityRef | MemoryRef | NameRef, field: str
) -> tuple[bytes, list[Change]]:
    """The subject key ``ref`` names in a write, and the changes that makes: a new
    entity for a new name, or an ``ambiguous_entity`` review item for a tie.

    An entity that was merged away is stored as named (the end of its chain must
    be live); it answers as that end until an unmerge."""
    store, txn = ctx.store, ctx.txn
    if isinstance(ref, EntityRef):
        if entity_row(store, txn, scope, ref.entity) is None:
            raise NotFound(f"no entity {ref.entity.hex()} in space {scope.space!r}", field=field)
        canonical = canonical_entity(store, txn, scope, ref.entity)
        if not _live_entity(store, txn, scope, canonical):
            raise Conflict(f"entity {canonical.hex()} is tombstoned", field=field)
        return ENTITY_TAG + ref.entity, []
    if isinstance(ref, MemoryRef):
        if txn.get(scope.key(ref.memory), db=store.table(MEMORIES)) is None:
            raise NotFound(f"no memory {ref.memory.hex()} in space {scope.space!r}", field=field)
        return MEMORY_TAG + ref.memory, []
    matches = resolve_name(
        store, txn, scope, ref.name, ref.type_, settings=ctx.resolution, field=f"{field}.name"
    )
    ambiguous = bool(matches) and is_ambiguous(matches, ctx.resolution)
    if matches and not ambiguous and matches[0].tier != "fuzzy":
        owner = named_owner(store, txn, scope, ref, matches[0].entity_id)
        return ENTITY_TAG + owner, []
    # What follows makes an entity of the name's type, or a pending name that
    # becomes one when decided ``distinct``: either needs a declared type.
    check_entity_type(store, txn, scope, ref.type_, f"{field}.type")
    if ambiguous:
        return _pending(ctx, scope, ref, tied(matches, ctx.resolution))
    entity_id = ctx.ids.new()
    row = new_row(
        scope, name=ref.name, type_=ref.type_, aliases=[], attributes={}, created_at=ctx.record_time
    )
    changes: list[Change] = [
        row_change(scope, entity_id, row),
        # A name that makes an entity is an entity change like ENTITY_CREATE: audited.
        audit_entry(ctx, scope, "entity_create", [entity_id], reason="named by a write"),
    ]
    changes += index_changes(scope, entity_id, set(), index_names(row))
    return ENTITY_TAG + entity_id, changes


def _chain(store: Store, txn: lmdb.Transaction, scope: Scope, entity_id: bytes) -> list[bytes]:
    """``entity_id`` and every entity its chain of merges passes through, to the end."""
    chain = [entity_id]
    for _ in range(MAX_MERGE_HOPS + 1):
        row = entity_row(store, txn, scope, chain[-1])
        target = None if row is None else row.get("merged_into")
        if not isinstance(target, bytes):
            return chain
        chain.append(target)
    # ENTITY_MERGE refuses chains longer than MAX_MERGE_HOPS, so this is a bug.
    raise Internal(f"entity {entity_id.hex()} has a merge chain longer than {MAX_MERGE_HOPS}")


def named_owner(
    store: Store, txn: lmdb.Transaction, scope: Scope, ref: NameRef, kept: bytes
) -> bytes:
    """The entity a write through ``ref`` stores, once the name resolved to the live
    entity ``kept``: the merged-away entity the name belonged to before a merge moved
    it to ``kept``, else ``kept``.

    A name moves up a chain of merges only to an entity that did not answer to it,
    so the entities holding it that answer as ``kept`` lie on one chain; the one
    furthest from ``kept`` had it first. When they do not lie on one chain (the kept
    entity was renamed between merges), the write stores ``kept``."""
    holders = [
        entity_id
        for entity_id, row in name_owners(store, txn, scope, normalise_name(ref.name))
        if row.get("merged_into") is not None
        and type_matches(row, ref.type_)
        and canonical_entity(store, txn, scope, entity_id) == kept
    ]
    for holder in holders:
        if set(holders) <= set(_chain(store, txn, scope, holder)):
            return holder
    return kept


def _pending(
    ctx: PlanContext, scope: Scope, ref: NameRef, candidates: list[bytes]
) -> tuple[bytes, list[Change]]:
    """The pending subject key for an ambiguous name: the open item for the same
    (name, type) if there is one (its candidates brought up to date), else a new one."""
    index_key = pending_name_key(scope, ref.name, ref.type_)
    open_id = ctx.txn.get(index_key, db=ctx.store.table(REVIEWS_BY_NAME))
    if open_id is not None:
        review_id = bytes(open_id)
        row = review_row(ctx.store, ctx.txn, scope, review_id)
        if row is None:
            raise Internal(f"the pending-name index names a missing review {review_id.hex()}")
        if row.get("records") == candidates:
            return PENDING_TAG + review_id, []
        row["records"] = candidates
        return PENDING_TAG + review_id, [Put(REVIEWS, scope.key(review_id), cbor.encode(row))]
    extra: dict[str, object] = {"name": ref.name}
    if ref.type_ is not None:
        extra["type"] = ref.type_
    review_id, changes = queue_review(ctx, scope, "ambiguous_entity", candidates, extra)
    changes.append(Put(REVIEWS_BY_NAME, index_key, review_id))
    return PENDING_TAG + review_id, changes


def resolve_for_read(
    store: Store,
    txn: lmdb.Transaction,
    scope: Scope,
    ref: EntityRef | MemoryRef | NameRef,
    *,
    as_of: int | None = None,
) -> bytes | None:
    """The subject key ``ref`` names in a read (among the entities as they are now, or
    as believed at ``as_of``), or None when a name matches nothing (a read answers as
    if it matched nothing, spec/01-wire.md §9): the exact name, else an alias, the
    first by id on a tie. A merged-away entity answers as the kept one."""
    if isinstance(ref, EntityRef):
        return ENTITY_TAG + canonical_entity(store, txn, scope, ref.entity, as_of=as_of)
    if isinstance(ref, MemoryRef):
        return MEMORY_TAG + ref.memory
    exact, alias = exact_candidates(store, txn, scope, ref.name, ref.type_, as_of=as_of)
    found = exact or alias
    return ENTITY_TAG + found[0][0] if found else None
