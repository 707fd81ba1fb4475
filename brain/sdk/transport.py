"""The one seam under the facade: a transport sends a request and returns its answer.

:class:`WireTransport` speaks to a server over one connection
(:class:`brain.client.Client`) and can make a fresh one when the old one is lost;
:class:`EmbeddedTransport` runs the request in a :class:`~brain.engine.database.Database`
of this process. :class:`~brain.sdk.sync.Brain` is the same class over either. The
asyncio twins are in :mod:`brain.sdk.aio`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Protocol

from brain.client import Client
from brain.client.sync import DEFAULT_PORT, DEFAULT_TIMEOUT_S
from brain.errors import ConnectionClosed, InvalidArgument
from brain.wire.messages.common import MIN_LSN_WAIT_S, ReadRequest
from brain.wire.messages.control import Ping, Pong
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message

if TYPE_CHECKING:
    from brain.engine.database import Database

__all__ = ["EmbeddedTransport", "Transport", "WireTransport", "embedded_request"]


def embedded_request(
    database: Database, namespace: str, opcode: Opcode, message: Message
) -> Message:
    """Run one request in ``database``; PING, which a server answers itself, is
    answered here with this process's clock, as the server answers it with its own."""
    if opcode is Opcode.PING and isinstance(message, Ping):
        return Pong(nonce=message.nonce, server_time=time.time_ns())
    if isinstance(message, ReadRequest) and message.min_lsn is not None:
        _reach(database, message.min_lsn)
    return database.execute(namespace, opcode, message)


def _reach(database: Database, lsn: int) -> None:
    """A read's ``min_lsn`` in this process, by the server's rule (spec/01-wire.md
    §4): at once when applied; refused at once by a database that plans its log
    alone (no planner lease: every LSN it holds is applied); otherwise waited for
    up to ``MIN_LSN_WAIT_S``."""
    applied = database.applied_lsn
    if lsn <= applied:
        return
    if database.lease is None:
        raise InvalidArgument(
            f"min_lsn {lsn} is beyond LSN {applied}, the last the log holds; this "
            "database plans its writes, so no write has that LSN yet",
            field="min_lsn",
        )
    database.wait_applied(lsn, MIN_LSN_WAIT_S)


class Transport(Protocol):
    """What :class:`~brain.sdk.sync.Brain` needs of a way to reach a database."""

    def request(self, opcode: Opcode, message: Message) -> Message:
        """Run one request and return its answer, or raise the BrainError it ended in."""
        ...

    def reconnect(self) -> bool:
        """Replace a lost connection by a fresh one; False when there is none to replace
        (an embedded database), so a lost connection is not retried."""
        ...

    def close(self) -> None:
        """Release what the transport holds; closing twice is harmless."""
        ...


class WireTransport:
    """One connection to a Brain server, made again on :meth:`reconnect`."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        *,
        api_key: str,
        timeout: float | None = DEFAULT_TIMEOUT_S,
    ) -> None:
        """Connect and authenticate; raises the server's error, or ConnectionClosed."""
        self._host, self._port, self._api_key, self._timeout = host, port, api_key, timeout
        self._client: Client | None = self._connect()

    def _connect(self) -> Client:
        return Client.connect(self._host, self._port, api_key=self._api_key, timeout=self._timeout)

    @property
    def client(self) -> Client:
        """The current connection (a new one after a reconnect)."""
        if self._client is None:
            raise ConnectionClosed("the connection is closed")
        return self._client

    def request(self, opcode: Opcode, message: Message) -> Message:
        """Send ``message`` as ``opcode`` and wait for its answer."""
        return self.client.call(opcode, message)

    def reconnect(self) -> bool:
        """Drop the broken connection and open a new one with the same key."""
        if self._client is None:
            return False  # closed by its owner: nothing to reconnect
        self._client.close()
        self._client = None
        self._client = self._connect()
        return True

    def close(self) -> None:
        """Say BYE and close the connection."""
        if self._client is not None:
            self._client.close()
            self._client = None


class EmbeddedTransport:
    """A database in this process, used as ``namespace``."""

    def __init__(
        self, database: Database, *, namespace: str = "default", owns: bool = False
    ) -> None:
        """Serve requests from ``database``; ``owns`` closes it with the transport."""
        self.database = database
        self.namespace = namespace
        self._owns = owns

    def request(self, opcode: Opcode, message: Message) -> Message:
        """Run the request in the database, on the caller's thread."""
        return embedded_request(self.database, self.namespace, opcode, message)

    def reconnect(self) -> bool:
        """An embedded database has no connection to lose."""
        return False

    def close(self) -> None:
        """Close the database when this transport opened it."""
        if self._owns:
            self.database.close()
