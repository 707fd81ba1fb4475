"""Transactions (spec/05-durability.md §8): buffered writes applied all or none.

TXN_BEGIN opens a buffer held in memory by the engine and owned by one
connection. A write carrying its ``txn_id`` is planned at once against the
current state plus the writes buffered before it (so errors come back
immediately and later writes can use the ids of earlier ones), then buffered
with the record changes it made (:attr:`BufferedWrite.kept`): the later writes
and reads of the transaction apply those again rather than planning the
earlier writes anew, so buffering n writes plans each once. Its answer carries
the ids the commit will use, with ``lsn`` and ``recorded_at`` 0 because
neither exists yet. TXN_COMMIT plans every buffered write again, once each, in
order, against the state at commit time, and logs them as one WAL record
applied in one LMDB transaction: a crash before that record is durable leaves
nothing, after it everything. The ids a write took when it was
buffered are handed to it again at commit, so a write that creates a record
creates the one its buffered answer named; the commit's results are the
authoritative answers all the same (an ENCODE whose text was stored by
another write in the meantime answers with that memory, deduplicated). A
transaction that expires, is aborted, fails at commit, or whose
connection closes is gone; its id then answers ``TXN_EXPIRED``. A committed
one answers a repeated TXN_COMMIT with its stored answer
(:func:`brain.engine.planner.plan_commit`).

A write joins its buffer when its batch is final. Until then it is *staged*
under the number of the planning that made it (:attr:`PlanContext.planning
<brain.engine.write.writer.PlanContext.planning>`), so the later jobs of the
same batch (pipelined writes, reads, the commit) see it, and a planning thrown
away (the map grew, the batch failed) leaves nothing behind.

What open transactions hold is bounded by slots (:data:`MAX_OPEN_TXNS`, per
namespace and per connection), by writes and kept changes per transaction
(:data:`MAX_TXN_WRITES`, :data:`MAX_TXN_KEPT_CHANGES`), and by cost units
(one per KiB, :mod:`brain.engine.write.budget`) per transaction, per
connection and per namespace (:data:`MAX_TXN_BUFFER_PER_CONNECTION`,
:data:`MAX_TXN_BUFFER_PER_NAMESPACE`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, TypeVar

from brain.engine.write import budget
from brain.engine.write.plan import COUNTER_BYTES, Change, Delete, Put
from brain.errors import OverBudget, Overloaded, TxnExpired, TxnTooLarge
from brain.ids import new_id
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message

__all__ = [
    "DEFAULT_TXN_TIMEOUT_MS",
    "MAX_OPEN_TXNS",
    "MAX_OPEN_TXNS_PER_CONNECTION",
    "MAX_OPEN_TXNS_PER_NAMESPACE",
    "MAX_TXN_BUFFER_PER_CONNECTION",
    "MAX_TXN_BUFFER_PER_NAMESPACE",
    "MAX_TXN_KEPT_CHANGES",
    "MAX_TXN_WRITES",
    "BufferedWrite",
    "IdSource",
    "OpenTxn",
    "TxnRegistry",
    "kept_units",
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
"""Transactions one connection may hold open, so that a client still runs a
transaction on each of several streams; what they buffer together is bounded by
:data:`MAX_TXN_BUFFER_PER_CONNECTION`."""

MAX_TXN_BUFFER_PER_CONNECTION: Final = 2 * budget.TXN_BUDGET
"""Cost units (about 128 MiB) one connection's open transactions may buffer together:
two transactions filled to the transaction budget. The slots alone would let a
connection hold 16 full transactions (1 GiB) in the server's memory."""

MAX_TXN_BUFFER_PER_NAMESPACE: Final = 8 * budget.TXN_BUDGET
"""Cost units (about 512 MiB) one namespace's open transactions may buffer together,
whatever connections opened them: eight full transactions. Its 1,000 slots alone
would let one tenant make the server hold 64 GiB."""

MAX_TXN_KEPT_CHANGES: Final = 20_000
"""Record changes the buffered writes of one transaction may keep. Every later write
and read of the transaction applies them again (raw LMDB puts, about 2 µs each)
in a nested transaction, so this bounds that work at some 40 ms per request on
the one writer thread, far above the 5 to 20 changes a buffered write keeps."""

OPEN_TXNS_RETRY_MS: Final = 1000
"""Suggested back-off when every transaction slot is taken."""

DEFAULT_TXN_TIMEOUT_MS: Final = 30_000
"""A transaction nobody commits is dropped after 30 s unless TXN_BEGIN asks otherwise."""

_K = TypeVar("_K", bytes, str)


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


