"""Cluster reads: read throughput of one node against three nodes of one shard.

One shard's records are written through its planner, then :data:`CLIENTS` client
processes (a process each, so that the clients' own Python does not share one
interpreter lock) read them for a fixed time: ``MEMORY_GET`` of random memories and
a ``RECALL`` every :data:`RECALL_EVERY` reads. "one" is the planner alone with every
client on it; "three" is the planner and two followers (``brain serve --cluster``
processes on three local ``nats-server``), the clients spread over the three. Both
take turns (spec/08-benchmarks.md), each on fresh data directories and a fresh
stream, the hashing embedder keeping the model out of the figure.

On one machine of two cores three servers share the cores the one server had, so
the ratio measures the cost of followers, not the capacity they add on machines of
their own: spec/08-benchmarks.md §"Cluster reads" says how reads scale with machines.

    python -m bench cluster-reads [--quick]
"""

from __future__ import annotations

import multiprocessing
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Final

from bench import harness
from bench.brainserver import BrainServer, brain_server
from bench.peers.nats import start_cluster
from brain.client import Client
from brain.errors import Unavailable
from brain.wire.messages.memory_ops import Encode, EncodeOk, MemoryGet
from brain.wire.messages.recall_ops import Recall
from brain.wire.opcodes import Opcode

__all__ = ["CLIENTS", "main"]

CLIENTS: Final = 6
"""Reader processes, one request in flight each: two per node of the three-node
setup, so each node has readers, and few enough for two cores."""

MEMORIES: Final = 300
"""Memories written before the reads: enough that reads spread over many records."""

RECALL_EVERY: Final = 10
"""One read in this many is a RECALL (the rest MEMORY_GET): the mix of an agent
that looks up what it knows and now and then searches it."""

PAIRS: Final = 3
"""Turns of each setup in a full run."""

QUICK_PAIRS: Final = 1
"""Turns of ``--quick``."""

SECONDS: Final = 8.0
"""Read time per turn in a full run."""

QUICK_SECONDS: Final = 1.0
"""Read time per turn of ``--quick``."""

CATCH_UP_S: Final = 60.0
"""Longest a follower may take to apply the loaded records before the reads start."""

ENV: Final = {"BRAIN_RETRIEVAL__EMBEDDER": "hashing"}
"""Every node embeds with the hashing embedder: the figure is the serving cost."""


def _reader(address: tuple[str, int, str], ids: list[bytes], min_lsn: int, seconds: float) -> int:
    """Read for ``seconds`` on one node; the reads answered (in a process of its own)."""
    host, port, key = address
    rng = random.Random(os.getpid())
    done = 0
    with Client.connect(host, port, api_key=key) as client:
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            if done % RECALL_EVERY == RECALL_EVERY - 1:
                client.call(
                    Opcode.RECALL, Recall(cue=f"topic {rng.randrange(17)}", min_lsn=min_lsn)
                )
            else:
                client.call(Opcode.MEMORY_GET, MemoryGet(id=rng.choice(ids), min_lsn=min_lsn))
            done += 1
    return done


def _load(planner: BrainServer) -> tuple[list[bytes], int]:
    """Write :data:`MEMORIES` memories through the planner: their ids and the last LSN."""
    ids: list[bytes] = []
    lsn = 0
    with Client.connect(planner.host, planner.port, api_key=planner.api_key) as client:
        for n in range(MEMORIES):
            text = f"memory {n} about topic {n % 17} and thing {n % 29}"
            answer = client.call(Opcode.ENCODE, Encode(request_id=os.urandom(16), text=text))
            assert isinstance(answer, EncodeOk)
            ids.append(answer.memory_id)
            lsn = answer.lsn
    return ids, lsn


