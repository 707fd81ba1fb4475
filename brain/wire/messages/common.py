"""Bases and rules shared by the data requests (spec/01-wire.md §4).

Every data request may name a ``space``; every write carries the idempotency key
``request_id``; every read may name the LSN it must see, ``min_lsn``
(read-your-writes on a follower, spec/05-durability.md §14.4); every write may
join a transaction and carries ``txn_id``, and so do the reads that may run
inside one (by id, the lists and the traversal; spec/05-durability.md §8). The
bases below add those fields in that order, so a request class states only its
own.

Slotted messages cannot inherit from two classes with fields, so a request that
reuses a draft (STATEMENT_CREATE reuses the fields of STATEMENT_SUPERSEDE's
``new``) inherits the draft and declares the common fields itself.

The ``check_*`` functions are cross checks (``Message.cross_checks``) shared by
several families.
"""

from __future__ import annotations

import math
import struct
from typing import Annotated, Final, Protocol

from brain.errors import InvalidArgument
from brain.wire.messages.values import Id, Nanos, Space, UInt
from brain.wire.schema import Len, Message, wire_message

__all__ = [
    "MAX_REASON_CHARS",
    "MIN_LSN_WAIT_S",
    "ByIdRequest",
    "HasValidity",
    "HasVector",
    "ReadRequest",
    "Reason",
    "ScopedRequest",
    "Tombstoned",
    "TxnReadRequest",
    "TxnWriteRequest",
    "WriteRequest",
    "check_validity",
    "check_vector",
]

MAX_REASON_CHARS: Final = 4096
"""Longest tombstone reason: a note for the audit log, not a document."""

MIN_LSN_WAIT_S: Final = 5.0
"""How long a read waits for the node to apply its ``min_lsn`` (spec/01-wire.md §4).
A healthy follower lags by its poll (0.1 s) plus the time to read and apply a
batch; after a failed round it tries again a second later, and a stream leader
election takes a few seconds. Five seconds covers one retry and one election, and
is short enough that a client whose follower is not catching up hears so and
reads on the planner instead. One bound for every request: a client that would
wait less stops waiting on its side."""

Reason = Annotated[str, Len(1, MAX_REASON_CHARS)]
"""A free-text note kept in the audit log."""

_FLOAT32: Final = 4


@wire_message
class ScopedRequest(Message):
    """A data request: ``space`` picks the space in the key's namespace (default
    ``"default"``, applied by the server)."""

    space: Space | None = None


@wire_message
class WriteRequest(ScopedRequest):
    """A write: ``request_id`` is its idempotency key (spec/01-wire.md §4)."""

    request_id: Id


@wire_message
class TxnWriteRequest(WriteRequest):
    """A write that may be buffered in the transaction ``txn_id``."""

    txn_id: Id | None = None


@wire_message
class ReadRequest(ScopedRequest):
    """A read: with ``min_lsn`` the node answers only once it has applied the log up
    to that LSN (a write's answer carries its ``lsn``), so a client reading on a
    follower sees its own writes (spec/01-wire.md §4, spec/05-durability.md §14.4)."""

    min_lsn: UInt | None = None


@wire_message
class TxnReadRequest(ReadRequest):
    """A read that may run inside the transaction ``txn_id``: it then sees the state
    as the transaction's buffered writes would leave it (spec/05-durability.md §8)."""

    txn_id: Id | None = None


@wire_message
class ByIdRequest(ReadRequest):
    """A read of one record by ``id``.

    ``txn_id`` (an addition to spec/01-wire.md §9, which says reads inside a transaction
    see its own writes but gives reads no way to name one) reads the state as
    the transaction's buffered writes would leave it.
    """

    id: Id
    txn_id: Id | None = None


@wire_message
class Tombstoned(Message):
    """The answer to a tombstone or retraction: the record, the write's LSN and its
    record time, which is also the record's ``tombstoned_at``."""

    id: Id
    lsn: UInt
    tombstoned_at: Nanos


class HasVector(Protocol):
    """A message with an optional ``vector`` field."""

    @property
    def vector(self) -> bytes | None:
        """The embedding, little-endian float32."""
        ...


class HasValidity(Protocol):
    """A message with an optional validity interval."""

    @property
    def valid_from(self) -> int | None:
        """Start of validity, inclusive."""
        ...

    @property
    def valid_to(self) -> int | None:
        """End of validity, exclusive."""
        ...


def check_vector(message: HasVector) -> None:
    """``vector`` holds whole, finite float32 values (spec/01-wire.md §2)."""
    vector = message.vector
    if vector is None:
        return
    if len(vector) % _FLOAT32:
        raise InvalidArgument(
            f"vector must hold whole float32 values (a multiple of 4 bytes), "
            f"got {len(vector)} bytes",
            field="vector",
        )
    values = struct.unpack(f"<{len(vector) // _FLOAT32}f", vector)
    if not all(math.isfinite(v) for v in values):
        raise InvalidArgument("vector must hold only finite values", field="vector")


def check_validity(message: HasValidity) -> None:
    """``valid_from ≤ valid_to`` when both are given (spec/01-wire.md §9)."""
    start, end = message.valid_from, message.valid_to
    if start is not None and end is not None and start > end:
        raise InvalidArgument("valid_to must not be before valid_from", field="valid_to")
