"""Entity rows, the name index, and how a ``ref`` names a subject (spec/02-data-model.md §4).

Storage, every key scope-prefixed:

- ``entities``: ``entity_id`` → the row: ``namespace``, ``space``, ``name``,
  ``type``?, ``aliases``, ``attributes``, ``created_at``, ``merged_into``?,
  ``moved``? (while merged away: the normalised names its merge gave the kept
  entity), ``tombstoned_at``? and ``merge_height``? (the longest chain of
  merges that ends at this entity, present once it is above zero);
- ``entity_by_name``: ``name key ‖ 0x00 ‖ entity_id`` → ``b""`` for the
  normalised name and every normalised alias of each entity that is not merged
  away, and for a merged-away one the names its merge moved to the kept entity
  (``moved`` in its row): the name still names it, and a write through that
  name stores its id, which answers as the kept one while the merge stands
  (:func:`brain.engine.records.refs.resolve_for_write`). Tombstoned entities keep their
  rows (resolution skips them), so the index is a function of the entity row
  alone: :func:`index_names`.

Names are compared case- and space-normalised (casefolded, runs of white space
made one space, trimmed). A name key is the normalised name's UTF-8, or, when
that is too long for an LMDB key, its head followed by a hash of the whole
(:func:`name_key`); the entity id is always the key's last 16 bytes.

How refs in requests name entities is :mod:`brain.engine.records.refs`; how names
resolve, :mod:`brain.engine.records.resolution`.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterator
from typing import Final

import lmdb

from brain import cbor
from brain.engine.records.entity_history import interval_at, members_at, version_at, versions
from brain.engine.store.env import Store
from brain.engine.store.scan import scan_keys
from brain.engine.store.scope import Scope
from brain.engine.store.tables import ENTITIES, ENTITY_BY_NAME
from brain.engine.write.plan import Change, Delete, Put
from brain.errors import Internal, InvalidArgument
from brain.wire.messages.records import Entity

__all__ = [
    "ENTITY_ID_BYTES",
    "MAX_ATTRIBUTE_DEPTH",
    "MAX_MERGE_HOPS",
    "NAME_KEY_BYTES",
    "aliases_of",
    "canonical_entity",
    "check_attributes",
    "check_name",
    "decode_row",
    "entity_row",
    "entity_versions",
    "exact_candidates",
    "index_changes",
    "index_names",
    "is_live",
    "name_key",
    "name_owners",
    "new_row",
    "normalise_name",
    "recorded_at_of",
    "row_change",
    "to_entity",
    "type_matches",
]

ENTITY_ID_BYTES: Final = 16
"""Entity ids are UUIDv7, 16 raw bytes."""

NAME_KEY_BYTES: Final = 400
"""Longest name part of an ``entity_by_name`` key: LMDB keys hold at most 511 bytes,
less the 32-byte scope prefix, the separator and the 16-byte id, with headroom."""

_NAME_HASH_BYTES: Final = 16
"""Hash bytes that end an over-long name key: enough that two names never share one."""

MAX_MERGE_HOPS: Final = 64
"""Longest chain of merges (A into B into C …): every ref to a merged entity follows
it, so it stays short; a merge that would make a longer one answers CONFLICT."""

MAX_ATTRIBUTE_DEPTH: Final = 4
"""Nesting levels of an attribute map, the map itself included: attributes describe
an entity, they are not documents."""

_CBOR_INT_MIN: Final = -(1 << 64)
_CBOR_INT_MAX: Final = (1 << 64) - 1

_SPACES: Final = re.compile(r"\s+")


def normalise_name(name: str) -> str:
    """The form names and aliases are matched in."""
    return _SPACES.sub(" ", name.casefold()).strip()


def check_name(name: str, field: str) -> str:
    """The normalised ``name``; INVALID_ARGUMENT when nothing but white space is left."""
    normal = normalise_name(name)
    if not normal:
        raise InvalidArgument("a name must contain a character other than white space", field=field)
    return normal


def name_key(normal: str) -> bytes:
    """The name part of an index key for the normalised name ``normal``."""
    raw = normal.encode("utf-8")
    if len(raw) < NAME_KEY_BYTES:
        return raw
    # Exactly NAME_KEY_BYTES long, so it can never equal a short name's key.
    digest = hashlib.sha256(raw).digest()[:_NAME_HASH_BYTES]
    return raw[: NAME_KEY_BYTES - _NAME_HASH_BYTES] + digest


def _index_key(scope: Scope, normal: str, entity_id: bytes) -> bytes:
    return scope.key(name_key(normal), b"\x00", entity_id)


def check_attributes(attributes: dict[str, object], field: str) -> dict[str, object]:
    """``attributes`` when every value is CBOR-simple (text, integer, float, bool, null,
    bytes) or an array or text-keyed map of them, nested at most
    :data:`MAX_ATTRIBUTE_DEPTH` levels; INVALID_ARGUMENT naming the first bad value."""
    _check_attribute(attributes, field, 1)
    return attributes


def _check_attribute(value: object, path: str, depth: int) -> None:
    if value is None or isinstance(value, bool | str | bytes):
        return
    if isinstance(value, int):
        if not _CBOR_INT_MIN <= value <= _CBOR_INT_MAX:
            raise InvalidArgument(f"{path} is outside the CBOR integer range", field=path)
        return
    if isinstance(value, float):
        # NaN and the infinities have no JSON form and never compare equal to themselves.
        if not math.isfinite(value):
            raise InvalidArgument(f"{path} must be a finite number", field=path)
        return
    if isinstance(value, list | tuple | dict) and depth > MAX_ATTRIBUTE_DEPTH:
        raise InvalidArgument(
            f"{path} nests deeper than {MAX_ATTRIBUTE_DEPTH} levels of attributes", field=path
        )
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _check_attribute(item, f"{path}[{i}]", depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidArgument(f"{path} must have text keys", field=path)
            _check_attribute(item, f"{path}.{key}", depth + 1)
        return
    raise InvalidArgument(
        f"{path} must be text, an integer, a float, a bool, null or bytes", field=path
    )


# --- rows ---------------------------------------------------------------------------------


def entity_row(
    store: Store,
    txn: lmdb.Transaction,
    scope: Scope,
    entity_id: bytes,
    *,
    as_of: int | None = None,
) -> dict[str, object] | None:
    """The stored entity row, or None (also for a row that names another scope); with
    ``as_of``, the row as believed then (None before the entity was created)."""
    if as_of is not None:
        found = version_at(store, txn, scope.key(entity_id), as_of)
        return None if found is None else decode_row(scope, found)
    raw = txn.get(scope.key(entity_id), db=store.table(ENTITIES))
    return None if raw is None else decode_row(scope, bytes(raw))


def entity_versions(
    store: Store, txn: lmdb.Transaction, scope: Scope, entity_id: bytes
) -> list[Entity]:
    """Every version of the entity, oldest first, each with its record interval."""
    found = [
        (at, row)
        for at, raw in versions(store, txn, scope.key(entity_id))
        if (row := decode_row(scope, raw)) is not None
    ]
    shown: list[Entity] = []
    for index, (at, row) in enumerate(found):
        until = found[index + 1][0] if index + 1 < len(found) else None
        shown.append(to_entity(entity_id, row, recorded_at=at, record_invalidated_at=until))
    return shown


def recorded_at_of(
    store: Store, txn: lmdb.Transaction, scope: Scope, entity_id: bytes, as_of: int | None
) -> tuple[int, int | None]:
    """The record interval of the version of the entity a read shows (the last, or the
    one believed at ``as_of``): its ``recorded_at`` and ``record_invalidated_at``."""
    found = interval_at(store, txn, scope.key(entity_id), as_of)
    return (0, None) if found is None else found


def decode_row(scope: Scope, raw: bytes) -> dict[str, object] | None:
    """A stored entity row, or None when it names another scope than ``scope``."""
    row = cbor.decode(raw)
    assert isinstance(row, dict)
    loaded = {str(k): v for k, v in row.items()}
    # Keys are scope-prefixed already; the row's own scope is checked as a second lock.
    if loaded.get("namespace") != scope.namespace or loaded.get("space") != scope.space:
        return None
    return loaded


def new_row(
    scope: Scope,
    *,
    name: str,
    type_: str | None,
    aliases: list[str],
    attributes: dict[str, object],
    created_at: int,
) -> dict[str, object]:
    """The row of a new entity."""
    row: dict[str, object] = {
        "namespace": scope.namespace,
        "space": scope.space,
        "name": name,
        "aliases": aliases,
        "attributes": attributes,
        "created_at": created_at,
    }
    if type_ is not None:
        row["type"] = type_
    return row


def row_change(scope: Scope, entity_id: bytes, row: dict[str, object]) -> Put:
    """The put that stores ``row``."""
    return Put(ENTITIES, scope.key(entity_id), cbor.encode(row))


def aliases_of(row: dict[str, object]) -> list[str]:
    """The row's aliases, in their stored order."""
    aliases = row.get("aliases", [])
    assert isinstance(aliases, list)
    return [str(a) for a in aliases]


