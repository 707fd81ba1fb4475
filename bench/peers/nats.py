"""A real three-node NATS cluster with JetStream on loopback: the replicated log's peer in
the tests (tests/integration/test_jetstream_log.py) and in the replication benchmark.

Each node is a ``nats-server`` process with its own configuration, store directory
and log file under a temporary directory, listening for clients and routes on free
loopback ports. :func:`start_cluster` waits until every node takes connections;
JetStream's own readiness (a meta leader) is what
:meth:`~brain.engine.replication.jetstream_log.JetStreamLog.open` waits for.
"""

from __future__ import annotations

import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Final

NODES: Final = 3
"""Three nodes: the fewest where a quorum (two) survives the loss of one."""

START_TIMEOUT_S: Final = 10.0
"""Time for a node to take connections; it does in well under a second."""

STOP_TIMEOUT_S: Final = 5.0
"""Time a node gets to stop on SIGTERM before it is killed."""

MAX_PAYLOAD: Final = 8 * 1024 * 1024
"""The servers' message limit: above the 1 MiB default, so that a large plan fits
in one message, and the most NATS advises."""

NATS_SERVER: Final = shutil.which("nats-server") or "/usr/sbin/nats-server"


def free_port() -> int:
    """A loopback TCP port nothing listens on just now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Node:
    """One ``nats-server`` of the cluster."""

    name: str
    port: int
    route_port: int
    directory: Path
    max_payload: int = MAX_PAYLOAD
    cluster_name: str = "brain-test"
    process: subprocess.Popen[bytes] | None = None
    log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        """The node's client address."""
        return f"nats://127.0.0.1:{self.port}"

    def config(self, routes: list[int]) -> str:
        """The node's configuration file's text."""
        route_urls = ", ".join(f'"nats-route://127.0.0.1:{port}"' for port in routes)
        store = self.directory / "jetstream"
        return (
            f"server_name: {self.name}\n"
            f"listen: 127.0.0.1:{self.port}\n"
            f"max_payload: {self.max_payload}\n"
            f'jetstream {{ store_dir: "{store}", max_memory_store: 67108864, '
            "max_file_store: 1073741824 }\n"
            f"cluster {{ name: {self.cluster_name}, listen: 127.0.0.1:{self.route_port}, "
            f"routes: [{route_urls}] }}\n"
        )


@dataclass
class NatsCluster:
    """The running cluster: its nodes, started and stopped by :func:`start_cluster`."""

    nodes: list[Node] = field(default_factory=list)

    @property
    def servers(self) -> tuple[str, ...]:
        """Every node's client address."""
        return tuple(node.url for node in self.nodes)

    def start(self, node: Node) -> None:
        """Start ``node`` and wait until it takes connections."""
        config = node.directory / "nats.conf"
        routes = [other.route_port for other in self.nodes if other is not node]
        config.write_text(node.config(routes))
        node.log = (node.directory / "nats.log").open("ab")
        node.process = subprocess.Popen(
            [NATS_SERVER, "-c", str(config)], stdout=node.log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if node.process.poll() is not None:
                raise RuntimeError(f"{node.name} exited: {self.log_of(node)}")
            try:
                with socket.create_connection(("127.0.0.1", node.port), timeout=1):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{node.name} did not listen: {self.log_of(node)}") from None
                time.sleep(0.05)

    def kill(self, node: Node) -> None:
        """SIGKILL ``node``: no goodbye to its peers, as a crash."""
        assert node.process is not None
        node.process.send_signal(signal.SIGKILL)
        node.process.wait(STOP_TIMEOUT_S)
        self._close_log(node)

    def stop(self, node: Node) -> None:
        """Stop ``node`` with SIGTERM, killing it if it does not go in time."""
        if node.process is None or node.process.poll() is not None:
            self._close_log(node)
            return
        node.process.terminate()
        try:
            node.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            node.process.kill()
            node.process.wait(STOP_TIMEOUT_S)
        self._close_log(node)

    def node_named(self, name: str) -> Node:
        """The node whose server name is ``name``."""
        return next(node for node in self.nodes if node.name == name)

    def log_of(self, node: Node) -> str:
        """The tail of ``node``'s log, for failure messages."""
        path = node.directory / "nats.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    @staticmethod
    def _close_log(node: Node) -> None:
        if node.log is not None:
            node.log.close()
            node.log = None


@contextmanager
def start_cluster(directory: Path, *, max_payload: int = MAX_PAYLOAD) -> Iterator[NatsCluster]:
    """Start a three-node JetStream cluster under ``directory``, whose servers take
    messages of up to ``max_payload`` bytes; stop it on exit.

    A machine without ``nats-server`` fails here, by name, rather than skipping:
    ``.ci/run`` installs it, and so can ``apt-get install nats-server``.
    """
    if not Path(NATS_SERVER).is_file():
        raise RuntimeError(f"{NATS_SERVER} is missing: apt-get install nats-server")
    cluster = NatsCluster()
    # A name of its own: clusters started side by side (parallel tests) whose ports
    # happened to meet would refuse each other's routes rather than merge.
    name = f"brain-test-{secrets.token_hex(4)}"
    for index in range(NODES):
        node_dir = directory / f"n{index + 1}"
        node_dir.mkdir(parents=True)
        node = Node(f"n{index + 1}", free_port(), free_port(), node_dir, max_payload, name)
        cluster.nodes.append(node)
    try:
        for node in cluster.nodes:
            cluster.start(node)
        yield cluster
    finally:
        for node in cluster.nodes:
            cluster.stop(node)
