"""Fixtures shared by the engine's unit tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import brain
from brain.engine.database import Database


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    """A fresh embedded database, closed after the test."""
    database = brain.open(tmp_path / "d")
    try:
        yield database
    finally:
        database.close()
