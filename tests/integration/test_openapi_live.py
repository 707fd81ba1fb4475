"""A real server's answers are the ones its OpenAPI documents give (spec/06-operations.md
§4): each probe's status is documented for its route, and its body has the documented
media type and validates against the documented schema."""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator

from brain.client import Client
from brain.wire.messages.memory_ops import Encode, EncodeOk
from brain.wire.opcodes import Opcode
from tests.integration.conftest import ServerProcess
from tests.integration.httpcall import http_call


def _resolved(node: Any, document: dict[str, Any]) -> Any:
    """``node`` with every local ``$ref`` replaced by what it points at."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            target: Any = document
            for part in ref[2:].split("/"):
                target = target[part]
            return _resolved(target, document)
        return {key: _resolved(value, document) for key, value in node.items()}
    if isinstance(node, list):
        return [_resolved(item, document) for item in node]
    return node


def _check(
    document: dict[str, Any],
    base: str,
    method: str,
    template: str,
    *,
    path: str | None = None,
    body: Any = None,
    token: str | None = None,
) -> tuple[int, bytes]:
    """Ask ``method`` on the route ``template`` (``path`` filled in), and hold the
    answer to what the document says of that route."""
    operation = document["paths"][template][method.lower()]
    status, raw, headers = http_call(method, base + (path or template), body, token)
    documented = operation["responses"].get(str(status))
    assert documented is not None, f"{method} {path or template}: {status} is not documented"
    content = documented.get("content")
    if content is None:
        assert raw == b"", (method, template, status, raw)
        return status, raw
    media = headers["Content-Type"].split(";")[0].strip()
    assert media in content, f"{method} {template}: {media} is not among {list(content)}"
    schema = _resolved(content[media]["schema"], document)
    if media == "application/json":
        instance: Any = json.loads(raw)
    elif media == "application/x-ndjson":
        # A JSON Lines stream is text; each of its lines is a JSON object.
        instance = raw.decode()
        assert all(isinstance(json.loads(line), dict) for line in instance.splitlines())
    else:
        instance = raw.decode()
    Draft202012Validator(schema).validate(instance)
    return status, raw


def _document(url: str, token: str | None = None) -> dict[str, Any]:
    status, raw, headers = http_call("GET", url, token=token)
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    document = json.loads(raw)
    assert isinstance(document, dict) and document["openapi"] == "3.1.0"
    return document


def test_the_public_port_answers_as_documented(server: ServerProcess) -> None:
    base = f"http://{server.host}:{server.public_port}"
    document = _document(base + "/openapi.json")
    assert _check(document, base, "GET", "/healthz") == (200, b"ok")
    assert _check(document, base, "GET", "/readyz")[0] == 200
    status, raw = _check(document, base, "GET", "/metrics")
    assert status == 200 and b"brain_requests_total" in raw
    assert _check(document, base, "GET", "/openapi.json")[0] == 200


def test_the_admin_port_answers_as_documented(server: ServerProcess) -> None:
    base = f"http://127.0.0.1:{server.admin_port}"
    token = server.credentials["admin_token"]
    assert http_call("GET", base + "/openapi.json")[0] == 401
    document = _document(base + "/openapi.json", token)

    def check(method: str, template: str, **kwargs: Any) -> tuple[int, bytes]:
        return _check(document, base, method, template, token=token, **kwargs)

    assert check("GET", "/v1/export", path="/v1/export?namespace=default")[0] == 404
    with Client.connect(
        "127.0.0.1", server.wire_port, api_key=server.credentials["api_key"]
    ) as client:
        made = client.call(Opcode.ENCODE, Encode(request_id=bytes(16), text="Alice met Bob."))
        assert isinstance(made, EncodeOk)

    status, raw = check("POST", "/v1/keys", body={"namespace": "team-a"})
    assert status == 201
    key_id = json.loads(raw)["key_id"]
    assert check("POST", "/v1/keys", body={"namespace": "team-a", "x": 1})[0] == 400
    assert check("GET", "/v1/keys")[0] == 200
    assert check("DELETE", "/v1/keys/{key_id}", path=f"/v1/keys/{key_id}")[0] == 204
    assert check("DELETE", "/v1/keys/{key_id}", path=f"/v1/keys/{key_id}")[0] == 404
    assert check("GET", "/v1/config")[0] == 200
    assert check("GET", "/v1/stats")[0] == 200
    assert check("GET", "/v1/wal")[0] == 200
    assert check("GET", "/v1/cluster")[0] == 200
    assert check("GET", "/v1/audit", path="/v1/audit?namespace=default&limit=5")[0] == 200
    assert check("GET", "/v1/audit", path="/v1/audit?limit=5")[0] == 400
    explained = check("POST", "/v1/explain", body={"namespace": "default", "cue": "Alice"})
    assert explained[0] == 200
    status, raw = check("GET", "/v1/export", path="/v1/export?namespace=default")
    assert status == 200 and json.loads(raw.splitlines()[0])["format"] == "brain-export/1"
    assert check("POST", "/v1/snapshots")[0] == 201
    assert check("GET", "/v1/snapshots")[0] == 200
    assert check("POST", "/v1/purge")[0] == 200
    status, _ = check("GET", "/v1/import", path="/v1/import?namespace=default&export_id=00ff")
    assert status == 200
    assert check("POST", "/v1/import/finish", body={"header": {}})[0] == 400
