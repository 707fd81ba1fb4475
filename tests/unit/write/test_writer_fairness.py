"""The writer is fair between namespaces: a quiet tenant's write is planned among the
next ones, however many a busy tenant has queued, and each namespace keeps its order.

Positions are read off the LSNs the writes took (the order the writer planned them
in) and off the writer's batch counter, never off the clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Final

from brain import cbor
from brain.engine.database import Database
from brain.engine.planner import plan_single
from brain.engine.write.writer import MAX_BATCH, MAX_BATCH_PLAN_S, Outcome, PlanContext
from brain.wire.messages.memory_ops import Encode, EncodeOk
from brain.wire.opcodes import Opcode
from tests.unit.common import WRITER_HOLD_S, rid, writer_held

BUSY: Final = "busy"
QUIET: Final = "quiet"

BACKLOG: Final = 2 * MAX_BATCH + 76
"""The busy tenant's queued writes: more than two full batches, so a FIFO writer
would plan the quiet one's write in its third batch, behind all of them."""


def encode(db: Database, namespace: str, text: str) -> Future[bytes]:
    return db.submit(namespace, Opcode.ENCODE, Encode(request_id=rid(), text=text))


def lsn_of(future: Future[bytes]) -> int:
    return EncodeOk.from_wire(cbor.decode(future.result())).lsn


def test_a_quiet_namespace_is_planned_before_a_busy_ones_backlog(db: Database) -> None:
    with writer_held(db):
        busy = [encode(db, BUSY, f"busy write {n}") for n in range(BACKLOG)]
        quiet = encode(db, QUIET, "the quiet tenant's one write")
    # Round-robin: the quiet write is the second one planned, not the last.
    assert lsn_of(quiet) == 2
    # The busy tenant's writes keep the order they were sent in.
    lsns = [lsn_of(f) for f in busy]
    assert lsns == sorted(lsns) and len(set(lsns)) == BACKLOG


def test_a_write_arriving_mid_batch_is_planned_next(db: Database) -> None:
    late: list[Future[bytes]] = []

    def busy_write(n: int) -> Callable[[PlanContext], Outcome]:
        def plan(ctx: PlanContext) -> Outcome:
            if n == 0 and not late:
                # Arrives while the busy tenant's first batch is being planned.
                late.append(encode(db, QUIET, "arrived while the busy batch was planned"))
            request = Encode(request_id=rid(), text=f"busy write {n}")
            return plan_single(ctx, BUSY, Opcode.ENCODE, request)

        return plan

    with writer_held(db):
        busy = [db.writer.submit(busy_write(n), BUSY) for n in range(BACKLOG)]
    assert all(f.result() for f in busy)
    assert lsn_of(late[0]) == 2


def test_a_shared_batch_stops_once_planning_ran_its_time(db: Database) -> None:
    planned: list[tuple[str, int]] = []

    def slow_write(namespace: str, n: int) -> Callable[[PlanContext], Outcome]:
        def plan(ctx: PlanContext) -> Outcome:
            # Each write plans for the whole time a shared batch may take.
            time.sleep(MAX_BATCH_PLAN_S)
            planned.append((namespace, db.writer.batches))
            request = Encode(request_id=rid(), text=f"{namespace} slow write {n}")
            return plan_single(ctx, namespace, Opcode.ENCODE, request)

        return plan

    # Alone, a namespace's slow writes still share one group commit.
    with writer_held(db):
        alone = [db.writer.submit(slow_write(BUSY, n), BUSY) for n in range(3)]
    assert all(f.result() for f in alone)
    assert len({batch for _, batch in planned}) == 1
    # Shared, each batch ends after its first write: the lanes take turns.
    planned.clear()
    with writer_held(db):
        shared = [db.writer.submit(slow_write(ns, n), ns) for ns in (BUSY, QUIET) for n in range(3)]
    assert all(f.result() for f in shared)
    batches = [batch for _, batch in planned]
    assert batches == sorted(set(batches))
    assert [ns for ns, _ in planned] == [BUSY, QUIET] * 3


def test_a_batch_is_cut_as_shared_while_another_namespace_is_active(db: Database) -> None:
    """The quiet tenant has no write queued, but it is active (its reads, say): its
    next write could come at any moment and would wait for the whole batch in hand,
    so the busy tenant's batch ends once planning ran its time, as a shared one."""
    planned: list[int] = []

    def slow_write(n: int) -> Callable[[PlanContext], Outcome]:
        def plan(ctx: PlanContext) -> Outcome:
            time.sleep(MAX_BATCH_PLAN_S)
            planned.append(db.writer.batches)
            request = Encode(request_id=rid(), text=f"busy slow write {n}")
            return plan_single(ctx, BUSY, Opcode.ENCODE, request)

        return plan

    with writer_held(db):
        db.writer.activity.touch(QUIET)
        writes = [db.writer.submit(slow_write(n), BUSY) for n in range(3)]
    assert all(f.result() for f in writes)
    assert planned == sorted(set(planned))  # one batch each


def test_maintenance_runs_after_the_next_batch_not_after_the_backlog(db: Database) -> None:
    with writer_held(db):
        busy = [encode(db, BUSY, f"busy write {n}") for n in range(BACKLOG)]
        first_batches = db.writer.batches
        ran_after = db.writer.between_batches(lambda: db.writer.batches)
    assert ran_after.result() == first_batches + 1
    assert all(lsn_of(f) for f in busy)


def test_closing_answers_every_write_queued_before_it(db: Database) -> None:
    lanes = [f"tenant-{n}" for n in range(3)]
    with writer_held(db):
        queued = [encode(db, lanes[n % 3], f"queued write {n}") for n in range(60)]
        closing = threading.Thread(target=db.close)
        closing.start()
        deadline = time.monotonic() + WRITER_HOLD_S
        # Wait until the stop is queued behind the writes, then let the writer go.
        while db.writer._queue.qsize() <= len(queued) and time.monotonic() < deadline:
            time.sleep(0.01)
    closing.join(WRITER_HOLD_S)
    assert not closing.is_alive()
    assert sorted(lsn_of(f) for f in queued) == list(range(1, 61))


def test_a_write_given_up_before_it_is_planned_spoils_no_other_answer(db: Database) -> None:
    """A client that closes its connection cancels its queued write's future; the
    writer drops that write, and every other write of the batch still gets its
    answer (once, a cancelled future in a batch made every later one INTERNAL)."""
    with writer_held(db):
        first = encode(db, BUSY, "written before the one given up")
        given_up = encode(db, BUSY, "given up while queued")
        others = [encode(db, name, f"{name} after it") for name in (BUSY, QUIET)]
        assert given_up.cancel()
    for future in (first, *others):
        assert lsn_of(future) > 0
    assert given_up.cancelled()
    assert len({lsn_of(f) for f in (first, *others)}) == 3
    # The dropped write took no LSN: no logged record holds it. (The indexer's own
    # write for the first ones may take an LSN between theirs, when the batch is cut.)
    logged = [record.payload for record in db.wal.read_from(1)]
    assert len(logged) >= 3
    assert not any(b"given up while queued" in payload for payload in logged)
