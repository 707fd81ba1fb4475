"""Ingest: acknowledged STATEMENT_CREATE writes per second, against PostgreSQL 15.

A real ``brain serve`` (fsync on) and a PostgreSQL 15 cluster started by the
harness (``synchronous_commit=on``, :mod:`bench.peers.postgres`) take turns
(A B A B …). Each turn starts from a fresh server (ours) or a fresh database
(the peer's), preloaded with the generated world's entities; then
:mod:`bench.loadgen` drives :data:`CLIENTS` concurrent connections from
:data:`PROCESSES` generator processes, each connection with one write in
flight, each write a fact about one of the entities. A write counts when it is
acknowledged: our WAL record is durable, the peer's COMMIT has returned.

Group commit shows as fsyncs per 1,000 writes far below 1,000 (ours from
``brain_wal_fsyncs_total``, the peer's from ``pg_stat_wal.wal_sync``). The
single-client figure (one write in flight, so one fsync per write) is measured
too, one pair.

    python -m bench ingest [--quick] [--pairs N] [--seconds S]
"""

from __future__ import annotations

import asyncio
import statistics
import sys
from collections.abc import Mapping
from typing import Any, Final

from bench import harness
from bench.brainload import create_entities
from bench.brainserver import brain_server
from bench.datagen import generate
from bench.loadgen import run_load
from bench.peers.postgres import PostgresServer, postgres_server
from bench.pgload import create_entities as pg_create_entities
from brain.client import AsyncClient

__all__ = ["CLIENTS", "main", "measure_ours", "measure_postgres"]

CLIENTS: Final = 16
"""Concurrent connections, one write in flight each (spec/08-benchmarks.md)."""

PROCESSES: Final = 2
"""Generator processes: enough to keep 16 connections busy without taking both cores."""

PAIRS: Final = 3
"""A B turns of a full run at :data:`CLIENTS`; the ratio is the median of the pairs."""

SECONDS: Final = 12.0
"""Load time per turn in a full run: long enough for several checkpoints of either side."""

QUICK_SECONDS: Final = 1.0
"""Load time per turn of ``--quick``: it only keeps the harness and the peer alive."""

WARMUP_S: Final = 3.0
"""Time for the generator processes to start and connect before the common start."""

QUICK_WARMUP_S: Final = 1.5
"""The same for ``--quick``, where a late start only shortens an unmeasured run."""

WORLD: Final = 1000
"""Statements of the generated world whose entities (about 90) the writes are about."""

SEED: Final = 1
"""The generator's seed, recorded so a reader can regenerate the same entities."""

PEER: Final = "PostgreSQL 15"

GOAL: Final = 1.0
"""Writes/s over PostgreSQL's at :data:`CLIENTS` clients (spec/08-benchmarks.md §5)."""

SINGLE_GOAL: Final = 0.8
"""Writes/s over PostgreSQL's at one client: each write waits for its own fsync on both
sides, so the CPU around one fsync is all that differs."""
"""The peer's name in the results table."""

_turns = 0


def _next_turn() -> int:
    """A number unique to this turn within the run (request ids, database names)."""
    global _turns
    _turns += 1
    return _turns


async def _preload(host: str, port: int, api_key: str) -> list[bytes]:
    client = await AsyncClient.connect(host, port, api_key=api_key)
    try:
        return await create_entities(client, generate(WORLD, SEED).entities)
    finally:
        await client.close()


def measure_ours(clients: int, seconds: float, warmup_s: float) -> dict[str, Any]:
    """One turn on a fresh server: writes/s, latency, fsyncs, generator CPU time."""
    with brain_server() as server:
        entities = asyncio.run(_preload(server.host, server.port, server.api_key))
        fsyncs = server.metric("brain_wal_fsyncs_total")
        params = {
            "host": server.host,
            "port": server.port,
            "api_key": server.api_key,
            "entities": [e.hex() for e in entities],
            "run": _next_turn(),
        }
        load = run_load(
            "bench.brainload:statement_create",
            params,
            processes=min(PROCESSES, clients),
            connections=clients,
            seconds=seconds,
            warmup_s=warmup_s,
        )
        fsyncs = server.metric("brain_wal_fsyncs_total") - fsyncs
        # The indexer embeds new statements in the background, on the same two cores.
        indexer = {
            "embedded_by_end": int(server.metric("brain_index_embedded_total")),
            "backlog_at_end": int(server.metric("brain_embed_backlog")),
        }
        rss = server.rss_mb()
    turn = _turn(clients, load.to_dict(), load.operations, fsyncs, rss_mb=rss)
    return {**turn, "indexer": indexer}


def measure_postgres(
    pg: PostgresServer, clients: int, seconds: float, warmup_s: float
) -> dict[str, Any]:
    """One turn on a fresh database of the running cluster, measured as :func:`measure_ours`."""
    turn = _next_turn()
    conninfo = pg.create_database(f"ingest_{turn}")
    entities = pg_create_entities(conninfo, generate(WORLD, SEED).entities)
    syncs = pg.wal_syncs()
    load = run_load(
        "bench.pgload:pg_insert",
        {"conninfo": conninfo, "entities": entities, "run": turn},
        processes=min(PROCESSES, clients),
        connections=clients,
        seconds=seconds,
        warmup_s=warmup_s,
    )
    return _turn(clients, load.to_dict(), load.operations, pg.wal_syncs() - syncs)