def kept_units(changes: tuple[Change, ...]) -> int:
    """The cost units of holding ``changes`` in memory: one per KiB of keys and values."""
    held = 0
    for change in changes:
        if isinstance(change, Put):
            held += len(change.key) + len(change.value)
        elif isinstance(change, Delete):
            held += len(change.key)
        else:
            held += len(change.key) + COUNTER_BYTES
    return held // budget.BYTES_PER_UNIT


@dataclass(slots=True, eq=False)
class BufferedWrite:
    """One write waiting for its transaction's commit."""

    opcode: Opcode
    request: Message
    ids: IdSource
    kept: tuple[Change, ...] = ()
    """The record and idempotency changes it made when it was buffered (planned at LSN 0
    and record time 0; no index or change-log entries). They stand for it under
    the transaction's later writes and reads; the commit plans it again."""
    cost: int = 0
    """Its cost units: the request's estimate and :func:`kept_units` of ``kept``."""


@dataclass(slots=True)
class OpenTxn:
    """A transaction's buffer and ownership."""

    txn_id: bytes
    namespace: str
    owner: bytes
    deadline: float
    writes: list[BufferedWrite] = field(default_factory=list)
    """The buffered writes whose batches are final, in order."""
    cost: int = 0
    """The cost units of ``writes``."""
    kept_changes: int = 0
    """How many changes ``writes`` keep."""
    staged: list[BufferedWrite] = field(default_factory=list)
    """Writes planned in the batch being planned, which join ``writes`` when it is final."""
    staged_in: int = 0
    """The planning ``staged`` belongs to; another planning's are void."""
    closing_in: int = 0
    """The planning that holds this transaction's commit (0: none): later jobs of that
    planning find the transaction gone, as they would once the commit is final."""

    def staged_for(self, planning: int) -> list[BufferedWrite]:
        """The writes staged by the jobs of ``planning`` so far (those of another
        planning are dropped: it was thrown away or is final)."""
        if self.staged_in != planning:
            self.staged = []
            self.staged_in = planning
        return self.staged

    def pending(self, planning: int) -> list[BufferedWrite]:
        """What a job of ``planning`` sees: the buffered writes, then those staged by
        the jobs before it in the same planning."""
        return self.writes + self.staged_for(planning)


