"""Reading the CBOR rows every table stores."""

from __future__ import annotations

import lmdb

from brain import cbor
from brain.engine.store.env import Store

__all__ = ["decode_row", "load_row", "opt_int"]


def decode_row(raw: bytes) -> dict[str, object]:
    """A stored row's CBOR map, with text keys (the server wrote it: no wire checks)."""
    row = cbor.decode_stored(raw)
    assert isinstance(row, dict)
    return {str(k): v for k, v in row.items()}


def load_row(
    store: Store, txn: lmdb.Transaction, table: bytes, key: bytes
) -> dict[str, object] | None:
    """The CBOR map stored under ``key`` in ``table``, or None."""
    raw = txn.get(key, db=store.table(table))
    return None if raw is None else decode_row(bytes(raw))


def opt_int(value: object) -> int | None:
    """``value`` when it is an integer, else None (an absent time)."""
    return value if isinstance(value, int) else None
