"""The entity opcodes (spec/02-data-model.md §4, spec/02-data-model.md §4): planners and readers.

Decisions where the wire spec is silent:

- **ENTITY_CREATE** always creates: a name (and type) that another entity has
  already is not an error, since two things may share a name; ENTITY_RESOLVE
  reports the tie as ``ambiguous``. Aliases are kept in the order given, and
  one whose normalised form equals the name or an earlier alias is dropped.
  Attribute values must be CBOR-simple (text, integer, float, bool, null,
  bytes) or arrays and text-keyed maps of them, at most
  :data:`~brain.engine.records.entity_rows.MAX_ATTRIBUTE_DEPTH` levels deep; floats
  finite.
- **ENTITY_UPDATE** renames, then removes and adds aliases (both matched
  normalised; removing an alias the entity lacks is no error; naming one alias
  in both lists is INVALID_ARGUMENT), and **replaces** the attribute map whole
  when ``attributes`` is given (the message says "replace attributes"; a merge
  could never delete a key). The old name does not become an alias. A
  tombstoned or merged-away entity answers CONFLICT.
- **ENTITY_RESOLVE** answers the candidates of :mod:`brain.engine.records.resolution`
  (exact, alias, fuzzy; best first, ties by id), ``ambiguous`` when the two
  best are within the margin, and ``resolved`` (the best) otherwise.
- **ENTITY_LIST** walks entities in id order, skipping tombstoned and merged
  ones; ``type`` matches exactly, ``prefix`` is matched against the normalised
  name. The cursor is the last id returned.
- **ENTITY_MERGE** needs two distinct live entities. The merged one gets
  ``merged_into``; its name and aliases become aliases of the kept one (minus
  those the kept one already answers to) and leave the merged row's
  ``aliases``. The names that moved are listed in the merged row's ``moved``
  and keep their name index rows pointing at it, so a write naming one of
  them stores the merged id, which answers as the kept entity until an
  unmerge (:func:`brain.engine.records.refs.resolve_for_write`); its other index rows
  are deleted. Types and attributes of the kept entity do not change. The
  merge record (table ``entity_merges``) holds both rows and their index
  names before and after.
- **ENTITY_UNMERGE** puts back exactly the rows and index rows from before
  the merge. It answers CONFLICT when either entity changed after the merge
  (the kept one updated, tombstoned, merged again or given another merge),
  because an exact restore would silently undo that later write: undo later
  merges first, newest first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Final

import lmdb

from brain import cbor
from brain.engine.records.audit import audit_entry
from brain.engine.records.entity_history import TIME_BYTES
from brain.engine.records.entity_rows import (
    ENTITY_ID_BYTES,
    MAX_MERGE_HOPS,
    aliases_of,
    check_attributes,
    check_name,
    decode_row,
    entity_row,
    entity_versions,
    index_changes,
    index_names,
    is_live,
    new_row,
    normalise_name,
    recorded_at_of,
    row_change,
    to_entity,
)
from brain.engine.records.refs import ENTITY_TAG, absorb, release
from brain.engine.records.resolution import is_ambiguous, resolve_name
from brain.engine.records.schema import check_entity_type
from brain.engine.store.env import Store
from brain.engine.store.scan import scan
from brain.engine.store.scope import Scope
from brain.engine.store.tables import ENTITIES, ENTITY_MERGES, ENTITY_VERSIONS
from brain.engine.write.plan import Change, Put
from brain.engine.write.reads import ReadContext
from brain.engine.write.writer import PlanContext
from brain.errors import Conflict, InvalidArgument, NotFound
from brain.wire.messages.entity_ops import (
    EntityCreate,
    EntityCreateOk,
    EntityGet,
    EntityGetOk,
    EntityHistory,
    EntityHistoryOk,
    EntityList,
    EntityListOk,
    EntityMerge,
    EntityMergeOk,
    EntityResolve,
    EntityResolveOk,
    EntityTombstone,
    EntityTombstoneOk,
    EntityUnmerge,
    EntityUnmergeOk,
    EntityUpdate,
    EntityUpdateOk,
)
from brain.wire.messages.records import Entity
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message

__all__ = [
    "DEFAULT_LIST_LIMIT",
    "DEFAULT_RESOLVE_LIMIT",
    "ENTITY_READS",
    "ENTITY_WRITES",
    "merge_changes",
    "plan_create",
    "plan_merge",
    "plan_tombstone",
    "plan_unmerge",
    "plan_update",
    "read_get",
    "read_history",
    "read_list",
    "read_resolve",
]

DEFAULT_RESOLVE_LIMIT: Final = 10
"""Matches ENTITY_RESOLVE returns when the request names no limit: a short pick list."""

DEFAULT_LIST_LIMIT: Final = 100
"""Page size when ENTITY_LIST names none, as for STATEMENT_LIST (spec/02-data-model.md §4)."""

Row = dict[str, object]


def _load(store: Store, txn: lmdb.Transaction, scope: Scope, entity_id: bytes, field: str) -> Row:
    row = entity_row(store, txn, scope, entity_id)
    if row is None:
        raise NotFound(f"no entity {entity_id.hex()} in space {scope.space!r}", field=field)
    return row


def _live(store: Store, txn: lmdb.Transaction, scope: Scope, entity_id: bytes, field: str) -> Row:
    """The row of an entity a write may change: neither tombstoned nor merged away."""
    row = _load(store, txn, scope, entity_id, field)
    merged_into = row.get("merged_into")
    if isinstance(merged_into, bytes):
        raise Conflict(
            f"entity {entity_id.hex()} was merged into {merged_into.hex()}; "
            "change the kept entity, or unmerge first",
            field=field,
        )
    if row.get("tombstoned_at") is not None:
        raise Conflict(f"entity {entity_id.hex()} is tombstoned", field=field)
    return row


def _add_aliases(name: str, existing: list[str], additions: Iterable[str], field: str) -> list[str]:
    """``existing`` then each addition whose normalised form is new (not the name either)."""
    taken = {normalise_name(name)} | {normalise_name(a) for a in existing}
    aliases = list(existing)
    for i, alias in enumerate(additions):
        normal = check_name(alias, f"{field}[{i}]")
        if normal not in taken:
            taken.add(normal)
            aliases.append(alias)
    return aliases


# --- writes -------------------------------------------------------------------------------


def plan_create(
    ctx: PlanContext, scope: Scope, request: EntityCreate
) -> tuple[list[Change], EntityCreateOk]:
    """ENTITY_CREATE: a new entity, even when another already has its name."""
    check_name(request.name, "name")
    check_entity_type(ctx.store, ctx.txn, scope, request.type_, "type")
    aliases = _add_aliases(request.name, [], request.aliases or (), "aliases")
    attributes = check_attributes(dict(request.attributes or {}), "attributes")
    entity_id = ctx.ids.new()
    row = new_row(
        scope,
        name=request.name,
        type_=request.type_,
        aliases=aliases,
        attributes=attributes,
        created_at=ctx.record_time,
    )
    changes: list[Change] = [
        row_change(scope, entity_id, row),
        audit_entry(ctx, scope, "entity_create", [entity_id]),
    ]
    changes += index_changes(scope, entity_id, set(), index_names(row))
    return changes, EntityCreateOk(entity_id=entity_id, lsn=ctx.lsn)


def plan_update(
    ctx: PlanContext, scope: Scope, request: EntityUpdate
) -> tuple[list[Change], EntityUpdateOk]:
    """ENTITY_UPDATE: rename, remove and add aliases, replace the attribute map."""
    row = _live(ctx.store, ctx.txn, scope, request.id, "id")
    updated = dict(row)
    if request.name is not None:
        check_name(request.name, "name")
        updated["name"] = request.name
    name = str(updated["name"])
    removals = {normalise_name(a) for a in request.remove_aliases or ()}
    for i, alias in enumerate(request.add_aliases or ()):
        if normalise_name(alias) in removals:
            raise InvalidArgument(
                f"alias {alias!r} is both added and removed", field=f"add_aliases[{i}]"
            )
    # An alias equal to the (new) name says nothing the name does not.
    kept = [
        a
        for a in aliases_of(row)
        if normalise_name(a) not in removals and normalise_name(a) != normalise_name(name)
    ]
    updated["aliases"] = _add_aliases(name, kept, request.add_aliases or (), "add_aliases")
    if request.attributes is not None:
        updated["attributes"] = check_attributes(dict(request.attributes), "attributes")
    changes: list[Change] = [
        row_change(scope, request.id, updated),
        audit_entry(ctx, scope, "entity_update", [request.id]),
    ]
    changes += index_changes(scope, request.id, index_names(row), index_names(updated))
    entity = to_entity(request.id, updated, recorded_at=ctx.record_time)
    return changes, EntityUpdateOk(entity=entity)


def plan_tombstone(
    ctx: PlanContext, scope: Scope, request: EntityTombstone
) -> tuple[list[Change], EntityTombstoneOk]:
    """ENTITY_TOMBSTONE: soft-delete; the row and its name index rows stay for history."""
    row = _live(ctx.store, ctx.txn, scope, request.id, "id")
    updated = dict(row)
    updated["tombstoned_at"] = ctx.record_time
    changes: list[Change] = [
        row_change(scope, request.id, updated),
        audit_entry(ctx, scope, "entity_tombstone", [request.id]),
    ]
    return changes, EntityTombstoneOk(id=request.id, lsn=ctx.lsn)


def _height(row: Row) -> int:
    height = row.get("merge_height", 0)
    assert isinstance(height, int)
    return height


def plan_merge(
    ctx: PlanContext, scope: Scope, request: EntityMerge
) -> tuple[list[Change], EntityMergeOk]:
    """ENTITY_MERGE: point ``merge`` at ``keep`` and move its names to ``keep``."""
    merge_id, changes = merge_changes(ctx, scope, request.keep, request.merge)
    return changes, EntityMergeOk(merge_id=merge_id, lsn=ctx.lsn)


def merge_changes(
    ctx: PlanContext, scope: Scope, keep_id: bytes, merged_id: bytes, *, field: str = "merge"
) -> tuple[bytes, list[Change]]:
    """The id of a new merge of ``merged_id`` into ``keep_id`` and its changes (rows,
    name index, merge record, absorbed key, audit entry). Errors name ``keep`` or
    ``field``."""
    store, txn = ctx.store, ctx.txn
    keep = _live(store, txn, scope, keep_id, "keep" if field == "merge" else field)
    merged = _live(store, txn, scope, merged_id, field)
    height = max(_height(keep), _height(merged) + 1)
    if height > MAX_MERGE_HOPS:
        raise Conflict(
            f"the merge would make a chain of {height} merges, more than {MAX_MERGE_HOPS}",
            field=field,
        )
    moved = [str(merged["name"]), *aliases_of(merged)]
    new_keep = dict(keep)
    new_keep["aliases"] = _add_aliases(str(keep["name"]), aliases_of(keep), moved, field)
    new_keep["merge_height"] = height
    new_merged = dict(merged)
    new_merged["aliases"] = []
    new_merged["merged_into"] = keep_id
    # The names new to the kept entity stay indexed under the merged one too: a write
    # through one of them stores the merged id, so the unmerge can give it back.
    new_merged["moved"] = sorted(index_names(merged) - index_names(keep))
    record_id = ctx.ids.new()
    record = {
        "keep": keep_id,
        "merge": merged_id,
        "keep_before": keep,
        "merge_before": merged,
        "keep_index": sorted(index_names(keep)),
        "merge_index": sorted(index_names(merged)),
        "keep_after": new_keep,
        "merge_after": new_merged,
        "merged_at": ctx.record_time,
    }
    changes: list[Change] = [
        row_change(scope, keep_id, new_keep),
        row_change(scope, merged_id, new_merged),
        *index_changes(scope, keep_id, index_names(keep), index_names(new_keep)),
        *index_changes(scope, merged_id, index_names(merged), index_names(new_merged)),
        Put(ENTITY_MERGES, scope.key(record_id), cbor.encode(record)),
        absorb(scope, keep_id, ENTITY_TAG + merged_id),
        audit_entry(ctx, scope, "entity_merge", [record_id, keep_id, merged_id]),
    ]
    return record_id, changes


def _merge_record(store: Store, txn: lmdb.Transaction, scope: Scope, merge_id: bytes) -> Row:
    raw = txn.get(scope.key(merge_id), db=store.table(ENTITY_MERGES))
    if raw is None:
        raise NotFound(f"no merge {merge_id.hex()} in space {scope.space!r}", field="merge_id")
    record = cbor.decode(bytes(raw))
    assert isinstance(record, dict)
    return {str(k): v for k, v in record.items()}


def _row_field(record: Row, key: str) -> Row:
    value = record[key]
    assert isinstance(value, dict)
    return {str(k): v for k, v in value.items()}


def _id_field(record: Row, key: str) -> bytes:
    value = record[key]
    assert isinstance(value, bytes)
    return value


def _names_field(record: Row, key: str) -> set[str]:
    value = record[key]
    assert isinstance(value, list)
    return {str(name) for name in value}


def plan_unmerge(
    ctx: PlanContext, scope: Scope, request: EntityUnmerge
) -> tuple[list[Change], EntityUnmergeOk]:
    """ENTITY_UNMERGE: both rows and their index rows exactly as before the merge."""
    store, txn = ctx.store, ctx.txn
    record = _merge_record(store, txn, scope, request.merge_id)
    if record.get("unmerged_at") is not None:
        raise Conflict(f"merge {request.merge_id.hex()} was already undone", field="merge_id")
    restored: list[Change] = []
    for role in ("keep", "merge"):
        entity_id = _id_field(record, role)
        now = _load(store, txn, scope, entity_id, "merge_id")
        # Byte comparison: rows are encoded deterministically, so equal rows encode equal.
        if cbor.encode(now) != cbor.encode(_row_field(record, f"{role}_after")):
            raise Conflict(
                f"entity {entity_id.hex()} changed after merge {request.merge_id.hex()} "
                "(updated, tombstoned or merged again); undo those changes first, "
                "since unmerging would silently revert them",
                field="merge_id",
            )
        restored.append(row_change(scope, entity_id, _row_field(record, f"{role}_before")))
        restored += index_changes(
            scope, entity_id, index_names(now), _names_field(record, f"{role}_index")
        )
    done = dict(record)
    done["unmerged_at"] = ctx.record_time
    restored.append(
        release(scope, _id_field(record, "keep"), ENTITY_TAG + _id_field(record, "merge"))
    )
    restored.append(Put(ENTITY_MERGES, scope.key(request.merge_id), cbor.encode(done)))
    ids = [request.merge_id, _id_field(record, "keep"), _id_field(record, "merge")]
    restored.append(audit_entry(ctx, scope, "entity_unmerge", ids))
    return restored, EntityUnmergeOk(lsn=ctx.lsn)


# --- reads --------------------------------------------------------------------------------


def _shown(ctx: ReadContext, scope: Scope, entity_id: bytes, row: Row, as_of: int | None) -> Entity:
    """The entity as a read shows it: ``row`` with its version's record interval."""
    start, until = recorded_at_of(ctx.store, ctx.txn, scope, entity_id, as_of)
    return to_entity(entity_id, row, recorded_at=start, record_invalidated_at=until)


