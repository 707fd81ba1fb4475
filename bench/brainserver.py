"""A real ``brain serve`` process on a fresh data directory, for the suites to load.

The server is started exactly as an operator would (fsync on, default
configuration), on free ports; :class:`BrainServer` also reads its metrics and
its resident memory, and stops it with SIGTERM (a clean shutdown).
"""

from __future__ import annotations

import signal
import subprocess
import tempfile
import threading
import tomllib
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from bench.harness import rss_mb
from brain.server.spawn import SpawnedServer, spawn_server

__all__ = ["STOP_TIMEOUT_S", "BrainServer", "brain_server"]

STOP_TIMEOUT_S: Final = 60.0
"""How long a clean stop may take (a final checkpoint of a large index included)."""


@dataclass
class BrainServer:
    """Where a running server listens and how to reach it."""

    spawned: SpawnedServer
    data_dir: Path
    api_key: str

    @property
    def host(self) -> str:
        return self.spawned.host

    @property
    def port(self) -> int:
        return self.spawned.wire_port

    @property
    def pid(self) -> int:
        return self.spawned.process.pid

    def rss_mb(self) -> float:
        """The server's resident memory now, in MiB."""
        return rss_mb(self.pid)

    def metric(self, name: str) -> float:
        """The value of an unlabelled metric on ``/metrics`` (0.0 when absent)."""
        url = f"http://127.0.0.1:{self.spawned.public_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            for line in response.read().decode().splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
        return 0.0


@contextmanager
def brain_server(
    env: Mapping[str, str] | None = None,
    data_dir: Path | None = None,
    extra: tuple[str, ...] = (),
) -> Iterator[BrainServer]:
    """Run a server on ``data_dir`` (a fresh temporary one by default), with the
    ``brain serve`` flags ``extra``, until the block ends."""
    with tempfile.TemporaryDirectory(prefix="brain-bench-") as tmp:
        data = data_dir if data_dir is not None else Path(tmp) / "data"
        spawned = spawn_server(data, *extra, env=env)
        process = spawned.process

        # Keep draining its output so the server never blocks on a full pipe.
        def drain() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                spawned.output.append(line)

        drainer = threading.Thread(target=drain, daemon=True)
        drainer.start()
        try:
            api_key = tomllib.loads((data / "credentials.toml").read_text())["api_key"]
            yield BrainServer(spawned, data, api_key)
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            drainer.join(timeout=5)
            if process.stdout is not None:
                process.stdout.close()
