"""One shard's record log in a NATS JetStream stream with three replicas.

The stream ``BRAIN_LOG_<shard>`` takes the subject ``brain.log.<shard>`` and
holds one message per record: the record's WAL frame
(:func:`~brain.engine.wal.format.encode_record`, CRCs included), so a record
read back is checked as a segment's would be. The record's LSN is the message's
stream sequence; a message whose frame names another LSN is corruption.

Every publish carries these headers (spec/05-durability.md §14), and
``Nats-Expected-Stream`` so that it lands in no other stream:

- ``Nats-Msg-Id``: the caller's id for the record (by default the SHA-256 of
  its frame), so a publish retried after a lost acknowledgement is stored once:
  the stream answers the retry as a duplicate, naming the sequence it holds.
- ``Nats-Expected-Last-Sequence``: the LSN before the record. The stream stores
  the message only if that is its last sequence, so a writer that is not the
  one the log expects (another appended since it looked) cannot append: the
  stream refuses and :class:`~brain.errors.LogFenced` is raised.

:meth:`JetStreamLog.append` returns only once the stream acknowledged every
record, which it does once a quorum of its replicas (two of three) stored it;
:meth:`JetStreamLog.sync` then has nothing left to do.

nats-py is asyncio and the writer is a thread: the client runs on an event loop
of its own, on a thread of its own, and every call from the writer waits for it
at most a named, bounded time.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import json
import logging
import re
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from pathlib import Path
from typing import Final, TypeVar

import nats
import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import (
    DiscardPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
    StreamInfo,
)
from nats.nuid import NUID

from brain.engine.replication.generations import (
    Compaction,
    Generation,
    current_of,
    list_generations,
    stream_name,
    stream_subject,
)
from brain.engine.replication.options import REPLICAS, JetStreamLogOptions
from brain.engine.wal.format import Incomplete, WalRecord, decode_record, encode_record
from brain.engine.wal.parts import split_record
from brain.errors import LogFenced, StorageFault, WalCorruption, WalSyncFailed

__all__ = [
    "ACK_WAIT_S",
    "APPEND_DEADLINE_S",
    "CALL_TIMEOUT_S",
    "REPLICAS",
    "JetStreamLog",
    "JetStreamLogOptions",
]

_T = TypeVar("_T")

log = logging.getLogger("brain.engine")

CONNECT_TIMEOUT_S: Final = 5.0
"""Time to reach one server of the cluster; a loopback or LAN server answers in
milliseconds, so this only bounds a server that is down."""

CONNECT_DEADLINE_S: Final = 10.0
"""How long opening tries the servers of the list in turn before it reports the
cluster unreachable: long enough for every server of a small cluster to be
tried more than once, short enough that a wrong address is told soon."""

API_ATTEMPT_S: Final = 2.0
"""How long one JetStream API request (stream info, reading a record) waits before
it is sent again: a leader answers in milliseconds, and a request that reached
none (the old one just died) is better sent again soon than waited on."""

API_DEADLINE_S: Final = 20.0
"""How long an API request is sent again before it is reported: enough for the
cluster to elect new stream and meta leaders after losing a server."""

OPEN_DEADLINE_S: Final = 30.0
"""Time to get the stream ready when opening: right after the cluster starts its
JetStream meta group elects a leader (seconds) and answers "temporarily
unavailable" until then, which the open retries."""

CALL_TIMEOUT_S: Final = 10.0
"""The longest one call into the client that is not sent again waits (taking the
acknowledgement inbox, closing the connection, cancelling what is left on the
loop), and the slack the caller's thread adds to a call's own deadline: longer
than a stream leader election (a few seconds), after which the call is reported
rather than letting the writer hang."""

ACK_WAIT_S: Final = 2.0
"""How long one round of publishes waits for its acknowledgements before the
unacknowledged records are published again (same ids, so never stored twice). A
quorum write on a healthy cluster takes milliseconds; two seconds is about when a
lost leader's followers start electing a new one."""

APPEND_DEADLINE_S: Final = 20.0
"""How long one append keeps publishing again before it fails the log: enough to
ride out a leader election and a client reconnect; the writer's clients wait this
long at worst, then get UNAVAILABLE."""

RETRY_PAUSE_S: Final = 0.2
"""Pause before publishing again after the stream answered that it has no leader."""

DEDUPE_WINDOW_S: Final = 120.0
"""How long the stream remembers a ``Nats-Msg-Id``: far longer than
:data:`APPEND_DEADLINE_S`, so every retry of an append falls inside it."""

