"""The HTTP ports' error answers (brain/server/http_errors.py): each error family's
status, and the errors a real server is not made to raise (a bug, a transient
refusal, a failure once a stream is under way), from handlers that raise them."""

from __future__ import annotations

import asyncio
import logging
import re

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from brain.errors import (
    AsOfInFuture,
    BrainError,
    Conflict,
    Internal,
    NotFound,
    Overloaded,
    PermissionDenied,
    Unauthenticated,
    Unavailable,
    registered_errors,
)
from brain.server.http_errors import json_errors, status_for


def test_every_registered_error_has_the_status_of_its_family() -> None:
    expected = {
        AsOfInFuture: 400,
        Unauthenticated: 401,
        PermissionDenied: 403,
        NotFound: 404,
        Conflict: 409,
        Overloaded: 503,
        Unavailable: 503,
        Internal: 500,
    }
    for cls, status in expected.items():
        assert status_for(cls("x")) == status, cls.__name__
    for cls in registered_errors().values():
        assert status_for(cls("x")) in {400, 401, 403, 404, 409, 500, 503}, cls.__name__


def _app() -> web.Application:
    async def boom(_: web.Request) -> web.Response:
        raise RuntimeError("a bug")

    async def busy(_: web.Request) -> web.Response:
        raise Overloaded("too busy", retry_after_ms=1500)

    async def conflict(_: web.Request) -> web.Response:
        raise Conflict("already done", field="start")

    async def cut(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(b"first line\n")
        raise Unavailable("the disk went away mid-stream")

    app = web.Application(middlewares=[json_errors])
    app.router.add_get("/boom", boom)
    app.router.add_get("/busy", busy)
    app.router.add_get("/conflict", conflict)
    app.router.add_get("/cut", cut)
    return app


async def _get(client: TestClient[web.Request, web.Application], path: str) -> tuple[int, object]:
    async with client.get(path) as answer:
        assert answer.content_type == "application/json"
        return answer.status, await answer.json()


def test_errors_of_handlers_are_json(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        async with TestClient(TestServer(_app())) as client:
            with caplog.at_level(logging.ERROR, logger="brain.server"):
                status, body = await _get(client, "/boom")
            assert status == 500 and isinstance(body, dict) and body["error"] == "INTERNAL"
            # The answer names a log id; the log has the traceback under it.
            found = re.search(r"id ([0-9a-f]{32})", str(body["message"]))
            assert found and "a bug" not in str(body["message"])
            logged = [r for r in caplog.records if found[1] in r.getMessage()]
            assert logged and logged[0].exc_info is not None

            async with client.get("/busy") as answer:
                assert answer.status == 503 and answer.headers["Retry-After"] == "2"
                assert await answer.json() == {
                    "error": "OVERLOADED",
                    "message": "too busy",
                    "retry_after_ms": 1500,
                }
            status, body = await _get(client, "/conflict")
            assert status == 409
            assert body == {"error": "CONFLICT", "message": "already done", "field": "start"}

            # Once a stream is under way its answer cannot change: the connection is cut.
            with caplog.at_level(logging.CRITICAL, logger="aiohttp.server"):
                async with client.get("/cut") as answer:
                    assert answer.status == 200
                    with pytest.raises(aiohttp.ClientPayloadError):
                        await answer.read()

    asyncio.run(main())


def test_an_unknown_brain_error_is_a_server_fault() -> None:
    class Strange(BrainError):
        """A BrainError of no family (as a client-side UnknownError is)."""

    assert status_for(Strange("?")) == 500
