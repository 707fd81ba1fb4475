"""Permissions per opcode over the wire (spec/01-wire.md §4): a key may do what its
permissions allow and nothing more; a revoked key cannot connect, and stops
working on the connections that were using it.

Each request is the opcode's golden example (``protocol/examples.py``), so every
write opcode is tried with a well-formed payload: a refusal comes from the
permission check, not from validation.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

from protocol.examples import examples
from tests.integration.conftest import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
TABLE = json.loads((ROOT / "protocol" / "protocol.json").read_text(encoding="utf-8"))
NEEDS = {op["name"]: (int(op["code"], 16), op["permission"]) for op in TABLE["opcodes"]}
ENCODE, RECALL, SUBSCRIBE = NEEDS["ENCODE"][0], NEEDS["RECALL"][0], NEEDS["SUBSCRIBE"][0]


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
    _revoke(server, key_id)
    refused = server.client()
    answer = refused.handshake(api_key)
    assert answer.error_name == "UNAUTHENTICATED"
    assert refused.closed_by_server()


def _revoke(server: ServerProcess, key_id: str) -> None:
    request = urllib.request.Request(
        f"http://127.0.0.1:{server.admin_port}/v1/keys/{key_id}", method="DELETE"
    )
    request.add_header("Authorization", f"Bearer {server.credentials['admin_token']}")
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 204


def test_a_key_revoked_while_connected_stops_working(server: ServerProcess) -> None:
    api_key, key_id = _key(server, "read,write")
    follower, worker = server.client(), server.client()
    for client in (follower, worker):
        assert client.handshake(api_key).opcode == 0x0082
    follower.send(SUBSCRIBE, 1, {})
    worker.send(ENCODE, 1, {"request_id": os.urandom(16), "text": "before the revocation"})
    assert worker.recv().opcode == ENCODE | 0x80
    assert follower.recv().body["op"] == "create"  # the subscription is live
    worker.send(RECALL, 3, {"cue": "revocation", "top_k": 1})
    assert worker.recv().opcode == RECALL | 0x80
    bystander = server.client()  # another key's connection goes on as before
    assert bystander.handshake(server.credentials["api_key"]).opcode == 0x0082

    _revoke(server, key_id)

    # The open subscription ends with the error, without the client asking anything.
    ended = follower.recv()
    assert (ended.stream_id, ended.eos, ended.error_name) == (1, True, "UNAUTHENTICATED")
    # Every later request on the key's connections is refused, streams included.
    requests = [
        (worker, ENCODE, {"request_id": os.urandom(16), "text": "after the revocation"}),
        (worker, RECALL, {"cue": "revocation", "top_k": 1}),
        (worker, SUBSCRIBE, {}),
        (follower, SUBSCRIBE, {"from_lsn": 1}),
    ]
    for stream, (client, opcode, body) in enumerate(requests, start=5):
        stream_id = 2 * stream + 1
        client.send(opcode, stream_id, body)
        answer = client.recv()
        assert (answer.stream_id, answer.error_name) == (stream_id, "UNAUTHENTICATED"), answer
    bystander.send(ENCODE, 1, {"request_id": os.urandom(16), "text": "a bystander"})
    assert bystander.recv().opcode == ENCODE | 0x80
    assert server.client().handshake(api_key).error_name == "UNAUTHENTICATED"
