"""Prefix scans (``brain/engine/store/scan.py``) against a real LMDB table."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from typing import Final

import lmdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brain.engine.store.scan import scan, scan_keys

LARGE_VALUE_BYTES: Final = 1 << 20
"""A value far larger than every key together, so copying even one shows in the peak."""


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[lmdb.Environment]:
    opened = lmdb.open(str(tmp_path_factory.mktemp("scan")), map_size=1 << 28, max_dbs=2)
    yield opened
    opened.close()


@pytest.fixture
def txn(env: lmdb.Environment) -> Iterator[tuple[lmdb.Transaction, lmdb._Database]]:
    """A write transaction over an empty table, aborted afterwards."""
    db = env.open_db(b"rows")
    write = env.begin(write=True)
    write.drop(db, delete=False)
    try:
        yield write, db
    finally:
        write.abort()


def _fill(pair: tuple[lmdb.Transaction, lmdb._Database], keys: list[bytes]) -> None:
    txn, db = pair
    for key in keys:
        txn.put(key, b"v:" + key, db=db)


KEYS: Final = [b"a\x01", b"ab\x01", b"ab\x02", b"abc\x01", b"abd\x01", b"b\x01", b"b\x02"]


def test_empty_table(txn: tuple[lmdb.Transaction, lmdb._Database]) -> None:
    assert list(scan(*txn, b"a")) == []
    assert list(scan_keys(*txn, b"")) == []
    assert list(scan(*txn, b"a", start=b"ab")) == []


def test_rows_of_the_prefix_in_key_order(txn: tuple[lmdb.Transaction, lmdb._Database]) -> None:
    _fill(txn, list(reversed(KEYS)))
    assert list(scan(*txn, b"ab")) == [
        (b"ab\x01", b"v:ab\x01"),
        (b"ab\x02", b"v:ab\x02"),
        (b"abc\x01", b"v:abc\x01"),
        (b"abd\x01", b"v:abd\x01"),
    ]
    assert list(scan_keys(*txn, b"")) == KEYS


def test_a_prefix_of_another_key_group(txn: tuple[lmdb.Transaction, lmdb._Database]) -> None:
    _fill(txn, KEYS)
    # "abc" groups inside "ab" (a byte prefix), and stops before its sibling "abd".
    assert list(scan_keys(*txn, b"abc")) == [b"abc\x01"]
    assert list(scan_keys(*txn, b"ab\x01")) == [b"ab\x01"]
    assert list(scan_keys(*txn, b"aa")) == []


def test_prefix_at_the_end_of_the_table(txn: tuple[lmdb.Transaction, lmdb._Database]) -> None:
    _fill(txn, KEYS)
    assert list(scan_keys(*txn, b"b")) == [b"b\x01", b"b\x02"]
    assert list(scan_keys(*txn, b"b\x02")) == [b"b\x02"]
    # Past every key: the cursor finds nothing at all.
    assert list(scan(*txn, b"c")) == []


def test_start_key(txn: tuple[lmdb.Transaction, lmdb._Database]) -> None:
    _fill(txn, KEYS)
    assert list(scan_keys(*txn, b"ab", start=b"ab\x02")) == [b"ab\x02", b"abc\x01", b"abd\x01"]
    # A start between keys begins at the next one; one past the group finds nothing.
    assert list(scan_keys(*txn, b"ab", start=b"ab\x01\x00")) == [b"ab\x02", b"abc\x01", b"abd\x01"]
    assert (
        list(scan(*txn, b"ab", start=b"abe")) == [] and list(scan(*txn, b"b", start=b"b\x03")) == []
    )
    with pytest.raises(ValueError, match="outside its prefix"):
        list(scan(*txn, b"ab", start=b"a\x01"))


def test_stopping_early_leaves_the_rest_unread(
    txn: tuple[lmdb.Transaction, lmdb._Database],
) -> None:
    _fill(txn, KEYS)
    rows = scan(*txn, b"ab")
    assert next(rows) == (b"ab\x01", b"v:ab\x01")
    assert [key for key, _ in rows] == [b"ab\x02", b"abc\x01", b"abd\x01"]


def _peak_bytes(pair: tuple[lmdb.Transaction, lmdb._Database], keys_only: bool) -> int:
    tracemalloc.start()
    try:
        if keys_only:
            for _ in scan_keys(*pair, b"big"):
                pass
        else:
            for _ in scan(*pair, b"big"):
                pass
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_keys_only_copies_no_value(txn: tuple[lmdb.Transaction, lmdb._Database]) -> None:
    write, db = txn
    for index in range(4):
        write.put(b"big" + bytes([index]), bytes(LARGE_VALUE_BYTES), db=db)
    assert list(scan_keys(write, db, b"big")) == [b"big" + bytes([i]) for i in range(4)]
    assert _peak_bytes(txn, keys_only=False) >= LARGE_VALUE_BYTES
    assert _peak_bytes(txn, keys_only=True) < LARGE_VALUE_BYTES // 16


_KEY: Final = st.binary(min_size=1, max_size=4).map(lambda b: bytes(x % 3 for x in b))
"""Keys over three byte values, so that prefixes and groups overlap often."""


@settings(max_examples=200, deadline=None)
@given(keys=st.sets(_KEY, max_size=30), prefix=st.binary(max_size=2), tail=st.binary(max_size=3))
def test_a_scan_is_the_sorted_filter(
    env: lmdb.Environment, keys: set[bytes], prefix: bytes, tail: bytes
) -> None:
    prefix = bytes(x % 3 for x in prefix)
    start = prefix + bytes(x % 3 for x in tail)
    db = env.open_db(b"rows")
    with env.begin(write=True) as write:
        write.drop(db, delete=False)
        for key in keys:
            write.put(key, key[::-1], db=db)
        expected = [key for key in sorted(keys) if key.startswith(prefix)]
        assert list(scan(write, db, prefix)) == [(key, key[::-1]) for key in expected]
        assert list(scan_keys(write, db, prefix)) == expected
        assert list(scan_keys(write, db, prefix, start=start)) == [
            k for k in expected if k >= start
        ]
        write.abort()
