"""Request ids for the tests: numbered ones, the same bytes in every run, and fresh ones.

A test that replays a write, or writes the same requests into two scopes, numbers
its ids (:func:`request_id`, :func:`request_ids`); any other takes a fresh one
(:func:`fresh_request_id`). Fresh ids are numbered too, from :data:`FRESH_START`
up, so they are as reproducible as the order of the calls, and never equal an id
a test numbered itself.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Final

REQUEST_ID_BYTES: Final = 16
"""The length of a ``request_id`` on the wire (spec/01-wire.md)."""

FRESH_START: Final = 1 << 127
"""The first fresh id's number, its top bit set: every number a test gives its own
ids is far smaller, so a fresh id never repeats a numbered one."""

_fresh: Final = itertools.count(FRESH_START)


def request_id(number: int) -> bytes:
    """Request id ``number``: the same 16 bytes in every run, scope and process."""
    return number.to_bytes(REQUEST_ID_BYTES, "big")


def request_ids(start: int = 1) -> Iterator[bytes]:
    """Request ids ``start``, ``start + 1``, and so on: a sequence that starts over
    exactly, for a test that writes the same requests more than once."""
    return map(request_id, itertools.count(start))


def fresh_request_id() -> bytes:
    """A request (or record) id no other call in this process returns."""
    return request_id(next(_fresh))
