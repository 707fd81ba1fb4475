"""The two HTTP ports (spec/06-operations.md §4): public health and metrics, and the admin API.

The public port needs no credentials and says nothing private: liveness,
readiness and Prometheus metrics. Every admin route needs
``Authorization: Bearer <admin_token>`` and answers 401 without it; bodies are
JSON both ways. Every error of either port is a JSON object with the wire error's
name (:mod:`brain.server.http_errors`).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import struct
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import TYPE_CHECKING, Final

from aiohttp import web

from brain.engine.admin.snapshot import SNAPSHOT_DIR, list_snapshots
from brain.engine.admin.transfer import EXPORT_FORMAT, Header, Row
from brain.engine.records.audit import DEFAULT_AUDIT_LIMIT, MAX_AUDIT_LIMIT
from brain.errors import InvalidArgument, NotFound, Unauthenticated, Unavailable
from brain.ids import new_id
from brain.server import http_schemas as schemas
from brain.server.backend import BackendStatus
from brain.server.config import Config
from brain.server.http_errors import error_response, json_errors
from brain.server.keys import KeyChanges, KeyStore, parse_permissions
from brain.server.metrics import ServerMetrics
from brain.server.openapi import Answer, Param, Port, Route, error, install, openapi_route
from brain.wire.messages.recall_ops import ExplainRequest
from brain.wire.opcodes import Opcode

if TYPE_CHECKING:
    from brain.engine.database import Database
    from brain.engine.replication.registry import NodeRegistry

__all__ = [
    "ADMIN",
    "ADMIN_MAX_BODY",
    "ADMIN_PORT",
    "ADMIN_ROUTES",
    "IMPORT_MAX_BODY",
    "IMPORT_MAX_ROWS",
    "PUBLIC",
    "PUBLIC_PORT",
    "PUBLIC_ROUTES",
    "AdminState",
    "PublicState",
    "make_admin_app",
    "make_public_app",
]

ADMIN_MAX_BODY: Final = 1024 * 1024
"""Admin requests are small JSON documents; a larger body is refused."""

PROMETHEUS_CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

Mover = Callable[[str, str], Awaitable[dict[str, object]]]
"""Moves ``namespace`` to ``to_shard`` and answers what it did (a cluster node's
:mod:`brain.server.namespace_move`)."""

EXPORT_CHUNK_LINES: Final = 1000
"""Export lines read per trip to the worker thread: small enough to stream steadily."""

IMPORT_MAX_ROWS: Final = 10_000
"""Rows one import request may carry: one logged write, a few megabytes at most."""

IMPORT_MAX_BODY: Final = 64 * 1024 * 1024
"""The body of one import request (every other admin route keeps
:data:`ADMIN_MAX_BODY`): room for the largest row a record can put. One write
carries at most about 4 MiB of data (``WRITE_BUDGET``), and the largest row it
derives, the lexical row of a text of many distinct short words, is a few times
its text; an export doubles each row in hex. It is also the WAL's largest
record (``MAX_PAYLOAD``), which the batch becomes."""


def _take(lines: Iterator[str], count: int) -> list[str]:
    """Up to ``count`` more lines of an export (fewer at its end)."""
    chunk: list[str] = []
    for line in lines:
        chunk.append(line)
        if len(chunk) == count:
            break
    return chunk


def _row(index: int, row: object) -> Row:
    """One row of an import request."""
    try:
        if isinstance(row, dict):
            table, key, value = str(row["table"]), str(row["key"]), str(row["value"])
            return Row(table.encode(), bytes.fromhex(key), bytes.fromhex(value))
    except (KeyError, ValueError) as exc:
        raise InvalidArgument(
            f"rows[{index}] is not a row of an export: {exc}", field="rows"
        ) from exc
    raise InvalidArgument(f"rows[{index}] is not a row of an export", field="rows")


def _header(header: object) -> Header:
    """An export's header line, as an import request names it."""
    if not isinstance(header, dict) or header.get("format") != EXPORT_FORMAT:
        raise InvalidArgument(f"header must be an export header ({EXPORT_FORMAT})", field="header")
    namespace, eid, clock = header.get("namespace"), header.get("export_id"), header.get("clock")
    if not isinstance(namespace, str) or not isinstance(eid, str) or not isinstance(clock, int):
        raise InvalidArgument("header needs namespace, export_id and clock", field="header")
    try:
        return Header(namespace, bytes.fromhex(eid), clock)
    except ValueError:
        raise InvalidArgument("header.export_id must be hex", field="header") from None