def _turn(
    clients: int, load: dict[str, Any], writes: int, fsyncs: float, *, rss_mb: float | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {"clients": clients, **load, "fsyncs": int(fsyncs)}
    out["fsyncs_per_1000_writes"] = round(1000 * fsyncs / writes, 1) if writes else None
    if rss_mb is not None:
        out["server_rss_mb"] = rss_mb
    return out


def _median(runs: list[Mapping[str, Any]], key: str) -> float:
    return float(statistics.median(float(r[key]) for r in runs))


def _p99(runs: list[Mapping[str, Any]]) -> float:
    return float(statistics.median(float(r["latency_ms"]["p99"]) for r in runs))


def _print(system: str, runs: list[Mapping[str, Any]]) -> None:
    for run in runs:
        latency = run["latency_ms"]
        print(
            f"clients={run['clients']:>3}  system={system:<8}  writes/s={run['ops_per_s']:>9}  "
            f"fsyncs/1000 writes={run['fsyncs_per_1000_writes']}  "
            f"p50={latency['p50']} ms  p99={latency['p99']} ms  errors={run['errors']}",
            flush=True,
        )


def main(argv: list[str]) -> int:
    """Entry point of the suite."""
    p = harness.parser("ingest", __doc__)
    p.add_argument("--pairs", type=int, help=f"A B turns at {CLIENTS} clients (full: {PAIRS})")
    p.add_argument("--seconds", type=float, help=f"load time per turn (full: {SECONDS})")
    args = p.parse_args(argv)
    pairs = args.pairs or (1 if args.quick else PAIRS)
    seconds = args.seconds or (QUICK_SECONDS if args.quick else SECONDS)
    warmup = QUICK_WARMUP_S if args.quick else WARMUP_S
    with postgres_server() as pg:
        runs = harness.alternate(
            {
                "brain": lambda: measure_ours(CLIENTS, seconds, warmup),
                "postgres": lambda: measure_postgres(pg, CLIENTS, seconds, warmup),
            },
            pairs,
        )
        single = harness.alternate(
            {
                "brain": lambda: measure_ours(1, seconds, warmup),
                "postgres": lambda: measure_postgres(pg, 1, seconds, warmup),
            },
            1,
        )
        peer = pg.describe()
    for name in ("brain", "postgres"):
        _print(name, runs[name] + single[name])
    ratio = harness.ratios(runs["brain"], runs["postgres"], "ops_per_s")
    single_ratio = harness.ratios(single["brain"], single["postgres"], "ops_per_s")
    goal = harness.Goal(f"throughput ≥ {GOAL:.1f}x PostgreSQL", GOAL, at_least=True)
    single_goal = harness.Goal(
        f"throughput ≥ {SINGLE_GOAL:.1f}x PostgreSQL", SINGLE_GOAL, at_least=True
    )
    summary = [
        harness.row(
            f"ingest: STATEMENT_CREATE, {CLIENTS} clients, fsync on",
            "writes/s",
            _median(runs["brain"], "ops_per_s"),
            peer=_median(runs["postgres"], "ops_per_s"),
            peer_name=PEER,
            ratio=ratio["median"],
            goal=goal,
        ),
        harness.row(
            "ingest: STATEMENT_CREATE, 1 client, fsync on",
            "writes/s",
            _median(single["brain"], "ops_per_s"),
            peer=_median(single["postgres"], "ops_per_s"),
            peer_name=PEER,
            ratio=single_ratio["median"],
            goal=single_goal,
        ),
        harness.row(
            f"ingest: fsyncs per 1,000 writes, {CLIENTS} clients",
            "fsyncs",
            _median(runs["brain"], "fsyncs_per_1000_writes"),
            peer=_median(runs["postgres"], "fsyncs_per_1000_writes"),
            peer_name=PEER,
        ),
        harness.row(
            f"ingest: p99 write latency, {CLIENTS} clients",
            "ms",
            _p99(runs["brain"]),
            peer=_p99(runs["postgres"]),
            peer_name=PEER,
        ),
    ]
    notes = []
    backlog = [int(r["indexer"]["backlog_at_end"]) for r in runs["brain"]]
    if any(backlog):
        notes.append(
            "Our server embeds every new statement in the background (the default MiniLM "
            "embedder) on the same two cores as the writes: at the end of the "
            f"{CLIENTS}-client turns {backlog} statements were still waiting to be embedded "
            "(brain_embed_backlog), so that work was competing with ingest throughout."
        )
    errors = sum(int(r["errors"]) for side in (runs, single) for rs in side.values() for r in rs)
    harness.save(
        "ingest",
        args,
        {
            "summary": summary,
            "parameters": {
                "clients": CLIENTS,
                "generator_processes": PROCESSES,
                "in_flight_per_connection": 1,
                "pairs": pairs,
                "seconds_per_turn": seconds,
                "warmup_s": warmup,
                "world_statements": WORLD,
                "seed": SEED,
                "write": "a fact (subject entity, predicate works_on, text object)",
                "ours": "brain serve, default configuration (fsync on), fresh data dir per turn",
                "peer_turn": "fresh database per turn in one cluster, entities preloaded",
            },
            "peer": {
                **peer,
                "schema": "bench/peers/postgres.py SCHEMA (6 B-tree indexes, FK on subject)",
                "write": "INSERT … RETURNING, prepared, one transaction per write (COMMIT)",
            },
            "ratio": {f"{CLIENTS}_clients": ratio, "1_client": single_ratio},
            "runs": runs,
            "single_client_runs": single,
            "notes": notes,
            "errors": errors,
        },
    )
    if errors:
        print(f"ingest: {errors} writes failed", file=sys.stderr)
        return 1
    return 0