COMPACT_CHUNK_BYTES: Final = 4 * 1024 * 1024
"""Base records published per append while compacting, in bytes (a chunk is closed
once it holds this much): a few MiB in flight, acknowledged by a quorum well
within :data:`ACK_WAIT_S` on a healthy cluster."""

PUBLISH_OVERHEAD_BYTES: Final = 4096
"""Room kept in a message beside a record's payload: its frame header (32 bytes) and
the publish's headers (message id, expected stream and sequence: under 300 bytes),
with a margin."""

READ_BATCH: Final = 256
"""Records asked for at once when reading: enough requests in flight to hide the
round trip, few enough that a batch of frames stays a few MiB."""

NO_RESPONDERS: Final = 503
"""The status (and error code) of an answer that no stream leader gave: during an
election; the publish is tried again."""

JETSTREAM_UNAVAILABLE: Final = 10008
"""JetStream's error code for "temporarily unavailable": its meta group has no leader."""

NO_SUITABLE_PEERS: Final = 10005
"""JetStream's "no suitable peers for placement": right after a cluster starts, its
new meta leader may not know every server yet and refuses a three-replica stream;
opening tries again (a cluster that truly has too few servers is reported when
:data:`OPEN_DEADLINE_S` runs out, with this error)."""

WRONG_LAST_SEQUENCE: Final = 10071
"""JetStream's error code for a publish whose ``Nats-Expected-Last-Sequence`` did not
hold: the fence."""

_SHARD = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""A shard name: what a stream name and a subject token may both hold."""


class _Loop:
    """An asyncio event loop running on a thread of its own, for blocking callers."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="brain-jetstream")
        self._thread.daemon = True
        self._thread.start()

    def call(self, coro: Coroutine[object, object, _T], timeout: float) -> _T:
        """Run ``coro`` on the loop; wait at most ``timeout`` seconds for it."""
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"no answer within {timeout} s") from None

    def close(self) -> None:
        """Cancel what is left on the loop, stop it and close it."""

        async def cancel_rest() -> None:
            current = asyncio.current_task()
            rest = [task for task in asyncio.all_tasks() if task is not current]
            for task in rest:
                task.cancel()
            await asyncio.gather(*rest, return_exceptions=True)
            await self.loop.shutdown_asyncgens()

        try:
            self.call(cancel_rest(), CALL_TIMEOUT_S)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join()
            self.loop.close()


