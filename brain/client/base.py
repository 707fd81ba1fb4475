"""What the synchronous and the asyncio client share: the handshake's results."""

from __future__ import annotations

from brain.wire.client_session import ClientSession
from brain.wire.messages.control import AuthOk, Welcome

__all__ = ["HandshakeInfo"]


class HandshakeInfo:
    """The server's WELCOME and AUTH_OK, read from the client's protocol session."""

    _session: ClientSession

    @property
    def welcome(self) -> Welcome:
        """The server's WELCOME: its name, session id and limits."""
        assert self._session.welcome is not None, "connect() completes the handshake"
        return self._session.welcome

    @property
    def auth_ok(self) -> AuthOk:
        """The server's AUTH_OK: the key's namespace, id and permissions."""
        assert self._session.auth_ok is not None, "connect() completes the handshake"
        return self._session.auth_ok
