"""The facade: ``Brain`` (blocking) and ``AsyncBrain`` (asyncio) over a server or an
embedded database.

``from brain import Brain, AsyncBrain`` are the same classes. The modules are named for what
they hold: :mod:`~brain.sdk.times` (what time arguments take, :class:`Instant`),
:mod:`~brain.sdk.results` (what methods return), :mod:`~brain.sdk.transport`
(the seam between the facade and a database), :mod:`~brain.sdk.retry` (when a
request is sent again), :mod:`~brain.sdk.requests` (arguments to wire requests),
:mod:`~brain.sdk.operations` (each operation's request and result, shared by
both facades), :mod:`~brain.sdk.calls` (the escape hatch's opcode table),
:mod:`~brain.sdk.sync`, :mod:`~brain.sdk.aio`.
"""

from __future__ import annotations

from brain.sdk.aio import (
    AsyncBrain,
    AsyncEmbeddedTransport,
    AsyncTransaction,
    AsyncTransport,
    AsyncWireTransport,
)
from brain.sdk.results import RecordId
from brain.sdk.sync import Brain, Transaction
from brain.sdk.times import Instant, TimeLike, to_nanos
from brain.sdk.transport import EmbeddedTransport, Transport, WireTransport

__all__ = [
    "AsyncBrain",
    "AsyncEmbeddedTransport",
    "AsyncTransaction",
    "AsyncTransport",
    "AsyncWireTransport",
    "Brain",
    "EmbeddedTransport",
    "Instant",
    "RecordId",
    "TimeLike",
    "Transaction",
    "Transport",
    "WireTransport",
    "to_nanos",
]
