"""The server process: the wire listener, the public and admin HTTP ports, shutdown.

:class:`Server` owns everything one ``brain serve`` runs. ``start`` binds the
three ports (port 0 picks a free one, which tests use) and ``stop`` closes
listeners, lets connections finish, and releases the data directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from pathlib import Path
from typing import Final

from aiohttp import web

from brain import __version__
from brain.engine.database import Database, DatabaseOptions
from brain.errors import Overloaded
from brain.ids import new_id
from brain.server.backend import Backend, BackendStatus, EngineBackend, UnbuiltBackend
from brain.server.config import Config
from brain.server.connection import Connection
from brain.server.credentials import bootstrap_credentials
from brain.server.files import make_private
from brain.server.http import make_admin_app, make_public_app
from brain.server.keys import KeyStore
from brain.server.metrics import ServerMetrics
from brain.wire.session import ServerSession, encode_error_frame

__all__ = ["SERVER_NAME", "Server", "run_server"]

log = logging.getLogger("brain.server")

SERVER_NAME: Final = f"brain/{__version__}"

SHUTDOWN_GRACE_S: Final = 10.0
"""How long stop() waits for open connections to finish before cutting them."""

OVERLOADED_RETRY_MS: Final = 1000
"""Suggested back-off for a client refused because max_connections were open."""


class Server:
    """One running Brain server."""

    def __init__(self, config: Config, backend: Backend | None = None) -> None:
        """Serve ``backend``, or (when None) the database in the configured data directory."""
        self.config = config
        self._given_backend = backend
        self.backend: Backend = UnbuiltBackend()
        self.metrics = ServerMetrics()
        self.keys: KeyStore | None = None
        self.credentials_path: Path | None = None
        self._wire: asyncio.Server | None = None
        self._runners: list[web.AppRunner] = []
        self._connections: set[asyncio.Task[None]] = set()
        self.wire_port = 0
        self.public_port = 0
        self.admin_port = 0
        self._recovering = True

    def status(self) -> BackendStatus:
        """Readiness: 503 while recovering, then whatever the backend says."""
        if self._recovering:
            return BackendStatus(False, 0, "recovering: replaying the write-ahead log")
        return self.backend.status()

    async def start(self) -> None:
        """Bind the public port, recover the database, then open the wire and admin ports."""
        try:
            await self._start()
        except BaseException:
            await self._close_listeners()
            raise

    async def _start(self) -> None:
        data = self.config.data_path
        data.mkdir(parents=True, exist_ok=True)
        # A walk of the whole data directory (snapshots too): off the event loop.
        await asyncio.to_thread(make_private, data)
        server = self.config.server
        # The public port comes first, so /readyz can say 503 while recovery runs.
        self.public_port = await self._serve_http(
            make_public_app(self.status, self.metrics), server.public_host, server.public_port
        )
        if self._given_backend is not None:
            self.backend = self._given_backend
        else:
            # Nothing is served from the wire port half-recovered: it opens after this.
            options = DatabaseOptions(
                resolution=self.config.entities.resolution(),
                embedder=self.config.retrieval.embedder,
                model_dir=self.config.retrieval.model_path,
                index_wait_s=self.config.retrieval.index_wait_s,
            )
            database = await asyncio.to_thread(Database.open, data, options)
            self.backend = EngineBackend(database)
            self.metrics.attach_database(database)
        self._recovering = False
        self.keys = KeyStore(data)
        self.credentials_path = bootstrap_credentials(data, self.keys)
        self._wire = await asyncio.start_server(
            self._accept, host=server.host, port=server.port, limit=64 * 1024
        )
        self.wire_port = self._wire.sockets[0].getsockname()[1]
        self.admin_port = await self._serve_http(
            make_admin_app(self.config, self.keys, self._database()),
            server.admin_host,
            server.admin_port,
        )

    async def _serve_http(self, app: web.Application, host: str, port: int) -> int:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        await site.start()
        self._runners.append(runner)
        # aiohttp does not expose the bound port; port 0 (tests) needs it.
        bound = site._server
        if isinstance(bound, asyncio.Server) and bound.sockets:
            return int(bound.sockets[0].getsockname()[1])
        return port

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None and self.keys is not None
        if len(self._connections) >= self.config.server.max_connections:
            self.metrics.connections_refused.inc()
            error = Overloaded(
                f"{self.config.server.max_connections} connections are open; try again later",
                retry_after_ms=OVERLOADED_RETRY_MS,
            )
            writer.write(encode_error_frame(0, error))
            with contextlib.suppress(ConnectionError, OSError):
                await writer.drain()
            writer.close()
            return
        self._connections.add(task)
        self.metrics.connections.inc()
        self.metrics.connections_open.inc()
        server = self.config.server
        session = ServerSession(
            server_name=SERVER_NAME,
            session_id=new_id(),
            clock=time.time_ns,
            max_frame=server.max_frame,
            max_streams=server.max_streams,
            observer=self._count_session_answer,
        )
        connection = Connection(
            reader,
            writer,
            session=session,
            backend=self.backend,
            keys=self.keys,
            metrics=self.metrics,
            idle_timeout_s=server.idle_timeout_s,
            subscriber_stall_s=server.subscriber_stall_s,
        )
        try:
            await connection.serve()
        finally:
            self._connections.discard(task)
            self.metrics.connections_open.dec()

    async def _close_listeners(self) -> None:
        if self._wire is not None:
            self._wire.close()
            await self._wire.wait_closed()
            self._wire = None
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()

    def _database(self) -> Database | None:
        backend = self.backend
        return backend.database if isinstance(backend, EngineBackend) else None

    def _count_session_answer(self, opcode: str, outcome: str) -> None:
        self.metrics.requests.labels(opcode=opcode, outcome=outcome).inc()

    async def stop(self) -> None:
        """Stop accepting, give connections a grace period, release everything."""
        if self._wire is not None:
            self._wire.close()
        if self._connections:
            _, pending = await asyncio.wait(set(self._connections), timeout=SHUTDOWN_GRACE_S)
            for task in pending:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*pending, return_exceptions=True)
        await self._close_listeners()
        await self.backend.close()
        if self.keys is not None:
            self.keys.close()
            self.keys = None


async def run_server(config: Config) -> None:
    """Run a server until SIGINT or SIGTERM, then stop it cleanly."""
    # Handlers go in before the "serving" line is printed: a supervisor that
    # reads that line and signals at once must get a clean stop, not death.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    server = Server(config)
    await server.start()
    if server.credentials_path is not None:
        print(f"first start: credentials written to {server.credentials_path}", flush=True)
    print(
        f"brain {__version__} serving wire on {config.server.host}:{server.wire_port}, "
        f"public HTTP on {config.server.public_host}:{server.public_port}, "
        f"admin HTTP on {config.server.admin_host}:{server.admin_port}, "
        f"data in {config.data_path}",
        flush=True,
    )
    try:
        await stop.wait()
    finally:
        log.info("shutting down")
        await server.stop()
