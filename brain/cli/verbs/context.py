"""What a running verb holds: its arguments, its printer and, once needed, a connection.

The connection opens on the first request, so a verb whose arguments fail to
build a valid message never touches the network, and an ``InvalidArgument``
raised before anything was sent is the command line's fault (exit 2), not the
server's (exit 1).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypeVar

from brain.cli.verbs.connect import Target, connect, resolve_target
from brain.cli.verbs.output import Printer
from brain.errors import ConnectionClosed
from brain.wire.messages.common import WriteRequest
from brain.wire.messages.entity_ops import EntityGet, EntityGetOk
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message

if TYPE_CHECKING:
    from brain.client.sync import Client

__all__ = [
    "MAX_NAME_LOOKUPS",
    "Request",
    "Verb",
    "VerbContext",
    "WriteBuilder",
]

MAX_NAME_LOOKUPS: Final = 1000
"""Most entities a table looks up to show names instead of ids: one screenful's worth
many times over, and one pipelined round trip; beyond it the table shows ids."""

REQUEST_ID_BYTES: Final = 16
"""An idempotency key's length (spec/01-wire.md §4)."""

M = TypeVar("M", bound=Message)


@dataclass(frozen=True, slots=True)
class Request:
    """One request a write verb makes, and the class its answer must have."""

    opcode: Opcode
    message: Message
    answer: type[Message]


class VerbContext:
    """A verb's arguments, printer and lazily opened connection."""

    def __init__(
        self,
        args: argparse.Namespace,
        printer: Printer,
        *,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        """Nothing connects until the first :meth:`call`."""
        self.args = args
        self.printer = printer
        self._environ = environ
        self._client: Client | None = None
        self.target: Target | None = None
        self.sent = False
        """True once a request left (or was about to leave) for the server."""
        self.last_request_id: bytes | None = None
        """The ``request_id`` of the last write sent, named if its answer never comes."""

    @property
    def space(self) -> str | None:
        """The ``--space`` (env ``BRAIN_SPACE``); None lets the server use ``default``."""
        space = getattr(self.args, "space", None)
        return space if isinstance(space, str) else None

    def request_id(self) -> bytes:
        """The write's idempotency key: ``--request-id``, else 16 fresh random bytes."""
        given = getattr(self.args, "request_id", None)
        if isinstance(given, bytes):
            return given
        return os.urandom(REQUEST_ID_BYTES)

    def client(self) -> Client:
        """The connection, opened (and the handshake done) on first use."""
        if self._client is None:
            self.target = resolve_target(self.args, self._environ)
            self._client = connect(self.target, timeout=self.args.timeout)
        return self._client

    def call(self, opcode: Opcode, message: Message, answer: type[M]) -> M:
        """Send one request; return its answer, which must be an ``answer``."""
        client = self.client()
        self.sent = True
        if isinstance(message, WriteRequest) or hasattr(message, "request_id"):
            self.last_request_id = getattr(message, "request_id", None)
        reply = client.call(opcode, message)
        if not isinstance(reply, answer):
            raise ConnectionClosed(
                f"{opcode.name} was answered with {type(reply).__name__}, not {answer.__name__}"
            )
        return reply

    def send(self, request: Request) -> Message:
        """Send a :class:`Request`; return its answer."""
        return self.call(request.opcode, request.message, request.answer)

    def entity_names(self, ids: Iterable[bytes]) -> dict[bytes, str]:
        """The names of the entities ``ids`` (at most :data:`MAX_NAME_LOOKUPS`), looked up
        in one pipelined round trip; an id the lookup cannot name is left out."""
        wanted = list(dict.fromkeys(ids))[:MAX_NAME_LOOKUPS]
        if not wanted:
            return {}
        requests: Sequence[tuple[Opcode, Message]] = [
            (Opcode.ENTITY_GET, EntityGet(space=self.space, id=ident)) for ident in wanted
        ]
        names: dict[bytes, str] = {}
        for ident, reply in zip(wanted, self.client().pipeline(requests), strict=True):
            # An id the lookup cannot name is shown as an id: names are a courtesy.
            if isinstance(reply, EntityGetOk):
                names[ident] = reply.entity.name
        return names

    def close(self) -> None:
        """Say goodbye to the server, if a connection was opened."""
        if self._client is not None:
            self._client.close()
            self._client = None


Verb = Callable[[VerbContext], int]
"""A verb: runs with its context, prints, returns the exit code."""

WriteBuilder = Callable[[VerbContext], Request]
"""Builds the request of a write verb from its arguments (also used by ``brain txn``)."""
