"""Entity rows and how a ``ref`` names a subject (WIRE.md §8, SEMANTICS.md §7).

An entity row lives under ``scope ‖ entity_id``; ``entity_by_name`` maps
``scope ‖ normalised name ‖ 0x00 ‖ entity_id`` for its name and every alias, so
exact-name resolution is one range scan within the scope. Names are compared
case- and space-normalised (casefolded, runs of white space made one space,
trimmed).

A ref in a write resolves to a *subject key*: a one-byte tag and a 16-byte
id (entity, memory, or pending review). ``{"name": …}`` finds the entity with
that exact name or alias (and type, when given) or, in a write, creates it.
"""

from __future__ import annotations

import re
from typing import Final

import lmdb

from brain.engine.plan import Change, Put
from brain.engine.scope import Scope
from brain.engine.store.env import Store
from brain.engine.writer import PlanContext
from brain.errors import NotFound
from brain.wire import cbor
from brain.wire.messages.values import EntityRef, MemoryRef, NameRef, PendingRef, SubjectRef

__all__ = [
    "SUBJECT_KEY_BYTES",
    "entity_row",
    "normalise_name",
    "ref_of_key",
    "resolve_for_read",
    "resolve_for_write",
]

ENTITIES: Final = b"entities"
BY_NAME: Final = b"entity_by_name"
MEMORIES: Final = b"memories"

_TAG_ENTITY: Final = b"e"
_TAG_MEMORY: Final = b"m"
_TAG_PENDING: Final = b"p"
SUBJECT_KEY_BYTES: Final = 17
"""A subject key: a tag byte and a 16-byte id."""

_SPACES: Final = re.compile(r"\s+")


def normalise_name(name: str) -> str:
    """The form names and aliases are matched in."""
    return _SPACES.sub(" ", name.casefold()).strip()


def entity_row(
    store: Store, txn: lmdb.Transaction, scope: Scope, entity_id: bytes
) -> dict[str, object] | None:
    """The stored entity, or None."""
    raw = txn.get(scope.key(entity_id), db=store.table(ENTITIES))
    if raw is None:
        return None
    row = cbor.decode(bytes(raw))
    assert isinstance(row, dict)
    return {str(k): v for k, v in row.items()}


def _by_name(
    store: Store, txn: lmdb.Transaction, scope: Scope, name: str, type_: str | None
) -> bytes | None:
    prefix = scope.key(normalise_name(name).encode("utf-8"), b"\x00")
    cursor = txn.cursor(db=store.table(BY_NAME))
    if not cursor.set_range(prefix):
        return None
    for key, _ in cursor:
        raw = bytes(key)
        if not raw.startswith(prefix):
            break
        entity_id = raw[len(prefix) :]
        row = entity_row(store, txn, scope, entity_id)
        if row is None or row.get("tombstoned_at") is not None:
            continue
        if type_ is None or row.get("type") in (None, type_):
            return entity_id
    return None


def _exists(store: Store, txn: lmdb.Transaction, scope: Scope, table: bytes, rid: bytes) -> bool:
    return txn.get(scope.key(rid), db=store.table(table)) is not None


def resolve_for_write(
    ctx: PlanContext, scope: Scope, ref: EntityRef | MemoryRef | NameRef, field: str
) -> tuple[bytes, list[Change]]:
    """The subject key ``ref`` names, creating the entity a new name needs."""
    store, txn = ctx.store, ctx.txn
    if isinstance(ref, EntityRef):
        if not _exists(store, txn, scope, ENTITIES, ref.entity):
            raise NotFound(f"no entity {ref.entity.hex()} in space {scope.space!r}", field=field)
        return _TAG_ENTITY + ref.entity, []
    if isinstance(ref, MemoryRef):
        if not _exists(store, txn, scope, MEMORIES, ref.memory):
            raise NotFound(f"no memory {ref.memory.hex()} in space {scope.space!r}", field=field)
        return _TAG_MEMORY + ref.memory, []
    found = _by_name(store, txn, scope, ref.name, ref.type_)
    if found is not None:
        return _TAG_ENTITY + found, []
    entity_id = ctx.ids.new()
    row: dict[str, object] = {
        "name": ref.name,
        "aliases": [],
        "attributes": {},
        "created_at": ctx.record_time,
    }
    if ref.type_ is not None:
        row["type"] = ref.type_
    changes: list[Change] = [
        Put(ENTITIES, scope.key(entity_id), cbor.encode(row)),
        Put(BY_NAME, scope.key(normalise_name(ref.name).encode("utf-8"), b"\x00", entity_id), b""),
    ]
    return _TAG_ENTITY + entity_id, changes


def resolve_for_read(
    store: Store, txn: lmdb.Transaction, scope: Scope, ref: EntityRef | MemoryRef | NameRef
) -> bytes | None:
    """The subject key ``ref`` names, or None when a name matches nothing (a read
    answers as if it matched nothing, WIRE.md §8)."""
    if isinstance(ref, EntityRef):
        return _TAG_ENTITY + ref.entity
    if isinstance(ref, MemoryRef):
        return _TAG_MEMORY + ref.memory
    found = _by_name(store, txn, scope, ref.name, ref.type_)
    return None if found is None else _TAG_ENTITY + found


def ref_of_key(key: bytes) -> SubjectRef:
    """The ref an answer shows for a subject key."""
    tag, raw = key[:1], key[1:]
    if tag == _TAG_ENTITY:
        return EntityRef(entity=raw)
    if tag == _TAG_MEMORY:
        return MemoryRef(memory=raw)
    return PendingRef(pending=raw)
