"""The container image's exact command line, configuration and health check, run
outside a container (this machine cannot run Docker).

The Dockerfile is read, not restated: its CMD is run with the configuration
file it copies into the image (only the data directory and the ports move, as a
volume and a port mapping would move them), its HEALTHCHECK command is run
against the server, and its STOPSIGNAL must stop the server cleanly.
"""

from __future__ import annotations

import json
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

from brain.client import Client
from brain.server.config import load_config
from brain.wire.messages.memory_ops import Encode, EncodeOk
from brain.wire.opcodes import Opcode
from tests.integration.conftest import start_server

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text(encoding="utf-8")


def _instruction(name: str) -> str:
    """The argument of the last ``name`` instruction, continuation lines joined."""
    joined = DOCKERFILE.replace("\\\n", " ")
    found = re.findall(rf"^{name}\s+(.+)$", joined, re.MULTILINE)
    assert found, f"the Dockerfile has no {name}"
    return str(found[-1]).strip()


def _copied() -> dict[str, Path]:
    """Where each COPY of a single repository file lands in the image."""
    joined = DOCKERFILE.replace("\\\n", " ")
    mapping: dict[str, Path] = {}
    for source, target in re.findall(r"^COPY\s+(\S+)\s+(\S+)\s*$", joined, re.MULTILINE):
        if (ROOT / source).is_file():
            mapping[target] = ROOT / source
    return mapping


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
