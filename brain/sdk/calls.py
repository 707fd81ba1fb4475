"""The escape hatch's table: which opcode a request class travels with.

:data:`CALLABLE` is the reverse of :data:`brain.wire.registry.MESSAGES` for the
data requests; ``call(request)`` looks the opcode up by the request's exact class
(EXPLAIN's request extends RECALL's, and must not be sent as a RECALL).
"""

from __future__ import annotations

import dataclasses
from typing import Final

from brain.wire.opcodes import CONTROL_OPCODES, Opcode
from brain.wire.registry import MESSAGES
from brain.wire.schema import Message

__all__ = ["CALLABLE", "NOT_CALLABLE", "opcode_of", "with_space"]

NOT_CALLABLE: Final[dict[Opcode, str]] = {
    **dict.fromkeys(CONTROL_OPCODES, "connection control, done by the transport itself"),
    Opcode.SUBSCRIBE: "answers with a stream: use brain.client.Client.stream",
    Opcode.UNSUBSCRIBE: "ends a stream SUBSCRIBE opened: use brain.client.Client.stream",
}
"""Opcodes ``call`` does not send, with the reason."""

CALLABLE: Final[dict[type[Message], Opcode]] = {
    request: opcode for opcode, (request, _) in MESSAGES.items() if opcode not in NOT_CALLABLE
}
"""Each data request class and its opcode."""


def opcode_of(request: Message) -> Opcode:
    """The opcode ``request`` is sent as; TypeError for a class ``call`` does not send."""
    opcode = CALLABLE.get(type(request))
    if opcode is None:
        raise TypeError(f"call() sends data requests, not {type(request).__name__}")
    return opcode


def with_space(request: Message, space: str) -> Message:
    """``request`` with ``space`` filled in when it names none."""
    if getattr(request, "space", "unset") is None:
        return dataclasses.replace(request, space=space)  # type: ignore[type-var]
    return request
