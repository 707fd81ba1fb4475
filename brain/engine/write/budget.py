"""Cost estimates and budgets: the planner refuses work too large to do safely.

A write's cost is estimated from its request alone, before anything is read:
a fixed part for the rows and index entries any write touches, plus one unit
per KiB of text and bytes it carries (what it will put into the WAL, LMDB and,
later, the indexes). A single write over :data:`WRITE_BUDGET`, or a
transaction whose writes add up to more than :data:`TXN_BUDGET`, answers
``OVER_BUDGET`` before it reaches the writer, so no request can make the one
writer hold a huge LMDB transaction or buffer unbounded data in memory.
"""

from __future__ import annotations

from typing import Final

from brain.errors import InvalidArgument, OverBudget
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message

__all__ = ["TXN_BUDGET", "WRITE_BUDGET", "check_write", "estimate_write"]

BASE_WRITE_COST: Final = 4
"""A record row, its index entries, the idempotency rows: a handful of puts."""

BYTES_PER_UNIT: Final = 1024
"""One cost unit per KiB of payload data."""

WRITE_BUDGET: Final = 4096
"""About 4 MiB of data in one write: far above any single record the protocol
allows today (text is at most 1 MiB), a bound for the operations to come."""

TXN_BUDGET: Final = 65_536
"""About 64 MiB buffered by one transaction, held in memory until its commit."""


def _payload_bytes(value: object, field: str) -> int:
    """The bytes ``value`` (found at ``field``) will take; INVALID_ARGUMENT for a
    string that is not Unicode text (a lone surrogate, which only a request built in
    this process can hold: the wire admits valid UTF-8 alone). Refused here, in the
    caller's thread, it can never reach the writer and fail a batch other writes
    share."""
    if isinstance(value, str):
        try:
            return len(value.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise InvalidArgument(
                f"{field} is not valid Unicode text (a lone surrogate at {exc.start})",
                field=field,
            ) from None
    if isinstance(value, bytes):
        return len(value)
    if isinstance(value, dict):
        return sum(
            _payload_bytes(k, field) + _payload_bytes(v, f"{field}.{k}" if field else str(k))
            for k, v in value.items()
        )
    if isinstance(value, list | tuple):
        return sum(_payload_bytes(v, field) for v in value)
    return 8


def estimate_write(opcode: Opcode, request: Message) -> int:
    """The cost units of one write; INVALID_ARGUMENT for text that is not Unicode."""
    return BASE_WRITE_COST + _payload_bytes(request.to_wire(), "") // BYTES_PER_UNIT


def check_write(opcode: Opcode, request: Message, *, already: int = 0, budget: int) -> int:
    """Return the write's cost; OVER_BUDGET when ``already + cost`` exceeds ``budget``."""
    cost = estimate_write(opcode, request)
    if already + cost > budget:
        raise OverBudget(
            f"{opcode.name} is estimated at {already + cost} cost units, over the budget of "
            f"{budget}" + (" for one transaction" if already else "")
        )
    return cost
