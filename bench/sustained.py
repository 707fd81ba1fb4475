"""Sustained ingest with MiniLM: writes per second and the semantic index's lag.

A real ``brain serve`` with the MiniLM embedder (the default) takes STATEMENT_CREATE
writes from :data:`CLIENTS` connections for ten minutes. The indexer embeds their
texts in the background, in its own lower-priority process, on the same two cores.
Every :data:`SAMPLE_S` the harness reads ``/metrics``. It records acknowledged
writes, the embedding backlog, the index's lag in seconds, the documents embedded
and the writes refused with OVERLOADED.

Once a namespace's backlog reaches ``retrieval.max_embed_backlog``, its writes
are refused with ``retry_after_ms`` (spec/04-retrieval.md §3). The clients here obey
it: they sleep as told, then send the same request again, so a write's latency
includes its waits. After the load, the run measures how long the indexer takes
to empty what was left, up to :data:`DRAIN_LIMIT_S`.

    python -m bench sustained [--quick] [--seconds S] [--clients N]
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from collections.abc import Mapping
from typing import Any, Final

from bench import harness
from bench.brainload import StatementCreateSession, call_obeying, create_entities
from bench.brainserver import BrainServer, brain_server
from bench.datagen import generate
from bench.loadgen import run_load
from brain.client import AsyncClient
from brain.engine.write.tuning import MAX_EMBED_BACKLOG
from brain.wire.opcodes import Opcode

__all__ = ["ObedientCreateSession", "main", "obedient_create"]

CLIENTS: Final = 16
"""Concurrent connections, one write in flight each, as in the ingest suite."""

PROCESSES: Final = 2
"""Generator processes, as in the ingest suite."""

SECONDS: Final = 600.0
"""Load time of a full run: ten minutes."""

QUICK_SECONDS: Final = 3.0
"""Load time of ``--quick``: it only keeps the harness alive."""

SAMPLE_S: Final = 10.0
"""Time between two readings of ``/metrics`` in a full run."""

QUICK_SAMPLE_S: Final = 1.0
"""The same for ``--quick``."""

QUICK_BACKLOG: Final = 50
"""``retrieval.max_embed_backlog`` of ``--quick``: small enough that its three
seconds of writes fill it, so the refusals and the retries run too."""

DRAIN_LIMIT_S: Final = 900.0
"""Longest the run waits after the load for the backlog to empty. Past it the run
reports the backlog left instead."""

WORLD: Final = 1000
"""Statements of the generated world whose entities the writes are about."""

METRICS: Final = {
    "acknowledged": "brain_group_commit_jobs_total",
    "backlog": "brain_embed_backlog",
    "lag_s": "brain_index_lag_seconds",
    "embedded": "brain_index_embedded_total",
    "refused": "brain_embed_refused_total",
}
"""The figures each sample records, by the metric they are read from."""


class ObedientCreateSession(StatementCreateSession):
    """STATEMENT_CREATE that, refused with OVERLOADED, waits ``retry_after_ms`` and
    sends the same request again (:func:`~bench.brainload.call_obeying`)."""

    async def step(self, n: int) -> None:
        await call_obeying(self.client, Opcode.STATEMENT_CREATE, self.request(n))


def obedient_create(params: Mapping[str, Any], session_no: int) -> ObedientCreateSession:
    """Factory for :mod:`bench.loadgen`: ``"bench.sustained:obedient_create"``."""
    return ObedientCreateSession(params, session_no)


async def _preload(server: BrainServer) -> list[bytes]:
    client = await AsyncClient.connect(server.host, server.port, api_key=server.api_key)
    try:
        return await create_entities(client, generate(WORLD, 1).entities)
    finally:
        await client.close()


def _sample(server: BrainServer, started: float) -> dict[str, float]:
    figures = {key: server.metric(name) for key, name in METRICS.items()}
    return {
        "t_s": round(time.monotonic() - started, 1),
        **figures,
        "rss_mb": round(server.rss_mb(), 1),
    }


def _drain(server: BrainServer, started: float) -> dict[str, float | None]:
    """Wait for the backlog to empty, up to :data:`DRAIN_LIMIT_S`."""
    began = time.monotonic()
    while time.monotonic() - began < DRAIN_LIMIT_S:
        if (
            server.metric("brain_embed_backlog") == 0
            and server.metric("brain_index_lag_seconds") == 0
        ):
            return {"drained_after_s": round(time.monotonic() - began, 1), "left": 0}
        time.sleep(1.0)
    return {"drained_after_s": None, "left": server.metric("brain_embed_backlog")}


def measure(
    clients: int, seconds: float, sample_s: float, warmup_s: float, backlog: int
) -> dict[str, Any]:
    """One server, one long load; samples while it runs, then the drain."""
    env = {"BRAIN_RETRIEVAL__MAX_EMBED_BACKLOG": str(backlog)}
    with brain_server(env=env) as server:
        entities = asyncio.run(_preload(server))
        params = {
            "host": server.host,
            "port": server.port,
            "api_key": server.api_key,
            "entities": [e.hex() for e in entities],
            "run": 1,
        }
        samples: list[dict[str, float]] = []
        done = threading.Event()
        started = time.monotonic() + warmup_s

        def sampler() -> None:
            done.wait(warmup_s)
            while not done.wait(sample_s):
                samples.append(_sample(server, started))

        thread = threading.Thread(target=sampler, daemon=True)
        thread.start()
        try:
            load = run_load(
                "bench.sustained:obedient_create",
                params,
                processes=min(PROCESSES, clients),
                connections=clients,
                seconds=seconds,
                warmup_s=warmup_s,
            )
        finally:
            done.set()
            thread.join()
        at_end = _sample(server, started)
        drain = _drain(server, started)
    return {
        "load": load.to_dict(),
        "samples": samples,
        "at_end": at_end,
        "drain": drain,
        "max_embed_backlog": backlog,
    }


def _summary(result: Mapping[str, Any], seconds: float) -> list[dict[str, object]]:
    load = result["load"]
    samples = result["samples"] or [result["at_end"]]
    at_end = result["at_end"]
    writes = float(load["operations"]) / seconds
    # The second half of the run: the steady state, after the backlog first filled.
    steady = samples[len(samples) // 2 :]
    embed_rate = 0.0
    if len(steady) >= 2 and steady[-1]["t_s"] > steady[0]["t_s"]:
        embed_rate = (steady[-1]["embedded"] - steady[0]["embedded"]) / (
            steady[-1]["t_s"] - steady[0]["t_s"]
        )
    rows = [
        harness.row(f"sustained ingest, {CLIENTS} clients, {seconds:.0f} s", "writes/s", writes),
        harness.row("documents embedded per second, second half", "docs/s", embed_rate),
        harness.row("largest embedding backlog", "documents", max(s["backlog"] for s in samples)),
        harness.row("largest index lag", "s", max(s["lag_s"] for s in samples)),
        harness.row("index lag at the end of the load", "s", at_end["lag_s"]),
        harness.row("writes refused with OVERLOADED (then retried)", "writes", at_end["refused"]),
    ]
    drained = result["drain"]["drained_after_s"]
    if drained is not None:
        rows.append(harness.row("time to empty the backlog after the load", "s", drained))
    return rows


def main(argv: list[str]) -> int:
    """``python -m bench sustained``."""
    p = harness.parser("sustained", __doc__)
    p.add_argument("--seconds", type=float, help=f"load time (full: {SECONDS:.0f})")
    p.add_argument("--clients", type=int, default=CLIENTS, help=f"connections ({CLIENTS})")
    args = p.parse_args(argv)
    seconds = args.seconds or (QUICK_SECONDS if args.quick else SECONDS)
    sample_s = QUICK_SAMPLE_S if args.quick else SAMPLE_S
    backlog = QUICK_BACKLOG if args.quick else MAX_EMBED_BACKLOG
    result = measure(args.clients, seconds, sample_s, warmup_s=3.0, backlog=backlog)
    lags = [s["lag_s"] for s in result["samples"]] or [0.0]
    print(
        f"{result['load']['operations'] / seconds:.1f} writes/s;"
        f" lag median {statistics.median(lags):.1f} s, max {max(lags):.1f} s;"
        f" drain {result['drain']}"
    )
    parameters = {"clients": args.clients, "seconds": seconds, "sample_s": sample_s}
    harness.save(
        "sustained",
        args,
        {"summary": _summary(result, seconds), "parameters": parameters, **result},
    )
    return 0
