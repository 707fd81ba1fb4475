"""Which wire connections are let in: the limits on open connections and who gives way.

Three limits hold at every moment (spec/01-wire.md §3):

- ``server.max_connections`` connections in all;
- ``server.max_connections_per_peer`` from one peer address;
- :data:`UNAUTHENTICATED_SHARE` of ``max_connections`` that have not
  completed AUTH yet.

A connection that has not authenticated costs its peer nothing but a socket,
so it is the one that gives way: when the whole server or the unauthenticated
share is full, the newcomer is let in and the oldest unauthenticated connection
of the peer holding the most of them is closed with ``OVERLOADED``. A peer
flooding the server with silent sockets thus only displaces its own, and a
client that authenticates is never displaced. Only when every connection
counted by the full limit has authenticated (or a peer reached its own limit)
is the newcomer refused with ``OVERLOADED``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from brain.errors import Overloaded

__all__ = ["OVERLOADED_RETRY_MS", "UNAUTHENTICATED_SHARE", "Admission", "Slot"]

UNAUTHENTICATED_SHARE: Final = 0.5
"""The part of ``server.max_connections`` that connections not yet authenticated
may hold together: the rest stays for clients with a key, whatever the flood."""

OVERLOADED_RETRY_MS: Final = 1000
"""Suggested back-off for a connection refused or closed for lack of a slot."""


class Slot:
    """One admitted connection's place in the count."""

    __slots__ = ("_admission", "_close", "authenticated", "open", "peer")

    def __init__(self, admission: Admission, peer: str, close: Callable[[Overloaded], None]):
        self._admission = admission
        self._close = close
        self.peer = peer
        self.authenticated = False
        self.open = True

    def authenticate(self) -> None:
        """The connection completed AUTH: it no longer gives way to newcomers."""
        self._admission._authenticate(self)

    def release(self) -> None:
        """The connection closed (a slot given up twice counts once)."""
        self._admission._release(self)


class Admission:
    """The open wire connections of one server, counted by peer and by AUTH."""

    def __init__(self, *, max_connections: int, max_per_peer: int) -> None:
        self.max_connections = max_connections
        self.max_per_peer = max_per_peer
        self.max_unauthenticated = max(1, int(max_connections * UNAUTHENTICATED_SHARE))
        self._open = 0
        self._per_peer: dict[str, int] = {}
        # Per peer, its unauthenticated slots, oldest first (dicts keep insertion order).
        self._waiting: dict[str, dict[Slot, None]] = {}
        self._waiting_count = 0
        self.displaced = 0
        """Unauthenticated connections closed so far to let a newer one in."""

    @property
    def open(self) -> int:
        """Connections admitted and not yet released."""
        return self._open

    @property
    def unauthenticated(self) -> int:
        """Admitted connections that have not completed AUTH."""
        return self._waiting_count

    def admit(self, peer: str, close: Callable[[Overloaded], None]) -> Slot:
        """Count a new connection from ``peer``; ``close`` is how to close it should
        it have to give way later. Raises OVERLOADED when it cannot be let in."""
        if self._per_peer.get(peer, 0) >= self.max_per_peer:
            raise Overloaded(
                f"{self.max_per_peer} connections are open from this address, the most "
                "one address may; try again later",
                retry_after_ms=OVERLOADED_RETRY_MS,
            )
        if self._open >= self.max_connections or self._waiting_count >= self.max_unauthenticated:
            victim = self._oldest_waiting()
            if victim is None:
                raise Overloaded(
                    f"{self.max_connections} connections are open; try again later",
                    retry_after_ms=OVERLOADED_RETRY_MS,
                )
            self._release(victim)
            self.displaced += 1
            victim._close(
                Overloaded(
                    "closed to make room for a newer connection: the server is full, and "
                    "connections that have not authenticated are the first to give way",
                    retry_after_ms=OVERLOADED_RETRY_MS,
                )
            )
        slot = Slot(self, peer, close)
        self._open += 1
        self._per_peer[peer] = self._per_peer.get(peer, 0) + 1
        self._waiting.setdefault(peer, {})[slot] = None
        self._waiting_count += 1
        return slot

    def _oldest_waiting(self) -> Slot | None:
        """The oldest unauthenticated slot of the peer holding the most of them."""
        if not self._waiting:
            return None
        peer = max(self._waiting, key=lambda p: len(self._waiting[p]))
        return next(iter(self._waiting[peer]))

    def _unwait(self, slot: Slot) -> None:
        waiting = self._waiting.get(slot.peer)
        if waiting is None or slot not in waiting:
            return
        del waiting[slot]
        self._waiting_count -= 1
        if not waiting:
            del self._waiting[slot.peer]

    def _authenticate(self, slot: Slot) -> None:
        if slot.open and not slot.authenticated:
            slot.authenticated = True
            self._unwait(slot)

    def _release(self, slot: Slot) -> None:
        if not slot.open:
            return
        slot.open = False
        self._unwait(slot)
        self._open -= 1
        left = self._per_peer[slot.peer] - 1
        if left:
            self._per_peer[slot.peer] = left
        else:
            del self._per_peer[slot.peer]
