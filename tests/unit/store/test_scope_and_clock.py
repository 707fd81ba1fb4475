"""Scope id derivations (pinned) and the record clock."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from brain.engine.store.scope import SCOPE_PREFIX_BYTES, Scope, namespace_id, space_id
from brain.engine.write.clock import RecordClock


def test_derivations_are_pinned() -> None:
    # spec/05-durability.md §10; values computed independently with hashlib from the rule's text.
    ns = namespace_id("default")
    assert ns.hex() == "5dca21c563e47231525c8f72e57e5481"
    assert space_id(ns, "default").hex() == "b1772f3df9c4abd17098caf9cc6dd24d"
    acme = namespace_id("acme")
    assert acme.hex() == "73b12e831bfc505ea2d57824cfc4bf9f"
    assert space_id(acme, "default").hex() == "74139fed3e100b69215fcbab7c254a94"
    assert space_id(acme, "work").hex() == "90412238e05d4ab2e8c7db9e0e71edae"
    scope = Scope("acme", "work")
    assert scope.prefix == acme + space_id(acme, "work")
    assert len(scope.prefix) == SCOPE_PREFIX_BYTES
    assert scope.key(b"\x01") == scope.prefix + b"\x01"


def test_default_space() -> None:
    assert Scope.of("ns", None) == Scope("ns", "default")


@given(st.text(min_size=1, max_size=8), st.text(min_size=1, max_size=8), st.text(min_size=1))
def test_same_space_name_in_two_namespaces_never_collides(a: str, b: str, space: str) -> None:
    if a != b:
        assert Scope(a, space).prefix != Scope(b, space).prefix


def test_clock_is_strictly_increasing_when_the_wall_steps_back() -> None:
    walls = iter([100, 100, 50, 200, 10])
    clock = RecordClock(0, wall=lambda: next(walls))
    assert [clock.tick() for _ in range(5)] == [100, 101, 102, 200, 201]


def test_clock_resumes_above_its_seed() -> None:
    clock = RecordClock(1_000, wall=lambda: 5)
    assert clock.tick() == 1_001
    clock.observe(5_000)
    assert clock.tick() == 5_001
    assert clock.now() == 5_001
