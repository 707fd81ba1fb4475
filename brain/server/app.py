"""The server process: the wire listener, the public and admin HTTP ports, shutdown.

:class:`Server` owns everything one ``brain serve`` runs. ``start`` binds the
three ports (port 0 picks a free one, which tests use) and ``stop`` closes
listeners, lets connections finish, and releases the data directory. Which
connections are let in is :mod:`brain.server.admission`'s to say.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from aiohttp import web

from brain.engine.database import Database, DatabaseOptions
from brain.engine.write.activity import Activity
from brain.engine.write.pacing import Pacing
from brain.errors import Overloaded
from brain.ids import new_id
from brain.server.admission import OVERLOADED_RETRY_MS, Admission, Slot
from brain.server.backend import Backend, BackendStatus, EngineBackend, UnbuiltBackend
from brain.server.config import Config
from brain.server.connection import Connection
from brain.server.credentials import bootstrap_credentials
from brain.server.files import make_private
from brain.server.http import make_admin_app, make_public_app
from brain.server.keys import KeyStore
from brain.server.metrics import ServerMetrics
from brain.server.signals import watch_stop_signals
from brain.version import __version__
from brain.wire.session import ServerSession, encode_error_frame

if TYPE_CHECKING:  # the NATS client loads only on a cluster node
    from brain.engine.replication.registry import NodeRegistry

__all__ = ["SERVER_NAME", "Server", "run_server"]

log = logging.getLogger("brain.server")

SERVER_NAME: Final = f"brain/{__version__}"

REFUSED_HOLD_S: Final = OVERLOADED_RETRY_MS / 1000
"""How long a connection refused at accept is held before its OVERLOADED: the
``retry_after_ms`` it is then told, so a client that obeys it loses nothing."""

MAX_HELD_REFUSALS: Final = 1024
"""Refused connections held at once; past it they are refused at once. Each holds a
file descriptor and a small task, so this bounds what holding them costs."""

PLANNER_WATCH_S: Final = 0.1
"""How often a cluster node looks whether it plans its shard's writes, to answer its
shard's forwarded writes or stop: the follower's own look at the lease is as often
(spec/05-durability.md §14.3), so a new planner answers within about two of these."""

SHUTDOWN_GRACE_S: Final = 10.0
"""How long stop() waits for open connections to finish before cutting them."""


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
        self._connections: dict[asyncio.Task[None], Connection] = {}
        self._held: set[asyncio.Task[Any]] = set()
        self._admission = Admission(
            max_connections=config.server.max_connections,
            max_per_peer=config.server.max_connections_per_peer,
        )
        # Each namespace's share of the event loop, kept across its connections
        # (spec/06-operations.md §11); only the event loop uses it.
        self._loop_pacing = Pacing(Activity())
        self.wire_port = 0
        self.public_port = 0
        self.admin_port = 0
        self._recovering = True
        self._stopping = False
        self.registry: NodeRegistry | None = None
        """This node's heartbeat into the cluster's node registry (cluster nodes)."""
        self._cluster: Any = None
        """The cluster link, shard map and planner watch (``--cluster``), as a
        :class:`_ClusterParts`; None on a single node."""

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
            if self._cluster is not None:
                await self._cluster.close()
                self._cluster = None
            # A database opened before the failure (the key store is opened after it) is
            # closed too: its indexer may be inside hnswlib, and a thread left running
            # in C++ when the interpreter exits aborts the process instead of exit 1.
            if self._given_backend is None:
                await self.backend.close()
            if self.keys is not None:
                self.keys.close()
                self.keys = None
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
                extractors=self.config.entities.chosen_extractors(),
                embedder=self.config.retrieval.embedder,
                model_dir=self.config.retrieval.model_path,
                index_wait_s=self.config.retrieval.index_wait_s,
                max_embed_backlog=self.config.retrieval.max_embed_backlog,
                idempotency_retention_ns=self.config.server.idempotency_retention_ns,
                jetstream=self.config.cluster.log_options(),
            )
            database = await asyncio.to_thread(Database.open, data, options)
            self.backend = EngineBackend(database)
            self.metrics.attach_database(database)
            if self.config.cluster.enabled:
                self._cluster = await _join_cluster(self.config, self.backend)
        self._recovering = False
        self.keys = KeyStore(data)
        loop = asyncio.get_running_loop()
        # Revocations come from the admin port's worker threads.
        self.keys.on_revoked(lambda key_id: loop.call_soon_threadsafe(self._key_revoked, key_id))
        self.credentials_path = bootstrap_credentials(data, self.keys)
        if self._cluster is not None:
            await self._cluster.share_keys(self.keys, self.config.cluster.replicas)
        self._wire = await asyncio.start_server(
            self._accept, host=server.host, port=server.port, limit=64 * 1024
        )
        self.wire_port = self._wire.sockets[0].getsockname()[1]
        registry = await asyncio.to_thread(self._open_registry)
        self.admin_port = await self._serve_http(
            make_admin_app(
                self.config,
                self.keys,
                self._database(),
                registry=registry,
                mover=None if self._cluster is None else self._cluster.move,
                shared_keys=None if self._cluster is None else self._cluster.key_sync,
            ),
            server.admin_host,
            server.admin_port,
        )
        if registry is not None:
            await asyncio.to_thread(registry.start, self._addresses())
            self.registry = registry

    def _open_registry(self) -> NodeRegistry | None:
        """A cluster node's entry in the node registry (spec/05-durability.md §14.6)."""
        database = self._database()
        if database is None or not self.config.cluster.enabled:
            return None
        from brain.engine.replication.jetstream_log import JetStreamLog
        from brain.engine.replication.registry import NodeRegistry

        wal = database.wal
        assert isinstance(wal, JetStreamLog)
        return NodeRegistry.open(wal, self.config.cluster.node, database.replication_status)

    def _addresses(self) -> dict[str, str]:
        server = self.config.server
        return {
            "wire": f"{server.host}:{self.wire_port}",
            "public": f"{server.public_host}:{self.public_port}",
            "admin": f"{server.admin_host}:{self.admin_port}",
            "version": __version__,
        }

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
            pacing=self._loop_pacing,
        )
        try:
            slot = self._admit(writer, connection)
        except Overloaded as refused:
            self.metrics.connections_refused.inc()
            await self._hold_refused()
            writer.write(encode_error_frame(0, refused))
            with contextlib.suppress(ConnectionError, OSError):
                await writer.drain()
            writer.close()
            return
        connection.slot = slot
        self._connections[task] = connection
        self.metrics.connections.inc()
        self.metrics.connections_open.inc()
        try:
            await connection.serve()
        except asyncio.CancelledError:
            # stop() cut it after the grace. Returned, not raised: the stream
            # machinery would log a cancelled handler as an error.
            pass
        finally:
            slot.release()
            del self._connections[task]
            self.metrics.connections_open.dec()

    async def _hold_refused(self) -> None:
        """Keep a refused connection open, unread, for :data:`REFUSED_HOLD_S` before it
        is told OVERLOADED, while fewer than :data:`MAX_HELD_REFUSALS` are held: a
        client that reconnects the moment it is refused then asks once a second
        instead of thousands of times, and its refusals stop costing everyone else
        the event loop. Not while stopping: the stop must not wait for them."""
        if self._stopping or len(self._held) >= MAX_HELD_REFUSALS:
            return
        task = asyncio.current_task()
        assert task is not None
        self._held.add(task)
        try:
            await asyncio.sleep(REFUSED_HOLD_S)
        except asyncio.CancelledError:
            pass  # stop(): answer it now
        finally:
            self._held.discard(task)

    def _admit(self, writer: asyncio.StreamWriter, connection: Connection) -> Slot:
        """The new connection's slot; OVERLOADED when it may not be let in."""
        if self._stopping:
            # Accepted just before the listener closed: stop() has drained the rest.
            raise Overloaded("the server is stopping", retry_after_ms=OVERLOADED_RETRY_MS)
        return self._admission.admit(_peer_address(writer), self._displace(connection))

    def _displace(self, connection: Connection) -> Callable[[Overloaded], None]:
        """How to close ``connection`` should it have to give way to a newer one."""

        def close(error: Overloaded) -> None:
            self.metrics.connections_displaced.inc()
            connection.close_for(error)

        return close

    def _key_revoked(self, key_id: bytes) -> None:
        for connection in list(self._connections.values()):
            connection.key_revoked(key_id)

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
        self._stopping = True
        if self._wire is not None:
            self._wire.close()
        for held in list(self._held):
            held.cancel()
        if self._connections:
            # Subscriptions never end on their own and idle connections wait for their
            # peers: each is told to answer what is in flight and close.
            for connection in self._connections.values():
                connection.drain()
            _, pending = await asyncio.wait(set(self._connections), timeout=SHUTDOWN_GRACE_S)
            for task in pending:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*pending, return_exceptions=True)
        await self._close_listeners()
        if self.registry is not None:  # before the database closes the log it uses
            await asyncio.to_thread(self.registry.stop)
            self.registry = None
        if self._cluster is not None:
            await self._cluster.close()
            self._cluster = None
        await self.backend.close()
        if self.keys is not None:
            self.keys.close()
            self.keys = None


