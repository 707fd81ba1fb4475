"""Moving a namespace to another shard while it serves (spec/05-durability.md §14.9).

Run by the planner of the target shard (``POST /v1/cluster/moves`` on its admin
port). The namespace takes writes on its source shard until the last moment:

1. drop whatever an earlier, broken-off move left of it here;
2. copy: read the source shard's stream from LSN 1 and log here its changes to the
   namespace's keys (:meth:`Database.copy_namespace`), again until a pass finds
   fewer than :data:`CATCH_UP_RECORDS` new records;
3. freeze: the shard map marks it frozen (every node refuses its writes, retry
   advice :data:`~brain.engine.write.frozen.FROZEN_RETRY_MS`), then the source's
   planner logs the freeze (``freeze`` over ``brain.plan.<source>``): nothing of the
   namespace is logged there after that LSN, whichever node plans;
4. copy the source stream up to that LSN;
5. cut over: the shard map puts it on this shard, compare-and-set on the frozen
   entry's revision, so nodes route it here from their next look (a node still on
   the old map is refused by the source and retries);
6. the source's planner drops it and thaws (``drop``).

A failure before the cut-over undoes the freeze (map and source) and drops the copy
here; a mover that died in between leaves the namespace frozen, and running the move
again completes it. After it, the move is done; a source that does not drop its rows
(asked :data:`DROP_TRIES` times) keeps them frozen, served by nothing, and the report
says so.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Final

from brain import cbor
from brain.errors import BrainError, Conflict, InvalidArgument, Unavailable

if TYPE_CHECKING:
    from brain.engine.database import Database
    from brain.engine.replication.jetstream_log import JetStreamLog
    from brain.engine.replication.shard_map import Placement, ShardMap
    from brain.server.cluster_link import ClusterLink, Kind

__all__ = ["CATCH_UP_RECORDS", "DROP_TRIES", "MAX_COPY_PASSES", "MoveReport", "move_namespace"]

log = logging.getLogger("brain.server")

CATCH_UP_RECORDS: Final = 200
"""A copy pass that found fewer new source records than this ends the copying while
writes go on: the rest is copied with the namespace frozen, a few milliseconds."""

MAX_COPY_PASSES: Final = 20
"""Copy passes before freezing anyway: a source shard written faster than the copy
catches up would otherwise keep it copying for ever."""


DROP_TRIES: Final = 3
"""Times the source's planner is asked to drop the moved namespace: a takeover there
(seconds) between the cut-over and the drop is ridden out."""


@dataclass(frozen=True, slots=True)
class MoveReport:
    """What a move did (the answer of ``POST /v1/cluster/moves``)."""

    namespace: str
    from_shard: str
    to_shard: str
    copied_changes: int
    """Changes to the namespace's keys logged on the target."""
    source_lsn: int
    """The source log's LSN of the freeze: the copy holds everything up to it."""
    passes: int
    """Copy passes made while the namespace took writes."""
    frozen_ms: int
    """How long the namespace refused writes."""
    dropped_keys: int | None
    """Keys the source dropped after the cut-over; None when it did not answer
    :data:`DROP_TRIES` times: its rows stay there, frozen, and nothing serves them."""
    epoch: int
    """The shard map's epoch of the namespace after the cut-over."""

    def to_json(self) -> dict[str, object]:
        """The report as JSON."""
        return asdict(self)


async def move_namespace(
    database: Database,
    link: ClusterLink,
    shard_map: ShardMap,
    *,
    namespace: str,
    to_shard: str,
    planning: bool,
) -> MoveReport:
    """Move ``namespace`` to ``to_shard``, whose planner this node must be."""
    if not namespace:
        raise InvalidArgument("namespace is required", field="namespace")
    if to_shard != link.shard:
        raise Unavailable(
            f"a move to shard {to_shard} runs on that shard's planner, not on node "
            f"{link.node} of shard {link.shard}"
        )
    if not planning:
        raise Unavailable(
            f"a move to shard {to_shard} runs on that shard's planner, node "
            f"{database.planner}, not on node {link.node}"
        )
    source = shard_map.shard_of(namespace).shard
    if source == to_shard:
        raise Conflict(f"namespace {namespace!r} is on shard {to_shard} already")
    move = _Move(database, link, shard_map, namespace=namespace, source=source, target=to_shard)
    return await move.run()


