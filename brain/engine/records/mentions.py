"""Mentions: the names a memory's text mentions, and the entities they named when it was
stored (spec/02-data-model.md §3.1).

ENCODE of a new memory runs the configured extractors (:mod:`brain.engine.extract`,
``PlanContext.extractors``) on its text, and resolves each name found as a
``{name}`` ref is resolved (:func:`~brain.engine.records.resolution.resolve_name`:
exact name, alias, then fuzzy, of any type). A name with one best candidate
links to that entity; an ambiguous one (:func:`~brain.engine.records.resolution.is_ambiguous`)
or one that matches nothing stays a name-only mention. The fuzzy tier reads the
scope's names once per memory, however many names the memory mentions.

Storage, every key scope-prefixed, all written by the ENCODE itself (its plan's
changes, so the WAL holds and replays them):

- ``mentions``: ``memory_id`` → ``{recorded_at, extractors: [[name, version]…],
  mentions: [[name, found, extractor index, entity?]…]}`` (the extractor that
  found it, by its place in ``extractors``); a forget adds
  ``record_invalidated_at`` (the first forget's time), and a hard forget drops
  ``mentions`` (the names are text of the memory) and keeps the rest;
- ``mention_by_name``: ``name hash ‖ memory_id`` → empty, once per distinct
  normalised name, while the memory's text is stored (:func:`name_hash`: the
  key holds a hash of the name, never its text);
- ``mention_stats``: ``"mentioned"`` → how many memories of the scope mention
  a name, and ``"df" ‖ name hash`` → how many mention that name (the row is
  deleted when none does any more): the graph arm's document frequencies.

Every extraction (one extractor on one memory) appends an ``extract`` audit
entry: the memory in ``records``, the text's SHA-256, the extractor's name and
version, each output as the SHA-256 of its normalised name with how it was
found and the entity it resolved to, and the microseconds spent extracting and
resolving. No name is written to the log, which is append-only, so a hard
forget leaves no text of the memory in it.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable
from typing import Final

import lmdb

from brain import cbor
from brain.engine.extract import HOW_FOUND
from brain.engine.records.audit import audit_entry
from brain.engine.records.entity_rows import normalise_name
from brain.engine.records.resolution import is_ambiguous, name_index, resolve_name
from brain.engine.store.env import Store
from brain.engine.store.rows import decode_row, load_row
from brain.engine.store.scan import scan_keys
from brain.engine.store.scope import Scope
from brain.engine.store.tables import ENTITY_BY_NAME, MENTION_BY_NAME, MENTION_STATS, MENTIONS
from brain.engine.write.plan import Add, Change, Delete, Put, read_counter
from brain.engine.write.writer import PlanContext
from brain.wire.messages.records import Mention
from brain.wire.messages.values import MAX_NAME_CHARS

__all__ = [
    "EXTRACT_OPERATION",
    "MAX_MEMORY_MENTIONS",
    "NAME_HASH_BYTES",
    "forget_mentions",
    "memories_naming",
    "mentioned_memories",
    "mentions_of",
    "name_digest",
    "name_frequency",
    "name_hash",
    "name_index_changes",
    "plan_mentions",
]

EXTRACT_OPERATION: Final = "extract"
"""The audit operation of one extraction."""

MAX_MEMORY_MENTIONS: Final = 64
"""Most mentions stored for one memory, over all its extractors: each extractor bounds
its own output, and this bounds the write whatever extractors are configured."""

NAME_HASH_BYTES: Final = 16
"""Bytes of a name's SHA-256 in a ``mention_by_name`` or ``mention_stats`` key: enough
that two names of a scope never share one."""

_MENTIONED: Final = b"mentioned"
"""The ``mention_stats`` key (after the scope) of the count of memories with a mention."""

_DF: Final = b"df"
"""The ``mention_stats`` key prefix (after the scope) of a name's document frequency."""


def name_digest(normal: str) -> bytes:
    """The SHA-256 of a normalised name's UTF-8: what the audit log keeps of it."""
    return hashlib.sha256(normal.encode("utf-8")).digest()


def name_hash(normal: str) -> bytes:
    """The name part of the mention keys of a normalised name: its digest's head."""
    return name_digest(normal)[:NAME_HASH_BYTES]


