"""The writer's waiting jobs, one lane per namespace, drawn round-robin.

The writer serves every tenant from one thread. Were its jobs one FIFO queue, a
tenant that pipelines hundreds of writes would put every other tenant's write
behind all of them. :class:`Lanes` keeps one FIFO lane per namespace (and one for
the engine's own work, named ``None``) and hands jobs out in rounds: each lane
with a job waiting gets one turn per round, in the order the lanes first had a
job waiting; a lane that had its turn waits for the next round. A lane that
starts waiting mid-round joins the round at its end, ahead of every lane that
already had its turn in it, so a quiet namespace's job is among the next ones
drawn however long the busy lanes are. Within one lane the order is the order
of submission, so a connection's pipelined writes, and a transaction's
buffered writes and its commit, are planned in the order they were sent
(spec/05-durability.md §1). A lane the writer holds back (one namespace over
its share of the writer while another is active, :mod:`brain.engine.write.pacing`)
is passed over and keeps its place in the round.

Only the writer thread uses a :class:`Lanes`; it is not locked.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

__all__ = ["Lane", "Lanes"]

Lane = str | None
"""A lane's name: the namespace of its jobs, ``None`` for the engine's own writes
(the indexer's vectors, an import)."""

T = TypeVar("T")


class Lanes(Generic[T]):
    """Jobs waiting for the writer, by lane, handed out round-robin."""

    __slots__ = ("_done", "_turns", "_waiting")

    def __init__(self) -> None:
        self._waiting: dict[Lane, deque[T]] = {}
        self._turns: deque[Lane] = deque()
        """Lanes still to have their turn in the current round, in order."""
        self._done: deque[Lane] = deque()
        """Lanes that had their turn in the current round and still have jobs."""

    def __len__(self) -> int:
        """How many lanes have a job waiting."""
        return len(self._waiting)

    def add(self, lane: Lane, job: T) -> None:
        """Queue ``job`` at the end of its lane."""
        jobs = self._waiting.get(lane)
        if jobs is None:
            self._waiting[lane] = jobs = deque()
            self._turns.append(lane)
        jobs.append(job)

    def waiting(self) -> Iterator[Lane]:
        """The lanes with a job waiting, those still to have their turn in the
        current round first."""
        yield from self._turns
        yield from self._done

    def take(self, held: Callable[[Lane], bool] | None = None) -> tuple[Lane, T] | None:
        """The next job, with its lane: the first job of the lane whose turn it is
        (None when no job waits). A lane for which ``held`` is true is passed over
        and keeps its turn for when it is no longer held; None when every lane
        with a job waiting is held."""
        index = self._turn(held)
        if index is None and self._done:
            # A new round: every lane still waiting, in the order of the last one,
            # behind the held lanes that did not have their turn in this one.
            self._turns.extend(self._done)
            self._done.clear()
            index = self._turn(held)
        if index is None:
            return None
        lane = self._turns[index]
        del self._turns[index]
        jobs = self._waiting[lane]
        job = jobs.popleft()
        if jobs:
            self._done.append(lane)
        else:
            del self._waiting[lane]
        return lane, job

    def _turn(self, held: Callable[[Lane], bool] | None) -> int | None:
        """Where the first lane of the current round not held is in it (None: none)."""
        if held is None:
            return 0 if self._turns else None
        for index, lane in enumerate(self._turns):
            if not held(lane):
                return index
        return None

    def shared(self, served: set[Lane]) -> bool:
        """True when more than one lane is involved: those of ``served`` (a batch's
        lanes so far) and those with a job waiting."""
        if len(served) > 1 or len(self._waiting) > 1:
            return True
        return bool(served) and bool(self._waiting) and next(iter(self._waiting)) not in served

    def drain(self) -> list[T]:
        """Remove and return every waiting job, lane by lane."""
        jobs = [job for lane in self._waiting.values() for job in lane]
        self._waiting.clear()
        self._turns.clear()
        self._done.clear()
        return jobs
