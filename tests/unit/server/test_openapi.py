"""The OpenAPI documents of the HTTP ports (brain/server/openapi.py): each is valid
OpenAPI 3.1, is served by its port, and lists exactly the routes the port routes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from jsonschema import Draft202012Validator
from openapi_spec_validator import OpenAPIV31SpecValidator, validate

from brain.server.backend import UnbuiltBackend
from brain.server.config import load_config
from brain.server.http import ADMIN_PORT, PUBLIC_PORT, make_admin_app, make_public_app
from brain.server.keys import KeyStore
from brain.server.metrics import ServerMetrics
from brain.server.openapi import (
    OPENAPI_PATH,
    Answer,
    Param,
    Port,
    Route,
    install,
    openapi_document,
    openapi_route,
)

TOKEN = "unit-test-admin-token"

METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}
"""The keys of an OpenAPI path item that are operations."""


@pytest.fixture
def apps(tmp_path: Path) -> Iterator[dict[str, web.Application]]:
    """Both ports' apps, as the server makes them (the admin one with a known token)."""
    keys = KeyStore(tmp_path)
    config = load_config(environ={}, overrides={"admin.token": TOKEN})
    try:
        yield {
            "public": make_public_app(UnbuiltBackend().status, ServerMetrics()),
            "admin": make_admin_app(config, keys),
        }
    finally:
        keys.close()


def _served(app: web.Application) -> tuple[str, dict[str, Any]]:
    """The Content-Type and the document ``app`` answers ``GET /openapi.json`` with
    (an app is served once: it belongs to the event loop that first ran it)."""

    async def main() -> tuple[str, dict[str, Any]]:
        async with TestClient(TestServer(app)) as client:
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with client.get(OPENAPI_PATH, headers=headers) as answer:
                assert answer.status == 200
                return answer.content_type, json.loads(await answer.read())

    return asyncio.run(main())


def _routed(app: web.Application) -> set[tuple[str, str]]:
    """Every (method, path) the app's router routes."""
    return {
        (route.method, route.resource.canonical) for route in app.router.routes() if route.resource
    }


def _documented(document: dict[str, Any]) -> set[tuple[str, str]]:
    """Every (method, path) the document lists."""
    return {
        (method.upper(), path)
        for path, item in document["paths"].items()
        for method in item
        if method in METHODS
    }


def test_each_port_serves_a_valid_document_of_exactly_its_routes(
    apps: dict[str, web.Application],
) -> None:
    served = {name: _served(app) for name, app in apps.items()}
    for name, app in apps.items():
        content_type, document = served[name]
        assert content_type == "application/json", name
        validate(document, cls=OpenAPIV31SpecValidator)
        assert document["openapi"] == "3.1.0"
        routed = _routed(app)
        assert routed and _documented(document) == routed, name
        # No route answers HEAD unless the table says so.
        assert not any(method == "HEAD" for method, _ in routed), name
        operations = [
            item[method]
            for item in document["paths"].values()
            for method in item
            if method in METHODS
        ]
        ids = [operation["operationId"] for operation in operations]
        assert len(ids) == len(set(ids)), name
        for operation in operations:
            responses = operation["responses"]
            assert any(status.startswith("2") for status in responses), operation
            assert "500" in responses, operation
            assert ("401" in responses) == (name == "admin"), operation
            for answer in responses.values():
                for media in answer.get("content", {}).values():
                    Draft202012Validator.check_schema(media["schema"])
    assert _documented(served["public"][1]) >= {("GET", "/readyz"), ("GET", "/metrics")}
    assert ("DELETE", "/v1/keys/{key_id}") in _documented(served["admin"][1])


def test_the_admin_document_needs_the_token(apps: dict[str, web.Application]) -> None:
    async def main() -> int:
        async with (
            TestClient(TestServer(apps["admin"])) as client,
            client.get(OPENAPI_PATH) as answer,
        ):
            return answer.status

    assert asyncio.run(main()) == 401
    document = openapi_document(ADMIN_PORT)
    assert document["security"] == [{"bearer": []}]
    assert "security" not in openapi_document(PUBLIC_PORT)


async def _nothing(_: web.Request) -> web.Response:
    return web.Response()


def test_a_route_table_that_cannot_be_documented_is_refused() -> None:
    ok = Answer(200, "ok")
    served = openapi_route("a test port")
    with pytest.raises(ValueError, match=OPENAPI_PATH):
        install(web.Application(), Port("t", "", (Route("GET", "/a", _nothing, "a", (ok,)),)))
    twice = (Route("GET", "/a", _nothing, "a", (ok,)), Route("GET", "/a", _nothing, "b", (ok,)))
    with pytest.raises(ValueError, match="routed twice"):
        openapi_document(Port("t", "", (*twice, served)))
    undocumented = Route("DELETE", "/a/{id}", _nothing, "a", (ok,))
    with pytest.raises(ValueError, match="path parameters"):
        openapi_document(Port("t", "", (undocumented, served)))
    documented = Route(
        "DELETE", "/a/{id}", _nothing, "a", (ok,), params=(Param("id", "", {}, location="path"),)
    )
    parameters = openapi_document(Port("t", "", (documented, served)))["paths"]
    assert isinstance(parameters, dict)
    assert parameters["/a/{id}"]["delete"]["parameters"][0]["required"] is True
    clash = Route("GET", "/b", _nothing, "b", (Answer(500, "mine"),))
    with pytest.raises(ValueError, match="two answers 500"):
        openapi_document(Port("t", "", (clash, served)))