def is_live(row: dict[str, object]) -> bool:
    """Neither tombstoned nor merged away: a candidate for resolution and listing."""
    return row.get("tombstoned_at") is None and row.get("merged_into") is None


def type_matches(row: dict[str, object], type_: str | None) -> bool:
    """Whether a row fits a resolution's type: an untyped entity fits any type."""
    return type_ is None or row.get("type") in (None, type_)


def index_names(row: dict[str, object] | None) -> set[str]:
    """The normalised names the index holds for ``row``: once it is merged away, only
    those its merge moved to the kept entity (none for a merge that predates ``moved``)."""
    if row is None:
        return set()
    if row.get("merged_into") is not None:
        moved = row.get("moved", [])
        assert isinstance(moved, list)
        return {str(normal) for normal in moved}
    return {normalise_name(str(row["name"]))} | {normalise_name(a) for a in aliases_of(row)}


def index_changes(
    scope: Scope, entity_id: bytes, before: set[str], after: set[str]
) -> list[Change]:
    """The index puts and deletes that take ``entity_id``'s names from ``before`` to ``after``."""
    changes: list[Change] = [
        Delete(ENTITY_BY_NAME, _index_key(scope, normal, entity_id))
        for normal in sorted(before - after)
    ]
    changes += [
        Put(ENTITY_BY_NAME, _index_key(scope, normal, entity_id), b"")
        for normal in sorted(after - before)
    ]
    return changes