def _count(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgument(f"{name} must be a whole number, 0 or more", field=name)
    return value


def parse_import(body: dict[str, object]) -> tuple[Header, list[Row], int | None]:
    """An import request: ``{"header": <the export's header line>, "start"?: n,
    "rows": [...]}``, ``start`` being the index in the export of the first row."""
    header = _header(body.get("header"))
    rows = body.get("rows")
    if not isinstance(rows, list) or len(rows) > IMPORT_MAX_ROWS:
        raise InvalidArgument(f"rows must be a list of at most {IMPORT_MAX_ROWS}", field="rows")
    start = body.get("start")
    first = None if start is None else _count(start, "start")
    return header, [_row(index, row) for index, row in enumerate(rows)], first


def parse_finish(body: dict[str, object]) -> tuple[Header, int, list[bytes]]:
    """A request closing an import: ``{"header": …, "trailer": <the export's trailer>}``."""
    header = _header(body.get("header"))
    trailer = body.get("trailer")
    if not isinstance(trailer, dict) or trailer.get("end") is not True:
        raise InvalidArgument("trailer must be the export's last line", field="trailer")
    total = _count(trailer.get("rows"), "trailer")
    scopes = trailer.get("scopes", [])
    try:
        if isinstance(scopes, list):
            return header, total, [bytes.fromhex(str(scope)) for scope in scopes]
    except ValueError:
        pass
    raise InvalidArgument("trailer.scopes must be a list of hex scope prefixes", field="trailer")


def _json_value(value: object) -> object:
    """A wire value as JSON: byte strings in hex, maps and arrays followed."""
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    return value


@dataclass(frozen=True, slots=True)
class PublicState:
    """What the public port's handlers read (``request.app[PUBLIC]``)."""

    status: Callable[[], BackendStatus]
    """Readiness, as ``/readyz`` answers it."""
    metrics: ServerMetrics


PUBLIC: Final = web.AppKey("public", PublicState)
"""The public app's state."""


async def _healthz(_: web.Request) -> web.Response:
    return web.Response(text="ok")


async def _readyz(request: web.Request) -> web.Response:
    now = request.app[PUBLIC].status()
    if now.ready:
        return web.json_response({"ready": True, "applied_lsn": now.applied_lsn})
    return web.json_response({"ready": False, "reason": now.reason or "not ready"}, status=503)


async def _metrics(request: web.Request) -> web.Response:
    body = await asyncio.to_thread(request.app[PUBLIC].metrics.render)
    return web.Response(body=body, headers={"Content-Type": PROMETHEUS_CONTENT_TYPE})


_UNAVAILABLE: Final = error(
    HTTPStatus.SERVICE_UNAVAILABLE, "UNAVAILABLE: this server serves no database, or not now."
)
_BAD_INPUT: Final = error(
    HTTPStatus.BAD_REQUEST, "INVALID_ARGUMENT: a body or parameter that does not read."
)
_BAD_BODY: Final = (
    _BAD_INPUT,
    error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "BODY_TOO_LARGE: a body over the route's limit."),
)
_NAMESPACE_QUERY: Final = Param("namespace", "The namespace.", schemas.NAMESPACE, required=True)

_ROUTING: Final = (
    "Every error is the Error schema, with Content-Type application/json: a path no "
    "route has is 404 NOT_FOUND, a route asked with a method it does not take 405 "
    "METHOD_NOT_ALLOWED with an Allow header (spec/06-operations.md §4)."
)

PUBLIC_TITLE: Final = "Brain public port"

