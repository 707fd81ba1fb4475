"""Error answers of the two HTTP ports (spec/06-operations.md §4): one JSON shape for all.

Every error either port answers, from a handler's :class:`~brain.errors.BrainError`,
from aiohttp's routing (no such route, a method the route does not take, a body
over the limit) or from a bug, is ``{"error": NAME, "message": …, "field"?: …,
"retry_after_ms"?: …}`` with ``Content-Type: application/json``. ``NAME`` is the
wire error's name (spec/01-wire.md §5) where one means the same thing, and one of
:data:`HTTP_ONLY_ERRORS` where none does. The status follows the error's family
in :mod:`brain.errors`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from http import HTTPStatus
from typing import Final

from aiohttp import web

from brain.errors import (
    AccessError,
    BrainError,
    Internal,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    RequestError,
    StateError,
    TransientError,
    Unauthenticated,
    Unavailable,
)
from brain.ids import new_id
from brain.server.openapi import OPENAPI_PATH

__all__ = [
    "BODY_TOO_LARGE",
    "HTTP_ONLY_ERRORS",
    "METHOD_NOT_ALLOWED",
    "brain_error_response",
    "error_response",
    "json_errors",
    "status_for",
]

log = logging.getLogger("brain.server")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

METHOD_NOT_ALLOWED: Final = "METHOD_NOT_ALLOWED"
"""405: the path is a route, but not for this method (the ``Allow`` header lists those it takes)."""

BODY_TOO_LARGE: Final = "BODY_TOO_LARGE"
"""413: the request body is over the route's limit."""

HTTP_ONLY_ERRORS: Final = (METHOD_NOT_ALLOWED, BODY_TOO_LARGE)
"""The error names of HTTP's own conditions, which no wire error means: the wire has
no methods, and its size limit (``FRAME_TOO_LARGE``) closes the connection."""

_NAME_BY_STATUS: Final[Mapping[int, str]] = {
    HTTPStatus.BAD_REQUEST: InvalidArgument.name,
    HTTPStatus.UNAUTHORIZED: Unauthenticated.name,
    HTTPStatus.FORBIDDEN: PermissionDenied.name,
    HTTPStatus.NOT_FOUND: NotFound.name,
    HTTPStatus.METHOD_NOT_ALLOWED: METHOD_NOT_ALLOWED,
    HTTPStatus.REQUEST_ENTITY_TOO_LARGE: BODY_TOO_LARGE,
    HTTPStatus.SERVICE_UNAVAILABLE: Unavailable.name,
}
"""The name of an error aiohttp raises itself, by its status. Another 4xx is a request
the client must change (``INVALID_ARGUMENT``), another 5xx the server's fault
(``INTERNAL``)."""

_KEPT_HEADERS: Final = frozenset({"allow", "www-authenticate", "retry-after"})
"""Headers of an aiohttp error kept on its JSON answer: the ones that tell the client
what to do next. Its Content-Type and Content-Length describe the text body replaced."""


def status_for(error: BrainError) -> int:
    """The HTTP status of ``error``, by its family in :mod:`brain.errors`: a request
    error 400, unauthenticated 401, denied 403, not found 404, another state error 409,
    a transient error 503, anything else (a bug, an unknown code) 500."""
    if isinstance(error, RequestError):
        return HTTPStatus.BAD_REQUEST
    if isinstance(error, AccessError):
        return (
            HTTPStatus.FORBIDDEN if isinstance(error, PermissionDenied) else HTTPStatus.UNAUTHORIZED
        )
    if isinstance(error, NotFound):
        return HTTPStatus.NOT_FOUND
    if isinstance(error, StateError):
        return HTTPStatus.CONFLICT
    if isinstance(error, TransientError):
        return HTTPStatus.SERVICE_UNAVAILABLE
    return HTTPStatus.INTERNAL_SERVER_ERROR


def error_response(
    status: int,
    name: str,
    message: str,
    *,
    field: str | None = None,
    retry_after_ms: int | None = None,
    headers: Mapping[str, str] | None = None,
) -> web.Response:
    """The JSON answer of one error. A ``retry_after_ms`` is also sent as ``Retry-After``,
    in whole seconds rounded up, for HTTP clients that know only that header."""
    body: dict[str, object] = {"error": name, "message": message}
    if field is not None:
        body["field"] = field
    sent = dict(headers or {})
    if retry_after_ms is not None:
        body["retry_after_ms"] = retry_after_ms
        sent["Retry-After"] = str(max(1, math.ceil(retry_after_ms / 1000)))
    return web.json_response(body, status=status, headers=sent)


def brain_error_response(error: BrainError) -> web.Response:
    """The JSON answer of a :class:`BrainError` a handler raised."""
    return error_response(
        status_for(error),
        error.wire_name,
        error.message,
        field=error.field,
        retry_after_ms=error.retry_after_ms,
    )


def _http_error_response(request: web.Request, exc: web.HTTPException) -> web.Response:
    """The JSON answer of an error aiohttp raised (routing, body size)."""
    status = exc.status
    if status == HTTPStatus.NOT_FOUND:
        message = (
            f"no route {request.method} {request.path} on this port; "
            f"GET {OPENAPI_PATH} lists every route"
        )
    elif isinstance(exc, web.HTTPMethodNotAllowed):
        allowed = ", ".join(sorted(exc.allowed_methods))
        message = f"{request.path} does not take {request.method}; it takes {allowed}"
    else:
        message = exc.text or exc.reason
    name = _NAME_BY_STATUS.get(
        status, InvalidArgument.name if status < HTTPStatus.INTERNAL_SERVER_ERROR else Internal.name
    )
    kept = {k: v for k, v in exc.headers.items() if k.lower() in _KEPT_HEADERS}
    return error_response(status, name, message, headers=kept)


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Answer every error of the app as JSON: a :class:`BrainError`, an aiohttp HTTP
    error (no route, wrong method, body too large), and an unexpected exception, which
    is logged with its traceback under a log id that the ``INTERNAL`` answer names.

    An answer already under way (a streamed export) cannot be replaced: its error goes
    on to aiohttp, which closes the connection, so the client sees a cut stream."""
    try:
        return await handler(request)
    except BrainError as exc:
        if request.writer.output_size > 0:
            raise
        return brain_error_response(exc)
    except web.HTTPException as exc:
        if exc.status < HTTPStatus.BAD_REQUEST or request.writer.output_size > 0:
            raise
        return _http_error_response(request, exc)
    except Exception:
        if request.writer.output_size > 0:
            raise
        log_id = new_id().hex()
        log.exception("internal error %s on %s %s", log_id, request.method, request.path)
        return error_response(
            HTTPStatus.INTERNAL_SERVER_ERROR,
            Internal.name,
            f"internal error; see the server log for id {log_id}",
        )
