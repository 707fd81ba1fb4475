"""The opcode table of spec/01-wire.md §6: numbers, names and the permission each needs.

``protocol/protocol.json`` holds the same table in machine-readable form for
other languages; a test fails when the two differ.
"""

from __future__ import annotations

import enum
from typing import Final

__all__ = [
    "CONTROL_OPCODES",
    "ERROR_OPCODE",
    "PERMISSIONS",
    "RESPONSE_BIT",
    "Opcode",
    "Permission",
    "is_response",
    "required_permission",
    "response_opcode",
]

RESPONSE_BIT: Final = 0x0080
"""A response's opcode is its request's with this bit set (spec/01-wire.md §1)."""

ERROR_OPCODE: Final = 0x00FF


class Permission(enum.StrEnum):
    """What an API key may do (spec/01-wire.md §4)."""

    READ = "read"
    WRITE = "write"
    ADMIN = "admin"


PERMISSIONS: Final = tuple(p.value for p in Permission)


class Opcode(enum.IntEnum):
    """Request opcodes. Each response is ``opcode | RESPONSE_BIT``."""

    HELLO = 0x0001
    AUTH = 0x0002
    PING = 0x0010
    BYE = 0x001F
    ENCODE = 0x0020
    RECALL = 0x0021
    FORGET = 0x0024
    MEMORY_GET = 0x0027
    SUBSCRIBE = 0x0030
    UNSUBSCRIBE = 0x0031
    TXN_BEGIN = 0x0040
    TXN_COMMIT = 0x0041
    TXN_ABORT = 0x0042
    CANCEL_STREAM = 0x0050
    SCHEMA_PUT = 0x0120
    SCHEMA_GET = 0x0121
    ENTITY_CREATE = 0x0130
    ENTITY_GET = 0x0131
    ENTITY_UPDATE = 0x0132
    ENTITY_MERGE = 0x0134
    ENTITY_UNMERGE = 0x0135
    ENTITY_RESOLVE = 0x0136
    ENTITY_LIST = 0x0137
    ENTITY_TOMBSTONE = 0x0138
    ENTITY_HISTORY = 0x0139
    STATEMENT_CREATE = 0x0140
    STATEMENT_GET = 0x0141
    STATEMENT_SUPERSEDE = 0x0142
    STATEMENT_TOMBSTONE = 0x0143
    STATEMENT_RETRACT = 0x0144
    STATEMENT_HISTORY = 0x0145
    STATEMENT_LIST = 0x0146
    RELATION_CREATE = 0x0150
    RELATION_GET = 0x0151
    RELATION_SUPERSEDE = 0x0152
    RELATION_TOMBSTONE = 0x0153
    RELATION_LIST = 0x0154
    RELATION_TRAVERSE = 0x0156
    EXPLAIN = 0x0161
    REVIEW_LIST = 0x0170
    REVIEW_DECIDE = 0x0171


CONTROL_OPCODES: Final = frozenset(
    {Opcode.HELLO, Opcode.AUTH, Opcode.PING, Opcode.BYE, Opcode.CANCEL_STREAM}
)
"""Opcodes that manage the connection; they may travel on stream 0."""

_R, _W, _A = Permission.READ, Permission.WRITE, Permission.ADMIN

_PERMISSION: Final[dict[Opcode, Permission | None]] = {
    Opcode.HELLO: None,
    Opcode.AUTH: None,
    Opcode.PING: None,
    Opcode.BYE: None,
    Opcode.ENCODE: _W,
    Opcode.RECALL: _R,
    Opcode.FORGET: _W,
    Opcode.MEMORY_GET: _R,
    Opcode.SUBSCRIBE: _R,
    Opcode.UNSUBSCRIBE: _R,
    Opcode.TXN_BEGIN: _W,
    Opcode.TXN_COMMIT: _W,
    Opcode.TXN_ABORT: _W,
    Opcode.CANCEL_STREAM: None,
    Opcode.SCHEMA_PUT: _A,
    Opcode.SCHEMA_GET: _R,
    Opcode.ENTITY_CREATE: _W,
    Opcode.ENTITY_GET: _R,
    Opcode.ENTITY_UPDATE: _W,
    Opcode.ENTITY_MERGE: _W,
    Opcode.ENTITY_UNMERGE: _W,
    Opcode.ENTITY_RESOLVE: _R,
    Opcode.ENTITY_LIST: _R,
    Opcode.ENTITY_TOMBSTONE: _W,
    Opcode.ENTITY_HISTORY: _R,
    Opcode.STATEMENT_CREATE: _W,
    Opcode.STATEMENT_GET: _R,
    Opcode.STATEMENT_SUPERSEDE: _W,
    Opcode.STATEMENT_TOMBSTONE: _W,
    Opcode.STATEMENT_RETRACT: _W,
    Opcode.STATEMENT_HISTORY: _R,
    Opcode.STATEMENT_LIST: _R,
    Opcode.RELATION_CREATE: _W,
    Opcode.RELATION_GET: _R,
    Opcode.RELATION_SUPERSEDE: _W,
    Opcode.RELATION_TOMBSTONE: _W,
    Opcode.RELATION_LIST: _R,
    Opcode.RELATION_TRAVERSE: _R,
    Opcode.EXPLAIN: _R,
    Opcode.REVIEW_LIST: _R,
    Opcode.REVIEW_DECIDE: _W,
}


def required_permission(opcode: Opcode) -> Permission | None:
    """The permission a key needs for ``opcode``; None for connection control."""
    return _PERMISSION[opcode]


def response_opcode(opcode: int) -> int:
    """The opcode of the response to ``opcode``."""
    return opcode | RESPONSE_BIT


def is_response(opcode: int) -> bool:
    """True for response opcodes (and ERROR), which a client may never send."""
    return bool(opcode & RESPONSE_BIT)