PUBLIC_ROUTES: Final = (
    Route(
        "GET",
        "/healthz",
        _healthz,
        "Liveness: the process serves.",
        (Answer(HTTPStatus.OK, "Serving.", schemas.HEALTHZ, "text/plain"),),
    ),
    Route(
        "GET",
        "/readyz",
        _readyz,
        "Readiness: recovery is done and writes are possible.",
        (
            Answer(HTTPStatus.OK, "Ready.", schemas.READY),
            Answer(HTTPStatus.SERVICE_UNAVAILABLE, "Recovering, or read-only.", schemas.NOT_READY),
        ),
    ),
    Route(
        "GET",
        "/metrics",
        _metrics,
        "Prometheus metrics (text exposition format 0.0.4; spec/06-operations.md §5).",
        (Answer(HTTPStatus.OK, "Every metric.", schemas.TEXT, "text/plain"),),
    ),
    openapi_route(PUBLIC_TITLE),
)
"""Every route of the public port, and what each answers."""

PUBLIC_PORT: Final = Port(
    PUBLIC_TITLE,
    "Health, readiness and metrics; no authentication, nothing private. " + _ROUTING,
    PUBLIC_ROUTES,
)


def make_public_app(status: Callable[[], BackendStatus], metrics: ServerMetrics) -> web.Application:
    """The public port's routes (:data:`PUBLIC_ROUTES`), readiness from ``status``."""
    app = web.Application(middlewares=[json_errors])
    app[PUBLIC] = PublicState(status, metrics)
    install(app, PUBLIC_PORT)
    return app


@dataclass(frozen=True, slots=True)
class AdminState:
    """What the admin port's handlers read (``request.app[ADMIN]``)."""

    config: Config
    keys: KeyStore
    database: Database | None
    """The database served, or None on a server without one (its routes then answer
    UNAVAILABLE)."""
    registry: NodeRegistry | None = None
    """The cluster's node registry (None on a single node)."""
    mover: Mover | None = None
    """Moves a namespace to this node's shard (None on a single node)."""
    shared_keys: KeyChanges | None = None
    """The cluster's key table, through which a cluster node creates and deletes keys
    (None on a single node: :attr:`keys` itself)."""

    @property
    def key_changes(self) -> KeyChanges:
        """Where the key routes create and delete keys."""
        return self.keys if self.shared_keys is None else self.shared_keys

    @property
    def snapshot_dir(self) -> Path:
        """Where bundles made through the admin port go."""
        return self.config.data_path / SNAPSHOT_DIR

    def served(self) -> Database:
        """The database, for a route that needs it."""
        if self.database is None:
            raise Unavailable("this route needs the database, which this server does not serve")
        return self.database

    async def token_ok(self, presented: str) -> bool:
        """Whether ``presented`` is the admin token (the configured one, else the stored one)."""
        configured = self.config.admin.token
        if configured:
            return hmac.compare_digest(presented.encode(), configured.encode())
        return await asyncio.to_thread(self.keys.check_admin_token, presented)


ADMIN: Final = web.AppKey("admin", AdminState)
"""The admin app's state."""


@web.middleware
async def _guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    """401 without the admin bearer token, before anything else: whatever the route,
    known or not, a caller without the token learns nothing of it."""
    header = request.headers.get("Authorization", "")
    scheme, _, presented = header.partition(" ")
    if (
        scheme.lower() != "bearer"
        or not presented
        or not await request.app[ADMIN].token_ok(presented.strip())
    ):
        return error_response(
            HTTPStatus.UNAUTHORIZED,
            Unauthenticated.name,
            "a valid admin bearer token is required",
            headers={"WWW-Authenticate": 'Bearer realm="brain-admin"'},
        )
    return await handler(request)


