"""Which connections are let in (brain/server/admission.py): the per-peer limit, the
unauthenticated share, and who gives way when the server is full."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from brain.errors import Overloaded
from brain.server.admission import UNAUTHENTICATED_SHARE, Admission, Slot


class Closed:
    """Records which connections were told to give way, in order."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def closer(self, name: str) -> Callable[[Overloaded], None]:
        def close(error: Overloaded) -> None:
            assert error.retry_after_ms is not None and error.retry_after_ms > 0
            self.names.append(name)

        return close


def _admit(admission: Admission, closed: Closed, peer: str, name: str) -> Slot:
    return admission.admit(peer, closed.closer(name))


def test_one_peer_is_refused_past_its_limit_and_others_are_not() -> None:
    admission, closed = Admission(max_connections=100, max_per_peer=3), Closed()
    held = [_admit(admission, closed, "10.0.0.1", f"a{i}") for i in range(3)]
    with pytest.raises(Overloaded, match="from this address"):
        _admit(admission, closed, "10.0.0.1", "a3")
    _admit(admission, closed, "10.0.0.2", "b0")
    held[0].release()
    held[0].release()  # counted once
    _admit(admission, closed, "10.0.0.1", "a4")
    assert closed.names == [] and admission.open == 4


def test_unauthenticated_connections_take_a_share_and_the_oldest_gives_way() -> None:
    admission, closed = Admission(max_connections=10, max_per_peer=100), Closed()
    share = int(10 * UNAUTHENTICATED_SHARE)
    for i in range(share + 3):
        _admit(admission, closed, "10.0.0.1", f"s{i}")
    # The share stays full of the newest; the three oldest were closed, oldest first.
    assert closed.names == ["s0", "s1", "s2"]
    assert admission.unauthenticated == share and admission.open == share
    assert admission.displaced == 3


def test_a_full_server_displaces_the_busiest_peers_oldest_never_an_authenticated_one() -> None:
    admission, closed = Admission(max_connections=6, max_per_peer=100), Closed()
    keyed = [_admit(admission, closed, "10.0.0.9", f"k{i}") for i in range(3)]
    for slot in keyed:
        slot.authenticate()
    lone = _admit(admission, closed, "10.0.0.2", "lone")
    _admit(admission, closed, "10.0.0.1", "f0")
    _admit(admission, closed, "10.0.0.1", "f1")
    assert admission.open == 6
    # Full: the flooding peer (two waiting) gives way before the lone one.
    new = _admit(admission, closed, "10.0.0.3", "new")
    assert closed.names == ["f0"]
    lone.authenticate()
    newer = _admit(admission, closed, "10.0.0.4", "newer")
    assert closed.names == ["f0", "f1"]
    # Once every connection has authenticated, nobody gives way: the newcomer is refused.
    new.authenticate()
    newer.authenticate()
    assert admission.unauthenticated == 0 and admission.open == 6
    with pytest.raises(Overloaded, match="6 connections are open"):
        _admit(admission, closed, "10.0.0.5", "refused")
    assert closed.names == ["f0", "f1"]


def test_an_authenticated_slot_released_frees_its_place() -> None:
    admission, closed = Admission(max_connections=2, max_per_peer=2), Closed()
    first = _admit(admission, closed, "10.0.0.1", "a")
    first.authenticate()
    second = _admit(admission, closed, "10.0.0.1", "b")
    second.authenticate()
    with pytest.raises(Overloaded):
        _admit(admission, closed, "10.0.0.2", "c")
    first.release()
    _admit(admission, closed, "10.0.0.2", "c")
    assert closed.names == [] and admission.open == 2
