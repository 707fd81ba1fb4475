"""When the facade sends a request again (spec/01-wire.md §10).

A write carries one ``request_id`` for all its attempts, so a resend can never
apply it twice: the server answers a repeat with the first answer. Two refusals
are worth a resend: OVERLOADED, which says when (``retry_after_ms``), and a lost
connection, after which the request may or may not have been applied.
"""

from __future__ import annotations

from typing import Final

from brain.errors import Overloaded
from brain.wire.messages import txn_ops
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message

__all__ = [
    "DEFAULT_RETRY_AFTER_MS",
    "MAX_OVERLOADED_ATTEMPTS",
    "MAX_RETRY_WAIT_MS",
    "RECONNECTS_PER_REQUEST",
    "Attempts",
    "overloaded_wait_s",
    "resendable_after_reconnect",
]

MAX_OVERLOADED_ATTEMPTS: Final = 5
"""Attempts of one request while the server answers OVERLOADED: the server's
hints (a second for an embedding backlog) then give a backlog several seconds to
drain, and a server still saturated after that is a condition the caller should
see, not one a library should wait out."""

DEFAULT_RETRY_AFTER_MS: Final = 100
"""The wait when an OVERLOADED refusal gives no ``retry_after_ms``: long enough not
to hammer a saturated server, short against any request's timeout."""

MAX_RETRY_WAIT_MS: Final = 10_000
"""The longest single wait obeyed: a larger hint (or a damaged one) is capped so a
call never hangs for minutes on one refusal."""

RECONNECTS_PER_REQUEST: Final = 1
"""Fresh connections tried for one request after the connection is lost: one
covers a server restart or a dropped idle connection; a second loss in a row
means the server is unreachable, and the caller should know."""

_CONNECTION_BOUND: Final = frozenset({Opcode.TXN_BEGIN, Opcode.TXN_COMMIT, Opcode.TXN_ABORT})
"""Transactions live in their connection: on a new one the transaction is gone."""


def overloaded_wait_s(error: Overloaded) -> float:
    """Seconds to wait before resending a request refused with ``error``."""
    hinted = error.retry_after_ms if error.retry_after_ms is not None else DEFAULT_RETRY_AFTER_MS
    return min(max(hinted, 0), MAX_RETRY_WAIT_MS) / 1000


def resendable_after_reconnect(opcode: Opcode, message: Message) -> bool:
    """True unless the request belongs to a transaction, which died with the connection."""
    if opcode in _CONNECTION_BOUND or isinstance(message, txn_ops.TxnBegin):
        return False
    return getattr(message, "txn_id", None) is None


class Attempts:
    """The attempts of one request so far, and whether the rules above allow another.

    The blocking and the asyncio facade keep one per request and differ only in how
    they wait."""

    def __init__(self, opcode: Opcode, message: Message) -> None:
        """Count the attempts of ``message``, sent as ``opcode``."""
        self._opcode, self._message = opcode, message
        self._overloaded = 0
        self._reconnects = 0

    def wait_after(self, refused: Overloaded) -> float | None:
        """Seconds to wait before sending again after ``refused``; None when the
        attempts are spent and the refusal should reach the caller."""
        self._overloaded += 1
        if self._overloaded >= MAX_OVERLOADED_ATTEMPTS:
            return None
        return overloaded_wait_s(refused)

    def may_reconnect(self) -> bool:
        """True when the request may be sent again on a fresh connection (and counts it)."""
        if self._reconnects >= RECONNECTS_PER_REQUEST:
            return False
        if not resendable_after_reconnect(self._opcode, self._message):
            return False
        self._reconnects += 1
        return True
