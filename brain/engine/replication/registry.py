"""The node registry: every cluster node's status in one JetStream key-value bucket
(spec/05-durability.md §14.6).

Each node of a cluster (``brain serve --cluster``) puts its status, every
:data:`HEARTBEAT_S`, under its node id in the bucket :data:`REGISTRY_BUCKET`
(history 1, the log's replicas, file storage): its shard, role, planner,
applied and last LSN, lag, addresses, version and its own wall-clock time. Any
node reads every entry back (``GET /v1/cluster``).

**Staleness without node clocks.** A node that stopped (crashed, partitioned)
leaves its last entry behind. Whether an entry is *stale* is judged on the times
the NATS server stored the entries at (each message's own timestamp, set by the
bucket's stream leader), never on a node's clock: an entry stored more than
:data:`STALE_AFTER_S` before the newest entry of the bucket is stale. The reading
node's own heartbeat is among them and at most :data:`HEARTBEAT_S` old, so the
newest entry stands for "now" to within a heartbeat, and the comparison involves
the servers' clocks alone (those of one NATS cluster, kept in step as its
servers' clocks are). A node that stops cleanly puts a last entry saying so
(``state: stopped``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

import nats.errors
import nats.js.errors
from nats.js.api import KeyValueConfig, StorageType
from nats.js.kv import KeyValue

from brain.engine.replication.jetstream_log import (
    API_ATTEMPT_S,
    CALL_TIMEOUT_S,
    OPEN_DEADLINE_S,
    RETRY_PAUSE_S,
    JetStreamLog,
)
from brain.engine.replication.status import STATES, ReplicationStatus
from brain.errors import StorageFault, Unavailable

__all__ = [
    "HEARTBEAT_S",
    "REGISTRY_BUCKET",
    "STALE_AFTER_S",
    "STATES",
    "NodeEntry",
    "NodeRegistry",
]

log = logging.getLogger("brain.engine")

REGISTRY_BUCKET: Final = "BRAIN_NODES"
"""The key-value bucket of every node's status (key: the node id)."""

HEARTBEAT_S: Final = 1.0
"""How often a node puts its status: one small write a second per node costs the
cluster nothing, and keeps what ``/v1/cluster`` shows (applied LSN, lag) at most a
second old."""

STALE_AFTER_S: Final = 5.0
"""An entry stored this long before the bucket's newest is shown ``stale``: four
missed heartbeats beyond the one a live node may be in the middle of, so an
election in the NATS cluster (a few seconds) does not make live nodes look dead,
and well within the default planner lease term (10 s)."""

_STREAM: Final = f"KV_{REGISTRY_BUCKET}"
"""The stream JetStream keeps the bucket in."""

_SUBJECTS: Final = f"$KV.{REGISTRY_BUCKET}."
"""The subject prefix of the bucket's keys."""


@dataclass(frozen=True, slots=True)
class NodeEntry:
    """One node's entry as read back from the bucket."""

    node: str
    value: Mapping[str, object]
    """What the node put (its status, addresses, version, heartbeat time)."""
    revision: int
    """The entry's revision (the bucket stream's sequence)."""
    stored_at_ns: int
    """When the NATS server stored it (its wall clock, ns since the epoch)."""
    age_s: float
    """How long before the bucket's newest entry it was stored."""
    state: str
    """One of :data:`~brain.engine.replication.status.STATES`."""

    def to_json(self) -> dict[str, object]:
        """The entry as ``/v1/cluster`` shows it."""
        return {
            **self.value,
            "node": self.node,
            "state": self.state,
            "revision": self.revision,
            "stored_at": self.stored_at_ns,
            "age_s": round(self.age_s, 3),
        }


