"""Memories: ENCODE, MEMORY_GET and FORGET (spec/02-data-model.md §3)."""

from __future__ import annotations

from brain.wire.messages.common import ByIdRequest, TxnWriteRequest, check_vector
from brain.wire.messages.records import Context, ForgetMode, Memory, MemoryText
from brain.wire.messages.values import Id, Nanos, Sha256, UInt, Vector
from brain.wire.schema import Message, wire_message

__all__ = [
    "Encode",
    "EncodeOk",
    "Forget",
    "ForgetOk",
    "MemoryGet",
    "MemoryGetOk",
]


@wire_message
class Encode(TxnWriteRequest):
    """ENCODE: store a memory.

    Without ``vector`` the server embeds the text. The same text in the same
    space is stored once. ``override_forgotten`` allows text that was
    hard-forgotten before (audited; spec/02-data-model.md §3)."""

    text: MemoryText
    occurred_at: Nanos | None = None
    context: Context | None = None
    vector: Vector | None = None
    override_forgotten: bool | None = None

    cross_checks = (check_vector,)


@wire_message
class EncodeOk(Message):
    """The answer to ENCODE; ``deduplicated`` means the text was already stored as
    ``memory_id``."""

    memory_id: Id
    lsn: UInt
    recorded_at: Nanos
    sha256: Sha256
    deduplicated: bool


@wire_message
class MemoryGet(ByIdRequest):
    """MEMORY_GET: one memory by id."""


@wire_message
class MemoryGetOk(Message):
    """The answer to MEMORY_GET."""

    memory: Memory


@wire_message
class Forget(TxnWriteRequest):
    """FORGET: forget a memory, softly or for good (spec/02-data-model.md §3)."""

    memory: Id
    mode: ForgetMode


@wire_message
class ForgetOk(Message):
    """The answer to FORGET, with how many dependent statements were tombstoned."""

    memory_id: Id
    lsn: UInt
    already_forgotten: bool
    statements_tombstoned: UInt
