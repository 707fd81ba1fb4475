"""The writer's pacing: while another namespace is active, one namespace's writes take
at most about half the writer's time (spec/05-durability.md §1).

A flood here is a stream of writer jobs of one lane whose planning spins for
:data:`SPIN_S`, resubmitted as each is answered, so the lane never runs dry. Its
share is the time its jobs spent planning (summed from their own clocks) over a
stretch of wall time after the pacing settled; the other tenant is real reads
through the database, every few milliseconds, as a quiet tenant's would be.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Final

from brain import cbor
from brain.engine.database import Database
from brain.engine.write.activity import ACTIVE_WINDOW_S, Activity
from brain.engine.write.lanes import Lane, Lanes
from brain.engine.write.pacing import (
    FORGET_AFTER_S,
    MAX_PAUSE_S,
    MAX_SHARED_WRITER_SHARE,
    SHARE_WINDOW_S,
    Pacing,
)
from brain.engine.write.writer import Outcome, PlanContext, Replay
from brain.wire.messages.memory_ops import Encode, EncodeOk, MemoryGet
from brain.wire.opcodes import Opcode
from tests.unit.common import WRITER_HOLD_S, rid

BUSY: Final = "busy"
QUIET: Final = "quiet"
OTHER: Final = "other"

SPIN_S: Final = 0.002
"""Planning time of one flood job: a few milliseconds, as a large write's."""

IN_FLIGHT: Final = 64
"""Jobs a flood keeps queued, as a client pipelining its writes."""

SETTLE_S: Final = 5 * SHARE_WINDOW_S
"""Time a flood runs before its share is measured: the decaying share starts at 0."""

MEASURE_S: Final = 1.0
"""The wall time a share is measured over."""

READ_EVERY_S: Final = 0.003
"""The quiet tenant's pause between two reads."""

PACED_BOUND: Final = 0.6
"""Most of the wall time a paced flood may plan: the cap with a margin for the one
job it may start just under the cap and for clocks read on a loaded machine."""

SHARE_SPREAD: Final = 0.15
"""Most two unpaced floods' shares may differ: round-robin gives each half, less the
one job either may be ahead and a loaded machine's scheduling."""

WAIT_S: Final = 10.0
"""Longest a test waits for the pacing to begin, or for a write transaction to begin
in another thread: far past either on a loaded machine (pacing begins within a
fraction of a second), so only a writer that never paces, or holds its
transaction open through a pause, fails it."""


class Flood:
    """Writer jobs of one lane, each planning for :data:`SPIN_S`, kept queued."""

    def __init__(self, db: Database, lane: Lane, in_flight: int = IN_FLIGHT) -> None:
        self._db = db
        self._lane = lane
        self._in_flight = in_flight
        self.stopped = False
        self.planned: list[tuple[float, float]] = []
        """(start, end) of each job's planning, on the perf counter."""
        self.futures: list[Future[bytes]] = []

    def start(self) -> None:
        for _ in range(self._in_flight):
            self._submit()

    def _submit(self) -> None:
        if self.stopped:
            return
        future = self._db.writer.submit(self._plan, self._lane)
        self.futures.append(future)
        # Runs on the writer thread once the job is answered: the next one queues.
        future.add_done_callback(lambda _: self._submit())

    def _plan(self, ctx: PlanContext) -> Outcome:
        start = time.perf_counter()
        while time.perf_counter() - start < SPIN_S:
            pass
        self.planned.append((start, time.perf_counter()))
        return Replay(b"")

    def share(self, since: float, until: float) -> float:
        """The fraction of ``[since, until]`` its jobs spent planning."""
        spent = sum(
            max(0.0, min(end, until) - max(start, since)) for start, end in list(self.planned)
        )
        return spent / (until - since)

    def stop(self) -> None:
        """No more jobs; wait until those queued are planned (the lane keeps its order,
        so a last job answered means every earlier one was)."""
        self.stopped = True
        last = self._db.writer.submit(lambda ctx: Replay(b""), self._lane)
        last.result(WRITER_HOLD_S)


