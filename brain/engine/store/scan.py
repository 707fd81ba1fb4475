"""Prefix scans: the rows of one table whose keys begin with a prefix, in key order.

Every key of a table is laid out so that what a read wants is one key range (a
scope, a subject, a term: ``brain/engine/store/tables.py``), so every read of
several rows is mostly a prefix scan. Both scans stop at the first key past the prefix
without reading it further; a caller that stops early simply stops iterating.
Transactions here are opened without buffers, so keys and values are ``bytes``
that stay valid after the cursor moves.

The per-row work is kept to one slice and one comparison: the lexical arm reads
every posting of every cue term through :func:`scan`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

import lmdb

__all__ = ["scan", "scan_keys"]


def _position(cursor: lmdb.Cursor, prefix: bytes, start: bytes | None) -> bool:
    """Put ``cursor`` on the first key at or after ``start`` (or ``prefix``); False
    when there is none."""
    if start is None:
        return bool(cursor.set_range(prefix))
    if start[: len(prefix)] != prefix:
        raise ValueError(f"a scan's start key {start.hex()} is outside its prefix {prefix.hex()}")
    return bool(cursor.set_range(start))


def scan(
    txn: lmdb.Transaction, db: lmdb._Database, prefix: bytes, *, start: bytes | None = None
) -> Iterator[tuple[bytes, bytes]]:
    """``(key, value)`` of every row of ``db`` whose key begins with ``prefix``, in key
    order; with ``start`` (a key beginning with ``prefix``), from the first key at or
    after it."""
    cursor = txn.cursor(db=db)
    if not _position(cursor, prefix, start):
        return
    size = len(prefix)
    # Without buffers lmdb gives bytes; the cast is once per scan, not per row.
    rows = cast(Iterator[tuple[bytes, bytes]], cursor.iternext())
    for item in rows:
        if item[0][:size] != prefix:
            return
        yield item


def scan_keys(
    txn: lmdb.Transaction, db: lmdb._Database, prefix: bytes, *, start: bytes | None = None
) -> Iterator[bytes]:
    """The keys :func:`scan` would give, without reading or copying any value."""
    cursor = txn.cursor(db=db)
    if not _position(cursor, prefix, start):
        return
    size = len(prefix)
    keys = cast(Iterator[bytes], cursor.iternext(keys=True, values=False))
    for key in keys:
        if key[:size] != prefix:
            return
        yield key
