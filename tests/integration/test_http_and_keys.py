"""Public and admin HTTP ports, first-start credentials, and key management."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.integration.conftest import ServerProcess, start_server
from tests.integration.httpcall import http_call


def _public(server: ServerProcess, path: str) -> tuple[int, bytes, dict[str, str]]:
    return http_call("GET", f"http://{server.host}:{server.public_port}{path}")


def _admin(
    server: ServerProcess, method: str, path: str, body: Any = None, token: str | None = ""
) -> tuple[int, Any]:
    used = server.credentials["admin_token"] if token == "" else token
    status, raw, _ = http_call(method, f"http://127.0.0.1:{server.admin_port}{path}", body, used)
    return status, json.loads(raw) if raw else None


def test_health_ready_metrics(server: ServerProcess) -> None:
    status, body, _ = _public(server, "/healthz")
    assert (status, body) == (200, b"ok")
    status, body, _ = _public(server, "/readyz")
    assert status == 200
    assert json.loads(body) == {"ready": True, "applied_lsn": 0}
    client = server.client()
    client.handshake(server.credentials["api_key"])
    client.send(0x0141, 1, {"id": bytes(16)})
    client.recv()
    status, body, headers = _public(server, "/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    text = body.decode()
    assert 'brain_requests_total{opcode="STATEMENT_GET",outcome="NOT_FOUND"} 1.0' in text
    assert 'brain_requests_total{opcode="AUTH",outcome="ok"} 1.0' in text
    assert "brain_request_duration_seconds_bucket" in text
    assert "brain_connections_open 1.0" in text
    assert 'brain_requests_total{opcode="HELLO",outcome="ok"} 1.0' in text
    client.send(0x0777, 3, {})
    client.recv()
    text = _public(server, "/metrics")[1].decode()
    assert 'brain_requests_total{opcode="UNKNOWN",outcome="BAD_OPCODE"} 1.0' in text


def test_credentials_file_is_private_and_complete(server: ServerProcess) -> None:
    path = server.data_dir / "credentials.toml"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    creds = server.credentials
    assert creds["namespace"] == "default"
    assert creds["api_key"].startswith("brn_") and len(creds["api_key"]) == 4 + 43
    assert creds["admin_token"]
    assert any("credentials written to" in line for line in server.output)


def test_second_start_keeps_credentials(tmp_path: Path) -> None:
    first = start_server(tmp_path / "d")
    creds = first.credentials
    first.stop()
    second = start_server(tmp_path / "d")
    try:
        assert second.credentials == creds
        assert not any("credentials written" in line for line in second.output)
        assert second.client().handshake(creds["api_key"]).opcode == 0x0082
    finally:
        second.stop()


ADMIN_ROUTES: tuple[tuple[str, str], ...] = (
    ("POST", "/v1/keys"),
    ("GET", "/v1/keys"),
    ("DELETE", "/v1/keys/00112233445566778899aabbccddeeff"),
    ("GET", "/v1/stats"),
    ("POST", "/v1/explain"),
    ("POST", "/v1/purge"),
    ("POST", "/v1/snapshots"),
    ("GET", "/v1/snapshots"),
    ("GET", "/v1/audit?namespace=default"),
    ("GET", "/v1/wal"),
    ("GET", "/v1/config"),
    ("GET", "/v1/export?namespace=default"),
    ("POST", "/v1/import"),
)
"""Every route of spec/06-operations.md §4's admin port."""


def test_admin_needs_the_token(server: ServerProcess) -> None:
    for token in (None, "wrong"):
        for method, path in (*ADMIN_ROUTES, ("GET", "/v1/nope")):
            status, body = _admin(server, method, path, token=token)
            assert status == 401, (method, path, token)
            assert body["error"] == "UNAUTHENTICATED"


def test_admin_key_lifecycle(server: ServerProcess) -> None:
    status, made = _admin(
        server, "POST", "/v1/keys", {"namespace": "team-a", "permissions": ["read"]}
    )
    assert status == 201
    assert made["api_key"].startswith("brn_") and len(made["key_id"]) == 32
    status, listing = _admin(server, "GET", "/v1/keys")
    assert status == 200
    assert all("api_key" not in k for k in listing["keys"])
    assert made["key_id"] in {k["key_id"] for k in listing["keys"]}

    client = server.client()
    ok = client.handshake(made["api_key"])
    assert ok.body["namespace"] == "team-a" and ok.body["permissions"] == ["read"]
    # A read-only key may not write.
    client.send(0x0143, 1, {"request_id": bytes(16), "id": bytes(16)})
    assert client.recv().error_name == "PERMISSION_DENIED"

    status, _ = _admin(server, "DELETE", f"/v1/keys/{made['key_id']}")
    assert status == 204
    again = server.client()
    assert again.handshake(made["api_key"]).error_name == "UNAUTHENTICATED"
    status, body = _admin(server, "DELETE", f"/v1/keys/{made['key_id']}")
    assert status == 404 and body["error"] == "NOT_FOUND"


