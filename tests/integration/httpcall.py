"""One HTTP request to a test's server, answered whatever its status."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any, Final

HTTP_TIMEOUT_S: Final = 10
"""Longest one request to a local test server may take: far more than any answer does."""


def http_call(
    method: str,
    url: str,
    body: Any = None,
    token: str | None = None,
    *,
    raw: bytes | None = None,
    timeout: float = HTTP_TIMEOUT_S,
) -> tuple[int, bytes, dict[str, str]]:
    """``method url`` with ``body`` as JSON (or the bytes ``raw`` as they are) and the
    bearer ``token``, waiting at most ``timeout``: the status, the body and the
    headers, errors included."""
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read(), dict(exc.headers)
