"""The machine-readable contract in protocol/protocol.json matches the code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from brain.errors import ConnectionFault, registered_errors
from brain.wire.frame import DEFAULT_MAX_FRAME, FLAG_EOS, HEADER_SIZE, MAGIC
from brain.wire.opcodes import (
    CONTROL_OPCODES,
    ERROR_OPCODE,
    RESPONSE_BIT,
    Opcode,
    required_permission,
)
from brain.wire.registry import MESSAGES

TABLE: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parents[3] / "protocol" / "protocol.json").read_text()
)


def test_frame_constants() -> None:
    frame = TABLE["frame"]
    assert frame["header_size"] == HEADER_SIZE
    assert frame["magic"].encode() == MAGIC
    assert frame["flag_eos"] == FLAG_EOS
    assert frame["response_bit"] == RESPONSE_BIT
    assert frame["error_opcode"] == ERROR_OPCODE
    assert frame["max_frame_default"] == DEFAULT_MAX_FRAME


def test_opcode_table() -> None:
    table = {row["name"]: row for row in TABLE["opcodes"]}
    assert set(table) == {op.name for op in Opcode}
    for op in Opcode:
        row = table[op.name]
        assert int(row["code"], 16) == op.value
        permission = required_permission(op)
        assert row["permission"] == (permission.value if permission else None)
        assert row["control"] == (op in CONTROL_OPCODES)
        assert op in MESSAGES


def test_error_table() -> None:
    codes = registered_errors()
    table = {int(row["code"], 16): row for row in TABLE["errors"]}
    assert set(table) == set(codes)
    for code, cls in codes.items():
        row = table[code]
        assert row["name"] == cls.name
        assert row["retryable"] == cls.retryable
        assert row["closes_connection"] == issubclass(cls, ConnectionFault)


def test_no_response_opcode_collides_with_a_request() -> None:
    for op in Opcode:
        assert not op.value & RESPONSE_BIT
        assert (op.value | RESPONSE_BIT) not in {o.value for o in Opcode}