def test_admin_rejects_bad_key_requests(server: ServerProcess) -> None:
    status, body = _admin(server, "POST", "/v1/keys", {"namespace": "Bad Name"})
    assert status == 400 and body["field"] == "namespace"
    status, body = _admin(server, "POST", "/v1/keys", {"namespace": "a", "permissions": ["fly"]})
    assert status == 400 and body["field"] == "permissions"
    status, body = _admin(server, "POST", "/v1/keys", {"namespace": "a", "color": "red"})
    assert status == 400 and body["field"] == "color"


def test_admin_config_is_redacted(tmp_path: Path) -> None:
    proc = start_server(tmp_path / "d", env={"BRAIN_ADMIN__TOKEN": "s3cret-token"})
    try:
        status, config = _admin(proc, "GET", "/v1/config", token="s3cret-token")
        assert status == 200
        assert config["admin"]["token"] == "<redacted>"
        assert "s3cret-token" not in json.dumps(config)
        assert config["server"]["port"] == 0
    finally:
        proc.stop()


def test_cli_keys_create_while_server_runs(server: ServerProcess) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "brain",
            "keys",
            "create",
            "--namespace",
            "cli-ns",
            "--permissions",
            "read,write",
            "--data",
            str(server.data_dir),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ},
    )
    key = result.stdout.strip().splitlines()[-1]
    assert key.startswith("brn_")
    ok = server.client().handshake(key)
    assert ok.body["namespace"] == "cli-ns"
    assert sorted(ok.body["permissions"]) == ["read", "write"]