class TxnRegistry:
    """Every open transaction, by id, and the cost units each connection and namespace
    holds buffered in them."""

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, *, max_writes: int = MAX_TXN_WRITES
    ) -> None:
        self.max_writes = max_writes
        self._open: dict[bytes, OpenTxn] = {}
        self._lock = threading.Lock()
        self._clock = clock
        self._by_owner: dict[bytes, int] = {}
        self._by_namespace: dict[str, int] = {}
        # What the planning under way has staged, by owner and namespace: it counts
        # against their limits before its batch is final. Only the writer thread
        # stages, one planning at a time, so a new planning number starts afresh.
        self._planning = 0
        self._staged_by_owner: dict[bytes, int] = {}
        self._staged_by_namespace: dict[str, int] = {}

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

    def _lookup_locked(self, txn_id: bytes, namespace: str, planning: int) -> OpenTxn:
        txn = self._open.get(txn_id)
        # Another namespace's transaction is reported exactly like a missing one, and
        # so is one whose commit an earlier job of this planning holds.
        if txn is None or txn.namespace != namespace or (planning and txn.closing_in == planning):
            raise TxnExpired(f"no open transaction {txn_id.hex()}", field="txn_id")
        if self._clock() > txn.deadline:
            self._remove_locked(txn_id)
            raise TxnExpired(f"transaction {txn_id.hex()} timed out", field="txn_id")
        return txn

    def get(self, txn_id: bytes, namespace: str, planning: int = 0) -> OpenTxn:
        """The open transaction, or TXN_EXPIRED (also when the commit of a job before
        this one in ``planning`` holds it)."""
        with self._lock:
            return self._lookup_locked(txn_id, namespace, planning)

    def check_room(self, txn: OpenTxn, planning: int) -> None:
        """TXN_TOO_LARGE when one more write would not fit."""
        if len(txn.pending(planning)) >= self.max_writes:
            raise TxnTooLarge(
                f"a transaction holds at most {self.max_writes} writes", field="txn_id"
            )

    def stage(self, txn: OpenTxn, write: BufferedWrite, planning: int) -> None:
        """Stage ``write`` in ``txn`` for ``planning``, once it fits every bound:
        TXN_TOO_LARGE past :data:`MAX_TXN_KEPT_CHANGES`, OVER_BUDGET past the
        transaction budget, OVERLOADED past what its connection or its namespace may
        buffer (retryable: room comes back as their other transactions end)."""
        staged = txn.staged_for(planning)
        kept = txn.kept_changes + sum(len(w.kept) for w in staged) + len(write.kept)
        if kept > MAX_TXN_KEPT_CHANGES:
            raise TxnTooLarge(
                f"a transaction's buffered writes keep at most {MAX_TXN_KEPT_CHANGES} "
                f"record changes; this one would bring it to {kept}",
                field="txn_id",
            )
        held = txn.cost + sum(w.cost for w in staged) + write.cost
        if held > budget.TXN_BUDGET:
            raise OverBudget(
                f"{write.opcode.name} would bring its transaction to {held} cost units, "
                f"over the budget of {budget.TXN_BUDGET} for one transaction"
            )
        with self._lock:
            if planning != self._planning:
                self._planning = planning
                self._staged_by_owner.clear()
                self._staged_by_namespace.clear()
            in_namespace = (
                self._by_namespace.get(txn.namespace, 0)
                + self._staged_by_namespace.get(txn.namespace, 0)
                + write.cost
            )
            if in_namespace > MAX_TXN_BUFFER_PER_NAMESPACE:
                raise Overloaded(
                    f"this namespace's open transactions would buffer {in_namespace} cost "
                    f"units, over the {MAX_TXN_BUFFER_PER_NAMESPACE} one namespace may; "
                    "retry after some end",
                    retry_after_ms=OPEN_TXNS_RETRY_MS,
                )
            if txn.owner:
                by_owner = (
                    self._by_owner.get(txn.owner, 0)
                    + self._staged_by_owner.get(txn.owner, 0)
                    + write.cost
                )
                if by_owner > MAX_TXN_BUFFER_PER_CONNECTION:
                    raise Overloaded(
                        f"this connection's open transactions would buffer {by_owner} cost "
                        f"units, over the {MAX_TXN_BUFFER_PER_CONNECTION} one connection "
                        "may; commit or abort one first",
                        retry_after_ms=OPEN_TXNS_RETRY_MS,
                    )
                self._staged_by_owner[txn.owner] = by_owner - self._by_owner.get(txn.owner, 0)
            self._staged_by_namespace[txn.namespace] = in_namespace - self._by_namespace.get(
                txn.namespace, 0
            )
            staged.append(write)

    def confirm(self, txn: OpenTxn, write: BufferedWrite) -> None:
        """``write``'s batch is final: it joins ``txn``'s buffer (unless the transaction
        ended meanwhile), ahead of what its planning staged after it."""
        with self._lock:
            if write in txn.staged:
                txn.staged.remove(write)
            if self._open.get(txn.txn_id) is not txn:
                return
            txn.writes.append(write)
            txn.cost += write.cost
            txn.kept_changes += len(write.kept)
            self._by_namespace[txn.namespace] = (
                self._by_namespace.get(txn.namespace, 0) + write.cost
            )
            if txn.owner:
                self._by_owner[txn.owner] = self._by_owner.get(txn.owner, 0) + write.cost

    def closing(self, txn: OpenTxn, planning: int) -> None:
        """Mark ``txn`` as committed by a job of ``planning`` (final or not, it ends)."""
        txn.closing_in = planning

    def take(self, txn_id: bytes, namespace: str) -> OpenTxn:
        """Remove and return the transaction (for abort)."""
        with self._lock:
            txn = self._lookup_locked(txn_id, namespace, 0)
            self._remove_locked(txn_id)
            return txn

    def discard(self, txn_id: bytes) -> None:
        """Forget a transaction whose commit is final (absent is fine)."""
        with self._lock:
            self._remove_locked(txn_id)

    def abort_owner(self, owner: bytes) -> int:
        """Drop every transaction of a closed connection; return how many."""
        with self._lock:
            doomed = [t for t, txn in self._open.items() if txn.owner == owner]
            for txn_id in doomed:
                self._remove_locked(txn_id)
            return len(doomed)

    def _remove_locked(self, txn_id: bytes) -> None:
        """Drop a transaction and what it counted against its connection and namespace."""
        txn = self._open.pop(txn_id, None)
        if txn is None or not txn.cost:
            return
        _release(self._by_namespace, txn.namespace, txn.cost)
        if txn.owner:
            _release(self._by_owner, txn.owner, txn.cost)

    def _expire_locked(self) -> None:
        now = self._clock()
        for txn_id in [t for t, txn in self._open.items() if now > txn.deadline]:
            self._remove_locked(txn_id)


def _release(totals: dict[_K, int], key: _K, cost: int) -> None:
    """Take ``cost`` off ``totals[key]``, dropping the entry at zero."""
    left = totals.get(key, 0) - cost
    if left > 0:
        totals[key] = left
    else:
        totals.pop(key, None)
