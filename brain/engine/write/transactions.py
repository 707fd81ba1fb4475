"""Transactions (spec/05-durability.md §8): buffered writes applied all or none.

TXN_BEGIN opens a buffer held in memory by the engine and owned by one
connection. A write carrying its ``txn_id`` is planned at once against the
current state plus the writes buffered before it (so errors come back
immediately and later writes can use the ids of earlier ones), then buffered;
its answer carries the ids the commit will use, with ``lsn`` and
``recorded_at`` 0 because neither exists yet. TXN_COMMIT plans every buffered
write again, in order, against the state at commit time, and logs them as one
WAL record applied in one LMDB transaction: a crash before that record is
durable leaves nothing, after it everything. The ids a write took when it was
buffered are handed to it again at commit, so a write that creates a record
creates the one its buffered answer named; the commit's results are the
authoritative answers all the same (an ENCODE whose text was stored by
another write in the meantime answers with that memory, deduplicated). A
transaction that expires, is aborted, fails at commit, or whose
connection closes is gone; its id then answers ``TXN_EXPIRED``. A committed
one answers a repeated TXN_COMMIT with its stored answer
(:func:`brain.engine.planner.plan_commit`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from brain.errors import Overloaded, TxnExpired, TxnTooLarge
from brain.ids import new_id
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message

__all__ = [
    "DEFAULT_TXN_TIMEOUT_MS",
    "MAX_OPEN_TXNS",
    "MAX_OPEN_TXNS_PER_CONNECTION",
    "MAX_OPEN_TXNS_PER_NAMESPACE",
    "MAX_TXN_WRITES",
    "IdSource",
    "OpenTxn",
    "TxnRegistry",
]

MAX_TXN_WRITES: Final = 1000
"""Writes one transaction may buffer: its commit is one WAL record and one LMDB
transaction, which should stay far below a second of work."""

MAX_OPEN_TXNS: Final = 10_000
"""Transactions open at once across all connections; each holds its buffer in memory."""

MAX_OPEN_TXNS_PER_NAMESPACE: Final = 1_000
"""Transactions one namespace may hold open: a tenth of :data:`MAX_OPEN_TXNS`, so a
tenant that takes every slot it may leaves the rest to the others."""

MAX_OPEN_TXNS_PER_CONNECTION: Final = 16
"""Transactions one connection may hold open: with each buffering up to the
transaction budget (64 MiB), what one connection can make the server hold stays
bounded (1 GiB), while a client still runs a transaction on each of several streams."""

OPEN_TXNS_RETRY_MS: Final = 1000
"""Suggested back-off when every transaction slot is taken."""

DEFAULT_TXN_TIMEOUT_MS: Final = 30_000
"""A transaction nobody commits is dropped after 30 s unless TXN_BEGIN asks otherwise."""


class IdSource:
    """Hands out record ids; replays the same ids when planning is repeated."""

    __slots__ = ("_given", "_next")

    def __init__(self, reserved: list[bytes] | None = None) -> None:
        self._given: list[bytes] = [] if reserved is None else reserved
        self._next = 0

    def new(self) -> bytes:
        """The next id: a reserved one if any is left, else a fresh one (kept for replay)."""
        if self._next < len(self._given):
            value = self._given[self._next]
        else:
            value = new_id()
            self._given.append(value)
        self._next += 1
        return value

    def replay(self) -> IdSource:
        """A source that hands out the same ids again, in the same order."""
        return IdSource(self._given)


@dataclass(slots=True)
class BufferedWrite:
    """One write waiting for its transaction's commit."""

    opcode: Opcode
    request: Message
    ids: IdSource


@dataclass(slots=True)
class OpenTxn:
    """A transaction's buffer and ownership."""

    txn_id: bytes
    namespace: str
    owner: bytes
    deadline: float
    writes: list[BufferedWrite] = field(default_factory=list)
    cost: int = 0


