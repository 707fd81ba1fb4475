"""Reading the embed queue by scope (brain/engine/index/backlog.py): the scopes with
work, round-robin from any point, and a batch shared evenly between them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import lmdb
import pytest

from brain.engine.index.backlog import (
    after_scope,
    count_queued,
    has_queued,
    scopes_with_work,
    take_in_turn,
)
from brain.engine.store.scope import SCOPE_PREFIX_BYTES


def _prefix(n: int) -> bytes:
    return n.to_bytes(SCOPE_PREFIX_BYTES, "big")


@pytest.fixture
def queue(tmp_path: Path) -> Iterator[lmdb.Cursor]:
    """A queue of scopes 1 (5 entries), 2 (200), 4 (1) and 7 (2)."""
    env = lmdb.open(str(tmp_path / "q"), map_size=1 << 24)
    sizes = {1: 5, 2: 200, 4: 1, 7: 2}
    with env.begin(write=True) as txn:
        for scope, size in sizes.items():
            for doc in range(size):
                txn.put(_prefix(scope) + doc.to_bytes(4, "big"), b"+")
    txn = env.begin()
    try:
        yield txn.cursor()
    finally:
        txn.abort()
        env.close()


def test_a_batch_is_shared_evenly_and_what_is_left_goes_to_the_busy(
    queue: lmdb.Cursor,
) -> None:
    turn = take_in_turn(queue, [_prefix(2), _prefix(1), _prefix(4), _prefix(7)], 128)
    taken: dict[int, list[bytes]] = {}
    for key, _ in turn.entries:
        taken.setdefault(int.from_bytes(key[:SCOPE_PREFIX_BYTES], "big"), []).append(key)
    assert {scope: len(keys) for scope, keys in taken.items()} == {2: 120, 1: 5, 4: 1, 7: 2}
    assert list(taken) == [2, 1, 4, 7]  # scope after scope, in the order asked
    assert all(keys == sorted(keys) for keys in taken.values())
    assert len({key for key, _ in turn.entries}) == 128  # no entry twice
    assert turn.drained == {_prefix(1), _prefix(4), _prefix(7)}


def test_drained_means_no_entry_of_the_scope_is_left(queue: lmdb.Cursor) -> None:
    turn = take_in_turn(queue, [_prefix(1)], 5)  # exactly all: the next key tells
    assert len(turn.entries) == 5 and turn.drained == {_prefix(1)}
    turn = take_in_turn(queue, [_prefix(1)], 4)
    assert len(turn.entries) == 4 and turn.drained == frozenset()
    turn = take_in_turn(queue, [_prefix(7)], 128)  # the last scope of the table
    assert len(turn.entries) == 2 and turn.drained == {_prefix(7)}


def test_the_scopes_with_work_go_round_from_where_the_last_round_stopped(
    queue: lmdb.Cursor,
) -> None:
    assert scopes_with_work(queue, b"", 10) == ([_prefix(n) for n in (1, 2, 4, 7)], True)
    assert scopes_with_work(queue, _prefix(3), 10) == ([_prefix(n) for n in (4, 7, 1, 2)], True)
    assert scopes_with_work(queue, _prefix(4), 2) == ([_prefix(4), _prefix(7)], False)
    assert scopes_with_work(queue, _prefix(8), 10) == ([_prefix(n) for n in (1, 2, 4, 7)], True)


def test_one_scopes_queue(queue: lmdb.Cursor) -> None:
    assert has_queued(queue, _prefix(4)) and not has_queued(queue, _prefix(3))
    assert count_queued(queue, _prefix(2)) == 200
    assert count_queued(queue, _prefix(2), limit=17) == 17
    assert count_queued(queue, _prefix(9)) == 0
    assert after_scope(_prefix(7)) == _prefix(8)
    assert after_scope(b"\xff" * SCOPE_PREFIX_BYTES) is None
