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
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

import lmdb

from brain.engine.store.env import Store
from brain.engine.store.meta import FORMAT_VERSION, OLDEST_FORMAT, stamp_format, stored_format
from brain.engine.store.statement_keys import subject_time_key
from brain.engine.store.tables import STATEMENT_BY_SUBJECT, STATEMENT_BY_SUBJECT_TIME

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


STEPS: Final[dict[int, Step]] = {2: _subject_time_index}
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