class JetStreamLog:
    """A :class:`~brain.engine.wal.interface.RecordLog` on a JetStream stream; build it
    with :meth:`open`. Owned by one thread (the writer's); not thread-safe.

    Plain attributes, for metrics: ``sync_count`` (appends acknowledged),
    ``bytes_written`` (frame bytes acknowledged), ``republished`` (records
    published again after a lost or late acknowledgement).
    """

    def __init__(self, options: JetStreamLogOptions, loop: _Loop, client: Client) -> None:
        """Private: use :meth:`JetStreamLog.open`."""
        self.options = options
        self.stream = stream_name(options.shard, 0)
        """The log's name (its first generation's stream): what a store is held to
        and a snapshot's manifest names, whichever generation holds the log now."""
        self.generation = 0
        """The generation of the stream holding the log now (§14.10)."""
        self.compaction: Compaction | None = None
        """How that generation was made (None: the first, never compacted)."""
        self.sealed = False
        """Whether that stream is sealed (a compaction began: it takes no appends)."""
        self._physical = self.stream
        self._subject = stream_subject(options.shard, 0)
        self._offset = 0
        """The LSN of the record before the stream's sequence 1: 0, or for a compacted
        generation the LSN it was compacted to less its base records."""
        self.stream_bytes = 0
        """Bytes the current generation's stream holds, as of the last look at it plus
        the frames this handle appended since (what trimming weighs, §14.10)."""
        self.sync_count = 0
        self.bytes_written = 0
        self.republished = 0
        self._loop = loop
        self._client = client
        self._js: JetStreamContext = client.jetstream(timeout=API_ATTEMPT_S)
        self._first_lsn = 1
        self._next_lsn = 1
        self._failure: str | None = None
        self._closed = False
        self._nuid = NUID()
        """Unique tokens for reply subjects."""
        self._ack_prefix = ""
        self._acks: dict[str, asyncio.Future[Msg]] = {}
        """Publishes awaiting their acknowledgement, by reply token."""
        self.may_append: Callable[[], str | None] | None = None
        """Asked before each append: None when this node may append, else why not
        (its planner lease ran out, :mod:`brain.engine.replication.lease`); the
        append then fails the log without publishing."""

    @classmethod
    def open(cls, options: JetStreamLogOptions) -> JetStreamLog:
        """Connect to the cluster and open the shard's stream, creating it (file
        storage, ``options.replicas`` replicas) when it does not exist yet.

        An unreachable cluster, or a stream not ready within
        :data:`OPEN_DEADLINE_S`, raises :class:`~brain.errors.StorageFault`.
        """
        if not _SHARD.fullmatch(options.shard):
            raise ValueError(f"shard name {options.shard!r} is not 1-64 of A-Z a-z 0-9 _ -")
        if not options.servers:
            raise ValueError("a JetStream log needs at least one server")
        loop = _Loop()
        try:
            client = loop.call(_connect(options.servers), CONNECT_DEADLINE_S)
        except (TimeoutError, OSError, nats.errors.Error) as exc:
            loop.close()
            raise StorageFault(
                f"cannot reach the JetStream cluster {options.servers}: {exc}"
            ) from exc
        opened = cls(options, loop, client)
        try:
            info = loop.call(opened._ensure_stream(), OPEN_DEADLINE_S + CALL_TIMEOUT_S)
            opened._adopt(info)
            loop.call(opened._subscribe_acks(), CALL_TIMEOUT_S)
        except BaseException as exc:
            opened.close()
            if isinstance(exc, TimeoutError | nats.errors.Error):
                raise StorageFault(f"cannot open the log {opened.location}: {exc}") from exc
            raise
        return opened

    # --- the RecordLog protocol ----------------------------------------------------------

    @property
    def location(self) -> str:
        """The stream and the servers, for messages to the operator."""
        return f"JetStream stream {self._physical} on {','.join(self.options.servers)}"

    @property
    def first_lsn(self) -> int:
        """The lowest LSN the stream held when opened (:attr:`next_lsn` when none)."""
        return self._first_lsn

    @property
    def last_lsn(self) -> int:
        """The LSN of the last record this handle knows of (0 for an empty stream)."""
        return self._next_lsn - 1

    @property
    def next_lsn(self) -> int:
        """The LSN the next appended record must carry."""
        return self._next_lsn

    @property
    def failed(self) -> bool:
        """Whether an append failed; the log then takes no more writes."""
        return self._failure is not None

    @property
    def segments(self) -> list[Path]:
        """No local files: the records are in the stream."""
        return []

    @property
    def max_record_payload(self) -> int:
        """The largest record payload one message takes: the servers' ``max_payload``
        less :data:`PUBLISH_OVERHEAD_BYTES`. A larger plan is logged in parts
        (:mod:`brain.engine.wal.parts`)."""
        return int(self._client.max_payload) - PUBLISH_OVERHEAD_BYTES

    def append(self, records: Sequence[WalRecord], ids: Sequence[str] | None = None) -> None:
        """Publish ``records`` (LSNs :attr:`next_lsn`, +1, …) and return once the stream
        acknowledged each, i.e. a quorum of its replicas stored it.

        ``ids`` are the records' ``Nats-Msg-Id`` (by default each frame's SHA-256):
        a record whose id the stream already holds is not stored again. Wrong LSNs
        raise ValueError with nothing published. A refusal by the fence raises
        :class:`~brain.errors.LogFenced`; no acknowledgement within
        :data:`APPEND_DEADLINE_S`, or any other refusal, raises
        :class:`~brain.errors.WalSyncFailed`. Either fails the log.
        """
        self._check_writable()
        expected = self._next_lsn
        for record in records:
            if record.lsn != expected:
                raise ValueError(f"record has LSN {record.lsn} where LSN {expected} is next")
            expected += 1
        if ids is not None and len(ids) != len(records):
            raise ValueError(f"{len(ids)} ids for {len(records)} records")
        if not records:
            return
        if self.may_append is not None:
            refusal = self.may_append()
            if refusal is not None:
                raise self._fail(refusal)
        frames = [encode_record(record) for record in records]
        limit = self._client.max_payload
        for record, frame in zip(records, frames, strict=True):
            if len(frame) > limit:
                raise self._fail(
                    f"record {record.lsn} is {len(frame)} bytes, over the servers' "
                    f"max_payload of {limit}: raise max_payload in their configuration"
                )
        msg_ids = list(ids) if ids is not None else [hashlib.sha256(f).hexdigest() for f in frames]
        pending = [
            (record.lsn, frame, msg_id)
            for record, frame, msg_id in zip(records, frames, msg_ids, strict=True)
        ]
        try:
            self._loop.call(self._publish(pending), APPEND_DEADLINE_S + CALL_TIMEOUT_S)
        except LogFenced as exc:
            self._failure = str(exc)
            raise
        except WalSyncFailed:
            raise
        except (TimeoutError, nats.errors.Error, OSError) as exc:
            raise self._fail(f"publishing failed: {exc}") from exc
        self._next_lsn = expected
        self.sync_count += 1
        appended = sum(len(frame) for frame in frames)
        self.bytes_written += appended
        self.stream_bytes += appended

    def sync(self) -> None:
        """Nothing to do: :meth:`append` returned only once every record was stored by
        a quorum. A failed log raises :class:`~brain.errors.WalSyncFailed`."""
        self._check_writable()

    def rotate(self) -> None:
        """Nothing to do: the stream has no segments of its own to close."""
        self._check_writable()

    def checkpoint(self, durable_lsn: int) -> list[Path]:
        """Keep every record: the stream is what a fresh store rebuilds from, and one
        store being durable says nothing of another's (spec/05-durability.md §14).
        Returns the files deleted: none."""
        self._check_writable()
        if not 0 <= durable_lsn <= self.last_lsn:
            raise ValueError(f"durable LSN {durable_lsn} is outside 0..{self.last_lsn}")
        return []

    def read_from(self, lsn: int) -> Iterator[WalRecord]:
        """Every record with LSN ≥ ``lsn`` up to :attr:`last_lsn` as of this call, in
        order, checked like a segment's records. ``lsn`` below :attr:`first_lsn`
        raises ValueError; a record missing or damaged in the stream raises
        :class:`~brain.errors.WalCorruption`."""
        self._check_open()
        if lsn < self.first_lsn:
            raise ValueError(f"LSN {lsn} is below the first LSN held, {self.first_lsn}")
        return self._read(max(lsn, 1), self.last_lsn)

    def cut_torn_tail(self, applied_lsn: int) -> None:
        """Nothing to cut: a message is stored whole or not at all. A stream that
        ends before ``applied_lsn`` is left for recovery to report."""
        self._check_open()

    def close(self) -> None:
        """Close the connection and the client's event loop. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._loop.call(self._client.close(), CALL_TIMEOUT_S)
        except (TimeoutError, nats.errors.Error):
            pass  # the loop's close below cancels whatever is left
        finally:
            self._loop.close()

    def __enter__(self) -> JetStreamLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def resume(self) -> None:
        """Take appends again after a failed one (fenced, unacknowledged, refused by
        :attr:`may_append`): for a node that follows the stream again from what it
        applied, and appends only after it read the stream to its end
        (spec/05-durability.md §14.3). The next :meth:`refresh` sets the fence."""
        self._check_open()
        self._failure = None

    def refresh(self) -> int:
        """Ask the stream for its last sequence and take it as :attr:`last_lsn`: what a
        follower reads up to, and the fence a new planner appends after. Returns it.

        A stream that is sealed or gone was compacted (§14.10): when a later
        generation is complete the handle moves to it (:attr:`generation` changes;
        a reader that had applied less than its :attr:`compaction`'s
        ``compacted_to`` must start again from its base, :meth:`read_base`). A stream
        that ends before what this handle knew raises
        :class:`~brain.errors.WalCorruption`."""
        self._check_open()
        before = self.generation
        info = self._loop.call(
            self._retrying(self._current_info, API_DEADLINE_S, "info"),
            API_DEADLINE_S + CALL_TIMEOUT_S,
        )
        if self.generation != before:
            self._adopt(info)
            return self.last_lsn
        last = info.state.last_seq + self._offset
        if last < self.last_lsn:
            raise WalCorruption(
                self.location,
                0,
                None,
                f"the stream ends at LSN {last}, before the {self.last_lsn} records it held",
            )
        self._next_lsn = last + 1
        self.stream_bytes = info.state.bytes
        return self.last_lsn

    def read_base(self) -> Iterator[WalRecord]:
        """The base records of the current generation, in order: the store's rows at
        the LSN it was compacted to, which rebuild a store from nothing up to that
        LSN (nothing for a generation that was never compacted)."""
        self._check_open()
        made = self.compaction
        if made is None:
            return iter(())
        return self._read(self._offset + 1, made.compacted_to)

    async def _current_info(self) -> StreamInfo:
        """The info of the stream holding the log now, moving to a later complete
        generation when this one is sealed or deleted."""
        try:
            info: StreamInfo | None = await self._js.stream_info(self._physical)
        except nats.js.errors.NotFoundError:
            info = None
        if info is not None and not info.config.sealed:
            self.sealed = False
            return info
        found = await list_generations(self._client, self._js, self.options.shard)
        later = [g for g in found if g.number > self.generation and g.complete]
        if later:
            self._take(later[-1])
            await self._delete_before(later[-1].number, found)
            return later[-1].info
        if info is None:
            raise StorageFault(
                f"the stream {self._physical} was deleted and no later generation of the "
                f"log of shard {self.options.shard} is complete"
            )
        self.sealed = True
        return info

    def compact(
        self, base: Callable[[], Iterator[bytes]], count: int, *, kind: int, record_time: int
    ) -> None:
        """Move the log to a new generation holding ``count`` base records (the plans
        ``base()`` yields: the store's rows as of :attr:`last_lsn`), so that no record
        before it survives in the cluster (spec/05-durability.md §14.10).

        The current stream is sealed first (nothing appends to it from then on), a
        new one created with the next generation number and published to, fenced as
        appends are, each base record of ``kind`` stamped ``record_time``; then every older
        generation is deleted. The base ends at LSN ``max(last_lsn, count)`` (the
        compaction's ``compacted_to``) and the next append goes to the new stream
        after it. A stream that holds records this handle does not know of
        raises :class:`~brain.errors.LogFenced`; any failure fails the log and leaves
        the handle on the sealed stream, which the planner that takes the log next
        compacts again.
        """
        self._check_writable()
        last = self.last_lsn
        if count < 0:
            raise ValueError(f"{count} base records")
        # A base can take more records than the log has LSNs (a few large plans whose
        # rows are re-laid in smaller records): it then ends at LSN ``count``, and the
        # LSNs after ``last`` stand for no change (spec/05-durability.md §14.12).
        compacted_to = max(last, count)
        if self.may_append is not None:
            refusal = self.may_append()
            if refusal is not None:
                raise self._fail(refusal)
        made = Compaction(compacted_to, count)
        before = (self.generation, self.compaction)
        bytes_before = self.stream_bytes
        try:
            number = self._loop.call(
                self._open_generation(made, last), 2 * API_DEADLINE_S + CALL_TIMEOUT_S
            )
            self._point_at(number, made)
            self._next_lsn = self._offset + 1
            self.stream_bytes = 0
            self._publish_base(base(), count, kind, record_time)
            self.sealed = False
            self._first_lsn = self._offset + 1
        except BaseException as exc:
            self._point_at(*before)
            self._next_lsn = last + 1
            self.stream_bytes = bytes_before
            self.sealed = True
            if isinstance(exc, LogFenced):
                self._failure = str(exc)
                raise
            if isinstance(exc, WalSyncFailed | ValueError):
                raise
            if isinstance(exc, TimeoutError | nats.errors.Error | OSError | StorageFault):
                raise self._fail(f"compacting the log failed: {exc}") from exc
            raise
        try:
            self._loop.call(self._delete_older(number), API_DEADLINE_S + CALL_TIMEOUT_S)
        except (TimeoutError, nats.errors.Error, OSError) as exc:
            # The new generation is the log already: the old ones are deleted by the
            # next node that opens the log or moves to this generation.
            log.warning("deleting the generations before %s: %s", self._physical, exc)
        log.info(
            "the log of shard %s is compacted to LSN %d in %s (%d base records)",
            self.options.shard,
            compacted_to,
            self._physical,
            count,
        )

    def _publish_base(self, base: Iterator[bytes], count: int, kind: int, record_time: int) -> None:
        """Publish the ``count`` base records in chunks, each acknowledged before the
        next; a base of another length raises ValueError."""
        chunk: list[WalRecord] = []
        size = 0
        for payload in base:
            lsn = self._next_lsn + len(chunk)
            chunk += split_record(lsn, record_time, kind, payload, self.max_record_payload)
            size += len(payload)
            if size >= COMPACT_CHUNK_BYTES:
                self.append(chunk)
                chunk, size = [], 0
        if chunk:
            self.append(chunk)
        published = self._next_lsn - self._offset - 1
        if published != count:
            raise ValueError(f"the base held {published} records, not {count}")

    async def _open_generation(self, made: Compaction, last: int) -> int:
        """Seal the current stream, check that it ends at ``last`` (where this handle
        knows it ends), delete the incomplete copies of earlier compactions, and create
        the next generation; its number."""
        current = self._physical

        async def seal() -> StreamInfo:
            info = await self._js.stream_info(current)
            if info.config.sealed:
                return info
            config = info.config
            config.sealed = True
            return await self._js.update_stream(config)

        sealed = await self._retrying(seal, API_DEADLINE_S, "sealing the stream")
        self.sealed = True
        ends = sealed.state.last_seq + self._offset
        if ends != last:
            raise LogFenced(
                self.location,
                last,
                ends,
                f"the stream ends at LSN {ends}, not at {last}: another planner appended",
            )

        async def create() -> int:
            found = await list_generations(self._client, self._js, self.options.shard)
            for generation in found:
                if generation.number > self.generation:
                    await self._delete_stream(generation.name)
            number = max(g.number for g in found) + 1 if found else self.generation + 1
            await self._js.add_stream(self._stream_config(number, made))
            return number

        return await self._retrying(create, API_DEADLINE_S, "creating the compacted stream")

    async def _delete_older(self, number: int) -> None:
        """Delete every generation before ``number`` the cluster holds."""
        found = await list_generations(self._client, self._js, self.options.shard)
        await self._delete_before(number, found)

    async def _delete_before(self, number: int, found: list[Generation]) -> None:
        """Delete the generations of ``found`` before ``number``: left by a compaction
        cut short after its copy was complete, or about to be left by this one.
        Whoever finds older generations than the current one deletes them."""
        for generation in found:
            if generation.number < number:
                await self._delete_stream(generation.name)

    def run(self, coro: Coroutine[object, object, _T], timeout: float) -> _T:
        """Run ``coro`` on the client's event loop (the planner lease's requests share
        the connection); wait at most ``timeout`` seconds."""
        self._check_open()
        return self._loop.call(coro, timeout)

    @property
    def jetstream(self) -> JetStreamContext:
        """The client's JetStream context, for coroutines given to :meth:`run`."""
        return self._js

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The client's event loop (for tasks that live as long as the connection)."""
        return self._loop.loop

    # --- stream info, for tests and operators ----------------------------------------------

    def info(self) -> StreamInfo:
        """The stream's current info (state, cluster, config) from its leader."""
        self._check_open()
        return self._loop.call(
            self._retrying(lambda: self._js.stream_info(self._physical), API_DEADLINE_S, "info"),
            API_DEADLINE_S + CALL_TIMEOUT_S,
        )

    # --- on the loop -----------------------------------------------------------------------

    async def _ensure_stream(self) -> StreamInfo:
        """Take the log's current generation (§14.10), deleting older ones left by a
        compaction that stopped before it deleted them; create the first generation
        when the cluster holds none."""

        async def attempt() -> StreamInfo:
            found = await list_generations(self._client, self._js, self.options.shard)
            current = current_of(found)
            if current is None:
                if found:
                    raise StorageFault(
                        f"the log of shard {self.options.shard} is only in incomplete "
                        f"compacted streams ({', '.join(g.name for g in found)}): "
                        "its complete generation was deleted"
                    )
                return await self._js.add_stream(self._stream_config(0, None))
            self._take(current)
            await self._delete_before(current.number, found)
            return current.info

        return await self._retrying(
            attempt, OPEN_DEADLINE_S, "getting the stream ready", also=(NO_SUITABLE_PEERS,)
        )

    async def _delete_stream(self, name: str) -> None:
        """Delete a generation no longer current (absent already is fine)."""
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await self._js.delete_stream(name)

    def _take(self, generation: Generation) -> None:
        """Make ``generation``, as found, the stream this handle reads and appends to."""
        self._point_at(generation.number, generation.compaction)
        self.sealed = bool(generation.info.config.sealed)

    def _point_at(self, number: int, made: Compaction | None) -> None:
        """Read and append to generation ``number``, made by ``made``: its stream, its
        subject, and the LSN before its sequence 1 follow from them."""
        self.generation, self.compaction = number, made
        self._physical = stream_name(self.options.shard, number)
        self._subject = stream_subject(self.options.shard, number)
        self._offset = 0 if made is None else made.compacted_to - made.base

    async def _retrying(
        self,
        attempt: Callable[[], Awaitable[_T]],
        deadline_s: float,
        doing: str,
        *,
        also: tuple[int, ...] = (),
    ) -> _T:
        """Run ``attempt`` until it succeeds, trying again while the cluster has no
        leader for the request (a timeout, "no responders", 503, or "JetStream
        temporarily unavailable") or answers one of the error codes ``also``, for at
        most ``deadline_s``; anything else is final."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + deadline_s
        while True:
            try:
                return await attempt()
            except (
                nats.js.errors.ServiceUnavailableError,
                nats.js.errors.NoStreamResponseError,
                nats.errors.TimeoutError,
                nats.errors.NoRespondersError,
            ) as exc:
                last: Exception = exc
            except nats.js.errors.APIError as exc:
                transient = (JETSTREAM_UNAVAILABLE, *also)
                if exc.code != NO_RESPONDERS and exc.err_code not in transient:
                    raise
                last = exc
            if loop.time() + RETRY_PAUSE_S > deadline:
                raise StorageFault(
                    f"the log {self.location} did not answer {doing} within {deadline_s} s: {last}"
                )
            await asyncio.sleep(RETRY_PAUSE_S)

    def _stream_config(self, generation: int, made: Compaction | None) -> StreamConfig:
        return StreamConfig(
            name=stream_name(self.options.shard, generation),
            description=None if made is None else made.describe(),
            subjects=[stream_subject(self.options.shard, generation)],
            retention=RetentionPolicy.LIMITS,
            discard=DiscardPolicy.OLD,
            storage=StorageType.FILE,
            num_replicas=self.options.replicas,
            duplicate_window=DEDUPE_WINDOW_S,
            # The records are the database: nothing may delete one from the middle.
            deny_delete=True,
            allow_rollup_hdrs=False,
        )

    def _adopt(self, info: StreamInfo) -> None:
        state = info.state
        first_seq = max(state.first_seq if state.messages else state.last_seq + 1, 1)
        if state.messages != state.last_seq - first_seq + 1:
            raise WalCorruption(
                self.location,
                0,
                None,
                f"the stream holds {state.messages} records between sequences "
                f"{first_seq} and {state.last_seq}: some were deleted, the log has gaps",
            )
        self._next_lsn = state.last_seq + self._offset + 1
        self._first_lsn = first_seq + self._offset
        self.stream_bytes = state.bytes

    async def _subscribe_acks(self) -> None:
        """Take an inbox of this handle's own for the acknowledgements of its publishes."""
        self._ack_prefix = f"_INBOX.{self._nuid.next().decode()}."
        await self._client.subscribe(self._ack_prefix + "*", cb=self._on_ack)

    async def _on_ack(self, message: Msg) -> None:
        future = self._acks.pop(message.subject[len(self._ack_prefix) :], None)
        if future is not None and not future.done():
            future.set_result(message)

    async def _publish(self, pending: list[tuple[int, bytes, str]]) -> None:
        """Publish ``pending`` in order, without waiting between them, then collect the
        acknowledgements; publish what was not acknowledged again until the deadline.

        One coroutine publishes them on one connection, so they reach the server in
        LSN order; the fence holds for each, so a record lost on the way makes every
        later one refused as well, and they are all published again together.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + APPEND_DEADLINE_S
        first_round = True
        while pending:
            if not first_round:
                # Published again only while this writer may still append: a deposed
                # planner's retries must not reach the stream after its lease ran out
                # and another node read the stream's end (spec/05 §14.3).
                refusal = None if self.may_append is None else self.may_append()
                if refusal is not None:
                    raise self._fail(refusal)
                self.republished += len(pending)
            first_round = False
            tokens: list[str] = []
            futures: list[asyncio.Future[Msg]] = []
            for lsn, frame, msg_id in pending:
                token = self._nuid.next().decode()
                future: asyncio.Future[Msg] = loop.create_future()
                self._acks[token] = future
                tokens.append(token)
                futures.append(future)
                headers = {
                    "Nats-Msg-Id": msg_id,
                    "Nats-Expected-Stream": self._physical,
                    "Nats-Expected-Last-Sequence": str(lsn - 1 - self._offset),
                }
                await self._client.publish(
                    self._subject, frame, reply=self._ack_prefix + token, headers=headers
                )
            wait = max(min(ACK_WAIT_S, deadline - loop.time()), 0.0)
            await asyncio.wait(futures, timeout=wait)
            try:
                acknowledged, retry = self._settle(pending, futures)
            finally:
                for token in tokens:
                    self._acks.pop(token, None)
                for future in futures:
                    future.cancel()
            pending = pending[acknowledged:]
            if not pending:
                return
            if loop.time() >= deadline:
                raise self._fail(
                    f"records {pending[0][0]}..{pending[-1][0]} were not acknowledged by a "
                    f"quorum within {APPEND_DEADLINE_S} s"
                )
            if retry:
                await asyncio.sleep(RETRY_PAUSE_S)

    def _settle(
        self, pending: list[tuple[int, bytes, str]], futures: list[asyncio.Future[Msg]]
    ) -> tuple[int, bool]:
        """How many of ``pending``, from the first, the stream acknowledged, and whether
        the next was answered "no leader just now" (so wait before publishing again).
        A refusal by the fence raises LogFenced, any other refusal WalSyncFailed."""
        acknowledged = 0
        for (lsn, _, _), future in zip(pending, futures, strict=True):
            if not future.done():
                return acknowledged, False
            message = future.result()
            if message.headers and message.headers.get("Status") == str(NO_RESPONDERS):
                return acknowledged, True  # the stream has no leader just now
            answer = json.loads(message.data)
            error = answer.get("error")
            if error is not None:
                if error.get("err_code") == WRONG_LAST_SEQUENCE:
                    raise LogFenced(self.location, lsn - 1, None, str(error.get("description")))
                if error.get("code") == NO_RESPONDERS:
                    return acknowledged, True
                raise self._fail(f"the stream refused record {lsn}: {error}")
            seq = int(answer["seq"]) + self._offset
            if seq != lsn:
                raise LogFenced(
                    self.location,
                    lsn - 1,
                    seq - 1,
                    f"record {lsn} was stored as sequence {seq}"
                    + (" (an earlier copy of it)" if answer.get("duplicate") else ""),
                )
            acknowledged += 1
        return acknowledged, False

    def _read(self, lsn: int, end: int) -> Iterator[WalRecord]:
        expected = lsn
        while expected <= end:
            count = min(READ_BATCH, end - expected + 1)
            batch = self._loop.call(
                self._get_range(expected, count), API_DEADLINE_S + CALL_TIMEOUT_S
            )
            for data in batch:
                decoded = decode_record(data, 0, expected_lsn=expected, path=self.location)
                if isinstance(decoded, Incomplete) or decoded[1] != len(data):
                    raise WalCorruption(
                        self.location, 0, expected, "the message is not one whole record"
                    )
                yield decoded[0]
                expected += 1

    async def _get_range(self, first: int, count: int) -> list[bytes]:
        """The payloads of records ``first`` .. ``first + count - 1``, asked of the
        stream's leader all at once (each request sent again while it has none).

        Direct gets of the stream, not a consumer: a consumer is created through
        the cluster's meta leader, which after the loss of a server may take far
        longer to return than the stream's own leader.
        """
        stream, offset = self._physical, self._offset

        async def one(lsn: int) -> bytes:
            sequence = lsn - offset
            try:
                message = await self._retrying(
                    lambda: self._js.get_msg(stream, sequence),
                    API_DEADLINE_S,
                    f"reading record {lsn}",
                )
            except nats.js.errors.NotFoundError:
                raise WalCorruption(
                    self.location, 0, lsn, "the stream no longer holds this record"
                ) from None
            if message.seq != sequence or message.data is None:
                raise WalCorruption(
                    self.location, 0, lsn, f"the stream answered with sequence {message.seq}"
                )
            return message.data

        return list(await asyncio.gather(*(one(first + i) for i in range(count))))

    # --- state -----------------------------------------------------------------------------

    def _fail(self, reason: str) -> WalSyncFailed:
        if self._failure is None:
            self._failure = reason
        return WalSyncFailed(
            f"the log {self.location} failed: {reason}; "
            "it takes no more writes until the server restarts"
        )

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError("the JetStream log is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if self._failure is not None:
            raise WalSyncFailed(
                f"the log {self.location} failed earlier ({self._failure}); "
                "it takes no more writes until the server restarts"
            )


async def _on_client_error(error: Exception) -> None:
    # One line per event: the client's own default logs a traceback for every
    # attempt to reach a server that is down.
    log.warning("JetStream log connection: %s", error)


async def _on_disconnected() -> None:
    log.warning("JetStream log disconnected from its server; reconnecting")


async def _on_reconnected() -> None:
    log.info("JetStream log reconnected")


async def _connect(servers: tuple[str, ...]) -> Client:
    return await nats.connect(
        servers=list(servers),
        error_cb=_on_client_error,
        disconnected_cb=_on_disconnected,
        reconnected_cb=_on_reconnected,
        connect_timeout=int(CONNECT_TIMEOUT_S),
        # The client moves to another server of the cluster when its own goes;
        # an append's own deadline bounds how long a write waits for that.
        allow_reconnect=True,
        max_reconnect_attempts=-1,
        reconnect_time_wait=1,
    )