def to_entity(
    entity_id: bytes,
    row: dict[str, object],
    *,
    recorded_at: int,
    record_invalidated_at: int | None = None,
) -> Entity:
    """The entity as an answer shows it, with the record interval of the version shown."""
    wire: dict[str, object] = {"id": entity_id, "recorded_at": recorded_at}
    if record_invalidated_at is not None:
        wire["record_invalidated_at"] = record_invalidated_at
    for key in (
        "name",
        "type",
        "aliases",
        "attributes",
        "created_at",
        "merged_into",
        "tombstoned_at",
    ):
        if row.get(key) is not None:
            wire[key] = row[key]
    return Entity.from_wire(wire)


def canonical_entity(
    store: Store,
    txn: lmdb.Transaction,
    scope: Scope,
    entity_id: bytes,
    *,
    as_of: int | None = None,
) -> bytes:
    """The entity ``entity_id`` answers as (at ``as_of``, else now): itself, or the one
    it was merged into (following chains of merges). An unknown id is returned unchanged."""
    current = entity_id
    for _ in range(MAX_MERGE_HOPS + 1):
        row = entity_row(store, txn, scope, current, as_of=as_of)
        target = None if row is None else row.get("merged_into")
        if not isinstance(target, bytes):
            return current
        current = target
    # ENTITY_MERGE refuses chains longer than MAX_MERGE_HOPS, so this is a bug.
    raise Internal(f"entity {entity_id.hex()} has a merge chain longer than {MAX_MERGE_HOPS}")


# --- names --------------------------------------------------------------------------------


def name_owners(
    store: Store,
    txn: lmdb.Transaction,
    scope: Scope,
    normal: str,
    *,
    as_of: int | None = None,
) -> list[tuple[bytes, dict[str, object]]]:
    """Every entity the index holds (held at ``as_of``) the normalised name ``normal``
    for, in any state (tombstoned and merged-away ones included), in id order, each
    with its row (as of then)."""
    owners: list[tuple[bytes, dict[str, object]]] = []
    if not normal:
        return owners
    prefix = scope.key(name_key(normal), b"\x00")
    tails: Iterator[bytes]
    if as_of is None:
        tails = (key[len(prefix) :] for key in scan_keys(txn, store.table(ENTITY_BY_NAME), prefix))
    else:
        tails = members_at(store, txn, ENTITY_BY_NAME, prefix, as_of)
    for entity_id in tails:
        # A name holding a NUL byte shares this prefix; its keys are longer than an id.
        if len(entity_id) != ENTITY_ID_BYTES:
            continue
        row = entity_row(store, txn, scope, entity_id, as_of=as_of)
        if row is not None:
            owners.append((entity_id, row))
    return owners


def exact_candidates(
    store: Store,
    txn: lmdb.Transaction,
    scope: Scope,
    name: str,
    type_: str | None,
    *,
    as_of: int | None = None,
) -> tuple[list[tuple[bytes, dict[str, object]]], list[tuple[bytes, dict[str, object]]]]:
    """Live entities (at ``as_of``, else now) whose normalised name (first list) or an
    alias (second list) equals ``name`` normalised, and that fit ``type_``; each list
    in id order."""
    normal = normalise_name(name)
    exact: list[tuple[bytes, dict[str, object]]] = []
    alias: list[tuple[bytes, dict[str, object]]] = []
    for entity_id, row in name_owners(store, txn, scope, normal, as_of=as_of):
        if not is_live(row) or not type_matches(row, type_):
            continue
        if normalise_name(str(row["name"])) == normal:
            exact.append((entity_id, row))
        else:
            alias.append((entity_id, row))
    return exact, alias
