"""Start ``brain serve`` as a child process and learn its ports.

Tests, benchmarks and the chaos runner all need a real server process on
free ports; the server announces where it listens in one line on stdout
(:data:`READY_LINE`), which this module waits for and parses.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

__all__ = ["READY_LINE", "SpawnedServer", "spawn_server"]

READY_LINE: Final = re.compile(
    r"serving wire on (?P<host>[^ ]+):(?P<wire>\d+), public HTTP on [^ ]+:(?P<public>\d+), "
    r"admin HTTP on [^ ]+:(?P<admin>\d+)"
)
"""The line ``brain serve`` prints once every port is bound."""


@dataclass
class SpawnedServer:
    """A running server process and its ports; its stdout is left for the caller to drain."""

    process: subprocess.Popen[str]
    host: str
    wire_port: int
    public_port: int
    admin_port: int
    output: list[str] = field(default_factory=list)


def spawn_server(
    data_dir: Path, *extra: str, env: Mapping[str, str] | None = None
) -> SpawnedServer:
    """Start ``brain serve`` on free ports (port 0) and wait for its ready line.

    Raises RuntimeError with the output so far when it exits before being ready.
    """
    cmd = [
        sys.executable, "-m", "brain", "serve", "--data", str(data_dir),
        "--port", "0", "--public-port", "0", "--admin-port", "0", *extra,
    ]  # fmt: skip
    process = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})},
    )
    assert process.stdout is not None
    output: list[str] = []
    for line in process.stdout:
        output.append(line)
        match = READY_LINE.search(line)
        if match:
            return SpawnedServer(
                process,
                match["host"],
                int(match["wire"]),
                int(match["public"]),
                int(match["admin"]),
                output,
            )
    process.wait()
    process.stdout.close()
    raise RuntimeError("brain serve exited before it was ready:\n" + "".join(output))
