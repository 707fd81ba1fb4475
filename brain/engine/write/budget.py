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

from brain.errors import OverBudget
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


def _payload_bytes(value: object) -> int:
    if isinstance(value, str):
        return len(value.encode("utf-8"))
    if isinstance(value, bytes):
        return len(value)
    if isinstance(value, dict):
        return sum(_payload_bytes(k) + _payload_bytes(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return sum(_payload_bytes(v) for v in value)
    return 8


def estimate_write(opcode: Opcode, request: Message) -> int:
    """The cost units of one write."""
    return BASE_WRITE_COST + _payload_bytes(request.to_wire()) // BYTES_PER_UNIT


def check_write(opcode: Opcode, request: Message, *, already: int = 0, budget: int) -> int:
    """Return the write's cost; OVER_BUDGET when ``already + cost`` exceeds ``budget``."""
    cost = estimate_write(opcode, request)
    if already + cost > budget:
        raise OverBudget(
            f"{opcode.name} is estimated at {already + cost} cost units, over the budget of "
            f"{budget}" + (" for one transaction" if already else "")
        )
    return cost
