"""The load test: many connections, a recall-heavy mix, latency and memory figures.

    python -m tests.load [--connections 100] [--seconds 600] [--embedder minilm] [--save]

A real server is started on a temporary data directory and seeded; then
``--connections`` asyncio clients each loop for ``--seconds``, choosing every
request by the mix: 70% RECALL, 25% writes (ENCODE, STATEMENT_CREATE), 5% other
(MEMORY_GET, STATEMENT_LIST, PING). Every answer is counted by operation and
outcome; the only error allowed is ``OVERLOADED``. Reported: requests per
second, p50/p99 per operation, and the server's resident memory at the start,
the middle and the end, split into anonymous memory (what a leak would grow)
and file pages (LMDB's map, which grows with the data), beside the data
directory's size. ``--save`` writes ``bench/results/load.json``. The
suite runs 30 seconds of it with the hashing embedder
(``tests/integration/test_load.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

from brain.client import AsyncClient
from brain.errors import BrainError
from brain.wire.messages.control import Ping
from brain.wire.messages.memory_ops import Encode, EncodeOk, MemoryGet
from brain.wire.messages.recall_ops import Recall
from brain.wire.messages.statement_ops import StatementCreate, StatementList
from brain.wire.messages.values import NameRef, TextValue
from brain.wire.opcodes import Opcode
from tests.integration.conftest import ServerProcess, start_server

__all__ = ["MIX", "WORDS", "main", "percentile", "run_load"]

MIX: Final = (("recall", 0.70), ("write", 0.25), ("other", 0.05))
"""The share of each kind of request."""

SEED_MEMORIES: Final = 200
"""Memories written before the load, so recalls have something to find."""

_WORD_LIST: Final = """
    alice bob carol dave globex initech acme moved joined left said likes tea jazz
    project deadline meeting friday budget report travel paris berlin tokyo
