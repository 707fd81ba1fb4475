"""Point reads: STATEMENT_GET by id and STATEMENT_LIST by subject+predicate as of a past time.

Our server and a PostgreSQL 15 cluster (:mod:`bench.peers.postgres`) are loaded
with the same generated world (:mod:`bench.datagen`): entities, then
statements in order, each correction applied as STATEMENT_SUPERSEDE on ours and
as an UPDATE of the old row's ``record_invalidated_at`` plus the INSERT of its
successor, in one transaction, on the peer. The load has two halves with a
barrier between them; the last record time of the first half is the ``as_of``
instant of the list queries, so "as of" means the same set of statements on
both sides even though their clocks differ.

Before measuring, the as-of answers are compared for a sample of (subject,
predicate) pairs: the same statement contents must come back from both (the
run fails otherwise). Then the two queries are measured in turns (A B A B …),
:data:`CONNECTIONS` connections from :data:`PROCESSES` generator processes,
and the ratio of queries per second is reported pair by pair.

    python -m bench point [--quick] [--statements N] [--pairs N] [--seconds S]
"""

from __future__ import annotations

import asyncio
import random
import statistics
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol, TypeVar

import psycopg

from bench import harness
from bench.brainload import LIST_LIMIT, BrainWriter, create_entities
from bench.brainserver import BrainServer, brain_server
from bench.datagen import StatementSpec, World, generate
from bench.loadgen import run_load
from bench.peers.postgres import postgres_server
from bench.pgload import LIST_AS_OF, SPACE, PgWriter, from_ns, to_ns
from bench.pgload import create_entities as pg_create_entities
from brain.client import AsyncClient
from brain.wire.messages.records import Statement
from brain.wire.messages.statement_ops import StatementList, StatementListOk
from brain.wire.messages.values import EntityRef, TextValue
from brain.wire.opcodes import Opcode

__all__ = ["main"]

STATEMENTS: Final = 10_000
"""Statements loaded in a full run (spec/08-benchmarks.md: 10,000 to 20,000)."""

QUICK_STATEMENTS: Final = 400
"""Statements loaded by ``--quick``: enough for chains and an as-of cut to exist."""

CONNECTIONS: Final = 16
"""Concurrent query connections, one query in flight each (as ingest's clients)."""

PROCESSES: Final = 2
"""Generator processes driving the connections."""

LOAD_CONNECTIONS: Final = 16
"""Connections loading the world; a correction waits for the statement it corrects."""

PAIRS: Final = 3
"""A B turns per query in a full run."""

SECONDS: Final = 10.0
"""Load time per turn in a full run."""

QUICK_SECONDS: Final = 1.0
"""Load time per turn of ``--quick``."""

WARMUP_S: Final = 3.0
"""Time for the generator processes to start and connect before the common start."""

QUICK_WARMUP_S: Final = 1.5
"""The same for ``--quick``."""

CHECK_SAMPLE: Final = 200
"""(subject, predicate) pairs whose as-of answers are compared between the systems."""

BACKLOG_TIMEOUT_S: Final = 900.0
"""Longest wait for our indexer to embed the loaded statements before measuring (its
work would otherwise compete with the queries for the two cores)."""

BACKLOG_POLL_S: Final = 0.5
"""How often the embedding backlog is polled."""

SEED: Final = 1
"""The generator's seed."""

PEER: Final = "PostgreSQL 15"

GET_GOAL: Final = 1.2
"""STATEMENT_GET queries/s over PostgreSQL's: a key lookup in a memory map should beat a
B-tree probe behind a SQL executor (spec/08-benchmarks.md §5)."""

LIST_GOAL: Final = 1.0
"""As-of STATEMENT_LIST queries/s over PostgreSQL's: its index range scan does the same walk."""
"""The peer's name in the results table."""

Id = TypeVar("Id")


class Writer(Protocol[Id]):
    """One loading connection of either system (:class:`BrainWriter`, :class:`PgWriter`)."""

    async def open(self) -> None:
        """Connect."""

    async def close(self) -> None:
        """Disconnect."""

    async def write(self, spec: StatementSpec, old: Id | None, request_id: bytes) -> tuple[Id, int]:
        """Write ``spec`` (superseding ``old``); the new id and its record time (ns)."""
        ...


