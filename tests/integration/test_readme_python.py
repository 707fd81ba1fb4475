"""Every ```python block of README.md runs as written against a real server, and is
clean under ``mypy --strict``; the agent script runs embedded too, and so does the
asyncio example.

What a reader copies must run against ``make serve``'s defaults (127.0.0.1:9090,
the key in ``brain-data/credentials.toml``, read from the repository root). The
test gives it those conditions in a directory of its own: the server's data
directory is ``brain-data`` there, and the one thing that cannot be the same, the
server's port, is the only text swapped (:data:`SWAPS`).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from tests.integration.conftest import ServerProcess, start_server

ROOT: Final = Path(__file__).resolve().parents[2]
README: Final = ROOT / "README.md"
BLOCK: Final = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)

CONNECT: Final = "Brain.connect(api_key=key)"
"""How the README connects: the defaults of ``make serve``."""
OPEN: Final = 'Brain.open("my-data")'
"""How the README opens an embedded database: the model of ``make``'s build."""
EMBEDDED: Final = 'Brain.open("embedded-data", options=DatabaseOptions(embedder="hashing"))'
"""The embedded database the test opens instead: the hashing embedder, since what is
under test is the facade and the text, not the model."""
PRELUDE: Final = "from brain.engine.database import DatabaseOptions\n"

FAST: Final = {"BRAIN_RETRIEVAL__EMBEDDER": "hashing"}


def blocks() -> list[str]:
    """The README's Python blocks, in order."""
    found = BLOCK.findall(README.read_text(encoding="utf-8"))
    assert len(found) >= 4, "README.md lost its Python examples"
    return found


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, ServerProcess]]:
    where = Path(tmp_path_factory.mktemp("readme"))
    proc = start_server(where / "brain-data", env=FAST)
    try:
        yield where, proc
    finally:
        proc.stop()


def _run(code: str, cwd: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", code],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, f"{code}\n--- stderr:\n{done.stderr}"
    return done.stdout


def test_every_block_runs_over_the_wire(home: tuple[Path, ServerProcess]) -> None:
    where, server = home
    wire = f'Brain.connect("{server.host}", {server.wire_port}, api_key=key)'
    outputs = []
    for code in blocks():
        if CONNECT in code:
            outputs.append(_run(code.replace(CONNECT, wire), where))
        else:
            assert OPEN in code, "a block neither connects nor opens"
            outputs.append(_run(PRELUDE + code.replace(OPEN, EMBEDDED), where))
    first, agent, _, asynchronous = outputs
    assert "Alice moved to Globex." in first
    assert "Bea lives_in Oslo" in asynchronous and "entity:" not in asynchronous
    now, before = agent.split("[statement", 2)[1:]
    assert "Dan lives_in Berlin" in now and "Dan lives_in Paris" in before


def test_the_agent_script_runs_embedded_and_is_short(home: tuple[Path, ServerProcess]) -> None:
    where, _ = home
    agent = next(code for code in blocks() if "supersede_statement" in code)
    assert len(agent.splitlines()) <= 20
    out = _run(PRELUDE + agent.replace(CONNECT, EMBEDDED), where)
    assert "Dan lives_in Berlin" in out and "Dan lives_in Paris" in out
    assert "entity:" not in out  # entities shown by name


def test_the_asyncio_example_runs_embedded(home: tuple[Path, ServerProcess]) -> None:
    where, _ = home
    example = next(code for code in blocks() if "AsyncBrain" in code)
    out = _run(PRELUDE + example.replace(CONNECT, EMBEDDED), where)
    assert "Bea lives_in Oslo" in out and "entity:" not in out


def test_every_block_is_clean_under_mypy_strict(tmp_path: Path) -> None:
    files = []
    for index, code in enumerate(blocks()):
        path = tmp_path / f"readme_block_{index}.py"
        path.write_text(code, encoding="utf-8")
        files.append(str(path))
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", *files],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