class _Resolver:
    """Resolves the names one memory mentions: each distinct name once, and the scope's
    fuzzy names read at most once (only when some name has no exact or alias match)."""

    def __init__(self, ctx: PlanContext, scope: Scope) -> None:
        self._ctx = ctx
        self._scope = scope
        self._index: tuple[list[str], list[bytes]] | None = None
        self._done: dict[str, bytes | None] = {}
        # A scope without a single entity name resolves nothing: skip every tier.
        first = next(scan_keys(ctx.txn, ctx.store.table(ENTITY_BY_NAME), scope.key()), None)
        self._empty = first is None

    def _names(self) -> tuple[list[str], list[bytes]]:
        if self._index is None:
            self._index = name_index(self._ctx.store, self._ctx.txn, self._scope)
        return self._index

    def entity(self, name: str, normal: str) -> bytes | None:
        """The entity ``name`` links to: the best candidate unless it is ambiguous."""
        if self._empty:
            return None
        if normal not in self._done:
            ctx = self._ctx
            settings = ctx.resolution
            matches = resolve_name(
                ctx.store, ctx.txn, self._scope, name, settings=settings, names_of=self._names
            )
            linked = matches and not is_ambiguous(matches, settings)
            self._done[normal] = matches[0].entity_id if linked else None
        return self._done[normal]


def plan_mentions(
    ctx: PlanContext, scope: Scope, memory_id: bytes, text: str, sha256: bytes
) -> list[Change]:
    """The mention row, the name index and counters, and one audit entry per extractor,
    for a new memory of ``scope`` holding ``text`` (nothing when no extractor is
    configured)."""
    if not ctx.extractors:
        return []
    resolver = _Resolver(ctx, scope)
    mentions: list[list[object]] = []
    normals: dict[str, bytes] = {}  # each distinct name, with its hash
    audits: list[Change] = []
    for index, extractor in enumerate(ctx.extractors):
        started = time.perf_counter_ns()
        outputs: list[dict[str, object]] = []
        for found in extractor.extract(text):
            if len(mentions) >= MAX_MEMORY_MENTIONS:
                break
            normal = normalise_name(found.name)
            # What an answer cannot show is not stored: an extractor's slip, not the client's.
            if not normal or len(found.name) > MAX_NAME_CHARS or found.how not in HOW_FOUND:
                continue
            # Arrays, not maps: this row is written with every memory.
            mention: list[object] = [found.name, found.how, index]
            digest = name_digest(normal)
            output: dict[str, object] = {"name_sha256": digest, "found": found.how}
            entity = resolver.entity(found.name, normal)
            if entity is not None:
                mention.append(entity)
                output["entity"] = entity
            mentions.append(mention)
            outputs.append(output)
            normals.setdefault(normal, digest[:NAME_HASH_BYTES])
        details: dict[str, object] = {
            "input_sha256": sha256,
            "extractor": extractor.name,
            "version": extractor.version,
            "outputs": outputs,
            "cost_us": (time.perf_counter_ns() - started) // 1000,
        }
        audits.append(audit_entry(ctx, scope, EXTRACT_OPERATION, [memory_id], details=details))
    row = {
        "recorded_at": ctx.record_time,
        "extractors": [[e.name, e.version] for e in ctx.extractors],
        "mentions": mentions,
    }
    changes: list[Change] = [Put(MENTIONS, scope.key(memory_id), cbor.encode(row))]
    return changes + _name_index(scope, memory_id, list(normals.values())) + audits


def name_index_changes(scope: Scope, memory_id: bytes, row: dict[str, object]) -> list[Change]:
    """The ``mention_by_name`` entries and ``mention_stats`` counts (as adds) of a memory
    whose mention row is ``row``: one per distinct normalised name while the row keeps
    its names, none once a hard forget dropped them. An import rebuilds the name index
    from an export's records with it (:mod:`brain.engine.admin.jsonl_rebuild`)."""
    if "mentions" not in row:
        return []
    hashes = {name_hash(normalise_name(name)): None for name, *_ in _stored(row["mentions"])}
    return _name_index(scope, memory_id, list(hashes))


def _name_index(scope: Scope, memory_id: bytes, hashes: list[bytes]) -> list[Change]:
    """The name index entries of a memory mentioning the names hashed as ``hashes``
    (distinct), and their counts."""
    changes: list[Change] = []
    for hashed in hashes:
        changes.append(Put(MENTION_BY_NAME, scope.key(hashed, memory_id), b""))
        changes.append(Add(MENTION_STATS, scope.key(_DF, hashed), 1))
    if hashes:
        changes.append(Add(MENTION_STATS, scope.key(_MENTIONED), 1))
    return changes