def read_get(ctx: ReadContext, scope: Scope, request: EntityGet) -> EntityGetOk:
    """ENTITY_GET: the entity in any state, tombstoned and merged-away included; with
    ``as_of``, the version believed then (NOT_FOUND before it was created)."""
    if request.as_of is None:
        row = _load(ctx.store, ctx.txn, scope, request.id, "id")
    else:
        found = entity_row(ctx.store, ctx.txn, scope, request.id, as_of=request.as_of)
        if found is None:
            raise NotFound(
                f"no entity {request.id.hex()} in space {scope.space!r} as of {request.as_of}",
                field="id",
            )
        row = found
    return EntityGetOk(entity=_shown(ctx, scope, request.id, row, request.as_of))


def read_history(ctx: ReadContext, scope: Scope, request: EntityHistory) -> EntityHistoryOk:
    """ENTITY_HISTORY: every version of the entity, oldest first."""
    _load(ctx.store, ctx.txn, scope, request.id, "id")
    return EntityHistoryOk(versions=tuple(entity_versions(ctx.store, ctx.txn, scope, request.id)))


def read_resolve(ctx: ReadContext, scope: Scope, request: EntityResolve) -> EntityResolveOk:
    """ENTITY_RESOLVE: which live entities a name means, and whether one wins."""
    settings = ctx.resolution
    matches = resolve_name(
        ctx.store,
        ctx.txn,
        scope,
        request.name,
        request.type_,
        settings=settings,
        as_of=request.as_of,
    )
    ambiguous = is_ambiguous(matches, settings)
    limit = DEFAULT_RESOLVE_LIMIT if request.limit is None else request.limit
    return EntityResolveOk(
        matches=tuple(matches[:limit]),
        resolved=matches[0].entity_id if matches and not ambiguous else None,
        ambiguous=ambiguous,
    )


