"""The history checker of a cluster chaos run (spec/05-durability.md §14.4): pure code,
no I/O. It takes what the clients did and saw, and what every node holds at the end,
and lists every way they break the consistency model of spec/05 §14.4.

A **history** is a list of :class:`Op`: one attempt of one client at one node, with
its monotonic start and end (``time.monotonic`` is one clock for every process of a
machine), its outcome, and for a write the LSN its acknowledgement carried. Writes
are grouped by ``request_id``: a client retries a write with the same id (at another
node after a refusal, a timeout or a lost connection), and the write is

- **acknowledged** when any attempt was;
- **refused** when every attempt was refused with a definite error (nothing was
  planned: a follower's refusal, a bad argument);
- **indeterminate** otherwise (a timeout, a lost connection, a log that failed
  while appending: it may or may not be in the log).

Each write has a *content key*, a string that no other write produces (the text or
value carries the request id), and each node's final state maps content keys to the
ids of the records that bear them. A read reports what it saw as :class:`Seen`
entries: a write's content key, and the record id it showed for it, or None when
the read covered that write and did not find it.

The rules, each a :data:`RULES` name in the violations found:

- ``acked``: every acknowledged write appears exactly once in every node's final
  state, as the record its acknowledgement named;
- ``same-answer``: every acknowledgement of one request id names the same record
  and LSN (a retry was answered from the first write, not applied again);
- ``refused``: no write refused with a definite error appears anywhere;
- ``indeterminate``: an indeterminate write appears at most once on each node;
- ``converged``: every node's final state is the same;
- ``phantom``: a read never shows a record that no write made, nor a refused
  write, nor an acknowledged write as another record than its acknowledgement
  named;
- ``prefix``: a read is a consistent snapshot of a prefix of the log: it never
  misses an acknowledged write of a lower LSN than one it shows;
- ``monotonic``: on one node, a read that began after another ended never goes
  back in the log (per process: a restarted node starts again from its store);
- ``planner``: a read on the planner sees every write acknowledged before it began
  (a read on the planner: one that ran within a :class:`PlannerSpan` of its node's
  process, a time the node itself reported planning throughout; any node
  acknowledges writes, since a follower forwards them, so an acknowledgement does
  not say which node planned);
- ``min-lsn``: a read made with a minimum LSN sees every write at or below it.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

__all__ = [
    "RULES",
    "Checked",
    "FinalState",
    "Op",
    "PlannerSpan",
    "Seen",
    "Violation",
    "check",
]

Outcome = Literal["ok", "refused", "indeterminate"]
"""What one attempt got: an answer, a definite refusal, or no knowing."""

RULES: Final = (
    "acked",
    "same-answer",
    "refused",
    "indeterminate",
    "converged",
    "phantom",
    "prefix",
    "monotonic",
    "planner",
    "min-lsn",
)
"""Every rule the checker applies, in the order of the module's docstring."""

EXAMPLES_PER_RULE: Final = 20
"""Violations kept per rule in a report: enough to find the cause, few enough to read."""


@dataclass(frozen=True)
class Seen:
    """One thing a read saw: the write whose content key is ``key``, shown as the
    record ``record``, or None when the read covered that write and did not show it."""

    key: str
    record: str | None


@dataclass(frozen=True)
class Op:
    """One attempt of one client at one node.

    ``node`` is the node's id and ``incarnation`` counts its starts (a restarted node
    is a new process reading its own store). A write has ``request_id`` and ``key``
    (its content key); ``record`` and ``lsn`` come with an ``ok`` outcome. A read has
    ``seen``, and ``min_lsn`` when it was made only after the node had applied that
    LSN."""

    client: int
    node: str
    incarnation: int
    kind: str
    start: float
    end: float
    outcome: Outcome
    request_id: str | None = None
    key: str | None = None
    record: str | None = None
    lsn: int | None = None
    error: str | None = None
    seen: tuple[Seen, ...] = ()
    min_lsn: int | None = None

    @property
    def is_write(self) -> bool:
        """Whether this attempt is a write (it has a request id)."""
        return self.request_id is not None