@contextmanager
def reading(db: Database, namespace: str) -> Iterator[list[int]]:
    """A tenant reading one memory of its own every :data:`READ_EVERY_S`; the list
    counts its reads."""
    written = db.submit(namespace, Opcode.ENCODE, Encode(request_id=rid(), text="a quiet note"))
    memory = EncodeOk.from_wire(cbor.decode(written.result())).memory_id
    assert db.wait_indexed()  # the indexer's own write is done before the floods begin
    reads = [0]
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            db.execute(namespace, Opcode.MEMORY_GET, MemoryGet(id=memory))
            reads[0] += 1
            done.wait(READ_EVERY_S)

    reader = threading.Thread(target=read, name="quiet-reader")
    reader.start()
    try:
        yield reads
    finally:
        done.set()
        reader.join(WRITER_HOLD_S)


def shares(floods: list[Flood]) -> list[float]:
    """Run ``floods`` together and return each one's share of the wall time."""
    for flood in floods:
        flood.start()
    time.sleep(SETTLE_S)
    since = time.perf_counter()
    time.sleep(MEASURE_S)
    until = time.perf_counter()
    for flood in floods:
        flood.stop()
    return [flood.share(since, until) for flood in floods]


def test_a_flooding_namespace_plans_at_most_half_the_time_while_another_reads(
    db: Database,
) -> None:
    with reading(db, QUIET) as reads:
        (busy,) = shares([Flood(db, BUSY)])
    assert busy <= PACED_BOUND, f"the flood planned {busy:.0%} of the time"
    assert busy >= MAX_SHARED_WRITER_SHARE / 2, "it is held to its share, not stopped"
    assert db.writer.pauses > 0
    assert db.statistics().writer_paced_seconds == db.writer.paced_seconds > 0.0
    assert reads[0] > 0


def test_a_namespace_alone_keeps_the_whole_writer(db: Database) -> None:
    (busy,) = shares([Flood(db, BUSY)])
    assert db.writer.pauses == 0
    assert db.writer.paced_seconds == 0.0
    assert busy > PACED_BOUND, f"alone, the flood planned only {busy:.0%} of the time"


def test_two_namespaces_writing_hard_share_the_writer_without_pauses(db: Database) -> None:
    busy, other = shares([Flood(db, BUSY), Flood(db, OTHER)])
    # The writer's own account proves no pause; the shares show round-robin (each
    # about half) and that together they planned more than pacing would allow one.
    assert db.writer.pauses == 0
    assert db.writer.paced_seconds == 0.0
    assert abs(busy - other) <= SHARE_SPREAD, (busy, other)
    assert busy + other > PACED_BOUND, (busy, other)


def test_the_engines_own_writes_are_not_paced(db: Database) -> None:
    with reading(db, QUIET):
        (engine,) = shares([Flood(db, None)])
    # The writer's own account is the proof: not one pause, not one paced second. The
    # share only has to exceed what pacing allows, since the quiet reader's thread
    # competes for the interpreter here, where a namespace alone has none beside it.
    assert db.writer.pauses == 0
    assert db.writer.paced_seconds == 0.0
    assert engine > PACED_BOUND, f"the engine's lane planned only {engine:.0%} of the time"


def wait_for_pauses(db: Database, flood: Flood) -> None:
    deadline = time.monotonic() + WAIT_S
    while db.writer.pauses == 0:
        assert time.monotonic() < deadline, "the flood was never paced"
        assert len(flood.planned) < 100_000
        time.sleep(0.01)


def test_stopping_while_paced_serves_the_queued_writes_at_once(db: Database) -> None:
    backlog = 200
    pauses_after_stop: list[float] = []
    stopping = threading.Event()
    db.writer.watch_pauses(lambda: pauses_after_stop.append(0.0) if stopping.is_set() else None)
    with reading(db, QUIET):
        flood = Flood(db, BUSY, in_flight=backlog)
        flood.start()
        wait_for_pauses(db, flood)
        flood.stopped = True
        queued = list(flood.futures)
        stopping.set()
        db.writer.stop()
    # Every write queued before the stop is answered, none of it paced: at most the
    # pause begun before the stop was taken in, which the stop ended.
    assert all(future.result(0) == b"" for future in queued)
    assert len(pauses_after_stop) <= 1, f"{len(pauses_after_stop)} pauses while stopping"