class _Move:
    """One move's state while it runs (steps in the module's docstring)."""

    def __init__(
        self,
        database: Database,
        link: ClusterLink,
        shard_map: ShardMap,
        *,
        namespace: str,
        source: str,
        target: str,
    ) -> None:
        self.database = database
        self.link = link
        self.shard_map = shard_map
        self.namespace = namespace
        self.source = source
        self.target = target
        self.copied = 0
        self.read = 0
        """The last source LSN copied."""
        self.passes = 0
        self.frozen_at: float | None = None
        self.source_frozen = False

    async def run(self) -> MoveReport:
        db, namespace = self.database, self.namespace
        await asyncio.to_thread(db.drop_namespace, namespace)
        # Frozen here too until the cut-over: only the copy writes it, so this
        # node's indexer does not embed its queued documents under the copy.
        await asyncio.to_thread(db.freeze_namespace, namespace, self.target)
        reader = await asyncio.to_thread(_open_source, db, self.source)
        try:
            fence, moved = await self._copy_and_cut_over(reader)
        except BaseException:
            await self._undo()
            raise
        finally:
            await asyncio.to_thread(reader.close)
        assert self.frozen_at is not None
        frozen_ms = round((time.monotonic() - self.frozen_at) * 1000)
        log.info("namespace %r moved from shard %s to %s", namespace, self.source, self.target)
        return MoveReport(
            namespace=namespace,
            from_shard=self.source,
            to_shard=self.target,
            copied_changes=self.copied,
            source_lsn=fence,
            passes=self.passes,
            frozen_ms=frozen_ms,
            dropped_keys=await self._drop_source(),
            epoch=moved.epoch,
        )

    async def _copy_and_cut_over(self, reader: JetStreamLog) -> tuple[int, Placement]:
        while self.passes < MAX_COPY_PASSES:
            self.passes += 1
            before = self.read
            await self._copy(reader)
            if self.read - before < CATCH_UP_RECORDS:
                break
        frozen = await asyncio.to_thread(self.shard_map.freeze, self.namespace)
        self.frozen_at = time.monotonic()
        answer = await self._tell("freeze", {"to_shard": self.target})
        self.source_frozen = True
        fence = answer.get("lsn")
        if not isinstance(fence, int):
            raise Unavailable(f"shard {self.source} logged the freeze without its LSN")
        while self.read < fence:
            await self._copy(reader)
        await asyncio.to_thread(self.database.thaw_namespace, self.namespace)
        moved = await asyncio.to_thread(
            self.shard_map.cut_over, self.namespace, self.target, frozen.revision
        )
        return fence, moved

    async def _copy(self, reader: JetStreamLog) -> None:
        added, self.read = await asyncio.to_thread(
            _copy_pass, self.database, reader, self.namespace, self.read
        )
        self.copied += added

    async def _tell(self, kind: Kind, body: dict[str, object]) -> dict[str, object]:
        """Ask the source shard's planner to take a step of the move."""
        from brain.server.cluster_link import Forwarded, plan_subject

        forwarded = Forwarded(
            kind=kind,
            opcode=0,
            payload=cbor.encode(body),
            namespace=self.namespace,
            key_id=b"",
            permissions=(),
            owner=b"",
        )
        subject = plan_subject(self.source)
        raw = await self.link.forward(subject, forwarded, doing=f"the planner of {self.source}")
        answer = cbor.decode(raw)
        return answer if isinstance(answer, dict) else {}

    async def _drop_source(self) -> int | None:
        for _ in range(DROP_TRIES):
            try:
                answer = await self._tell("drop", {})
            except BrainError as exc:
                log.warning("dropping %r from shard %s: %s", self.namespace, self.source, exc)
                continue
            deleted = answer.get("deleted")
            return deleted if isinstance(deleted, int) else None
        return None

    async def _undo(self) -> None:
        """A move given up before its cut-over: the source takes the namespace's
        writes again, and the copy here goes."""
        db, namespace = self.database, self.namespace
        try:
            if self.source_frozen:
                await self._tell("thaw", {})
            if self.frozen_at is not None:
                placement = self.shard_map.shard_of(namespace)
                await asyncio.to_thread(self.shard_map.thaw, namespace, placement.revision)
            await asyncio.to_thread(db.drop_namespace, namespace)
            await asyncio.to_thread(db.thaw_namespace, namespace)
        except (BrainError, TimeoutError, OSError):
            log.exception("undoing the move of namespace %r", namespace)


def _open_source(database: Database, shard: str) -> JetStreamLog:
    """A reader of ``shard``'s stream on this node's cluster (no lease: it never appends)."""
    from dataclasses import replace

    from brain.engine.replication.jetstream_log import JetStreamLog

    own = getattr(database.wal, "options", None)
    if own is None:
        raise Unavailable("this node serves no replicated log")
    return JetStreamLog.open(replace(own, shard=shard, node=None))


def _copy_pass(
    database: Database, reader: JetStreamLog, namespace: str, read: int
) -> tuple[int, int]:
    """Copy the source records after LSN ``read`` up to the stream's end now; the changes
    copied and the last LSN read."""
    last = reader.refresh()
    if last <= read:
        return 0, read
    start = read + 1
    if start < reader.first_lsn:
        # The source's stream was compacted (spec/05-durability.md §14.10): its base
        # holds every row from the start, but not the deletes after what was copied.
        if read:
            raise Unavailable(
                f"the stream of shard {reader.options.shard} was compacted while the "
                f"move had copied it up to LSN {read}: run the move again"
            )
        start = reader.first_lsn
    copied, upto = database.copy_namespace(namespace, reader.read_from(start))
    return copied, max(read, upto)
