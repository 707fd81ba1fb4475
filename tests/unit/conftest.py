"""Fixtures shared by the engine's unit tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import brain
from brain.engine import database as database_module
from brain.engine.database import Database
from brain.wire.schema import check_built_answers


@pytest.fixture(autouse=True)
def hashing_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unit tests embed with the hashing embedder, named explicitly here: fast and
    deterministic. Tests of retrieval quality ask for the model themselves."""
    monkeypatch.setattr(database_module, "DEFAULT_EMBEDDER", "hashing")


@pytest.fixture(autouse=True)
def checked_answers() -> Iterator[None]:
    """Answers the engine builds are validated as fully as requests here (the server
    trusts them), so a builder that makes an invalid one fails its tests."""
    previous = check_built_answers(True)
    try:
        yield
    finally:
        check_built_answers(previous)


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    """A fresh embedded database, closed after the test."""
    database = brain.open(tmp_path / "d")
    try:
        yield database
    finally:
        database.close()