def test_a_pause_holds_no_write_transaction(db: Database) -> None:
    """While the writer pauses, another write transaction can begin at once: the
    pause is between batches, never inside one's transaction (which would hold
    LMDB's write lock, and every writer, for the pause)."""
    began: list[bool] = []

    def begin_a_write() -> None:
        db._store.env.begin(write=True).abort()

    def during_pause() -> None:
        if len(began) >= 3:
            return
        other = threading.Thread(target=begin_a_write)
        other.start()
        # Held by an open transaction of this thread, it would wait until this ends.
        other.join(WAIT_S)
        began.append(not other.is_alive())

    db.writer.watch_pauses(during_pause)
    with reading(db, QUIET):
        flood = Flood(db, BUSY)
        flood.start()
        wait_for_pauses(db, flood)
        flood.stop()
    db.writer.watch_pauses(None)
    assert began and all(began)


def test_activity_knows_whether_another_namespace_is_active() -> None:
    now = [100.0]
    activity = Activity(clock=lambda: now[0])
    assert not activity.others_active(BUSY)
    for _ in range(3):
        activity.touch(BUSY)
    assert not activity.others_active(BUSY), "a namespace alone"
    activity.touch(QUIET)
    for _ in range(5):
        now[0] += 0.01
        activity.touch(BUSY)
    # QUIET is no longer the latest, but still the latest of the others.
    assert activity.others_active(BUSY)
    assert activity.others_active(QUIET)
    assert activity.others_active(None), "the engine's lane: any namespace counts"
    activity.touch(OTHER)
    activity.touch(BUSY)
    assert activity.others_active(BUSY) and activity.others_active(QUIET)
    now[0] += ACTIVE_WINDOW_S
    assert not activity.others_active(BUSY), "past the window nobody is active"
    activity.touch(BUSY)
    assert not activity.others_active(BUSY)


def test_a_held_lane_keeps_its_turn_and_its_order() -> None:
    lanes: Lanes[str] = Lanes()
    for n in range(3):
        for lane in ("a", "b", "c"):
            lanes.add(lane, f"{lane}{n}")
    held = {"a"}
    taken = [lanes.take(lambda lane: lane in held) for _ in range(4)]
    assert [t[1] for t in taken if t] == ["b0", "c0", "b1", "c1"]
    held.clear()
    # "a" never had its turn: it comes first, and its jobs keep their order.
    rest = [lanes.take() for _ in range(5)]
    assert [t[1] for t in rest if t] == ["a0", "b2", "c2", "a1", "a2"]
    assert lanes.take() is None
    lanes.add("a", "a3")
    assert lanes.take(lambda lane: True) is None, "every lane held"
    assert list(lanes.waiting()) == ["a"]


def test_a_share_decays_and_the_pause_lasts_until_it_is_back_under() -> None:
    now = [10.0]
    activity = Activity(clock=lambda: now[0])
    pacing = Pacing(activity, clock=lambda: now[0])
    activity.touch(QUIET)
    # A whole window of planning: twice the share, held for window * ln 2.
    pacing.spent(BUSY, SHARE_WINDOW_S, now[0])
    assert pacing.held(BUSY, now[0])
    assert pacing.pause([BUSY], now[0]) == MAX_PAUSE_S
    assert pacing.pause([BUSY, QUIET], now[0]) == 0.0, "another lane may be planned"
    assert pacing.pause([BUSY, None], now[0]) == 0.0, "the engine's lane is never held"
    back_under = SHARE_WINDOW_S * math.log(2)
    now[0] += back_under - MAX_PAUSE_S / 2
    assert 0.0 < pacing.pause([BUSY], now[0]) <= MAX_PAUSE_S / 2 + 1e-9
    now[0] += MAX_PAUSE_S
    assert not pacing.held(BUSY, now[0]) and pacing.pause([BUSY], now[0]) == 0.0


def test_meters_of_namespaces_gone_quiet_are_dropped() -> None:
    now = [10.0]
    pacing = Pacing(Activity(clock=lambda: now[0]), clock=lambda: now[0])
    for n in range(1000):
        pacing.spent(f"tenant-{n}", 0.001, now[0])
    now[0] += FORGET_AFTER_S
    pacing.spent(BUSY, 0.001, now[0])
    assert list(pacing._meters) == [BUSY]
