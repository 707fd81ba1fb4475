"""``min_lsn`` on every read request and on no other (spec/01-wire.md §4): decoded
strictly, round-tripped, refused on writes."""

from __future__ import annotations

import pytest

from brain import cbor
from brain.errors import InvalidArgument
from brain.wire.messages.common import ReadRequest
from brain.wire.messages.memory_ops import Encode, MemoryGet
from brain.wire.opcodes import Opcode, Permission, required_permission
from brain.wire.registry import MESSAGES

STREAMS = {Opcode.SUBSCRIBE, Opcode.UNSUBSCRIBE}
"""Reads that are streams: SUBSCRIBE names its start with ``from_lsn`` instead."""


def test_every_read_and_only_reads_take_min_lsn() -> None:
    for opcode, (request, _) in MESSAGES.items():
        is_read = required_permission(opcode) is Permission.READ and opcode not in STREAMS
        assert issubclass(request, ReadRequest) is is_read, opcode.name


def test_round_trip() -> None:
    message = MemoryGet(id=b"\x01" * 16, min_lsn=2**63)
    decoded = MemoryGet.from_wire(cbor.decode(cbor.encode(message.to_wire())))
    assert decoded == message and decoded.min_lsn == 2**63
    assert "min_lsn" not in MemoryGet(id=b"\x01" * 16).to_wire()


@pytest.mark.parametrize("value", [-1, 2**64, "3", 1.0, True, b"\x01"])
def test_bad_values_refused(value: object) -> None:
    with pytest.raises(InvalidArgument) as refused:
        MemoryGet.from_wire({"id": b"\x01" * 16, "min_lsn": value})
    assert refused.value.field == "min_lsn"


def test_writes_refuse_min_lsn() -> None:
    with pytest.raises(InvalidArgument):
        Encode.from_wire({"text": "x", "request_id": b"\x02" * 16, "min_lsn": 1})