def read_list(ctx: ReadContext, scope: Scope, request: EntityList) -> EntityListOk:
    """ENTITY_LIST: live entities in id order, optionally of one type or name prefix."""
    after = request.cursor
    if after is not None and len(after) != ENTITY_ID_BYTES:
        raise InvalidArgument("cursor is not one ENTITY_LIST returned", field="cursor")
    limit = DEFAULT_LIST_LIMIT if request.limit is None else request.limit
    prefix = None if request.prefix is None else normalise_name(request.prefix)
    page: list[Entity] = []
    more = False
    start = scope.key(after or b"")
    if request.as_of is None:
        rows = scan(ctx.txn, ctx.store.table(ENTITIES), scope.prefix, start=start)
    else:
        rows = _rows_as_of(ctx, scope, start, request.as_of)
    for key, value in rows:
        entity_id = key[len(scope.prefix) :]
        if after is not None and entity_id <= after:
            continue
        row = decode_row(scope, value)
        if row is None or not is_live(row):
            continue
        if request.type_ is not None and row.get("type") != request.type_:
            continue
        if prefix is not None and not normalise_name(str(row["name"])).startswith(prefix):
            continue
        if len(page) == limit:
            more = True
            break
        page.append(_shown(ctx, scope, entity_id, row, request.as_of))
    return EntityListOk(entities=tuple(page), cursor=page[-1].id if more else None)


