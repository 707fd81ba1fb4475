"""The foundation's promises, checked against a real server with raw frames."""

from __future__ import annotations

import json
import socket
import struct
import time
from pathlib import Path
from typing import Any

import cbor2
import crc32c
import pytest

from tests.integration.conftest import ServerProcess, start_server
from tests.integration.rawwire import RawClient, frame

VECTORS_DIR = Path(__file__).resolve().parents[1] / "data" / "cbor"

PING, HELLO, AUTH, BYE = 0x0010, 0x0001, 0x0002, 0x001F
STATEMENT_GET = 0x0141
ERROR = 0x00FF


def _ready(server: ServerProcess) -> RawClient:
    client = server.client()
    ok = client.handshake(server.credentials["api_key"])
    assert ok.opcode == 0x0082, ok
    return client


def test_handshake_and_auth(server: ServerProcess) -> None:
    client = server.client()
    client.send(HELLO, 0, {"client": "rawwire/1", "versions": [1]})
    welcome = client.recv()
    assert welcome.opcode == 0x0081 and welcome.stream_id == 0 and welcome.eos
    body = welcome.body
    assert body["version"] == 1
    assert isinstance(body["session_id"], bytes) and len(body["session_id"]) == 16
    assert body["max_frame"] == (1 << 24) - 1
    assert body["max_streams"] >= 1
    assert abs(body["server_time"] - time.time_ns()) < 60 * 10**9
    assert body["server"].startswith("brain/")
    client.send(AUTH, 0, {"api_key": server.credentials["api_key"]})
    ok = client.recv()
    assert ok.opcode == 0x0082 and ok.eos
    assert ok.body["namespace"] == "default"
    assert len(ok.body["key_id"]) == 16
    assert set(ok.body["permissions"]) == {"read", "write", "admin"}
    client.close()


def test_wrong_key_is_refused_and_closed(server: ServerProcess) -> None:
    client = server.client()
    reply = client.handshake("brn_" + "A" * 43)
    assert reply.opcode == ERROR and reply.error_name == "UNAUTHENTICATED"
    assert reply.body["code"] == 0x0030
    assert client.closed_by_server()


def test_bad_header_crc_closes_with_bad_frame(server: ServerProcess) -> None:
    client = _ready(server)
    raw = bytearray(frame(PING, 1, cbor2.dumps({"nonce": 1})))
    raw[8] ^= 0xFF
    client.send_bytes(bytes(raw))
    reply = client.recv()
    assert reply.opcode == ERROR and reply.stream_id == 0
    assert reply.error_name == "BAD_FRAME"
    assert client.closed_by_server()


@pytest.mark.parametrize(
    ("offset", "value"),
    [(0, 0x58), (4, 2), (7, 0x01), (19, 1), (27, 1)],
    ids=["magic", "version", "flags", "reserved19", "reserved24"],
)
def test_bad_header_fields_close_with_bad_frame(
    server: ServerProcess, offset: int, value: int
) -> None:
    client = server.client()
    raw = bytearray(frame(PING, 1, cbor2.dumps({"nonce": 1})))
    raw[offset] = value
    raw[8:12] = struct.pack(">I", crc32c.crc32c(bytes(raw[0:8] + raw[12:32])))
    client.send_bytes(bytes(raw))
    reply = client.recv()
    assert reply.error_name == "BAD_FRAME" and reply.stream_id == 0
    assert client.closed_by_server()


def test_bad_payload_crc_closes_with_bad_frame(server: ServerProcess) -> None:
    client = server.client()
    raw = bytearray(frame(PING, 1, cbor2.dumps({"nonce": 1})))
    raw[-1] ^= 0x01
    client.send_bytes(bytes(raw))
    reply = client.recv()
    assert reply.error_name == "BAD_FRAME" and reply.stream_id == 0
    assert client.closed_by_server()


def test_oversize_frame_refused_before_payload(tmp_path: Path) -> None:
    proc = start_server(tmp_path / "d", env={"BRAIN_SERVER__MAX_FRAME": "1024"})
    try:
        client = proc.client()
        header = frame(PING, 1, b"\x00" * 2000)[:32]
        # Only the header is sent: the answer must come without any payload byte.
        client.send_bytes(header)
        reply = client.recv()
        assert reply.error_name == "FRAME_TOO_LARGE" and reply.stream_id == 0
        assert client.closed_by_server()
    finally:
        proc.stop()


def test_unknown_opcode_then_ping(server: ServerProcess) -> None:
    client = _ready(server)
    client.send(0x0777, 1, {})
    reply = client.recv()
    assert reply.error_name == "BAD_OPCODE" and reply.stream_id == 1 and reply.eos
    client.send(PING, 3, {"nonce": "still here"})
    pong = client.recv()
    assert pong.opcode == 0x0090 and pong.body["nonce"] == "still here"


def test_response_opcode_from_client_is_bad_opcode(server: ServerProcess) -> None:
    client = _ready(server)
    client.send(0x0090, 1, {})
    assert client.recv().error_name == "BAD_OPCODE"


def test_unknown_key_names_the_field(server: ServerProcess) -> None:
    client = _ready(server)
    client.send(STATEMENT_GET, 1, {"id": bytes(16), "filters": {"as_of": 1}})
    reply = client.recv()
    assert reply.error_name == "INVALID_ARGUMENT" and reply.body["field"] == "filters"
    client.send(0x0146, 3, {"subject": {"entity": bytes(16), "extra": 1}})
    reply = client.recv()
    assert reply.error_name == "INVALID_ARGUMENT" and reply.body["field"] == "subject.extra"