def test_cli_keys_create_without_server(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "brain",
            "keys",
            "create",
            "--namespace",
            "offline",
            "--data",
            str(tmp_path / "d"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    key = result.stdout.strip().splitlines()[-1]
    proc = start_server(tmp_path / "d")
    try:
        assert proc.client().handshake(key).body["namespace"] == "offline"
    finally:
        proc.stop()


def test_cli_reports_bad_input(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "brain",
            "keys",
            "create",
            "--namespace",
            "x",
            "--permissions",
            "fly",
            "--data",
            str(tmp_path / "d"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1 and "unknown permission 'fly'" in result.stderr
    result = subprocess.run(
        [sys.executable, "-m", "brain", "serve", "--data", str(tmp_path / "d")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "BRAIN_SERVER__PROT": "1"},
        check=False,
    )
    assert result.returncode == 2 and "server.prot" in result.stderr
    version = subprocess.run(
        [sys.executable, "-m", "brain", "--version"], capture_output=True, text=True, check=True
    )
    assert version.stdout.startswith("brain ")


def test_admin_audit_lists_what_keys_did(server: ServerProcess) -> None:
    import os

    client = server.client()
    ok = client.handshake(server.credentials["api_key"])
    client.send(
        0x0140,
        1,
        {
            "request_id": os.urandom(16),
            "kind": "fact",
            "subject": {"name": "Ivy"},
            "predicate": "likes",
            "object": {"text": "tea"},
        },
    )
    created = client.recv().body
    client.send(
        0x0143, 3, {"request_id": os.urandom(16), "id": created["statement_id"], "reason": "typo"}
    )
    assert client.recv().opcode == 0x01C3
    status, made = _admin(server, "POST", "/v1/keys", {"namespace": "default"})
    assert status == 201
    assert _admin(server, "DELETE", f"/v1/keys/{made['key_id']}")[0] == 204
    status, body = _admin(server, "GET", "/v1/audit?namespace=default&limit=10")
    assert status == 200
    # Newest first: the key's delete and create, the tombstone, the entity the
    # statement's name made, and the bootstrap key.
    deleted, created_key, entry, made_entity, bootstrap = body["entries"]
    assert made_entity["operation"] == "entity_create"
    assert (deleted["operation"], deleted["via"]) == ("key_delete", "admin")
    assert deleted["records"] == created_key["records"] == [made["key_id"]]
    assert (created_key["operation"], created_key["via"]) == ("key_create", "admin")
    assert (bootstrap["operation"], bootstrap["via"]) == ("key_create", "bootstrap")
    assert bootstrap["records"] == [ok.body["key_id"].hex()]
    assert entry["operation"] == "statement_tombstone" and entry["reason"] == "typo"
    assert entry["key_id"] == ok.body["key_id"].hex()
    assert entry["records"] == [created["statement_id"].hex()]
    status, body = _admin(server, "GET", "/v1/audit")
    assert status == 400 and body["field"] == "namespace"


def test_admin_stats_wal_and_purge(server: ServerProcess) -> None:
    import os

    client = server.client()
    client.handshake(server.credentials["api_key"])
    client.send(0x0020, 1, {"request_id": os.urandom(16), "text": "a secret to forget"})
    made = client.recv().body
    client.send(0x0020, 3, {"request_id": os.urandom(16), "text": "kept", "space": "other"})
    assert client.recv().opcode == 0x00A0
    status, stats = _admin(server, "GET", "/v1/stats")
    assert status == 200
    scopes = {(s["namespace"], s["space"]): s for s in stats["scopes"]}
    assert scopes[("default", "default")]["memories"] == 1
    assert scopes[("default", "other")]["memories"] == 1
    assert stats["applied_lsn"] >= 2 and stats["durable_lsn"] <= stats["applied_lsn"]
    assert stats["sizes"]["lmdb_used_bytes"] > 0 and stats["sizes"]["wal_bytes"] > 0
    status, wal = _admin(server, "GET", "/v1/wal")
    assert status == 200 and wal["last_lsn"] >= wal["applied_lsn"] >= 2
    assert wal["segments"] and wal["first_lsn"] <= wal["last_lsn"] + 1
    client.send(
        0x0024, 5, {"request_id": os.urandom(16), "memory": made["memory_id"], "mode": "hard"}
    )
    assert client.recv().opcode == 0x00A4
    status, purged = _admin(server, "POST", "/v1/purge")
    assert (status, purged) == (200, {"purged": 1})
    assert _admin(server, "POST", "/v1/purge")[1] == {"purged": 0}
    for path in (server.data_dir / "lmdb").iterdir():
        assert b"a secret to forget" not in path.read_bytes()
    for path in (server.data_dir / "wal").iterdir():
        assert b"a secret to forget" not in path.read_bytes()


def test_every_documented_metric_is_emitted(server: ServerProcess) -> None:
    """The reverse of tests/unit/repository/test_docs.py: a metric the spec names must exist."""
    import os
    import re

    spec = (Path(__file__).resolve().parents[2] / "spec" / "06-operations.md").read_text()
    documented = set(
        re.findall(r"^\| `(brain_[a-z_]+)` \| (?:counter|gauge|histogram) \|", spec, re.M)
    )
    assert len(documented) > 20
    client = server.client()
    client.handshake(server.credentials["api_key"])
    client.send(0x0020, 1, {"request_id": os.urandom(16), "text": "a memory about owls"})
    client.recv()
    client.send(0x0021, 3, {"cue": "owls", "explain": True})
    assert client.recv().opcode == 0x00A1
    client.send(0x0021, 5, {"cue": "no such thing at all", "arms": {"semantic": 0.0}})
    client.recv()
    broken = server.client()
    broken.send_bytes(b"NOT A FRAME" * 4)  # a protocol error, counted
    broken.closed_by_server()
    exposition = _public(server, "/metrics")[1].decode()
    families = set(re.findall(r"^# TYPE (\S+) ", exposition, re.M))
    # A single node has no replication figures: the cluster's families are emitted on
    # cluster nodes, checked there (tests/integration/test_cluster_ops.py).
    cluster_only = {n for n in documented if n.startswith(("brain_replication_", "brain_planner_"))}
    assert len(cluster_only) == 7
    for name in sorted(documented - cluster_only):
        base = name.removesuffix("_total")
        assert name in families or base in families, f"{name} is documented but not emitted"
    assert not any(n.startswith(("brain_replication_", "brain_planner_")) for n in families)


def test_export_then_import_over_the_admin_port(server: ServerProcess, tmp_path: Path) -> None:
    import os
    import urllib.request

    client = server.client()
    client.handshake(server.credentials["api_key"])
    client.send(
        0x0140,
        1,
        {
            "request_id": os.urandom(16),
            "kind": "fact",
            "subject": {"name": "Ivy"},
            "predicate": "likes",
            "object": {"text": "tea"},
        },
    )
    made = client.recv().body
    request = urllib.request.Request(
        f"http://127.0.0.1:{server.admin_port}/v1/export?namespace=default",
        headers={"Authorization": f"Bearer {server.credentials['admin_token']}"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.headers["Content-Type"].startswith("application/x-ndjson")
        lines = [json.loads(line) for line in response.read().decode().splitlines()]
    header, rows, trailer = lines[0], lines[1:-1], lines[-1]
    assert trailer["end"] is True and trailer["rows"] == len(rows) > 0
    other = start_server(tmp_path / "other")
    try:
        token = other.credentials["admin_token"]
        for start in range(0, len(rows), 5):
            status, body = _admin(
                other,
                "POST",
                "/v1/import",
                {"header": header, "rows": rows[start : start + 5]},
                token=token,
            )
            assert status == 200 and body["imported"] == len(rows[start : start + 5])
        status, refused = _admin(
            other, "POST", "/v1/import", {"header": {}, "rows": []}, token=token
        )
        assert status == 400 and refused["field"] == "header"
        reader = other.client()
        reader.handshake(other.credentials["api_key"])
        reader.send(0x0145, 1, {"id": made["statement_id"]})
        imported = reader.recv()
        assert imported.opcode == 0x01C5 and imported.body["versions"]
        client.send(0x0145, 3, {"id": made["statement_id"]})
        assert imported.body == client.recv().body
    finally:
        other.stop()
