"""Frozen namespaces: a move to another shard holds their writes (spec/05-durability.md
§14.9).

A namespace is frozen by a logged plan that puts the ``meta`` row
``frozen: ‖ namespace id`` (CBOR ``{namespace, to_shard}``), and thawed by one that
deletes it. From the plan after the freeze on, the writer refuses every plan that puts
or adds a key of a frozen namespace (:func:`refusal`), whatever sent it: a client's
write, a transaction's commit, the indexer's vectors. A plan of deletes only (the
namespace's drop once it moved) still passes. Being a row of the store, written
through the log, the freeze holds on every node of the shard and survives a takeover:
a new planner reads it from its own store, so the log's position of the freeze is a
barrier after which the shard logs nothing more of the namespace.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

import lmdb

from brain import cbor
from brain.engine.store.env import Store
from brain.engine.store.scope import ID_BYTES, namespace_id
from brain.engine.store.tables import META
from brain.engine.write.plan import Add, Change, Delete, Put
from brain.errors import Unavailable

__all__ = [
    "FROZEN_PREFIX",
    "FROZEN_RETRY_MS",
    "freeze",
    "frozen_namespaces",
    "refusal",
    "thaw",
    "touches_freezes",
]

FROZEN_PREFIX: Final = b"frozen:"
"""What the ``meta`` key of a frozen namespace starts with (then its 16-byte id)."""

FROZEN_RETRY_MS: Final = 200
"""Retry advice of a write refused while its namespace is frozen: a move freezes a
namespace only for its last catch-up and cut-over, over in a few of these."""


def _key(namespace: str) -> bytes:
    return FROZEN_PREFIX + namespace_id(namespace)


def freeze(namespace: str, to_shard: str) -> Put:
    """The change that freezes ``namespace`` for its move to ``to_shard``."""
    return Put(META, _key(namespace), cbor.encode({"namespace": namespace, "to_shard": to_shard}))


def thaw(namespace: str) -> Delete:
    """The change that lets ``namespace`` take writes again."""
    return Delete(META, _key(namespace))


def frozen_namespaces(store: Store, txn: lmdb.Transaction) -> dict[bytes, tuple[str, str]]:
    """Every frozen namespace in ``txn``: namespace id → (name, shard it moves to). One
    seek when there is none, as almost always."""
    found: dict[bytes, tuple[str, str]] = {}
    cursor = txn.cursor(db=store.table(META))
    if not cursor.set_range(FROZEN_PREFIX):
        return found
    for raw_key, raw_value in cursor:
        key = bytes(raw_key)
        if not key.startswith(FROZEN_PREFIX):
            break
        row = cbor.decode(bytes(raw_value))
        name = str(row.get("namespace", "?")) if isinstance(row, dict) else "?"
        shard = str(row.get("to_shard", "?")) if isinstance(row, dict) else "?"
        found[key[len(FROZEN_PREFIX) :]] = (name, shard)
    return found


def touches_freezes(changes: Sequence[Change]) -> bool:
    """Whether ``changes`` freeze or thaw a namespace (the writer reads the frozen set
    again after such a plan, so the rest of its batch obeys it)."""
    return any(c.table == META and c.key.startswith(FROZEN_PREFIX) for c in changes)


def refusal(
    changes: Sequence[Change], frozen: Mapping[bytes, tuple[str, str]]
) -> Unavailable | None:
    """The refusal of a plan that puts or adds a key of a frozen namespace; None for
    any other (every key of every table but ``meta`` starts with its namespace id)."""
    for change in changes:
        if change.table == META or isinstance(change, Delete):
            continue
        assert isinstance(change, Put | Add)
        held = frozen.get(change.key[:ID_BYTES])
        if held is not None:
            name, shard = held
            return Unavailable(
                f"namespace {name!r} is frozen while it moves to shard {shard}",
                retry_after_ms=FROZEN_RETRY_MS,
            )
    return None