async def _read_json(request: web.Request) -> dict[str, object]:
    try:
        body = json.loads(await request.read() or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise InvalidArgument("body must be a JSON object")
    return body


async def _create_key(request: web.Request) -> web.Response:
    body = await _read_json(request)
    unknown = sorted(set(body) - {"namespace", "permissions"})
    if unknown:
        raise InvalidArgument(f"unknown key {unknown[0]!r}", field=unknown[0])
    namespace = body.get("namespace")
    if not isinstance(namespace, str):
        raise InvalidArgument("namespace (text) is required", field="namespace")
    raw_perms = body.get("permissions", ["read", "write"])
    if not isinstance(raw_perms, list) or not all(isinstance(p, str) for p in raw_perms):
        raise InvalidArgument("permissions must be a list of text", field="permissions")
    permissions = parse_permissions(str(p) for p in raw_perms)
    keys = request.app[ADMIN].key_changes
    api_key, record = await asyncio.to_thread(keys.create_key, namespace, permissions, via="admin")
    return web.json_response({"api_key": api_key, **record.to_json()}, status=201)


async def _list_keys(request: web.Request) -> web.Response:
    records = await asyncio.to_thread(request.app[ADMIN].keys.list_keys)
    return web.json_response({"keys": [r.to_json() for r in records]})


async def _delete_key(request: web.Request) -> web.Response:
    raw = request.match_info["key_id"]
    try:
        key_id = bytes.fromhex(raw)
    except ValueError:
        raise NotFound(f"no key with id {raw}") from None
    if len(key_id) != 16:
        raise NotFound(f"no key with id {raw}")
    await asyncio.to_thread(request.app[ADMIN].key_changes.delete_key, key_id, via="admin")
    return web.Response(status=204)


async def _show_config(request: web.Request) -> web.Response:
    return web.json_response(request.app[ADMIN].config.redacted())


async def _create_snapshot(request: web.Request) -> web.Response:
    state = request.app[ADMIN]
    db = state.served()
    bundle = state.snapshot_dir / time.strftime("%Y%m%dT%H%M%SZ-", time.gmtime())
    bundle = bundle.with_name(bundle.name + new_id().hex()[-8:])
    info = await asyncio.to_thread(db.snapshot, bundle, extra_envs={"keys": state.keys.env})
    return web.json_response(info.to_json(), status=201)


async def _show_snapshots(request: web.Request) -> web.Response:
    found = await asyncio.to_thread(list_snapshots, request.app[ADMIN].snapshot_dir)
    return web.json_response({"snapshots": [s.to_json() for s in found]})


async def _show_audit(request: web.Request) -> web.Response:
    state = request.app[ADMIN]
    db = state.served()
    namespace = request.query.get("namespace", "")
    if not namespace:
        raise InvalidArgument("namespace is required", field="namespace")
    raw_limit = request.query.get("limit", str(DEFAULT_AUDIT_LIMIT))
    if not raw_limit.isdigit() or not 1 <= int(raw_limit) <= MAX_AUDIT_LIMIT:
        raise InvalidArgument(f"limit must be 1..{MAX_AUDIT_LIMIT}", field="limit")
    limit = int(raw_limit)
    records = await asyncio.to_thread(db.audit, namespace, limit)
    key_changes = await asyncio.to_thread(state.keys.key_audit, namespace, limit)
    # Two logs, one answer: newest first across both.
    entries = sorted(records + key_changes, key=lambda e: int(str(e["recorded_at"])), reverse=True)[
        :limit
    ]
    return web.json_response({"entries": [_json_value(e) for e in entries]})


async def _explain(request: web.Request) -> web.Response:
    db = request.app[ADMIN].served()
    body = await _read_json(request)
    namespace = body.pop("namespace", None)
    if not isinstance(namespace, str) or not namespace:
        raise InvalidArgument("namespace (text) is required", field="namespace")
    vector = body.get("vector")
    if vector is not None:
        # JSON has no bytes: the vector comes as an array of numbers.
        if not isinstance(vector, list) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in vector
        ):
            raise InvalidArgument("vector must be an array of numbers", field="vector")
        body["vector"] = struct.pack(f"<{len(vector)}f", *vector)
    anchor = body.get("entity_anchor")
    if isinstance(anchor, str):
        try:
            body["entity_anchor"] = bytes.fromhex(anchor)
        except ValueError:
            raise InvalidArgument("entity_anchor must be hex", field="entity_anchor") from None
    question = ExplainRequest.from_wire(body)
    answer = await asyncio.to_thread(db.read, namespace, Opcode.EXPLAIN, question)
    # spec/06-operations.md §4 answers the Explain object itself: its fields at the top level,
    # then EXPLAIN's coverage and ranked hits beside them (spec/06-operations.md).
    wire = answer.to_wire()
    shown = wire.pop("explain")
    assert isinstance(shown, dict)
    return web.json_response(_json_value({**shown, **wire}))


def _stats(db: Database) -> dict[str, object]:
    return {**db.stats(), "replication": db.replication_status().to_json()}


async def _show_stats(request: web.Request) -> web.Response:
    return web.json_response(await asyncio.to_thread(_stats, request.app[ADMIN].served()))