async def load_world(
    writers: Sequence[Writer[Id]], specs: Sequence[StatementSpec], half: int
) -> tuple[list[Id], int, float]:
    """Write ``specs`` in order over ``writers``; a correction waits for what it corrects.

    Returns the ids in spec order, the last record time (ns) of the first ``half``
    specs (every later spec starts after it is acknowledged) and the load's writes/s."""
    await asyncio.gather(*(w.open() for w in writers))
    ids: dict[int, Id] = {}
    done: dict[int, asyncio.Event] = {s.index: asyncio.Event() for s in specs}
    cut = 0
    began = time.perf_counter()

    async def worker(writer: Writer[Id], queue: deque[StatementSpec]) -> int:
        latest = 0
        while queue:
            spec = queue.popleft()
            old: Id | None = None
            if spec.supersedes is not None:
                await done[spec.supersedes].wait()
                old = ids[spec.supersedes]
            request_id = b"point---" + spec.index.to_bytes(8, "big")
            ids[spec.index], recorded = await writer.write(spec, old, request_id)
            done[spec.index].set()
            latest = max(latest, recorded)
        return latest

    try:
        for part in (specs[:half], specs[half:]):
            queue = deque(part)
            latest = await asyncio.gather(*(worker(w, queue) for w in writers))
            cut = cut or max(latest)
    finally:
        await asyncio.gather(*(w.close() for w in writers))
    rate = len(specs) / (time.perf_counter() - began)
    return [ids[s.index] for s in specs], cut, rate


Content = tuple[str, str, str, int | None, int | None]
"""What is compared between the systems: kind, predicate, object, valid_from, event_at."""


def _ours_content(statement: Statement) -> Content:
    assert statement.kind is not None and statement.predicate is not None
    assert isinstance(statement.object_, TextValue)
    return (
        statement.kind,
        statement.predicate,
        statement.object_.text,
        statement.valid_from,
        statement.event_at,
    )


async def _ours_lists(
    server: BrainServer, pairs: Sequence[tuple[bytes, str]], as_of: int
) -> list[list[Content]]:
    client = await AsyncClient.connect(server.host, server.port, api_key=server.api_key)
    try:
        out = []
        for subject, predicate in pairs:
            answer = await client.call(
                Opcode.STATEMENT_LIST,
                StatementList(
                    subject=EntityRef(entity=subject),
                    predicate=predicate,
                    as_of=as_of,
                    limit=LIST_LIMIT,
                ),
            )
            assert isinstance(answer, StatementListOk)
            out.append(sorted(_ours_content(s) for s in answer.statements))
        return out
    finally:
        await client.close()


def _pg_lists(
    conninfo: str, pairs: Sequence[tuple[int, str]], as_of: int
) -> tuple[list[list[Content]], int]:
    """The peer's as-of answers, and how many rows in them were invalidated after ``as_of``."""
    out = []
    restored = 0
    with psycopg.connect(conninfo, autocommit=True) as conn:
        for subject, predicate in pairs:
            rows = conn.execute(
                LIST_AS_OF,
                {
                    "space": SPACE,
                    "subject": subject,
                    "predicate": predicate,
                    "as_of": from_ns(as_of),
                    "limit": LIST_LIMIT,
                },
            ).fetchall()
            out.append(sorted((r[4], r[3], r[5], to_ns(r[7]), to_ns(r[9])) for r in rows))
            restored += sum(1 for r in rows if r[11] is not None)
    return out, restored


def _wait_for_backlog(server: BrainServer) -> float:
    """Wait until our indexer has embedded everything; the seconds waited."""
    began = time.perf_counter()
    while server.metric("brain_embed_backlog") > 0:
        if time.perf_counter() - began > BACKLOG_TIMEOUT_S:
            raise RuntimeError("the indexer did not catch up with the loaded statements")
        time.sleep(BACKLOG_POLL_S)
    return round(time.perf_counter() - began, 1)


def _pairs(world: World) -> list[tuple[int, str]]:
    """Every (subject index, predicate) the world has statements for, in first-seen order."""
    return list(dict.fromkeys((s.subject, s.predicate) for s in world.statements))


