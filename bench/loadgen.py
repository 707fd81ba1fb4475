"""A multi-process, closed-loop load generator with merged latency histograms.

The load comes from separate processes (spec/08-benchmarks.md), so the server under
test and the generator are visibly different consumers of the two cores. Each
process opens ``connections`` sessions of a *workload* and runs them
concurrently on one asyncio loop; each session keeps ``depth`` requests in
flight (pipelined on one connection when ``depth`` > 1) until the deadline.
Every request's latency goes into the process's :class:`~bench.histogram.Histogram`;
the parent merges them and reports operations per second, the percentiles and
the generator's own CPU time.

A workload is named by ``"module:factory"`` so a child process can build it:
``factory(params, session_no)`` returns a :class:`Session`. The same generator
drives our server and every peer, so both sides of a ratio are measured alike.
"""

from __future__ import annotations

import asyncio
import importlib
import multiprocessing
import queue
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from bench.histogram import Histogram

__all__ = ["JOIN_GRACE_S", "LoadFailed", "LoadResult", "Session", "run_load"]

REPORT_POLL_S: Final = 1.0
"""How often the parent, waiting for reports, checks that its processes are alive."""

JOIN_GRACE_S: Final = 120.0
"""How long after the deadline a generator process may take to report (slow closes)."""


class LoadFailed(Exception):
    """A generator process could not run its sessions (it could not connect, say)."""


class Session(Protocol):
    """One connection's worth of a workload."""

    async def open(self) -> None:
        """Connect (and prepare anything per connection)."""

    async def step(self, n: int) -> None:
        """Send the ``n``-th request of this session and wait for its answer."""

    async def close(self) -> None:
        """Release the connection."""


@dataclass
class LoadResult:
    """What a load run measured, all processes merged."""

    operations: int
    errors: int
    seconds: float
    latency: Histogram
    generator_cpu_s: float
    first_error: str | None

    @property
    def ops_per_s(self) -> float:
        return self.operations / self.seconds if self.seconds else 0.0

    def to_dict(self) -> dict[str, Any]:
        """The JSON figures of the run."""
        return {
            "operations": self.operations,
            "errors": self.errors,
            "seconds": round(self.seconds, 3),
            "ops_per_s": round(self.ops_per_s, 1),
            "latency_ms": self.latency.summary(),
            "generator_cpu_s": round(self.generator_cpu_s, 3),
            **({"first_error": self.first_error} if self.first_error else {}),
        }


def _factory(ref: str) -> Any:
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class _Assignment:
    """What one generator process is told to do."""

    ref: str
    params: Mapping[str, Any]
    first_session: int
    sessions: int
    depth: int
    start_at: float
    seconds: float


async def _run_process(job: _Assignment) -> tuple[int, int, dict[str, object], str | None]:
    factory = _factory(job.ref)
    opened: list[Session] = [
        factory(job.params, job.first_session + i) for i in range(job.sessions)
    ]
    depth, start_at, seconds = job.depth, job.start_at, job.seconds
    await asyncio.gather(*(s.open() for s in opened))
    hist = Histogram()
    errors = 0
    first_error: str | None = None
    counters = [0] * len(opened)
    # Start together: every process waits for the same wall-clock instant.
    await asyncio.sleep(max(0.0, start_at - time.time()))
    deadline = time.perf_counter() + seconds

    async def lane(index: int, session: Session) -> None:
        nonlocal errors, first_error
        while time.perf_counter() < deadline:
            n = counters[index]
            counters[index] += 1
            began = time.perf_counter()
            try:
                await session.step(n)
            except Exception as exc:  # counted and reported, never hidden
                errors += 1
                first_error = first_error or f"{type(exc).__name__}: {exc}"
                continue
            hist.record(time.perf_counter() - began)

    await asyncio.gather(*(lane(i, s) for i, s in enumerate(opened) for _ in range(depth)))
    await asyncio.gather(*(s.close() for s in opened))
    return hist.total, errors, hist.to_dict(), first_error


def _child(job: _Assignment, out: Any) -> None:
    cpu = time.process_time()
    try:
        ops, errors, hist, first_error = asyncio.run(_run_process(job))
        out.put((ops, errors, hist, first_error, time.process_time() - cpu))
    except BaseException as exc:  # reported to the parent, which fails the run
        out.put(exc)


def _next_report(out: Any, children: list[Any], deadline: float) -> Any:
    """The next report from a generator process; a process that died without
    reporting (it could not even import, say) fails the run at once."""
    while True:
        try:
            return out.get(timeout=REPORT_POLL_S)
        except queue.Empty:
            if time.monotonic() > deadline:
                raise LoadFailed("the load processes did not report in time") from None
            dead = [c for c in children if not c.is_alive() and c.exitcode not in (0, None)]
            if dead:
                raise LoadFailed(
                    f"a load process exited with code {dead[0].exitcode} before reporting"
                ) from None


def run_load(
    ref: str,
    params: Mapping[str, Any],
    *,
    processes: int,
    connections: int,
    seconds: float,
    depth: int = 1,
    warmup_s: float = 3.0,
) -> LoadResult:
    """Drive ``connections`` sessions (spread over ``processes``) for ``seconds``.

    ``warmup_s`` is the time allowed for every process to import and connect
    before the common start instant; it is not part of the measurement."""
    if processes < 1 or connections < processes:
        raise ValueError("need at least one process and one connection per process")
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    start_at = time.time() + warmup_s
    per, extra = divmod(connections, processes)
    children = []
    first = 0
    for p in range(processes):
        count = per + (1 if p < extra else 0)
        job = _Assignment(ref, dict(params), first, count, depth, start_at, seconds)
        child = context.Process(target=_child, args=(job, out))
        child.start()
        children.append(child)
        first += count
    hist = Histogram()
    operations = errors = 0
    cpu = 0.0
    first_error: str | None = None
    deadline = time.monotonic() + warmup_s + seconds + JOIN_GRACE_S
    try:
        for _ in children:
            got = _next_report(out, children, deadline)
            if isinstance(got, BaseException):
                raise LoadFailed(f"a load process failed: {got!r}") from got
            ops, errs, hist_dict, err, child_cpu = got
            operations += ops
            errors += errs
            hist.merge(Histogram.from_dict(hist_dict))
            cpu += child_cpu
            first_error = first_error or err
    finally:
        for child in children:
            child.join(timeout=10)
            if child.is_alive():
                child.kill()
    return LoadResult(operations, errors, seconds, hist, cpu, first_error)
