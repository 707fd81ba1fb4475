"""Helpers for tests that write records: the namespace they use and fresh request ids."""

from __future__ import annotations

import itertools
from typing import Final

NS: Final = "default"
"""The namespace the engine tests write in."""

_next = itertools.count(1)


def rid() -> bytes:
    """A request (or record) id no other call in this process returns."""
    return next(_next).to_bytes(16, "big")