def _cluster(state: AdminState) -> dict[str, object]:
    """``GET /v1/cluster``: this node's replication status and, on a cluster, every
    registered node's entry (spec/06-operations.md §4)."""
    status = state.served().replication_status()
    answer: dict[str, object] = {
        "cluster": status.cluster,
        "node": status.to_json(),
        "planner": status.planner,
        "nodes": [],
    }
    if state.registry is not None:
        from brain.engine.replication.registry import HEARTBEAT_S, STALE_AFTER_S

        answer["nodes"] = [entry.to_json() for entry in state.registry.nodes()]
        answer["heartbeat_s"] = HEARTBEAT_S
        answer["stale_after_s"] = STALE_AFTER_S
    return answer


async def _move(request: web.Request) -> web.Response:
    body = await _read_json(request)
    unknown = sorted(set(body) - {"namespace", "to_shard"})
    if unknown:
        raise InvalidArgument(f"unknown key {unknown[0]!r}", field=unknown[0])
    namespace, to_shard = body.get("namespace"), body.get("to_shard")
    if not isinstance(namespace, str) or not namespace:
        raise InvalidArgument("namespace (text) is required", field="namespace")
    if not isinstance(to_shard, str) or not to_shard:
        raise InvalidArgument("to_shard (text) is required", field="to_shard")
    mover = request.app[ADMIN].mover
    if mover is None:
        raise Unavailable("a single node has no shards to move a namespace between")
    report = await mover(namespace, to_shard)
    return web.json_response(report)


async def _show_cluster(request: web.Request) -> web.Response:
    return web.json_response(await asyncio.to_thread(_cluster, request.app[ADMIN]))


async def _show_wal(request: web.Request) -> web.Response:
    return web.json_response(await asyncio.to_thread(request.app[ADMIN].served().wal_status))


async def _purge(request: web.Request) -> web.Response:
    return web.json_response({"purged": await asyncio.to_thread(request.app[ADMIN].served().purge)})


EXPORT_FORMATS: Final = ("exact", "jsonl")
"""``format`` of ``GET /v1/export``: stored rows in hex (the default), or readable records."""


def _export_lines(db: Database, query: Mapping[str, str]) -> Iterator[str]:
    """The lines ``GET /v1/export`` asks for, each without its newline."""
    namespace = query.get("namespace", "")
    if not namespace:
        raise InvalidArgument("namespace is required", field="namespace")
    form = query.get("format", "exact")
    if form not in EXPORT_FORMATS:
        raise InvalidArgument(f"format must be exact or jsonl, not {form!r}", field="format")
    if form == "jsonl":
        return db.export_jsonl(namespace, vectors=query.get("vectors", "none"))
    if "vectors" in query:
        raise InvalidArgument("vectors applies to format=jsonl only", field="vectors")
    return (json.dumps(line) for line in db.export(namespace))


async def _export(request: web.Request) -> web.StreamResponse:
    lines = _export_lines(request.app[ADMIN].served(), request.query)
    # Rows are read in one snapshot on a worker thread, a chunk at a time. The first
    # chunk is read before the answer starts, so an unknown namespace is a 404.
    chunk = await asyncio.to_thread(_take, lines, EXPORT_CHUNK_LINES)
    response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
    await response.prepare(request)
    while True:
        if chunk:
            await response.write("".join(line + "\n" for line in chunk).encode())
        if len(chunk) < EXPORT_CHUNK_LINES:
            break
        chunk = await asyncio.to_thread(_take, lines, EXPORT_CHUNK_LINES)
    await response.write_eof()
    return response


async def _import_batch(request: web.Request) -> web.Response:
    db = request.app[ADMIN].served()
    body = await _read_json(request.clone(client_max_size=IMPORT_MAX_BODY))
    header, rows, start = parse_import(body)
    batch = await asyncio.to_thread(db.import_rows, header, rows, start)
    # Until the import is finished its spaces hold only the rows sent so far.
    return web.json_response(
        {"imported": batch.imported, "next": batch.next_row, "complete": False}
    )