def test_data_request_before_auth_keeps_connection(server: ServerProcess) -> None:
    client = server.client()
    client.send(STATEMENT_GET, 1, {"id": bytes(16)})
    assert client.recv().error_name == "UNAUTHENTICATED"
    client.send(PING, 3, {})
    assert client.recv().opcode == 0x0090
    ok = client.handshake(server.credentials["api_key"])
    assert ok.opcode == 0x0082


def test_ping_before_hello(server: ServerProcess) -> None:
    client = server.client()
    client.send(PING, 0, {"nonce": 7})
    pong = client.recv()
    assert pong.opcode == 0x0090 and pong.stream_id == 0 and pong.body["nonce"] == 7


def test_stream_id_rules(server: ServerProcess) -> None:
    client = _ready(server)
    client.send(STATEMENT_GET, 2, {"id": bytes(16)})
    assert client.recv().error_name == "BAD_STREAM"
    client.send(STATEMENT_GET, 0, {"id": bytes(16)})
    assert client.recv().error_name == "BAD_STREAM"
    client.send(PING, 5, {})
    assert client.recv().opcode == 0x0090


def test_500_pipelined_pings(server: ServerProcess) -> None:
    client = _ready(server)
    batch = b"".join(frame(PING, 2 * i + 1, cbor2.dumps({"nonce": i})) for i in range(500))
    client.send_bytes(batch)
    seen: dict[int, Any] = {}
    for _ in range(500):
        reply = client.recv()
        assert reply.opcode == 0x0090 and reply.eos
        assert reply.stream_id not in seen
        seen[reply.stream_id] = reply.body["nonce"]
    assert seen == {2 * i + 1: i for i in range(500)}


def test_version_not_supported_closes(server: ServerProcess) -> None:
    client = server.client()
    client.send(HELLO, 0, {"client": "future/9", "versions": [7, 8]})
    reply = client.recv()
    assert reply.error_name == "VERSION_NOT_SUPPORTED"
    assert client.closed_by_server()


def test_bye_answers_and_closes(server: ServerProcess) -> None:
    client = _ready(server)
    client.send(STATEMENT_GET, 1, {"id": bytes(16)})
    client.send(BYE, 3, {})
    names = []
    for _ in range(2):
        reply = client.recv()
        names.append("BYE_OK" if reply.opcode == 0x009F else reply.error_name)
    assert names == ["NOT_FOUND", "BYE_OK"]
    assert client.closed_by_server()


def _cbor_vectors() -> list[dict[str, Any]]:
    path = VECTORS_DIR / "invalid_and_valid_vectors.json"
    vectors: list[dict[str, Any]] = json.loads(path.read_text())
    return vectors


def test_every_invalid_cbor_vector_gets_an_error_and_the_connection_lives(
    server: ServerProcess,
) -> None:
    client = _ready(server)
    vectors = _cbor_vectors()
    invalid = [bytes.fromhex(v["hex"]) for v in vectors if "invalid" in v["flags"]]
    assert len(invalid) > 600
    stream = 1
    for payload in invalid:
        client.send(STATEMENT_GET, stream, raw=payload)
        reply = client.recv()
        assert reply.stream_id == stream
        assert reply.error_name == "INVALID_ARGUMENT", (payload.hex(), reply.body)
        stream += 2
    # Valid CBOR that is not a map of the right keys is refused the same way.
    for vector in vectors:
        if "valid" in vector["flags"]:
            client.send(STATEMENT_GET, stream, raw=bytes.fromhex(vector["hex"]))
            assert client.recv().error_name == "INVALID_ARGUMENT"
            stream += 2
    client.send(PING, stream, {"nonce": "alive"})
    assert client.recv().body["nonce"] == "alive"


def test_idle_connection_is_closed(tmp_path: Path) -> None:
    proc = start_server(tmp_path / "d", env={"BRAIN_SERVER__IDLE_TIMEOUT_S": "0.5"})
    try:
        client = proc.client()
        client.handshake(proc.credentials["api_key"])
        client.sock.settimeout(10)
        started = time.monotonic()
        assert client.closed_by_server()
        assert time.monotonic() - started < 8
    finally:
        proc.stop()


def test_connection_limit_answers_overloaded(tmp_path: Path) -> None:
    proc = start_server(tmp_path / "d", env={"BRAIN_SERVER__MAX_CONNECTIONS": "2"})
    try:
        # Each authenticated before the next connects: a connection still waiting for
        # AUTH would give way to the next one (spec/01-wire.md §3).
        first = proc.client()
        assert first.handshake(proc.credentials["api_key"]).opcode == 0x0082
        second = proc.client()
        assert second.handshake(proc.credentials["api_key"]).opcode == 0x0082
        third = proc.client()
        reply = third.recv()
        assert reply.error_name == "OVERLOADED" and reply.body["retryable"] is True
        assert reply.body["retry_after_ms"] > 0
        first.close()
        time.sleep(0.3)
        fourth = proc.client()
        fourth.send(PING, 1, {})
        assert fourth.recv().opcode == 0x0090
    finally:
        proc.stop()


def test_sigterm_stops_cleanly(server: ServerProcess) -> None:
    assert server.stop() == 0


def test_handshake_must_finish_in_time(server: ServerProcess) -> None:
    client = server.client()
    client.sock.settimeout(20)
    started = time.monotonic()
    assert client.closed_by_server()
    elapsed = time.monotonic() - started
    assert 9.0 <= elapsed < 15.0


def test_raw_socket_garbage_does_not_hang(server: ServerProcess) -> None:
    with socket.create_connection((server.host, server.wire_port), timeout=10) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + b"\x00" * 16)
        data = sock.recv(65536)
    assert data[:4] == b"BRN0"
    assert cbor2.loads(data[32:])["name"] == "BAD_FRAME"
