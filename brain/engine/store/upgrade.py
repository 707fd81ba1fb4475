"""Bringing a store written by an earlier build to this build's layout, when it is opened.

The store's ``format_version`` (:mod:`brain.engine.store.meta`) names its layout. A
store of an older version this build knows is upgraded by :func:`upgrade_format`
once its WAL is replayed (the WAL's records were planned under the old layout, so
they are applied as they are, then upgraded with the rest) and before anything
is served: every step from its version on runs in one LMDB transaction with the
new stamp, so a crash leaves the old layout whole, and the next open upgrades it
again.

The steps, each from the version before:

- **2**: ``statement_by_subject_time`` is written from ``statement_by_subject``
  (:func:`~brain.engine.store.statement_keys.subject_time_key`), one pass over
  keys, no row decoded.
- **3**: ``memory_by_text`` and ``memory_by_sha`` are re-keyed from the SHA-256 of a
  memory's exact text to its text key (:mod:`brain.engine.store.text_keys`), one
  pass over each, decoding the memory row each entry names. A hard-forgotten
  memory has no text and keeps its entry. Two active memories whose texts now
  normalise alike leave ``memory_by_sha`` naming the one recorded first. The
  forget ledger keeps its keys (it holds no text to key anew); ENCODE looks an
  entry up under both.
- **4**: the entity history is begun from the entities as they stand: one version of
  each row, and an event holding each ``entity_by_name`` and ``entity_absorbed``
  key, all at the ``created_at`` of the entity the row or key belongs to (for an
  absorbed key, the entity absorbing it). What was believed between a creation
  and the upgrade was not kept before, so a read ``as_of`` an instant before the
  upgrade sees the entity as it stood at the upgrade, from its creation on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

import lmdb

from brain.engine.store.env import Store
from brain.engine.store.meta import FORMAT_VERSION, OLDEST_FORMAT, stamp_format, stored_format
from brain.engine.store.rows import decode_row
from brain.engine.store.scope import SCOPE_PREFIX_BYTES
from brain.engine.store.statement_keys import RECORD_ID_BYTES, subject_time_key
from brain.engine.store.tables import (
    ENTITIES,
    ENTITY_ABSORBED,
    ENTITY_ABSORBED_EVENTS,
    ENTITY_BY_NAME,
    ENTITY_NAME_EVENTS,
    ENTITY_VERSIONS,
    MEMORIES,
    MEMORY_BY_SHA,
    MEMORY_BY_TEXT,
    STATEMENT_BY_SUBJECT,
    STATEMENT_BY_SUBJECT_TIME,
)
from brain.engine.store.text_keys import text_key

__all__ = ["STEPS", "upgrade_format"]

log = logging.getLogger("brain.engine")

Step = Callable[[Store, lmdb.Transaction], int]
"""One upgrade step: it changes the store in the transaction and returns the rows it wrote."""


def _subject_time_index(store: Store, txn: lmdb.Transaction) -> int:
    """Version 2: ``statement_by_subject_time`` from every ``statement_by_subject`` key.
    Emptied first, so that it holds exactly the keys that follow from the other table."""
    target = store.table(STATEMENT_BY_SUBJECT_TIME)
    txn.drop(target, delete=False)
    source = txn.cursor(db=store.table(STATEMENT_BY_SUBJECT))
    rows = ((subject_time_key(bytes(key)), b"") for key in source.iternext(values=False))
    _, added = txn.cursor(db=target).putmulti(rows)
    return int(added)


def _memory_text_keys(store: Store, txn: lmdb.Transaction) -> int:
    """Version 3: ``memory_by_text`` and ``memory_by_sha`` keyed on each memory's text
    key. Every entry is derived afresh from the row it names, so a key already in the
    new form stays as it is."""
    memories = store.table(MEMORIES)
    by_text = store.table(MEMORY_BY_TEXT)
    old_text = [bytes(k) for k in txn.cursor(db=by_text).iternext(values=False)]
    new_text: list[bytes] = []
    for key in old_text:
        scope, memory_id = key[:SCOPE_PREFIX_BYTES], key[-RECORD_ID_BYTES:]
        row = _memory_row(txn, memories, scope + memory_id)
        text = None if row is None else row.get("text")
        digest = key[SCOPE_PREFIX_BYTES:-RECORD_ID_BYTES]
        new_text.append(scope + (text_key(text) if isinstance(text, str) else digest) + memory_id)
    txn.drop(by_text, delete=False)
    _, written = txn.cursor(db=by_text).putmulti((k, b"") for k in new_text)
    by_sha = store.table(MEMORY_BY_SHA)
    firsts: dict[bytes, tuple[bytes, bytes]] = {}
    entries = [(bytes(k), bytes(v)) for k, v in txn.cursor(db=by_sha).iternext()]
    for sha_key, memory_id in entries:
        scope = sha_key[:SCOPE_PREFIX_BYTES]
        row = _memory_row(txn, memories, scope + memory_id)
        if row is None or "forgotten" in row:
            continue  # an entry naming no active memory: no write would have left it
        text, recorded = row.get("text"), row.get("recorded_at")
        assert isinstance(text, str) and isinstance(recorded, int)
        new_key = scope + text_key(text)
        order = recorded.to_bytes(8, "big") + memory_id
        if new_key not in firsts or order < firsts[new_key][0]:
            firsts[new_key] = (order, memory_id)
    txn.drop(by_sha, delete=False)
    _, added = txn.cursor(db=by_sha).putmulti(
        sorted((k, first) for k, (_, first) in firsts.items())
    )
    return int(written) + int(added)


def _memory_row(
    txn: lmdb.Transaction, memories: lmdb._Database, key: bytes
) -> dict[str, object] | None:
    """The memory row under ``key`` (scope prefix and id), or None."""
    raw = txn.get(key, db=memories)
    return None if raw is None else decode_row(bytes(raw))


_ENTITY_ID_BYTES: Final = 16
_HELD: Final = b"\x01"
"""The value of an index event that holds its key (brain.engine.records.entity_history)."""


def _name_owner(key: bytes) -> bytes:
    """The entity row key of a name index key (``S ‖ name key ‖ 0x00 ‖ entity id``)."""
    return key[:SCOPE_PREFIX_BYTES] + key[-_ENTITY_ID_BYTES:]


def _absorbing_owner(key: bytes) -> bytes:
    """The entity row key of an absorbed key (``S ‖ entity id ‖ absorbed key``)."""
    return key[: SCOPE_PREFIX_BYTES + _ENTITY_ID_BYTES]


def _has_history(cursor: lmdb.Cursor, key: bytes) -> bool:
    """Whether a history table already holds an entry for ``key`` (``key ‖ u64``)."""
    if not cursor.set_range(key):
        return False
    found = bytes(cursor.key())
    return found.startswith(key) and len(found) == len(key) + 8


def _entity_history(store: Store, txn: lmdb.Transaction) -> int:
    """Version 4: the entity history begun from the entities as they stand. A row or key
    that has history already keeps it (a store stamped older by mistake loses nothing)."""
    versions = txn.cursor(db=store.table(ENTITY_VERSIONS))
    created: dict[bytes, bytes] = {}
    rows: list[tuple[bytes, bytes]] = []
    for key, value in txn.cursor(db=store.table(ENTITIES)):
        row = decode_row(bytes(value))
        at = row.get("created_at")
        stamp = (at if isinstance(at, int) and at >= 0 else 0).to_bytes(8, "big")
        created[bytes(key)] = stamp
        if not _has_history(versions, bytes(key)):
            rows.append((bytes(key) + stamp, bytes(value)))
    _, written = versions.putmulti(rows)
    events = 0
    for index, history, owner_of in (
        (ENTITY_BY_NAME, ENTITY_NAME_EVENTS, _name_owner),
        (ENTITY_ABSORBED, ENTITY_ABSORBED_EVENTS, _absorbing_owner),
    ):
        past = txn.cursor(db=store.table(history))
        held = [
            (bytes(key) + created.get(owner_of(bytes(key)), bytes(8)), _HELD)
            for key in txn.cursor(db=store.table(index)).iternext(values=False)
            if not _has_history(past, bytes(key))
        ]
        _, added = past.putmulti(held)
        events += int(added)
    return int(written) + events


STEPS: Final[dict[int, Step]] = {
    2: _subject_time_index,
    3: _memory_text_keys,
    4: _entity_history,
}
"""The step that brings a store to each version from the one before."""


def upgrade_format(store: Store) -> int | None:
    """Upgrade the store to :data:`FORMAT_VERSION` if it is older; return the version it
    had when it was upgraded (None when it needed nothing). Call it with no other
    transaction open: a step that fills the map grows it and starts again."""
    with store.read() as txn:
        version = stored_format(store, txn)
    if version is None or version == FORMAT_VERSION:
        return None
    assert OLDEST_FORMAT <= version < FORMAT_VERSION, "check_format refuses any other"
    # Each failure doubles the map, and Store.grow raises once the map is as large as
    # it may be, so this ends.
    while True:
        try:
            with store.env.begin(write=True) as txn:
                written = sum(
                    STEPS[step](store, txn) for step in range(version + 1, FORMAT_VERSION + 1)
                )
                stamp_format(store, txn, FORMAT_VERSION)
        except lmdb.MapFullError:
            store.grow()
            continue
        log.info(
            "the store at %s was upgraded from format %d to %d (%d index rows written)",
            store.path,
            version,
            FORMAT_VERSION,
            written,
        )
        return version
