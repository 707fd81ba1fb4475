"""compose.yaml (spec/06-operations.md §8): valid for Docker Compose, holding every
key the README relies on, agreeing with the Dockerfile and docker/brain.toml, and
with a healthcheck that passes on a ready server and fails where none listens.

Where ``docker compose`` is installed it checks the file itself; the rest runs
everywhere, so a broken file fails here on a machine without Docker too. No image
is built.
"""

from __future__ import annotations

import re
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from brain.server.app import SHUTDOWN_GRACE_S
from brain.server.config import load_config
from tests.integration.conftest import start_server

ROOT: Final = Path(__file__).resolve().parents[2]
COMPOSE: Final = ROOT / "compose.yaml"
README: Final = (ROOT / "README.md").read_text(encoding="utf-8")
DOCKERFILE: Final = (ROOT / "Dockerfile").read_text(encoding="utf-8")
IMAGE_CONFIG: Final = load_config(ROOT / "docker" / "brain.toml", environ={})

SERVICE: Final = "brain"
VOLUME: Final = "brain-data"

COMPOSE_CHECK_S: Final = 60
"""Longest ``docker compose config`` may take: it reads one small file."""

PROBE_S: Final = 30
"""Longest the healthcheck command may take: its own timeout is 2 s."""

_DURATION: Final = re.compile(r"(\d+)(h|ms|m|s|us)")
_UNIT_S: Final = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6}


def _seconds(duration: str) -> float:
    """A Compose duration (``10s``, ``1m30s``) in seconds."""
    parts = _DURATION.findall(duration)
    assert parts and "".join(n + u for n, u in parts) == duration, f"not a duration: {duration}"
    return sum(int(n) * _UNIT_S[u] for n, u in parts)


def _service() -> dict[str, Any]:
    document = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    assert isinstance(document, dict), "compose.yaml is not a mapping"
    assert VOLUME in (document.get("volumes") or {}), f"the named volume {VOLUME} is not declared"
    service = document["services"][SERVICE]
    assert isinstance(service, dict)
    return service


def _dockerfile_probe() -> list[str]:
    """The Dockerfile's HEALTHCHECK command, as words."""
    joined = DOCKERFILE.replace("\\\n", " ")
    found = re.search(r"^HEALTHCHECK\s.*?\bCMD\s+(.+)$", joined, re.MULTILINE)
    assert found, "the Dockerfile has no HEALTHCHECK"
    return shlex.split(found[1])


def test_docker_compose_reads_the_file() -> None:
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("docker is not installed; the structural checks below still run")
    has_compose = subprocess.run(
        [docker, "compose", "version"], capture_output=True, timeout=COMPOSE_CHECK_S, check=False
    )
    if has_compose.returncode != 0:
        pytest.skip("docker has no compose plugin; the structural checks below still run")
    checked = subprocess.run(
        [docker, "compose", "-f", str(COMPOSE), "config", "-q"],
        capture_output=True,
        text=True,
        timeout=COMPOSE_CHECK_S,
        check=False,
        cwd=ROOT,
    )
    assert checked.returncode == 0, checked.stderr


def test_the_service_is_the_image_with_its_ports_volume_and_grace() -> None:
    service = _service()
    build = service["build"]
    context = ROOT / (build if isinstance(build, str) else build["context"])
    dockerfile = "Dockerfile" if isinstance(build, str) else build.get("dockerfile", "Dockerfile")
    assert (context / dockerfile).resolve() == (ROOT / "Dockerfile").resolve()

    # Each published port is one the image serves off its loopback, on the host's loopback.
    server = IMAGE_CONFIG.server
    exposed = re.findall(r"^EXPOSE\s+(.+)$", DOCKERFILE, re.MULTILINE)[-1].split()
    published = [str(p).split(":") for p in service["ports"]]
    assert all(len(p) == 3 and p[0] == "127.0.0.1" and p[1] == p[2] for p in published), published
    assert [p[2] for p in published] == exposed == [str(server.port), str(server.public_port)]
    assert server.host == server.public_host == "0.0.0.0"

    # The named volume holds the data directory the image's configuration names.
    assert f"{VOLUME}:{server.data_dir}" in service["volumes"]
    assert re.search(rf'^VOLUME \["{server.data_dir}"\]$', DOCKERFILE, re.MULTILINE)

    assert service["stop_signal"] == "SIGTERM"
    assert _seconds(service["stop_grace_period"]) > SHUTDOWN_GRACE_S

    health = service["healthcheck"]
    assert health["test"][0] == "CMD" and health["test"][1:] == _dockerfile_probe()
    for key in ("interval", "timeout", "start_period"):
        assert _seconds(health[key]) > 0, key
    assert _seconds(health["timeout"]) < _seconds(health["interval"])
    assert isinstance(health["retries"], int) and health["retries"] >= 1
    assert f"http://127.0.0.1:{server.public_port}/readyz" in health["test"][-1]


def test_the_readme_names_what_the_file_holds() -> None:
    section = README.split("## Docker Compose", 1)[1].split("\n## ", 1)[0]
    service = _service()
    assert "`compose.yaml`" in section and f"`{SERVICE}`" in section and f"`{VOLUME}`" in section
    assert "docker compose up" in section and f"docker compose exec {SERVICE}" in section
    assert f"`{IMAGE_CONFIG.server.data_dir}`" in section and "`/readyz`" in section
    for port in (IMAGE_CONFIG.server.port, IMAGE_CONFIG.server.public_port):
        assert str(port) in section
    interval = _seconds(service["healthcheck"]["interval"])
    assert f"every {interval:g}" in section


def _probe(public_port: int) -> int:
    """The exit status of the healthcheck command against ``public_port`` on loopback."""
    words = _service()["healthcheck"]["test"][1:]
    assert words[0] == "python"
    default = f":{IMAGE_CONFIG.server.public_port}/"
    assert default in words[-1]
    command = [sys.executable, *words[1:-1], words[-1].replace(default, f":{public_port}/")]
    return subprocess.run(command, capture_output=True, timeout=PROBE_S, check=False).returncode


def test_the_healthcheck_passes_on_a_ready_server_and_fails_without_one(tmp_path: Path) -> None:
    server = start_server(tmp_path / "data")
    try:
        assert _probe(server.public_port) == 0
    finally:
        server.stop()
    # A port nobody listens on: the probe must fail, or it would pass for any server.
    with socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        unused = spare.getsockname()[1]
    assert _probe(unused) != 0