class _ClusterParts:
    """What a cluster node runs beside its database: the link, the shard map, and the
    task that subscribes to the shard's writes while this node plans them."""

    def __init__(self, link: Any, shard_map: Any, backend: EngineBackend) -> None:
        self.link = link
        self.shard_map = shard_map
        self.backend = backend
        self.key_sync: Any = None
        """The cluster's key table kept in step with this node's key store, once
        :meth:`share_keys` opened it."""
        self.watch = asyncio.get_running_loop().create_task(self._watch_planning())

    async def share_keys(self, keys: KeyStore, replicas: int) -> None:
        """Keep ``keys`` in step with the cluster's key table (spec/05-durability.md
        §14.11)."""
        from brain.server.key_sync import KeySync

        self.key_sync = await KeySync.open(self.link, keys, replicas=replicas)

    async def _watch_planning(self) -> None:
        while True:
            planning = self.backend.planning()
            if planning and not self.link.planning:
                await self.link.serve_plans(self.backend.answer_forwarded)
            elif not planning and self.link.planning:
                await self.link.stop_plans()
            await asyncio.sleep(PLANNER_WATCH_S)

    async def move(self, namespace: str, to_shard: str) -> dict[str, object]:
        """Move ``namespace`` to this node's shard (:mod:`brain.server.namespace_move`)."""
        from brain.server.namespace_move import move_namespace

        report = await move_namespace(
            self.backend.database,
            self.link,
            self.shard_map,
            namespace=namespace,
            to_shard=to_shard,
            planning=self.backend.planning(),
        )
        return report.to_json()

    async def close(self) -> None:
        self.watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.watch
        self.backend.forwarding = None
        if self.key_sync is not None:
            await self.key_sync.close()
            self.key_sync = None
        await asyncio.to_thread(self.shard_map.close)
        await self.link.close()


