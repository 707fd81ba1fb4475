"""Fixtures that run a real server process on free ports in a temporary directory."""

from __future__ import annotations

import signal
import subprocess
import threading
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from brain.server.spawn import spawn_server
from tests.integration.rawwire import RawClient


@dataclass
class ServerProcess:
    """A running `brain serve` and what a test needs to talk to it."""

    process: subprocess.Popen[str]
    data_dir: Path
    host: str
    wire_port: int
    public_port: int
    admin_port: int
    output: list[str]
    drainer: threading.Thread
    clients: list[RawClient] = field(default_factory=list)

    @property
    def credentials(self) -> dict[str, str]:
        with (self.data_dir / "credentials.toml").open("rb") as fh:
            return {k: str(v) for k, v in tomllib.load(fh).items()}

    def client(self) -> RawClient:
        client = RawClient(self.host, self.wire_port)
        self.clients.append(client)
        return client

    def stop(self) -> int:
        for client in self.clients:
            client.close()
        self.clients.clear()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.drainer.join(timeout=5)
        if self.process.stdout is not None:
            self.process.stdout.close()
        return self.process.returncode


def start_server(data_dir: Path, *extra: str, env: dict[str, str] | None = None) -> ServerProcess:
    """Start `brain serve` on free ports and wait until it says where it listens."""
    spawned = spawn_server(data_dir, *extra, env=env)
    process, output = spawned.process, spawned.output

    # Keep draining output so the child never blocks on a full pipe.
    def drain() -> None:
        assert process.stdout is not None
        for rest in process.stdout:
            output.append(rest)

    drainer = threading.Thread(target=drain, daemon=True)
    drainer.start()
    return ServerProcess(
        process,
        data_dir,
        spawned.host,
        spawned.wire_port,
        spawned.public_port,
        spawned.admin_port,
        output,
        drainer,
    )


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    """A fresh server on an empty data directory."""
    proc = start_server(tmp_path / "data")
    try:
        yield proc
    finally:
        proc.stop()
