"""Conversational context (spec/04-retrieval.md §5): a memory lends part of its fused
score to its neighbours in the same conversation.

An agent records a conversation turn by turn, and the turn that answers a cue is
often next to the one that matches it best (a question and its answer, a story
told over two turns). So after fusion each of the best :data:`CONTEXT_SOURCES`
memory candidates that the filter chain keeps adds ``CONTEXT_WEIGHTS[d - 1]``
times its fused score to the memories ``d`` steps before and after it in its
conversation, ``d`` up to ``len(CONTEXT_WEIGHTS)``; a neighbour that no arm
found joins the candidates, and every candidate is still judged by the chain.

A memory's **conversation** is found without any index of its own: the memories
of its space in the order they were recorded (memory ids sort by creation), walked
from it both ways, skipping forgotten ones, and stopping at the first memory that
is not in the same conversation: one without ``occurred_at``, with another
``context``, or whose ``occurred_at`` is more than :data:`CONTEXT_GAP_NS` away
from the last one walked. A memory without ``occurred_at`` has no conversation
(a document store such as Cranfield is left as it is).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from typing import Final

import lmdb

from brain.engine.index.documents import MEMORY_DOC
from brain.engine.recall.chain import TimesOf, memory_times
from brain.engine.recall.fusion import Candidate, fused_order
from brain.engine.records.filters import Filters, judge
from brain.engine.records.memories import memory_row
from brain.engine.store.env import Store
from brain.engine.store.rows import decode_row
from brain.engine.store.scope import Scope
from brain.engine.store.tables import MEMORIES

__all__ = [
    "CONTEXT_GAP_NS",
    "CONTEXT_SOURCES",
    "CONTEXT_WEIGHTS",
    "neighbours",
    "spread_context",
]

CONTEXT_WEIGHTS: Final = (0.25, 0.125)
"""The share of its fused score a memory adds to the memories one and two turns away:
chosen on the LoCoMo development split (where evidence turns sit next to the turn a
cue matches), halving with each step so that a far turn never outranks a near one."""
CONTEXT_SOURCES: Final = 50
"""Memory candidates, best first, that lend to their neighbours: below them a fused
score is too small to move a neighbour into the hits, and each costs row reads."""
CONTEXT_GAP_NS: Final = 3600 * 10**9
"""Longest time between two consecutive turns of one conversation (one hour): a
session resumed later, or the next day, is another conversation."""
_MAX_WALK: Final = 16
"""Memories read per direction while looking for the neighbours: forgotten ones are
skipped, but a long run of them must not make a recall read the space."""


def _conversation_of(row: dict[str, object]) -> tuple[int, object] | None:
    occurred = row.get("occurred_at")
    if not isinstance(occurred, int):
        return None
    return occurred, row.get("context")


def _walk(
    txn: lmdb.Transaction, db: lmdb._Database, scope: Scope, memory_id: bytes, forward: bool
) -> Iterator[tuple[bytes, dict[str, object]]]:
    """The scope's memories after (or before) ``memory_id`` in id order, with their rows."""
    cursor = txn.cursor(db=db)
    # The memory itself is stored, so the cursor lands on it; step off it first.
    if not cursor.set_range(scope.key(memory_id)):
        return
    if not (cursor.next() if forward else cursor.prev()):
        return
    for _ in range(_MAX_WALK):
        key = bytes(cursor.key())
        if not key.startswith(scope.prefix):
            return
        yield key[len(scope.prefix) :], decode_row(bytes(cursor.value()))
        if not (cursor.next() if forward else cursor.prev()):
            return


def neighbours(
    store: Store, txn: lmdb.Transaction, scope: Scope, memory_id: bytes, row: dict[str, object]
) -> list[tuple[bytes, int]]:
    """``(memory id, steps away)`` of the memory's conversation neighbours, up to
    ``len(CONTEXT_WEIGHTS)`` steps each way."""
    own = _conversation_of(row)
    if own is None:
        return []
    found: list[tuple[bytes, int]] = []
    db = store.table(MEMORIES)
    for forward in (False, True):
        last, steps = own[0], 0
        for other_id, other in _walk(txn, db, scope, memory_id, forward):
            if "forgotten" in other:
                continue
            theirs = _conversation_of(other)
            if theirs is None or theirs[1] != own[1] or abs(theirs[0] - last) > CONTEXT_GAP_NS:
                break
            steps += 1
            found.append((other_id, steps))
            last = theirs[0]
            if steps == len(CONTEXT_WEIGHTS):
                break
    return found


def spread_context(
    store: Store,
    txn: lmdb.Transaction,
    scope: Scope,
    order: Sequence[Candidate],
    *,
    filters: Filters,
    records: Collection[str] | None,
    times_of: TimesOf,
) -> list[Candidate]:
    """``order`` with each source's share added to its neighbours, re-sorted; the
    sources' times go into ``times_of`` for the chain."""
    if records is not None and "memory" not in records:
        return list(order)
    by_key = {candidate.key: candidate for candidate in order}
    shares: list[tuple[bytes, float]] = []
    sources = [c for c in order if c.key[:1] == MEMORY_DOC][:CONTEXT_SOURCES]
    for source in sources:
        row = memory_row(store, txn, scope, source.key[1:])
        times = None if row is None else memory_times(row)
        times_of.note(source.key, times)
        # Only what the request may see lends: a forgotten turn, or one recorded after
        # as_of, says nothing about its neighbours in the world asked about.
        if row is None or times is None or not judge(times, filters).kept:
            continue
        for other_id, steps in neighbours(store, txn, scope, source.key[1:], row):
            shares.append((MEMORY_DOC + other_id, CONTEXT_WEIGHTS[steps - 1] * source.score))
    if not shares:
        return list(order)
    for key, share in shares:
        candidate = by_key.setdefault(key, Candidate(key))
        candidate.context += share
    for candidate in by_key.values():
        candidate.score += candidate.context
    return sorted(by_key.values(), key=fused_order)
