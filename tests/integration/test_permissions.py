"""Permissions per opcode over the wire (spec/01-wire.md §4): a key may do what its
permissions allow and nothing more, and a revoked key cannot connect.

Each request is the opcode's golden example (``protocol/examples.py``), so every
write opcode is tried with a well-formed payload: a refusal comes from the
permission check, not from validation.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from protocol.examples import examples
from tests.integration.conftest import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
TABLE = json.loads((ROOT / "protocol" / "protocol.json").read_text(encoding="utf-8"))
NEEDS = {op["name"]: (int(op["code"], 16), op["permission"]) for op in TABLE["opcodes"]}


def _key(server: ServerProcess, permissions: str) -> tuple[str, str]:
    made = subprocess.run(
        [
            sys.executable,
            "-m",
            "brain",
            "keys",
            "create",
            "--namespace",
            "default",
            "--permissions",
            permissions,
            "--data",
            str(server.data_dir),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = made.stdout.strip().splitlines()
    return lines[-1], lines[0].split()[1]


def _answers(server: ServerProcess, api_key: str, needed: set[str]) -> dict[str, str | None]:
    """The error name (or None) each opcode that needs one of ``needed`` answers."""
    client = server.client()
    assert client.handshake(api_key).opcode == 0x0082
    payloads = examples()
    found: dict[str, str | None] = {}
    stream = 1
    for name, (code, permission) in NEEDS.items():
        # SUBSCRIBE's answer is an open stream with nothing to send yet; it is
        # checked in tests/integration/test_subscribe.py.
        if permission not in needed or name == "SUBSCRIBE":
            continue
        client.send(code, stream, payloads[name]["request"])
        reply = client.recv()
        assert reply.stream_id == stream
        found[name] = reply.error_name
        stream += 2
    return found


def test_each_opcode_needs_its_permission(server: ServerProcess) -> None:
    read_only, _ = _key(server, "read")
    refused = _answers(server, read_only, {"write", "admin"})
    assert len(refused) == 19
    assert set(refused.values()) == {"PERMISSION_DENIED"}, refused
    # Reads are allowed to a read-only key (their answers may be NOT_FOUND: the
    # examples name records this database does not hold).
    reads = _answers(server, read_only, {"read"})
    assert "PERMISSION_DENIED" not in reads.values(), reads
    writer, _ = _key(server, "read,write")
    admin_only = _answers(server, writer, {"admin"})
    assert admin_only == {"SCHEMA_PUT": "PERMISSION_DENIED"}
    writes = _answers(server, writer, {"write"})
    assert "PERMISSION_DENIED" not in writes.values(), writes


def test_a_revoked_key_cannot_connect(server: ServerProcess) -> None:
    api_key, key_id = _key(server, "read")
    assert server.client().handshake(api_key).opcode == 0x0082
    token = server.credentials["admin_token"]
    import urllib.request

    request = urllib.request.Request(
        f"http://127.0.0.1:{server.admin_port}/v1/keys/{key_id}", method="DELETE"
    )
    request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 204
    refused = server.client()
    answer = refused.handshake(api_key)
    assert answer.error_name == "UNAUTHENTICATED"
    assert refused.closed_by_server()
