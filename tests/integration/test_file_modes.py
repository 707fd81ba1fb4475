"""Everything the server writes is private to its user (spec/06-operations.md §7).

A real `brain serve`, started from a process whose umask lets group and others
read (022), writes a memory, indexes it, takes a snapshot and stops; then no
file or directory under its data directory grants group or others anything. A
data directory an older server left world-readable is made private at start.
"""

from __future__ import annotations

import json
import os
import stat
import time
import urllib.request
from pathlib import Path
from typing import Final

from tests.integration.conftest import ServerProcess, start_server
from tests.request_ids import fresh_request_id

ENCODE, RESPONSE = 0x0020, 0x0080
INDEXED_WITHIN_S: Final = 60.0
"""Longest the test waits for the indexer to embed one memory."""


def _admin(server: ServerProcess, method: str, path: str) -> dict[str, object]:
    url = f"http://{server.host}:{server.admin_port}{path}"
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    request.add_header("Authorization", f"Bearer {server.credentials['admin_token']}")
    with urllib.request.urlopen(request, timeout=30) as answer:
        shown = json.loads(answer.read())
    assert isinstance(shown, dict)
    return shown


def _open_to_others(root: Path) -> list[str]:
    """Every entry under ``root`` (itself included) that grants group or others a bit."""
    found: list[str] = []
    for path in [root, *sorted(root.rglob("*"))]:
        mode = path.lstat().st_mode
        if not stat.S_ISLNK(mode) and mode & 0o077:
            found.append(f"{path.relative_to(root.parent)} {stat.filemode(mode)}")
    return found


def _wait_indexed(server: ServerProcess) -> None:
    deadline = time.monotonic() + INDEXED_WITHIN_S
    while time.monotonic() < deadline:
        url = f"http://{server.host}:{server.public_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as answer:
            lines = answer.read().decode().splitlines()
        if "brain_index_vectors 1.0" in lines:
            return
        time.sleep(0.2)
    raise AssertionError("the indexer did not embed the memory")


def test_the_data_directory_is_private_to_the_server_user(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    leftover = data / "left-by-an-older-server.txt"
    leftover.write_text("tenant text")
    leftover.chmod(0o644)
    previous = os.umask(0o022)
    try:
        server = start_server(data, env={"BRAIN_RETRIEVAL__EMBEDDER": "hashing"})
    finally:
        os.umask(previous)
    try:
        client = server.client()
        assert client.handshake(server.credentials["api_key"]).opcode == 0x0002 | RESPONSE
        client.send(ENCODE, 1, {"request_id": fresh_request_id(), "text": "a private memory"})
        assert client.recv().opcode == ENCODE | RESPONSE
        _wait_indexed(server)
        assert _admin(server, "POST", "/v1/snapshots")["lsn"]
    finally:
        assert server.stop() == 0
    assert (data / "snapshots").is_dir() and (data / "index").is_dir()
    assert _open_to_others(data) == []