@dataclass(frozen=True, slots=True)
class PlannerSpan:
    """A time in which the process ``(node, incarnation)`` planned its shard's writes
    throughout: it said so at ``start`` and again at ``end``, in one spell of planning
    (its ``promotions`` count unchanged)."""

    node: str
    incarnation: int
    start: float
    end: float


FinalState = Mapping[str, Sequence[str]]
"""One node's final state: content key → ids of the records bearing it."""


@dataclass(frozen=True)
class Violation:
    """One broken rule, and what broke it."""

    rule: str
    detail: str


@dataclass
class Checked:
    """What the checker found: figures, and every violation."""

    writes_acknowledged: int = 0
    writes_refused: int = 0
    writes_indeterminate: int = 0
    lost: int = 0
    duplicated: int = 0
    reads_checked: int = 0
    planner_reads: int = 0
    """Reads held to the ``planner`` rule (within a planner span of their node)."""
    min_lsn_reads: int = 0
    """Reads held to the ``min-lsn`` rule (made with a minimum LSN)."""
    violations: list[Violation] = field(default_factory=list)

    def by_rule(self) -> dict[str, int]:
        """How many violations of each rule (every rule named, zeros included)."""
        counts = dict.fromkeys(RULES, 0)
        for violation in self.violations:
            counts[violation.rule] += 1
        return counts

    def examples(self) -> dict[str, list[str]]:
        """Up to :data:`EXAMPLES_PER_RULE` violations of each broken rule."""
        kept: dict[str, list[str]] = {}
        for violation in self.violations:
            shown = kept.setdefault(violation.rule, [])
            if len(shown) < EXAMPLES_PER_RULE:
                shown.append(violation.detail)
        return kept


@dataclass(frozen=True)
class _Write:
    """One logical write: every attempt of one request id, judged together."""

    request_id: str
    key: str
    acks: tuple[Op, ...]
    attempts: tuple[Op, ...]

    @property
    def status(self) -> Outcome:
        if self.acks:
            return "ok"
        if all(a.outcome == "refused" for a in self.attempts):
            return "refused"
        return "indeterminate"

    @property
    def first_ack(self) -> Op:
        return min(self.acks, key=lambda a: a.end)


def _writes(history: Iterable[Op]) -> dict[str, _Write]:
    attempts: dict[str, list[Op]] = {}
    for op in history:
        if op.request_id is not None:
            attempts.setdefault(op.request_id, []).append(op)
    writes: dict[str, _Write] = {}
    for request_id, tries in attempts.items():
        keys = {t.key for t in tries}
        key = next(iter(keys))
        if len(keys) != 1 or key is None:
            raise ValueError(
                f"request {request_id} carries other content keys: {sorted(map(str, keys))}"
            )
        acks = tuple(t for t in tries if t.outcome == "ok")
        writes[request_id] = _Write(request_id, key, acks, tuple(tries))
    return writes


def check(
    history: Sequence[Op],
    finals: Mapping[str, FinalState],
    planners: Sequence[PlannerSpan] = (),
) -> Checked:
    """Every violation of the rules of this module by ``history`` and the nodes'
    final states ``finals`` (node id → state); ``planners`` are the spans in which a
    node planned, within which its reads are held to the ``planner`` rule."""
    found = Checked()
    writes = _writes(history)
    by_key = {w.key: w for w in writes.values()}
    for write in writes.values():
        status = write.status
        if status == "ok":
            found.writes_acknowledged += 1
        elif status == "refused":
            found.writes_refused += 1
        else:
            found.writes_indeterminate += 1
    _check_answers(writes.values(), found)
    _check_finals(writes.values(), finals, found)
    reads = [op for op in history if not op.is_write and op.outcome == "ok"]
    found.reads_checked = len(reads)
    _check_reads(reads, writes.values(), by_key, _Spans(planners), found)
    return found