class NodeRegistry:
    """This node's heartbeat into :data:`REGISTRY_BUCKET`, and the reader of every
    node's entry. Build it with :meth:`open`; :meth:`start` begins the heartbeat
    (a thread of its own, so a slow cluster never holds up the log's event loop
    for long), :meth:`stop` ends it with a last ``stopped`` entry."""

    def __init__(
        self, log_: JetStreamLog, kv: KeyValue, node: str, status: Callable[[], ReplicationStatus]
    ) -> None:
        """Private: use :meth:`NodeRegistry.open`."""
        self.node = node
        self._log = log_
        self._kv = kv
        self._status = status
        self._extra: dict[str, object] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.heartbeats = 0
        """Heartbeats stored so far."""

    @classmethod
    def open(
        cls, log_: JetStreamLog, node: str, status: Callable[[], ReplicationStatus]
    ) -> NodeRegistry:
        """Open (creating when missing) the registry bucket on ``log_``'s cluster, for
        node ``node`` whose status ``status`` gives."""
        js = log_.jetstream

        async def bucket() -> KeyValue:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + OPEN_DEADLINE_S
            while True:
                try:
                    return await js.key_value(REGISTRY_BUCKET)
                except nats.js.errors.BucketNotFoundError:
                    pass
                try:
                    return await js.create_key_value(
                        KeyValueConfig(
                            bucket=REGISTRY_BUCKET,
                            history=1,
                            replicas=log_.options.replicas,
                            storage=StorageType.FILE,
                        )
                    )
                except (nats.errors.Error, nats.js.errors.Error) as exc:
                    # Another node created it meanwhile, or the cluster is electing.
                    if loop.time() > deadline:
                        raise StorageFault(f"cannot open the node registry: {exc}") from exc
                    await asyncio.sleep(RETRY_PAUSE_S)

        kv = log_.run(bucket(), OPEN_DEADLINE_S + CALL_TIMEOUT_S)
        return cls(log_, kv, node, status)

    def start(self, extra: Mapping[str, object]) -> None:
        """Put this node's entry now, then every :data:`HEARTBEAT_S`; ``extra`` goes in
        every entry (the node's addresses and version)."""
        self._extra = dict(extra)
        self.beat()
        self._thread = threading.Thread(target=self._run, name="brain-registry", daemon=True)
        self._thread.start()

    def entry(self, *, stopped: bool = False) -> dict[str, object]:
        """What this node puts: its status, ``extra``, its wall clock (``heartbeat_at``,
        ns) and whether it stopped."""
        return {
            **self._status().to_json(),
            **self._extra,
            "heartbeat_at": time.time_ns(),
            "stopped": stopped,
        }

    def beat(self, *, stopped: bool = False) -> None:
        """Put this node's entry once."""
        value = json.dumps(self.entry(stopped=stopped), sort_keys=True).encode()

        async def put() -> None:
            await asyncio.wait_for(self._kv.put(self.node, value), API_ATTEMPT_S)

        self._log.run(put(), API_ATTEMPT_S + CALL_TIMEOUT_S)
        self.heartbeats += 1

    def _run(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                self.beat()
            except (TimeoutError, ValueError, nats.errors.Error, nats.js.errors.Error) as exc:
                # An election, a reconnect: the next heartbeat tries again; a node
                # silent long enough is shown stale, which is the truth.
                log.warning("node %s heartbeat: %s", self.node, exc)
            except Exception:  # a bug: logged, and the heartbeat goes on
                log.exception("node %s heartbeat failed", self.node)

    def stop(self) -> None:
        """End the heartbeat and put a last entry saying this node stopped. Idempotent;
        a cluster that does not answer leaves the last heartbeat, which turns stale."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            self.beat(stopped=True)
        except (TimeoutError, ValueError, nats.errors.Error, nats.js.errors.Error) as exc:
            log.warning("node %s could not put its last entry: %s", self.node, exc)

    def nodes(self) -> list[NodeEntry]:
        """Every node's entry, by node id, each marked live, stale or stopped against
        the newest entry's storing time; UNAVAILABLE when the cluster does not answer."""
        js = self._log.jetstream

        async def read() -> list[tuple[str, bytes, int, int]]:
            info = await js.stream_info(_STREAM, subjects_filter=_SUBJECTS + ">")
            subjects = sorted((info.state.subjects or {}).keys())
            rows: list[tuple[str, bytes, int, int]] = []
            for subject in subjects:
                try:
                    message = await js.get_last_msg(_STREAM, subject)
                except nats.js.errors.NotFoundError:
                    continue  # gone between the two requests
                if message.data is None or message.seq is None or message.time is None:
                    continue  # a delete marker: nothing to show
                stored = int(message.time.timestamp() * 1e9)
                rows.append((subject[len(_SUBJECTS) :], message.data, message.seq, stored))
            return rows

        try:
            rows = self._log.run(read(), 2 * API_ATTEMPT_S + CALL_TIMEOUT_S)
        except (TimeoutError, nats.errors.Error, nats.js.errors.Error) as exc:
            raise Unavailable(f"the node registry did not answer: {exc}") from exc
        newest = max((stored for _, _, _, stored in rows), default=0)
        entries: list[NodeEntry] = []
        for node, data, revision, stored in rows:
            try:
                value = json.loads(data)
            except ValueError:
                value = {}
            if not isinstance(value, dict):
                value = {}
            age = (newest - stored) / 1e9
            state = "stopped" if value.get("stopped") else "live"
            if state == "live" and age > STALE_AFTER_S:
                state = "stale"
            entries.append(NodeEntry(node, value, revision, stored, age, state))
        return entries
