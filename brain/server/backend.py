"""What the server serves: the boundary between the wire shell and the database.

The shell hands every decoded, authorised data request to a :class:`Backend`
and sends back whatever message it returns or error it raises. The database
engine implements this interface; until it is part of the build,
:class:`UnbuiltBackend` answers every data request with ``UNAVAILABLE``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from brain.errors import Unavailable
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message
from brain.wire.session import Principal

__all__ = ["Backend", "BackendStatus", "UnbuiltBackend"]


@dataclass(frozen=True, slots=True)
class BackendStatus:
    """Readiness as ``/readyz`` reports it."""

    ready: bool
    applied_lsn: int
    reason: str | None = None


class Backend(Protocol):
    """The operations the server exposes over the wire."""

    async def execute(self, principal: Principal, opcode: Opcode, request: Message) -> Message:
        """Run one data request for ``principal``; raise a BrainError to refuse it."""
        ...

    def status(self) -> BackendStatus:
        """Whether the backend can take writes now, and how far it has applied."""
        ...

    async def close(self) -> None:
        """Finish in-flight work and release resources."""
        ...


class UnbuiltBackend:
    """The backend of a build without a database engine: every data request is refused."""

    async def execute(self, principal: Principal, opcode: Opcode, request: Message) -> Message:
        """Refuse with UNAVAILABLE; the request was already fully validated."""
        raise Unavailable(f"{opcode.name} is not available in this build")

    def status(self) -> BackendStatus:
        """Always ready: there is no recovery to wait for."""
        return BackendStatus(ready=True, applied_lsn=0)

    async def close(self) -> None:
        """Nothing to release."""
