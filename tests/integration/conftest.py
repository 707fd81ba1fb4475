"""Fixtures that run a real server on free ports in a temporary directory: in a process
of its own, or its configuration for one the test runs in its own process; and the
``brain`` command run to its end."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import tomllib
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import pytest

from brain.server.config import Config, load_config
from brain.server.spawn import spawn_server
from tests.integration.rawwire import RawClient

COMMAND_TIMEOUT_S: Final = 120
"""Longest one ``brain`` command run to its end may take: a refused start loads the
model first, which is slow on a busy two-core machine."""


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

    def metric(self, name: str) -> float:
        """The value of the unlabelled metric ``name`` on ``/metrics``."""
        url = f"http://{self.host}:{self.public_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as answer:
            for line in answer.read().decode().splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
        raise AssertionError(f"no metric {name}")

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


def free_port_config(data_dir: Path) -> Config:
    """The configuration of a server on ``data_dir`` listening on free ports, for one
    a test starts in its own process (with a fault hook in its database)."""
    return load_config(
        environ={},
        overrides={
            "server.data_dir": str(data_dir),
            "server.port": 0,
            "server.public_port": 0,
            "server.admin_port": 0,
        },
    )


def bootstrap_api_key(data_dir: Path) -> str:
    """The API key a server's first start wrote to ``data_dir``'s credentials file."""
    with (data_dir / "credentials.toml").open("rb") as fh:
        return str(tomllib.load(fh)["api_key"])


def run_brain(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``brain args`` to its end and keep its exit code and text output."""
    return subprocess.run(
        [sys.executable, "-m", "brain", *args],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )


def serve_to_exit(data_dir: Path) -> subprocess.CompletedProcess[str]:
    """``brain serve`` on ``data_dir`` and free ports, run until it exits: a start
    that is meant to be refused."""
    return run_brain(
        "serve", "--data", str(data_dir), "--port", "0", "--public-port", "0", "--admin-port", "0"
    )


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    """A fresh server on an empty data directory."""
    proc = start_server(tmp_path / "data")
    try:
        yield proc
    finally:
        proc.stop()