"""
WORDS: Final = tuple(_WORD_LIST.split())

RESULTS: Final = Path(__file__).resolve().parents[1] / "bench" / "results" / "load.json"


def _rss_mb(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def _sample(pid: int, data_dir: Path) -> dict[str, float]:
    """Resident memory, split into anonymous memory (the heap: what a leak grows) and
    file pages (mostly LMDB's map, which grows with the data), and the data's size."""
    data = sum(f.stat().st_size for f in data_dir.rglob("*") if f.is_file())
    return {
        "rss": _rss_mb(pid),
        "anon": _rss_mb(pid, "RssAnon"),
        "file": _rss_mb(pid, "RssFile"),
        "data": data / 2**20,
    }


def percentile(values: list[float], share: float) -> float:
    """The value below which ``share`` of ``values`` lie (0.0 for none)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def _worker(
    server: ServerProcess,
    rng: random.Random,
    *,
    until: float,
    latencies: dict[str, list[float]],
    outcomes: dict[str, int],
    memories: list[bytes],
) -> None:
    client = await AsyncClient.connect(
        server.host, server.wire_port, api_key=server.credentials["api_key"], timeout=120
    )
    try:
        while time.monotonic() < until:
            roll = rng.random()
            kind = (
                "recall"
                if roll < MIX[0][1]
                else "write"
                if roll < MIX[0][1] + MIX[1][1]
                else "other"
            )
            started = time.perf_counter()
            try:
                if kind == "recall":
                    cue = " ".join(rng.sample(WORDS, 3))
                    await client.call(Opcode.RECALL, Recall(cue=cue, top_k=10))
                elif kind == "write" and rng.random() < 0.5:
                    text = " ".join(rng.sample(WORDS, 6)) + f" {rng.getrandbits(48):x}"
                    made = await client.call(
                        Opcode.ENCODE, Encode(request_id=os.urandom(16), text=text)
                    )
                    if isinstance(made, EncodeOk):
                        memories.append(made.memory_id)
                elif kind == "write":
                    await client.call(
                        Opcode.STATEMENT_CREATE,
                        StatementCreate(
                            request_id=os.urandom(16),
                            kind="fact",
                            subject=NameRef(name=rng.choice(WORDS[:6]).title()),
                            predicate="noted",
                            object_=TextValue(text=" ".join(rng.sample(WORDS, 3))),
                        ),
                    )
                else:
                    pick = rng.random()
                    if pick < 0.4 and memories:
                        await client.call(Opcode.MEMORY_GET, MemoryGet(id=rng.choice(memories)))
                    elif pick < 0.8:
                        subject = NameRef(name=rng.choice(WORDS[:6]).title())
                        await client.call(
                            Opcode.STATEMENT_LIST, StatementList(subject=subject, limit=10)
                        )
                    else:
                        await client.call(Opcode.PING, Ping())
                outcome = f"{kind}:ok"
            except BrainError as exc:
                outcome = f"{kind}:{exc.wire_name}"
            latencies.setdefault(kind, []).append(time.perf_counter() - started)
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
    finally:
        await client.close()


async def _drive(
    server: ServerProcess, connections: int, seconds: float, seed: int
) -> dict[str, object]:
    rng = random.Random(seed)
    seeder = await AsyncClient.connect(
        server.host, server.wire_port, api_key=server.credentials["api_key"]
    )
    memories: list[bytes] = []
    for i in range(SEED_MEMORIES):
        made = await seeder.call(
            Opcode.ENCODE,
            Encode(request_id=os.urandom(16), text=" ".join(rng.sample(WORDS, 6)) + f" {i}"),
        )
        assert isinstance(made, EncodeOk)
        memories.append(made.memory_id)
    await seeder.close()
    latencies: dict[str, list[float]] = {}
    outcomes: dict[str, int] = {}
    pid = server.process.pid
    samples = {"start": _sample(pid, server.data_dir)}
    until = time.monotonic() + seconds
    started = time.monotonic()

    async def sample_middle() -> None:
        await asyncio.sleep(seconds / 2)
        samples["middle"] = _sample(pid, server.data_dir)

    workers = [
        _worker(
            server,
            random.Random(rng.getrandbits(32)),
            until=until,
            latencies=latencies,
            outcomes=outcomes,
            memories=memories,
        )
        for _ in range(connections)
    ]
    await asyncio.gather(sample_middle(), *workers)
    samples["end"] = _sample(pid, server.data_dir)
    elapsed = time.monotonic() - started
    total = sum(outcomes.values())
    return {
        "connections": connections,
        "seconds": round(elapsed, 1),
        "requests": total,
        "requests_per_s": round(total / elapsed, 1),
        "outcomes": dict(sorted(outcomes.items())),
        "latency_ms": {
            kind: {
                "p50": round(percentile(values, 0.5) * 1000, 2),
                "p99": round(percentile(values, 0.99) * 1000, 2),
            }
            for kind, values in sorted(latencies.items())
        },
        "rss_mb": {k: round(v["rss"], 1) for k, v in samples.items()},
        "rss_anon_mb": {k: round(v["anon"], 1) for k, v in samples.items()},
        "rss_file_mb": {k: round(v["file"], 1) for k, v in samples.items()},
        "data_mb": {k: round(v["data"], 1) for k, v in samples.items()},
    }


def run_load(
    data_dir: Path, *, connections: int, seconds: float, embedder: str, seed: int
) -> dict[str, object]:
    """Start a server on ``data_dir``, drive it, stop it; return the figures."""
    env = {**os.environ, "BRAIN_RETRIEVAL__EMBEDDER": embedder, "OPENBLAS_NUM_THREADS": "1"}
    server = start_server(data_dir, env=env)
    try:
        figures = asyncio.run(_drive(server, connections, seconds, seed))
    finally:
        server.stop()
    figures["embedder"] = embedder
    return figures


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.load``."""
    parser = argparse.ArgumentParser(prog="python -m tests.load", description=__doc__)
    parser.add_argument("--connections", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--embedder", default="minilm", choices=("minilm", "hashing"))
    parser.add_argument("--seed", type=int, default=random.randrange(1 << 30))
    parser.add_argument("--save", action="store_true", help="write bench/results/load.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="brain-load-") as tmp:
        figures = run_load(
            Path(tmp) / "data",
            connections=args.connections,
            seconds=args.seconds,
            embedder=args.embedder,
            seed=args.seed,
        )
    print(json.dumps(figures, indent=2))
    if args.save:
        RESULTS.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    outcomes = figures["outcomes"]
    assert isinstance(outcomes, dict)
    unexpected = [k for k in outcomes if not k.endswith((":ok", ":OVERLOADED"))]
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