class TxnRegistry:
    """Every open transaction, by id."""

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, *, max_writes: int = MAX_TXN_WRITES
    ) -> None:
        self.max_writes = max_writes
        self._open: dict[bytes, OpenTxn] = {}
        self._lock = threading.Lock()
        self._clock = clock

    def begin(self, namespace: str, owner: bytes, timeout_ms: int | None) -> bytes:
        """Open a transaction; return its id."""
        timeout = (DEFAULT_TXN_TIMEOUT_MS if timeout_ms is None else timeout_ms) / 1000
        with self._lock:
            self._expire_locked()
            self._check_slots_locked(namespace, owner)
            txn_id = new_id()
            self._open[txn_id] = OpenTxn(txn_id, namespace, owner, self._clock() + timeout)
            return txn_id

    def _check_slots_locked(self, namespace: str, owner: bytes) -> None:
        """OVERLOADED when the server, the namespace or the connection (``owner``; the
        embedded API's empty owner is no connection) has every slot it may take."""
        if len(self._open) >= MAX_OPEN_TXNS:
            raise Overloaded(
                f"{MAX_OPEN_TXNS} transactions are open; retry after some end",
                retry_after_ms=OPEN_TXNS_RETRY_MS,
            )
        in_namespace = sum(1 for txn in self._open.values() if txn.namespace == namespace)
        if in_namespace >= MAX_OPEN_TXNS_PER_NAMESPACE:
            raise Overloaded(
                f"this namespace has {MAX_OPEN_TXNS_PER_NAMESPACE} transactions open, "
                "the most one namespace may; retry after some end",
                retry_after_ms=OPEN_TXNS_RETRY_MS,
            )
        if owner and sum(1 for txn in self._open.values() if txn.owner == owner) >= (
            MAX_OPEN_TXNS_PER_CONNECTION
        ):
            raise Overloaded(
                f"this connection has {MAX_OPEN_TXNS_PER_CONNECTION} transactions open, "
                "the most one connection may; commit or abort one first",
                retry_after_ms=OPEN_TXNS_RETRY_MS,
            )

    def _lookup_locked(self, txn_id: bytes, namespace: str) -> OpenTxn:
        txn = self._open.get(txn_id)
        # Another namespace's transaction is reported exactly like a missing one.
        if txn is None or txn.namespace != namespace:
            raise TxnExpired(f"no open transaction {txn_id.hex()}", field="txn_id")
        if self._clock() > txn.deadline:
            del self._open[txn_id]
            raise TxnExpired(f"transaction {txn_id.hex()} timed out", field="txn_id")
        return txn

    def get(self, txn_id: bytes, namespace: str) -> OpenTxn:
        """The open transaction, or TXN_EXPIRED."""
        with self._lock:
            return self._lookup_locked(txn_id, namespace)

    def check_room(self, txn: OpenTxn) -> None:
        """TXN_TOO_LARGE when one more write would not fit."""
        if len(txn.writes) >= self.max_writes:
            raise TxnTooLarge(
                f"a transaction holds at most {self.max_writes} writes", field="txn_id"
            )

    def take(self, txn_id: bytes, namespace: str) -> OpenTxn:
        """Remove and return the transaction (for abort)."""
        with self._lock:
            txn = self._lookup_locked(txn_id, namespace)
            del self._open[txn_id]
            return txn

    def discard(self, txn_id: bytes) -> None:
        """Forget a transaction whose commit is final (absent is fine)."""
        with self._lock:
            self._open.pop(txn_id, None)

    def abort_owner(self, owner: bytes) -> int:
        """Drop every transaction of a closed connection; return how many."""
        with self._lock:
            doomed = [t for t, txn in self._open.items() if txn.owner == owner]
            for txn_id in doomed:
                del self._open[txn_id]
            return len(doomed)

    def _expire_locked(self) -> None:
        now = self._clock()
        for txn_id in [t for t, txn in self._open.items() if now > txn.deadline]:
            del self._open[txn_id]
