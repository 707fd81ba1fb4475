"""The route tables of the HTTP ports, and the OpenAPI 3.1 documents built from them.

A port's routes are one tuple of :class:`Route`, each carrying its handler and
what it answers. :func:`install` routes exactly those (method and path, no
implicit ``HEAD``) and serves, at ``GET /openapi.json``, the document
:func:`openapi_document` builds from the same tuple, so the document cannot
list a route the port does not route, nor miss one (spec/06-operations.md §4).
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Final, Literal

from aiohttp import web

from brain import __version__

__all__ = [
    "ERROR_SCHEMA",
    "JSON",
    "OPENAPI_PATH",
    "OPENAPI_VERSION",
    "Answer",
    "Param",
    "Port",
    "Route",
    "error",
    "install",
    "openapi_document",
    "openapi_route",
]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Schema = Mapping[str, object]
"""A JSON Schema (draft 2020-12, the dialect of OpenAPI 3.1)."""

OPENAPI_VERSION: Final = "3.1.0"
OPENAPI_PATH: Final = "/openapi.json"
JSON: Final = "application/json"

ERROR_SCHEMA: Final[Schema] = {
    "type": "object",
    "description": "Every error of the port (spec/06-operations.md §4, 'Errors, both ports').",
    "required": ["error", "message"],
    "properties": {
        "error": {
            "type": "string",
            "description": "The wire error's name (spec/01-wire.md §5), or "
            "METHOD_NOT_ALLOWED or BODY_TOO_LARGE.",
        },
        "message": {"type": "string"},
        "field": {"type": "string", "description": "The offending key or query parameter."},
        "retry_after_ms": {
            "type": "integer",
            "minimum": 0,
            "description": "For a transient error: when to try again (also in Retry-After).",
        },
    },
}
_ERROR_REF: Final = "#/components/schemas/Error"

_PATH_PARAM: Final = re.compile(r"\{(\w+)\}")
"""A path parameter in an aiohttp path, written as OpenAPI writes it: ``{key_id}``."""


@dataclass(frozen=True, slots=True)
class Answer:
    """One answer a route gives: its status, what it means, and its body (None: no body)."""

    status: int
    description: str
    schema: Schema | None = None
    media_type: str = JSON


def error(status: int, description: str) -> Answer:
    """An error answer: its body is the port's one error shape."""
    return Answer(status, description, {"$ref": _ERROR_REF})


@dataclass(frozen=True, slots=True)
class Param:
    """A query or path parameter of a route."""

    name: str
    description: str
    schema: Schema
    required: bool = False
    location: Literal["query", "path"] = "query"


@dataclass(frozen=True, slots=True)
class Route:
    """One route of a port: what the router routes and the document documents."""

    method: str
    path: str
    handler: Handler
    summary: str
    answers: tuple[Answer, ...]
    params: tuple[Param, ...] = ()
    body: Schema | None = None
    """The JSON request body's schema; None for a route that reads no body."""

    @property
    def operation_id(self) -> str:
        """The handler's name, which is unique within a port."""
        return self.handler.__name__.lstrip("_")


@dataclass(frozen=True, slots=True)
class Port:
    """What a port's document says of it as a whole."""

    title: str
    description: str
    routes: tuple[Route, ...]
    bearer: bool = False
    """Every route needs ``Authorization: Bearer``, and may answer 401."""


_EVERY_ROUTE: Final = (error(HTTPStatus.INTERNAL_SERVER_ERROR, "INTERNAL: a server bug."),)
_EVERY_GUARDED_ROUTE: Final = (
    error(HTTPStatus.UNAUTHORIZED, "UNAUTHENTICATED: no valid admin bearer token."),
)

_DOCUMENT: Final = web.AppKey("openapi_document", bytes)
"""The app's OpenAPI document, encoded once when the app is made."""


async def _openapi(request: web.Request) -> web.Response:
    return web.Response(body=request.app[_DOCUMENT], content_type=JSON)


def openapi_route(title: str) -> Route:
    """The route serving a port's own OpenAPI document."""
    return Route(
        "GET",
        OPENAPI_PATH,
        _openapi,
        f"This document: the OpenAPI {OPENAPI_VERSION} description of the {title}.",
        (
            Answer(
                HTTPStatus.OK,
                "The document.",
                {"type": "object", "required": ["openapi", "info", "paths"]},
            ),
        ),
    )


def install(app: web.Application, port: Port) -> None:
    """Route every route of ``port`` on ``app`` and serve its document."""
    paths = [route.path for route in port.routes]
    if OPENAPI_PATH not in paths:
        raise ValueError(f"a port's routes must include {OPENAPI_PATH}")
    for route in port.routes:
        app.router.add_route(route.method, route.path, route.handler)
    app[_DOCUMENT] = json.dumps(openapi_document(port), indent=1).encode()


def _content(schema: Schema | None, media_type: str) -> dict[str, object]:
    return {} if schema is None else {"content": {media_type: {"schema": dict(schema)}}}


def _parameters(route: Route) -> list[dict[str, object]]:
    named = set(_PATH_PARAM.findall(route.path))
    given = {p.name for p in route.params if p.location == "path"}
    if named != given:
        raise ValueError(f"{route.method} {route.path}: path parameters {named} documented {given}")
    return [
        {
            "name": p.name,
            "in": p.location,
            "description": p.description,
            # OpenAPI requires every path parameter.
            "required": p.required or p.location == "path",
            "schema": dict(p.schema),
        }
        for p in route.params
    ]


def _operation(route: Route, bearer: bool) -> dict[str, object]:
    answers: dict[str, object] = {}
    extra = _EVERY_ROUTE + (_EVERY_GUARDED_ROUTE if bearer else ())
    for answer in (*route.answers, *extra):
        key = str(int(answer.status))
        if key in answers:
            raise ValueError(f"{route.method} {route.path}: two answers {key}")
        answers[key] = {
            "description": answer.description,
            **_content(answer.schema, answer.media_type),
        }
    operation: dict[str, object] = {
        "operationId": route.operation_id,
        "summary": route.summary,
        "responses": answers,
    }
    parameters = _parameters(route)
    if parameters:
        operation["parameters"] = parameters
    if route.body is not None:
        operation["requestBody"] = {"required": True, **_content(route.body, JSON)}
    return operation


def openapi_document(port: Port) -> dict[str, object]:
    """The OpenAPI 3.1 document of ``port``: every route, and nothing else."""
    paths: dict[str, dict[str, object]] = {}
    for route in port.routes:
        methods = paths.setdefault(route.path, {})
        method = route.method.lower()
        if method in methods:
            raise ValueError(f"{route.method} {route.path} is routed twice")
        methods[method] = _operation(route, port.bearer)
    components: dict[str, object] = {"schemas": {"Error": dict(ERROR_SCHEMA)}}
    document: dict[str, object] = {
        "openapi": OPENAPI_VERSION,
        "info": {"title": port.title, "version": __version__, "description": port.description},
        "paths": paths,
        "components": components,
    }
    if port.bearer:
        components["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        document["security"] = [{"bearer": []}]
    return document