async def _join_cluster(config: Config, backend: EngineBackend) -> _ClusterParts:
    """Connect the node's cluster link, load the shard map, answer the shard's reads
    (and its writes while this node plans them), and forward what others answer."""
    # Here, not at the top: a single node never loads the NATS client.
    from brain.engine.replication.shard_map import ShardMap
    from brain.server.cluster_link import ClusterLink
    from brain.server.forwarding import Forwarding

    cluster = config.cluster
    link = await ClusterLink.connect(cluster.servers(), cluster.node, cluster.shard)
    try:
        shard_map = await asyncio.to_thread(
            ShardMap.open, link, cluster.home_shard, replicas=cluster.replicas
        )
    except BaseException:
        await link.close()
        raise
    backend.forwarding = Forwarding(link, shard_map, cluster.shard, backend.planning)
    await link.serve_reads(backend.answer_forwarded)
    return _ClusterParts(link, shard_map, backend)


async def run_server(config: Config) -> None:
    """Run a server until SIGINT or SIGTERM, then stop it cleanly."""
    # Handlers go in before the "serving" line is printed: a supervisor that
    # reads that line and signals at once must get a clean stop, not death.
    stop = asyncio.Event()
    restore_signals = watch_stop_signals(asyncio.get_running_loop(), stop.set)
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
        status = server.status()
        if status.ready:
            log.info("shutting down")
        else:
            # Still a clean stop, exit 0: nothing acknowledged is lost, and the next start
            # recovers from the WAL (spec/07-reliability.md §1).
            log.warning("shutting down %s", status.reason)
        try:
            await server.stop()
        finally:
            restore_signals()


def _peer_address(writer: asyncio.StreamWriter) -> str:
    """The address a connection comes from, without its port: what the per-peer
    limit counts by."""
    peer = writer.get_extra_info("peername")
    if isinstance(peer, tuple) and peer:
        return str(peer[0])
    return str(peer)
