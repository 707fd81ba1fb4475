"""Reading ``embed_queue`` by scope: who has queued work, a batch that serves them in
turn, and how much one scope still waits for (spec/04-retrieval.md §3).

The queue's keys are ``S ‖ doc key``, so one scope's entries are one key range,
and the ranges follow each other in prefix order. Taking the first entries of
the table would serve the scope with the lowest prefix until its range is empty:
a tenant that queued thousands of documents would hold every other scope's
recalls behind them. :func:`take_in_turn` instead splits a batch evenly between
the scopes it serves, giving what a scope leaves unused to the others, and says
which scopes it took every entry of (the indexer's per-scope progress rests on
that).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

import lmdb

from brain.engine.store.scope import SCOPE_PREFIX_BYTES

__all__ = [
    "EMBED_BACKLOG_COUNTED",
    "Turn",
    "after_scope",
    "count_queued",
    "has_queued",
    "scopes_with_work",
    "take_in_turn",
]

EMBED_BACKLOG_COUNTED: Final = 1_000
"""Most queue entries a recall counts for its coverage's ``embed_backlog``: enough
to tell a few stragglers from a flood, while a recall behind a re-index of
200,000 statements does not walk them all."""


@dataclass(frozen=True, slots=True)
class Turn:
    """A batch taken in turn: the entries, scope after scope (each scope's in key
    order), and the scopes none of whose entries the snapshot holds were left out."""

    entries: list[tuple[bytes, bytes]]
    drained: frozenset[bytes]


def after_scope(prefix: bytes) -> bytes | None:
    """The smallest prefix after ``prefix`` (None after the last one), where the
    queue's next scope begins."""
    value = int.from_bytes(prefix, "big") + 1
    if value >> (8 * len(prefix)):
        return None
    return value.to_bytes(len(prefix), "big")


def _scope_at(cursor: lmdb.Cursor, position: bytes) -> bytes | None:
    """The prefix of the first queued key at or after ``position``, or None."""
    if not cursor.set_range(position):
        return None
    return bytes(cursor.key()[:SCOPE_PREFIX_BYTES])


def has_queued(cursor: lmdb.Cursor, prefix: bytes) -> bool:
    """Whether the scope ``prefix`` has any entry in the queue ``cursor`` reads."""
    return _scope_at(cursor, prefix) == prefix


def scopes_with_work(cursor: lmdb.Cursor, start: bytes, limit: int) -> tuple[list[bytes], bool]:
    """Up to ``limit`` prefixes of scopes with queued entries, from ``start`` on and
    wrapping round to the first, each once; True when they are all there are."""
    found: list[bytes] = []
    position: bytes | None = start
    wrapped = not start  # from the first scope on: the end of the table is the end
    while len(found) < limit:
        prefix = None if position is None else _scope_at(cursor, position)
        if prefix is None or (wrapped and start and prefix >= start):
            if wrapped:
                return found, True
            wrapped, position = True, b""
            continue
        found.append(prefix)
        position = after_scope(prefix)
    return found, False


def _read_range(
    cursor: lmdb.Cursor, prefix: bytes, start: bytes, count: int
) -> tuple[list[tuple[bytes, bytes]], bool]:
    """Up to ``count`` entries of scope ``prefix`` from key ``start`` on, and whether
    the scope has more after them."""
    taken: list[tuple[bytes, bytes]] = []
    if not cursor.set_range(start):
        return taken, False
    while True:
        key = bytes(cursor.key())
        if key[:SCOPE_PREFIX_BYTES] != prefix:
            return taken, False
        if len(taken) == count:
            return taken, True
        taken.append((key, bytes(cursor.value())))
        if not cursor.next():
            return taken, False


def take_in_turn(cursor: lmdb.Cursor, scopes: Iterable[bytes], limit: int) -> Turn:
    """At most ``limit`` entries of ``scopes``: an even share each, what a scope
    leaves of its share given to those with more, in as many passes as it takes."""
    order = list(dict.fromkeys(scopes))
    taken: dict[bytes, list[tuple[bytes, bytes]]] = {prefix: [] for prefix in order}
    drained: set[bytes] = set()
    active, room = order, limit
    while active and room > 0:
        share = max(1, room // len(active))
        still: list[bytes] = []
        for prefix in active:
            ask = min(share, room)
            if ask == 0:
                still.append(prefix)
                continue
            mine = taken[prefix]
            start = mine[-1][0] + b"\x00" if mine else prefix  # just after the last taken
            got, more = _read_range(cursor, prefix, start, ask)
            mine += got
            room -= len(got)
            if more:
                still.append(prefix)
            else:
                drained.add(prefix)
        active = still
    entries = [entry for prefix in order for entry in taken[prefix]]
    return Turn(entries, frozenset(drained))


def count_queued(cursor: lmdb.Cursor, prefix: bytes, limit: int = EMBED_BACKLOG_COUNTED) -> int:
    """The entries under ``prefix`` (a scope's, or a namespace's id alone) in the
    queue, counted up to ``limit``."""
    counted = 0
    if not cursor.set_range(prefix):
        return counted
    width = len(prefix)
    for key in cursor.iternext(keys=True, values=False):
        if counted == limit or bytes(key[:width]) != prefix:
            break
        counted += 1
    return counted
