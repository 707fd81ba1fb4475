"""Every error either HTTP port answers is JSON of one shape, with its status
(spec/06-operations.md §4, "Errors"): a real server, asked wrongly."""

from __future__ import annotations

import json
from typing import Any

from brain.server.http import ADMIN_MAX_BODY
from tests.integration.conftest import ServerProcess
from tests.integration.httpcall import http_call


def _error(answer: tuple[int, bytes, dict[str, str]], status: int, name: str) -> dict[str, Any]:
    """The JSON error body of ``answer``, checked for its status, type and shape."""
    got, raw, headers = answer
    assert got == status, (got, raw)
    assert headers["Content-Type"].split(";")[0] == "application/json", headers
    body = json.loads(raw)
    assert isinstance(body, dict) and body["error"] == name, body
    assert isinstance(body["message"], str) and body["message"]
    assert set(body) <= {"error", "message", "field", "retry_after_ms"}, body
    return body


def test_public_port_errors_are_json(server: ServerProcess) -> None:
    base = f"http://{server.host}:{server.public_port}"
    body = _error(http_call("GET", f"{base}/nope"), 404, "NOT_FOUND")
    assert "/nope" in body["message"]
    for method, path in (("POST", "/readyz"), ("DELETE", "/metrics"), ("PUT", "/healthz")):
        answer = http_call(method, f"{base}{path}", raw=b"{}")
        _error(answer, 405, "METHOD_NOT_ALLOWED")
        assert "GET" in answer[2]["Allow"].split(","), (path, answer)
    # Success bodies are as they were: the metrics stay Prometheus text.
    status, _, headers = http_call("GET", f"{base}/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain")


def test_admin_port_errors_are_json(server: ServerProcess) -> None:
    base = f"http://127.0.0.1:{server.admin_port}"
    token = server.credentials["admin_token"]
    body = _error(http_call("GET", f"{base}/v1/nope", token=token), 404, "NOT_FOUND")
    assert "/v1/nope" in body["message"]
    answer = http_call("GET", f"{base}/v1/purge", token=token)
    _error(answer, 405, "METHOD_NOT_ALLOWED")
    assert answer[2]["Allow"] == "POST"
    answer = http_call("PUT", f"{base}/v1/keys", raw=b"{}", token=token)
    _error(answer, 405, "METHOD_NOT_ALLOWED")
    assert set(answer[2]["Allow"].split(",")) >= {"GET", "POST"}

    # Bad bodies: not JSON, not an object, a wrong field, too large.
    _error(http_call("POST", f"{base}/v1/keys", raw=b"{no", token=token), 400, "INVALID_ARGUMENT")
    _error(http_call("POST", f"{base}/v1/keys", [1, 2], token=token), 400, "INVALID_ARGUMENT")
    body = _error(
        http_call("POST", f"{base}/v1/keys", {"namespace": 7}, token=token), 400, "INVALID_ARGUMENT"
    )
    assert body["field"] == "namespace"
    huge = json.dumps({"namespace": "a" * ADMIN_MAX_BODY}).encode()
    answer = http_call("POST", f"{base}/v1/keys", raw=huge, token=token)
    body = _error(answer, 413, "BODY_TOO_LARGE")
    assert str(ADMIN_MAX_BODY) in body["message"]
    _error(http_call("GET", f"{base}/v1/audit", token=token), 400, "INVALID_ARGUMENT")
    _error(http_call("DELETE", f"{base}/v1/keys/zz", token=token), 404, "NOT_FOUND")

    # Without the token every route, known or not, is 401 before anything else.
    for method, path in (("GET", "/v1/nope"), ("GET", "/v1/purge"), ("POST", "/v1/keys")):
        answer = http_call(method, f"{base}{path}", raw=b"{no", token="wrong")
        _error(answer, 401, "UNAUTHENTICATED")
        assert answer[2]["WWW-Authenticate"].startswith("Bearer")
    # The server still serves after all of that.
    assert http_call("GET", f"{base}/v1/keys", token=token)[0] == 200