async def _import_status(request: web.Request) -> web.Response:
    db = request.app[ADMIN].served()
    namespace = request.query.get("namespace", "")
    if not namespace:
        raise InvalidArgument("namespace is required", field="namespace")
    try:
        export_id = bytes.fromhex(request.query.get("export_id", ""))
    except ValueError:
        raise InvalidArgument("export_id must be hex", field="export_id") from None
    if not export_id:
        raise InvalidArgument("export_id is required", field="export_id")
    progress = await asyncio.to_thread(db.import_progress, Header(namespace, export_id, 0))
    return web.json_response(
        {
            "next": progress.next_row,
            "complete": progress.complete,
            "scopes": [prefix.hex() for prefix in progress.scopes],
        }
    )


async def _import_finish(request: web.Request) -> web.Response:
    db = request.app[ADMIN].served()
    header, total, scopes = parse_finish(await _read_json(request))
    counts = await asyncio.to_thread(db.finish_import, header, total, scopes)
    return web.json_response(
        {
            "complete": True,
            "rows": total,
            "counts": {
                prefix.hex(): {table.decode(): n for table, n in tables.items()}
                for prefix, tables in counts.items()
            },
        }
    )


ADMIN_TITLE: Final = "Brain admin port"

ADMIN_ROUTES: Final = (
    Route(
        "POST",
        "/v1/keys",
        _create_key,
        "Mint an API key for a namespace.",
        (Answer(HTTPStatus.CREATED, "The key, shown this once.", schemas.NEW_KEY), *_BAD_BODY),
        body=schemas.KEY_REQUEST,
    ),
    Route(
        "GET",
        "/v1/keys",
        _list_keys,
        "Every key's record, never a secret.",
        (Answer(HTTPStatus.OK, "The keys.", schemas.KEYS),),
    ),
    Route(
        "DELETE",
        "/v1/keys/{key_id}",
        _delete_key,
        "Revoke a key: it fails AUTH from then on, and its connections are refused.",
        (
            Answer(HTTPStatus.NO_CONTENT, "Revoked."),
            error(HTTPStatus.NOT_FOUND, "NOT_FOUND: no key with that id."),
        ),
        params=(Param("key_id", "The key's id, 32 hex digits.", schemas.HEX, location="path"),),
    ),
    Route(
        "GET",
        "/v1/config",
        _show_config,
        "The effective configuration, secrets redacted.",
        (Answer(HTTPStatus.OK, "The configuration by section.", schemas.CONFIG),),
    ),
    Route(
        "POST",
        "/v1/snapshots",
        _create_snapshot,
        "Write a snapshot bundle of the database and the key store while writes go on.",
        (Answer(HTTPStatus.CREATED, "The bundle.", schemas.SNAPSHOT), _UNAVAILABLE),
    ),
    Route(
        "GET",
        "/v1/snapshots",
        _show_snapshots,
        "Every readable bundle in the data directory's snapshots/, oldest first.",
        (Answer(HTTPStatus.OK, "The bundles.", schemas.SNAPSHOTS),),
    ),
    Route(
        "GET",
        "/v1/audit",
        _show_audit,
        "A namespace's audit entries and key changes, newest first.",
        (Answer(HTTPStatus.OK, "The entries.", schemas.AUDIT), _BAD_INPUT, _UNAVAILABLE),
        params=(
            _NAMESPACE_QUERY,
            Param("limit", f"Entries at most; default {DEFAULT_AUDIT_LIMIT}.", schemas.LIMIT),
        ),
    ),
    Route(
        "POST",
        "/v1/explain",
        _explain,
        "EXPLAIN a recall: survivors per filter step, timings, coverage, ranked hits.",
        (
            Answer(HTTPStatus.OK, "The Explain object and the hits.", schemas.EXPLAIN_ANSWER),
            *_BAD_BODY,
            _UNAVAILABLE,
        ),
        body=schemas.EXPLAIN_REQUEST,
    ),
    Route(
        "GET",
        "/v1/stats",
        _show_stats,
        "Records per scope, progress, sizes and backlogs.",
        (Answer(HTTPStatus.OK, "The figures.", schemas.STATS), _UNAVAILABLE),
    ),
    Route(
        "GET",
        "/v1/cluster",
        _show_cluster,
        "This node's replication status, every registered node's and the shard's "
        "planner (on a single node: cluster false, this node alone).",
        (Answer(HTTPStatus.OK, "The cluster.", schemas.CLUSTER), _UNAVAILABLE),
    ),
    Route(
        "POST",
        "/v1/cluster/moves",
        _move,
        "Move a namespace to this node's shard while it serves (spec/05-durability.md "
        "§14.9): on that shard's planner; answered once the move is done.",
        (
            Answer(HTTPStatus.OK, "What the move did.", schemas.MOVE),
            *_BAD_BODY,
            error(HTTPStatus.CONFLICT, "CONFLICT: the namespace is on that shard already."),
            _UNAVAILABLE,
        ),
        body=schemas.MOVE_REQUEST,
    ),
    Route(
        "GET",
        "/v1/wal",
        _show_wal,
        "The write-ahead log's extent, progress and segments.",
        (Answer(HTTPStatus.OK, "The log.", schemas.WAL), _UNAVAILABLE),
    ),
    Route(
        "POST",
        "/v1/purge",
        _purge,
        "Purge forgotten content now.",
        (Answer(HTTPStatus.OK, "Documents purged.", schemas.PURGE), _UNAVAILABLE),
    ),
    Route(
        "GET",
        "/v1/export",
        _export,
        "A namespace's export, streamed from one snapshot (spec/06-operations.md §9).",
        (
            Answer(HTTPStatus.OK, "Header, rows, trailer.", schemas.TEXT, "application/x-ndjson"),
            _BAD_INPUT,
            error(HTTPStatus.NOT_FOUND, "NOT_FOUND: the database holds no row of it."),
            _UNAVAILABLE,
        ),
        params=(_NAMESPACE_QUERY,),
    ),
    Route(
        "POST",
        "/v1/import",
        _import_batch,
        f"Import rows of an export: at most {IMPORT_MAX_ROWS} rows and "
        f"{IMPORT_MAX_BODY} bytes of body.",
        (
            Answer(HTTPStatus.OK, "Where the import stands.", schemas.IMPORT_BATCH_ANSWER),
            *_BAD_BODY,
            error(HTTPStatus.CONFLICT, "CONFLICT: the space holds other records, or rows skipped."),
            _UNAVAILABLE,
        ),
        body=schemas.IMPORT_BATCH,
    ),
    Route(
        "GET",
        "/v1/import",
        _import_status,
        "Where the import of an export stands.",
        (
            Answer(HTTPStatus.OK, "The next row to send.", schemas.IMPORT_STATUS),
            _BAD_INPUT,
            _UNAVAILABLE,
        ),
        params=(
            _NAMESPACE_QUERY,
            Param("export_id", "The export's id, in hex.", schemas.HEX, required=True),
        ),
    ),
    Route(
        "POST",
        "/v1/import/finish",
        _import_finish,
        "Close an import once every row is in.",
        (
            Answer(HTTPStatus.OK, "Rows per table of every space.", schemas.IMPORT_FINISH_ANSWER),
            *_BAD_BODY,
            error(HTTPStatus.CONFLICT, "CONFLICT: rows are missing."),
            _UNAVAILABLE,
        ),
        body=schemas.IMPORT_FINISH,
    ),
    openapi_route(ADMIN_TITLE),
)
"""Every route of the admin port, and what each answers."""

ADMIN_PORT: Final = Port(
    ADMIN_TITLE,
    "Keys, configuration, snapshots, audit, statistics, the cluster, purge, export and "
    "import. "
    "Every route, this document's too, needs the admin bearer token, checked before "
    "the route is looked at: without it any path is 401 UNAUTHENTICATED. " + _ROUTING,
    ADMIN_ROUTES,
    bearer=True,
)


def make_admin_app(
    config: Config,
    keys: KeyStore,
    database: Database | None = None,
    *,
    registry: NodeRegistry | None = None,
    mover: Mover | None = None,
    shared_keys: KeyChanges | None = None,
) -> web.Application:
    """The admin API (:data:`ADMIN_ROUTES`) over ``keys`` and, for the routes that
    need them, ``database``, the cluster's node ``registry``, the ``mover`` of
    namespaces to this node's shard and the cluster's ``shared_keys``."""
    # The JSON errors wrap the guard, so its 401 and every later error share one shape.
    app = web.Application(middlewares=[json_errors, _guard], client_max_size=ADMIN_MAX_BODY)
    app[ADMIN] = AdminState(config, keys, database, registry, mover, shared_keys)
    install(app, ADMIN_PORT)
    return app
