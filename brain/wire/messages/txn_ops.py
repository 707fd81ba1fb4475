"""Transactions: TXN_BEGIN, TXN_COMMIT, TXN_ABORT (spec/05-durability.md §8).

A transaction is named by ``txn_id`` alone. Its requests accept ``space`` like every
data request (spec/01-wire.md §4); each buffered write names its own space.
"""

from __future__ import annotations

from typing import Annotated, Final

from brain.wire.messages.common import ScopedRequest
from brain.wire.messages.values import Id, UInt
from brain.wire.schema import Message, Range, wire_message

__all__ = [
    "MAX_TXN_TIMEOUT_MS",
    "TxnAbort",
    "TxnAborted",
    "TxnBegin",
    "TxnBegun",
    "TxnCommit",
    "TxnCommitted",
]

MAX_TXN_TIMEOUT_MS: Final = 60 * 60 * 1000
"""Longest transaction timeout asked for: buffered writes wait in memory; an hour is far
beyond any agent's turn. The server may cap it lower."""


@wire_message
class TxnBegin(ScopedRequest):
    """TXN_BEGIN: open a transaction; ``timeout_ms`` absent means the server's default."""

    timeout_ms: Annotated[int, Range(1, MAX_TXN_TIMEOUT_MS)] | None = None


@wire_message
class TxnBegun(Message):
    """The answer to TXN_BEGIN: the id later writes carry as ``txn_id``."""

    txn_id: Id


@wire_message
class TxnCommit(ScopedRequest):
    """TXN_COMMIT: apply every buffered write, all or none."""

    txn_id: Id


@wire_message
class TxnCommitted(Message):
    """The answer to TXN_COMMIT: the commit's LSN and each write's answer, in order."""

    lsn: UInt
    results: tuple[object, ...]


@wire_message
class TxnAbort(ScopedRequest):
    """TXN_ABORT: drop every buffered write."""

    txn_id: Id


@wire_message
class TxnAborted(Message):
    """The answer to TXN_ABORT: an empty map."""
