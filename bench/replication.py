"""Replication: ingest on the replicated log (three JetStream replicas) against the
single node's local WAL.

An embedded database takes ENCODE writes from :data:`CLIENTS` threads, each with one
write in flight, for a fixed time; the hashing embedder keeps the model out of the
figure, which is the log's cost. The single node syncs its WAL to the local disk
(fdatasync); the replicated one acknowledges a write once a quorum of three local
``nats-server`` processes (:mod:`bench.peers.nats`) stored it. The two take turns
(spec/08-benchmarks.md), each on a fresh data directory (and a fresh stream).

On one machine the three replicas share the two cores and the disk with the
database, so the ratio is a floor of what separate machines give: the model of
spec/08-benchmarks.md §"Replication" says how both figures scale with machines.

    python -m bench replication [--quick]
"""

from __future__ import annotations

import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from bench import harness
from bench.peers.nats import start_cluster
from brain.engine.database import Database, DatabaseOptions
from brain.engine.replication.options import JetStreamLogOptions
from brain.wire.messages.memory_ops import Encode
from brain.wire.opcodes import Opcode

__all__ = ["CLIENTS", "main", "measure"]

CLIENTS: Final = 8
"""Writer threads, one write in flight each: enough for group commit to batch on both
logs, few enough that two cores are not spent on switching between them."""

PAIRS: Final = 3
"""Turns of each system in a full run."""

QUICK_PAIRS: Final = 1
"""Turns of ``--quick``."""

SECONDS: Final = 8.0
"""Ingest time per turn in a full run."""

QUICK_SECONDS: Final = 1.0
"""Ingest time per turn of ``--quick``."""

NAMESPACE: Final = "bench"
"""The namespace every write goes to."""


def measure(options: DatabaseOptions, directory: Path, seconds: float) -> dict[str, Any]:
    """Acknowledged ENCODE writes per second on a fresh database at ``directory``."""
    done = [0] * CLIENTS
    stop = threading.Event()
    errors: list[BaseException] = []
    with Database.open(directory, options) as db:

        def client(index: int) -> None:
            n = 0
            try:
                while not stop.is_set():
                    text = f"client {index} wrote memory {n} about topic {n % 17}"
                    db.execute(
                        NAMESPACE, Opcode.ENCODE, Encode(request_id=os.urandom(16), text=text)
                    )
                    n += 1
                    done[index] = n
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(CLIENTS)]
        start = time.perf_counter()
        for thread in threads:
            thread.start()
        time.sleep(seconds)
        stop.set()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - start
    if errors:
        raise RuntimeError(f"a write failed during the run: {errors[0]!r}")
    return {"writes": sum(done), "seconds": round(elapsed, 3), "writes_per_s": sum(done) / elapsed}


def main(argv: list[str]) -> int:
    """Run the suite; print and save its JSON."""
    args = harness.parser("replication", __doc__).parse_args(argv)
    pairs = QUICK_PAIRS if args.quick else PAIRS
    seconds = QUICK_SECONDS if args.quick else SECONDS
    with tempfile.TemporaryDirectory(prefix="brain-bench-replication-") as scratch:
        root = Path(scratch)
        with start_cluster(root / "nats") as cluster:
            turn = [0]

            def fresh(kind: str) -> Path:
                turn[0] += 1
                return root / f"{kind}-{turn[0]}"

            def single() -> Mapping[str, Any]:
                return measure(DatabaseOptions(embedder="hashing"), fresh("single"), seconds)

            def replicated() -> Mapping[str, Any]:
                # A stream of its own each turn, as the single node gets a fresh WAL.
                log = JetStreamLogOptions(cluster.servers, shard=f"bench{turn[0] + 1}")
                options = DatabaseOptions(embedder="hashing", jetstream=log)
                return measure(options, fresh("replicated"), seconds)

            systems: dict[str, Callable[[], Mapping[str, Any]]] = {
                "replicated": replicated,
                "single": single,
            }
            runs = harness.alternate(systems, pairs)
    ratio = harness.ratios(runs["replicated"], runs["single"], "writes_per_s")
    ours = statistics.median(float(r["writes_per_s"]) for r in runs["replicated"])
    peer = statistics.median(float(r["writes_per_s"]) for r in runs["single"])
    result = {
        "clients": CLIENTS,
        "seconds": seconds,
        "runs": runs,
        "ratio": ratio,
        "summary": [
            harness.row(
                f"ingest: ENCODE on three JetStream replicas vs the single node's WAL, "
                f"{CLIENTS} clients, embedded",
                "writes/s",
                ours,
                peer=peer,
                peer_name="the single node (local WAL, fdatasync)",
                ratio=ratio["median"],
            )
        ],
    }
    stamped = harness.save("replication", args, result)
    print(
        f"replication: {ours:,.0f} writes/s on three replicas, {peer:,.0f} on the single "
        f"node: {ratio['median']:.2f}x (pairs {ratio['per_pair']}); "
        f"load {stamped['machine']['load_average_1m']}"
    )
    return 0