def measure(nodes: list[BrainServer], seconds: float) -> dict[str, Any]:
    """Reads per second of :data:`CLIENTS` readers spread over ``nodes`` (the first the
    planner), after a load through the planner that every node has applied."""
    ids, lsn = _load(nodes[0])
    addresses = [(node.host, node.port, node.api_key) for node in nodes]
    # Every node has applied the load before the clock starts: a read with the load's
    # LSN waits on a follower until it has (spec/01-wire.md §4, "Minimum LSN").
    deadline = time.monotonic() + CATCH_UP_S
    for host, port, key in addresses:
        with Client.connect(host, port, api_key=key) as client:
            while True:
                try:
                    client.call(Opcode.MEMORY_GET, MemoryGet(id=ids[-1], min_lsn=lsn))
                    break
                except Unavailable:  # past MIN_LSN_WAIT_S and still behind: ask again
                    if time.monotonic() > deadline:
                        raise
    jobs = [(addresses[i % len(addresses)], ids, lsn, seconds) for i in range(CLIENTS)]
    start = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(CLIENTS) as pool:
        counts = pool.starmap(_reader, jobs)
    elapsed = time.perf_counter() - start
    return {
        "nodes": len(nodes),
        "reads": sum(counts),
        "seconds": round(elapsed, 3),
        "reads_per_s": sum(counts) / seconds,
        "per_client": counts,
    }


@contextmanager
def _nodes(
    root: Path, servers: tuple[str, ...], shard: str, count: int
) -> Iterator[list[BrainServer]]:
    """``count`` nodes of ``shard``: the first started takes the planner lease."""
    with ExitStack() as stack:
        nodes = []
        for index in range(count):
            flags = ("--cluster", ",".join(servers), "--node", f"r{index}", "--shard", shard)
            data = root / f"{shard}-r{index}"
            nodes.append(stack.enter_context(brain_server(ENV, data, flags)))
        yield nodes


def main(argv: list[str]) -> int:
    """Run the suite; print and save its JSON."""
    args = harness.parser("cluster-reads", __doc__).parse_args(argv)
    pairs = QUICK_PAIRS if args.quick else PAIRS
    seconds = QUICK_SECONDS if args.quick else SECONDS
    with tempfile.TemporaryDirectory(prefix="brain-bench-cluster-reads-") as scratch:
        root = Path(scratch)
        with start_cluster(root / "nats") as cluster:
            turn = [0]

            def setup(count: int) -> Mapping[str, Any]:
                turn[0] += 1  # a fresh shard (stream) and fresh directories each turn
                with _nodes(root, cluster.servers, f"reads{turn[0]}", count) as nodes:
                    return measure(nodes, seconds)

            systems: dict[str, Callable[[], Mapping[str, Any]]] = {
                "three": lambda: setup(3),
                "one": lambda: setup(1),
            }
            runs = harness.alternate(systems, pairs)
    ratio = harness.ratios(runs["three"], runs["one"], "reads_per_s")
    ours = statistics.median(float(r["reads_per_s"]) for r in runs["three"])
    peer = statistics.median(float(r["reads_per_s"]) for r in runs["one"])
    result = {
        "clients": CLIENTS,
        "memories": MEMORIES,
        "recall_every": RECALL_EVERY,
        "seconds": seconds,
        "runs": runs,
        "ratio": ratio,
        "summary": [
            harness.row(
                f"reads: MEMORY_GET and 1 RECALL in {RECALL_EVERY} on three nodes of a shard "
                f"(planner + 2 followers) vs the planner alone, {CLIENTS} client processes",
                "reads/s",
                ours,
                peer=peer,
                peer_name="one node (the planner alone)",
                ratio=ratio["median"],
            )
        ],
    }
    stamped = harness.save("cluster-reads", args, result)
    print(
        f"cluster-reads: {ours:,.0f} reads/s on three nodes, {peer:,.0f} on one: "
        f"{ratio['median']:.2f}x (pairs {ratio['per_pair']}); "
        f"load {stamped['machine']['load_average_1m']}"
    )
    return 0