def main(argv: list[str]) -> int:
    """Entry point of the suite."""
    p = harness.parser("point", __doc__)
    p.add_argument("--statements", type=int, help=f"statements to load (full: {STATEMENTS})")
    p.add_argument("--pairs", type=int, help=f"A B turns per query (full: {PAIRS})")
    p.add_argument("--seconds", type=float, help=f"load time per turn (full: {SECONDS})")
    args = p.parse_args(argv)
    size = args.statements or (QUICK_STATEMENTS if args.quick else STATEMENTS)
    pairs = args.pairs or (1 if args.quick else PAIRS)
    seconds = args.seconds or (QUICK_SECONDS if args.quick else SECONDS)
    warmup = QUICK_WARMUP_S if args.quick else WARMUP_S
    world = generate(size, SEED)
    half = size // 2
    subject_predicates = _pairs(world)
    sample = random.Random(SEED).sample(
        subject_predicates, min(CHECK_SAMPLE, len(subject_predicates))
    )
    with brain_server() as server, postgres_server() as pg:
        ours_entities, ours_ids, ours_cut, ours_rate = asyncio.run(_load_ours(server, world, half))
        backlog_s = _wait_for_backlog(server)
        conninfo = pg.create_database("point")
        pg_entities = pg_create_entities(conninfo, world.entities)
        writers = [PgWriter(conninfo, pg_entities) for _ in range(LOAD_CONNECTIONS)]
        pg_ids, pg_cut, pg_rate = asyncio.run(load_world(writers, world.statements, half))

        ours_answers = asyncio.run(
            _ours_lists(server, [(ours_entities[s], pr) for s, pr in sample], ours_cut)
        )
        pg_answers, restored = _pg_lists(
            conninfo, [(pg_entities[s], pr) for s, pr in sample], pg_cut
        )
        agreeing = sum(1 for a, b in zip(ours_answers, pg_answers, strict=True) if a == b)
        check = {
            "pairs_checked": len(sample),
            "pairs_agreeing": agreeing,
            "rows_compared": sum(len(b) for b in pg_answers),
            "rows_invalidated_after_as_of": restored,
            "non_empty_answers": sum(1 for b in pg_answers if b),
            "compared": "kind, predicate, object, valid_from, event_at of each row, as a multiset",
        }
        print(f"as-of check: {agreeing}/{len(sample)} pairs agree", flush=True)

        ours_params = {"host": server.host, "port": server.port, "api_key": server.api_key}
        get_runs = _alternate(
            ("bench.brainload:statement_get", {**ours_params, "ids": [i.hex() for i in ours_ids]}),
            ("bench.pgload:pg_get", {"conninfo": conninfo, "ids": pg_ids}),
            pairs, seconds, warmup,
        )  # fmt: skip
        list_runs = _alternate(
            (
                "bench.brainload:statement_list",
                {
                    **ours_params,
                    "as_of": ours_cut,
                    "pairs": [(ours_entities[s].hex(), pr) for s, pr in subject_predicates],
                },
            ),
            (
                "bench.pgload:pg_list_as_of",
                {
                    "conninfo": conninfo,
                    "as_of": pg_cut,
                    "pairs": [(pg_entities[s], pr) for s, pr in subject_predicates],
                },
            ),
            pairs, seconds, warmup,
        )  # fmt: skip
        ours_rss = server.rss_mb()
        peer = pg.describe()
    get_ratio = harness.ratios(get_runs["brain"], get_runs["postgres"], "ops_per_s")
    list_ratio = harness.ratios(list_runs["brain"], list_runs["postgres"], "ops_per_s")
    summary = []
    for what, runs, ratio, bound in (
        ("point: STATEMENT_GET by id", get_runs, get_ratio, GET_GOAL),
        ("point: STATEMENT_LIST subject+predicate as_of", list_runs, list_ratio, LIST_GOAL),
    ):
        goal = harness.Goal(f"queries/s ≥ {bound:.1f}x PostgreSQL", bound, at_least=True)
        summary.append(
            harness.row(
                f"{what}, {CONNECTIONS} connections, {size:,} statements",
                "queries/s",
                _median(runs["brain"], "ops_per_s"),
                peer=_median(runs["postgres"], "ops_per_s"),
                peer_name=PEER,
                ratio=ratio["median"],
                goal=goal,
            )
        )
        summary.append(
            harness.row(
                f"{what}: p50 latency",
                "ms",
                _p50(runs["brain"]),
                peer=_p50(runs["postgres"]),
                peer_name=PEER,
            )
        )
    for name, runs in (("get", get_runs), ("list_as_of", list_runs)):
        for system, rs in runs.items():
            for r in rs:
                print(
                    f"query={name:<10}  system={system:<8}  queries/s={r['ops_per_s']:>9}  "
                    f"p50={r['latency_ms']['p50']} ms  p99={r['latency_ms']['p99']} ms  "
                    f"errors={r['errors']}",
                    flush=True,
                )
    errors = sum(int(r["errors"]) for rr in (get_runs, list_runs) for rs in rr.values() for r in rs)
    harness.save(
        "point",
        args,
        {
            "summary": summary,
            "parameters": {
                "statements": size,
                "corrections": sum(1 for s in world.statements if s.supersedes is not None),
                "entities": len(world.entities),
                "subject_predicate_pairs": len(subject_predicates),
                "seed": SEED,
                "connections": CONNECTIONS,
                "generator_processes": PROCESSES,
                "in_flight_per_connection": 1,
                "pairs": pairs,
                "seconds_per_turn": seconds,
                "warmup_s": warmup,
                "list_limit": LIST_LIMIT,
                "as_of": "last record time of the first half of the load, on each system",
                "load_connections": LOAD_CONNECTIONS,
            },
            "load": {
                "brain_writes_per_s": round(ours_rate, 1),
                "postgres_writes_per_s": round(pg_rate, 1),
                "brain_embed_backlog_wait_s": backlog_s,
                "brain_rss_mb_after": ours_rss,
            },
            "peer": {
                **peer,
                "schema": "bench/peers/postgres.py SCHEMA",
                "get": "SELECT … WHERE id = $1 (primary key), prepared, autocommit",
                "list_as_of": "bench/pgload.py LIST_AS_OF on (space, subject, predicate, "
                "recorded_at), prepared, autocommit",
                "supersede": "UPDATE record_invalidated_at + INSERT, one transaction",
            },
            "as_of_check": check,
            "ratio": {"get": get_ratio, "list_as_of": list_ratio},
            "runs": {"get": get_runs, "list_as_of": list_runs},
            "errors": errors,
        },
    )
    if agreeing != len(sample):
        print(f"point: as-of answers differ for {len(sample) - agreeing} pairs", file=sys.stderr)
        return 1
    if errors:
        print(f"point: {errors} queries failed", file=sys.stderr)
        return 1
    return 0