def forget_mentions(
    ctx: PlanContext, scope: Scope, mode: str, memory_ids: Iterable[bytes]
) -> list[Change]:
    """What a forget of ``memory_ids`` does to their mentions: each row is marked
    ``record_invalidated_at`` (kept from the first forget); a hard forget also drops
    the names from it, deletes their ``mention_by_name`` keys and counts them out of
    ``mention_stats``, deleting a count that reaches zero."""
    store, txn = ctx.store, ctx.txn
    changes: list[Change] = []
    deltas: dict[bytes, int] = {}
    for memory_id in memory_ids:
        row = load_row(store, txn, MENTIONS, scope.key(memory_id))
        if row is None:
            continue
        updated = dict(row)
        updated.setdefault("record_invalidated_at", ctx.record_time)
        if mode == "hard":
            gone = {normalise_name(name) for name, *_ in _stored(updated.pop("mentions", []))}
            for normal in sorted(gone):
                hashed = name_hash(normal)
                changes.append(Delete(MENTION_BY_NAME, scope.key(hashed, memory_id)))
                key = scope.key(_DF, hashed)
                deltas[key] = deltas.get(key, 0) - 1
            if gone:
                key = scope.key(_MENTIONED)
                deltas[key] = deltas.get(key, 0) - 1
        if updated != row:
            changes.append(Put(MENTIONS, scope.key(memory_id), cbor.encode(updated)))
    table = store.table(MENTION_STATS)
    for key, delta in deltas.items():
        raw = txn.get(key, db=table)
        left = read_counter(None if raw is None else bytes(raw)) + delta
        # A name no memory mentions any more leaves no row, not even its hash.
        changes.append(Delete(MENTION_STATS, key) if left <= 0 else Add(MENTION_STATS, key, delta))
    return changes


def _stored(value: object) -> list[tuple[str, str, int, bytes | None]]:
    """A row's ``mentions``: ``(name, found, extractor index, entity or None)`` each."""
    assert isinstance(value, list)
    shown: list[tuple[str, str, int, bytes | None]] = []
    for item in value:
        assert isinstance(item, list) and len(item) in (3, 4)
        entity = item[3] if len(item) == 4 and isinstance(item[3], bytes) else None
        shown.append((str(item[0]), str(item[1]), int(item[2]), entity))
    return shown


def mentions_of(
    store: Store, txn: lmdb.Transaction, scope: Scope, memory_id: bytes
) -> tuple[Mention, ...] | None:
    """The memory's mentions as answers show them; None when extraction never ran on
    it or a hard forget dropped them."""
    raw = txn.get(scope.key(memory_id), db=store.table(MENTIONS))
    if raw is None:
        return None
    row = decode_row(bytes(raw))
    if "mentions" not in row:
        return None
    extractors = row["extractors"]
    assert isinstance(extractors, list)
    labels = [f"{name}/{version}" for name, version in extractors]
    return tuple(
        Mention(name=name, found=found, entity=entity, extractor=labels[index])
        for name, found, index, entity in _stored(row["mentions"])
    )


def mentioned_memories(store: Store, txn: lmdb.Transaction, scope: Scope) -> int:
    """How many memories of ``scope`` mention a name (their text still stored)."""
    raw = txn.get(scope.key(_MENTIONED), db=store.table(MENTION_STATS))
    return read_counter(None if raw is None else bytes(raw))


def name_frequency(store: Store, txn: lmdb.Transaction, scope: Scope, normal: str) -> int:
    """How many memories of ``scope`` mention the normalised name ``normal``."""
    raw = txn.get(scope.key(_DF, name_hash(normal)), db=store.table(MENTION_STATS))
    return read_counter(None if raw is None else bytes(raw))


def memories_naming(
    store: Store, txn: lmdb.Transaction, scope: Scope, normal: str, limit: int
) -> list[bytes]:
    """The ids of at most ``limit`` memories of ``scope`` mentioning ``normal``, oldest
    first (ids are time-ordered)."""
    prefix = scope.key(name_hash(normal))
    found: list[bytes] = []
    for key in scan_keys(txn, store.table(MENTION_BY_NAME), prefix):
        if len(found) >= limit:
            break
        found.append(key[len(prefix) :])
    return found
