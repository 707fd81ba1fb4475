"""Settings for the whole suite, whichever process runs it."""

from __future__ import annotations

import os

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Forget the terminal's size: the CLI sizes its tables by ``COLUMNS`` when it is set,
    and a test runner's worker processes set it, so the tables the tests read (and those
    of the servers and commands they start) would depend on how the suite was started."""
    for name in ("COLUMNS", "LINES"):
        os.environ.pop(name, None)
