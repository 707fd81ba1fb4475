"""What the unit tests that write records share: their namespace, and fresh request ids."""

from __future__ import annotations

from typing import Final

from tests.request_ids import fresh_request_id as rid

__all__ = ["NS", "rid"]

NS: Final = "default"
"""The namespace the engine tests write in."""