def _check_answers(writes: Iterable[_Write], found: Checked) -> None:
    for write in writes:
        answers = {(a.record, a.lsn) for a in write.acks}
        if len(answers) > 1:
            found.duplicated += 1
            found.violations.append(
                Violation(
                    "same-answer",
                    f"request {write.request_id} acknowledged as {sorted(map(str, answers))}",
                )
            )


def _check_finals(
    writes: Iterable[_Write], finals: Mapping[str, FinalState], found: Checked
) -> None:
    lost: set[str] = set()
    duplicated: set[str] = set()
    for write in writes:
        status = write.status
        for node, state in sorted(finals.items()):
            held = list(state.get(write.key, ()))
            if status == "ok":
                wanted = write.first_ack.record
                if held != [wanted]:
                    (lost if not held or wanted not in held else duplicated).add(write.request_id)
                    found.violations.append(
                        Violation(
                            "acked",
                            f"request {write.request_id} ({write.key}) acknowledged as "
                            f"{wanted}, node {node} holds {held}",
                        )
                    )
            elif status == "refused":
                if held:
                    found.violations.append(
                        Violation(
                            "refused",
                            f"request {write.request_id} ({write.key}) refused by every "
                            f"attempt, node {node} holds {held}",
                        )
                    )
            elif len(held) > 1:
                duplicated.add(write.request_id)
                found.violations.append(
                    Violation(
                        "indeterminate",
                        f"request {write.request_id} ({write.key}) unanswered, node {node} "
                        f"holds it {len(held)} times: {held}",
                    )
                )
    found.lost += len(lost)
    found.duplicated += len(duplicated - lost)
    states = sorted(finals.items())
    for (first, one), (node, other) in itertools.pairwise(states):
        if _normal(one) != _normal(other):
            differ = sorted(set(_normal(one).items()) ^ set(_normal(other).items()))
            found.violations.append(
                Violation(
                    "converged",
                    f"nodes {first} and {node} differ in {len(differ)} entries, "
                    f"such as {differ[:3]}",
                )
            )


def _normal(state: FinalState) -> dict[str, tuple[str, ...]]:
    return {key: tuple(sorted(ids)) for key, ids in state.items() if ids}


@dataclass(frozen=True)
class _Bounds:
    """What a read's observations say of its place in the log: it holds every record
    up to ``low`` at least, and none after ``high`` (the LSNs of acknowledged writes
    it showed, and missed)."""

    low: int
    high: float

    @property
    def missed_at(self) -> float:
        """The lowest LSN of an acknowledged write the read missed (inf: none)."""
        return self.high + 1


def _bounds(read: Op, by_key: Mapping[str, _Write]) -> _Bounds:
    low, high = 0, math.inf
    for seen in read.seen:
        write = by_key.get(seen.key)
        if write is None or write.status != "ok":
            continue
        lsn = write.first_ack.lsn
        assert lsn is not None
        if seen.record is None:
            high = min(high, lsn - 1)
        else:
            low = max(low, lsn)
    return _Bounds(low, high)


def _check_reads(
    reads: Sequence[Op],
    writes: Iterable[_Write],
    by_key: Mapping[str, _Write],
    spans: _Spans,
    found: Checked,
) -> None:
    acked = sorted((w for w in writes if w.status == "ok"), key=lambda w: w.first_ack.end)
    acked_ends = [w.first_ack.end for w in acked]
    # The highest LSN acknowledged by each moment: the prefix a planner read must hold.
    highest: list[int] = []
    for write in acked:
        lsn = write.first_ack.lsn
        assert lsn is not None
        highest.append(max(lsn, highest[-1] if highest else 0))
    bounds: dict[int, _Bounds] = {}
    for index, read in enumerate(reads):
        _check_phantoms(read, by_key, found)
        bound = bounds[index] = _bounds(read, by_key)
        if bound.low > bound.high:
            found.violations.append(
                Violation(
                    "prefix",
                    f"{_name(read)} shows LSN {bound.low} but misses LSN {bound.missed_at:.0f}",
                )
            )
        found.min_lsn_reads += read.min_lsn is not None
        if read.min_lsn is not None and bound.high < read.min_lsn:
            found.violations.append(
                Violation(
                    "min-lsn",
                    f"{_name(read)} with minimum LSN {read.min_lsn} misses LSN "
                    f"{bound.missed_at:.0f}",
                )
            )
        if spans.holds(read):
            found.planner_reads += 1
            before = _count_before(acked_ends, read.start)
            if before and bound.high < highest[before - 1]:
                found.violations.append(
                    Violation(
                        "planner",
                        f"{_name(read)} on the planner misses LSN {bound.missed_at:.0f}, "
                        f"acknowledged up to LSN {highest[before - 1]} before it began",
                    )
                )
    _check_monotonic(reads, bounds, found)