def _rows_as_of(
    ctx: ReadContext, scope: Scope, start: bytes, as_of: int
) -> Iterator[tuple[bytes, bytes]]:
    """``(S ‖ entity_id, raw row)`` of each entity as believed at ``as_of``, in id order
    from ``start``: the last version of each recorded at or before it."""
    last: tuple[bytes, bytes] | None = None
    for key, value in scan(ctx.txn, ctx.store.table(ENTITY_VERSIONS), scope.prefix, start=start):
        row_key = key[: len(scope.prefix) + ENTITY_ID_BYTES]
        if last is not None and last[0] != row_key:
            yield last
            last = None
        if int.from_bytes(key[-TIME_BYTES:], "big") <= as_of:
            last = (row_key, bytes(value))
    if last is not None:
        yield last


WritePlanner = Callable[..., tuple[list[Change], Message]]
ReadHandler = Callable[..., Message]

ENTITY_WRITES: Final[dict[Opcode, WritePlanner]] = {
    Opcode.ENTITY_CREATE: plan_create,
    Opcode.ENTITY_UPDATE: plan_update,
    Opcode.ENTITY_MERGE: plan_merge,
    Opcode.ENTITY_UNMERGE: plan_unmerge,
    Opcode.ENTITY_TOMBSTONE: plan_tombstone,
}
"""The entity write planners, merged into ``operations.WRITES``."""

ENTITY_READS: Final[dict[Opcode, ReadHandler]] = {
    Opcode.ENTITY_GET: read_get,
    Opcode.ENTITY_RESOLVE: read_resolve,
    Opcode.ENTITY_LIST: read_list,
    Opcode.ENTITY_HISTORY: read_history,
}
"""The entity readers, merged into ``operations.READS``."""