async def _load_ours(
    server: BrainServer, world: World, half: int
) -> tuple[list[bytes], list[bytes], int, float]:
    client = await AsyncClient.connect(server.host, server.port, api_key=server.api_key)
    try:
        entities = await create_entities(client, world.entities)
    finally:
        await client.close()
    params = {"host": server.host, "port": server.port, "api_key": server.api_key}
    writers = [BrainWriter(params, entities) for _ in range(LOAD_CONNECTIONS)]
    ids, cut, rate = await load_world(writers, world.statements, half)
    return entities, ids, cut, rate


def _alternate(
    ours: tuple[str, Mapping[str, Any]],
    theirs: tuple[str, Mapping[str, Any]],
    pairs: int,
    seconds: float,
    warmup: float,
) -> dict[str, list[Mapping[str, Any]]]:
    def measure(ref: str, params: Mapping[str, Any]) -> Callable[[], Mapping[str, Any]]:
        return lambda: run_load(
            ref,
            params,
            processes=PROCESSES,
            connections=CONNECTIONS,
            seconds=seconds,
            warmup_s=warmup,
        ).to_dict()

    return harness.alternate({"brain": measure(*ours), "postgres": measure(*theirs)}, pairs)


def _median(runs: Sequence[Mapping[str, Any]], key: str) -> float:
    return float(statistics.median(float(r[key]) for r in runs))


def _p50(runs: Sequence[Mapping[str, Any]]) -> float:
    return float(statistics.median(float(r["latency_ms"]["p50"]) for r in runs))