def _count_before(ends: Sequence[float], moment: float) -> int:
    """How many of the sorted ``ends`` are before ``moment``."""
    low, high = 0, len(ends)
    while low < high:
        middle = (low + high) // 2
        if ends[middle] < moment:
            low = middle + 1
        else:
            high = middle
    return low


class _Spans:
    """The planner spans by process, sorted by start: :meth:`holds` in logarithmic
    time rather than a scan per read."""

    def __init__(self, spans: Sequence[PlannerSpan]) -> None:
        self.by_process: dict[tuple[str, int], list[PlannerSpan]] = {}
        for span in sorted(spans, key=lambda s: s.start):
            self.by_process.setdefault((span.node, span.incarnation), []).append(span)
        self.starts = {p: [s.start for s in found] for p, found in self.by_process.items()}

    def holds(self, read: Op) -> bool:
        """Whether ``read`` ran within a span of its own node's process."""
        process = (read.node, read.incarnation)
        before = bisect.bisect_right(self.starts.get(process, []), read.start)
        # Spans of one process do not overlap, so only the last begun can hold it.
        return bool(before) and self.by_process[process][before - 1].end >= read.end


def _check_phantoms(read: Op, by_key: Mapping[str, _Write], found: Checked) -> None:
    for seen in read.seen:
        if seen.record is None:
            continue
        write = by_key.get(seen.key)
        if write is None:
            found.violations.append(
                Violation("phantom", f"{_name(read)} shows {seen.key}, which no write made")
            )
        elif write.status == "refused":
            found.violations.append(
                Violation("phantom", f"{_name(read)} shows {seen.key}, whose write was refused")
            )
        elif write.status == "ok" and seen.record != write.first_ack.record:
            found.violations.append(
                Violation(
                    "phantom",
                    f"{_name(read)} shows {seen.key} as {seen.record}, acknowledged as "
                    f"{write.first_ack.record}",
                )
            )


def _check_monotonic(reads: Sequence[Op], bounds: Mapping[int, _Bounds], found: Checked) -> None:
    per_process: dict[tuple[str, int], list[int]] = {}
    for index, read in enumerate(reads):
        per_process.setdefault((read.node, read.incarnation), []).append(index)
    for (node, incarnation), indexes in sorted(per_process.items()):
        # Sweep by start: each read must hold at least the highest LSN shown by any
        # read of the same process that ended before it began.
        ended = sorted(indexes, key=lambda i: reads[i].end)
        started = sorted(indexes, key=lambda i: reads[i].start)
        best, best_read, cursor = 0, -1, 0
        for index in started:
            read = reads[index]
            while cursor < len(ended) and reads[ended[cursor]].end < read.start:
                earlier = ended[cursor]
                if bounds[earlier].low > best:
                    best, best_read = bounds[earlier].low, earlier
                cursor += 1
            if bounds[index].high < best:
                found.violations.append(
                    Violation(
                        "monotonic",
                        f"{_name(read)} on node {node} (start {incarnation}) misses LSN "
                        f"{bounds[index].missed_at:.0f} after {_name(reads[best_read])} "
                        f"showed LSN {best}",
                    )
                )


def _name(op: Op) -> str:
    return f"{op.kind} of client {op.client} at {op.start:.3f}-{op.end:.3f} on {op.node}"
