"""The shard map: which shard serves each namespace (spec/05-durability.md §14.7).

The map is the JetStream key-value bucket :data:`SHARD_MAP_BUCKET` (file storage,
the log's replicas, :data:`SHARD_MAP_HISTORY` revisions a key). A KV key may hold only
``[-/_=.a-zA-Z0-9]``, so a namespace's key is ``ns.`` and the hex of its UTF-8
(:func:`namespace_key`). The value is JSON ``{"shard", "state", "epoch"}``: the shard,
``active`` or ``frozen`` (a move in progress holds the namespace's writes), and an
epoch that every change raises. Every change is a compare-and-set on the key's
revision, so of two nodes racing one wins and the other is told
(:class:`~brain.errors.Conflict`); :mod:`~brain.engine.replication.kv_cas` says why
that is not the bucket's own ``update``.

A namespace the map does not name lives on the cluster's default shard
(``cluster.default_shard``). Lookups on the request path read a local cache that a
watch of the bucket keeps current (:data:`CACHE_BOUND_S`); they never go to NATS.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Final, Literal, Protocol, TypeVar

import nats.errors
import nats.js.errors
from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from brain.engine.replication.buckets import follow_bucket, open_bucket
from brain.engine.replication.jetstream_log import (
    API_ATTEMPT_S,
    CALL_TIMEOUT_S,
    OPEN_DEADLINE_S,
)
from brain.engine.replication.kv_cas import CAS_DEADLINE_S, KeyChanged, compare_and_set, read_last
from brain.errors import Conflict, InvalidArgument, StorageFault

__all__ = [
    "CACHE_BOUND_S",
    "SHARD_MAP_BUCKET",
    "SHARD_MAP_HISTORY",
    "Placement",
    "ShardMap",
    "namespace_key",
]

log = logging.getLogger("brain.engine")

_T = TypeVar("_T")

SHARD_MAP_BUCKET: Final = "BRAIN_SHARD_MAP"
"""The key-value bucket of the shard map (one key per mapped namespace)."""

SHARD_MAP_HISTORY: Final = 8
"""Revisions kept per key: a compare-and-set needs only the last, and a few more let
an operator see a namespace's recent moves (JetStream allows at most 64)."""

CACHE_BOUND_S: Final = 1.0
"""How soon after a change is stored every node's cache holds it, on a healthy
cluster: the watch's push arrives in milliseconds; the bound leaves room for a busy
machine. The tests hold the map to it."""

KEY_PREFIX: Final = "ns."
"""What every namespace's key starts with (then the hex of its UTF-8)."""

MAX_SHARD_NAME: Final = 64
"""A shard name's longest form: what a stream name and a subject token both hold."""

State = Literal["active", "frozen"]


def namespace_key(namespace: str) -> str:
    """The KV key of ``namespace``: ``ns.`` + the hex of its UTF-8 (KV keys allow only
    ``[-/_=.a-zA-Z0-9]``, and this is readable back)."""
    return KEY_PREFIX + namespace.encode("utf-8").hex()


def namespace_of(key: str) -> str | None:
    """The namespace a KV key names; None for a key that is not one of the map's."""
    if not key.startswith(KEY_PREFIX):
        return None
    try:
        return bytes.fromhex(key[len(KEY_PREFIX) :]).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return None


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a namespace lives: its shard, whether it takes writes, the map's epoch of
    it, and the revision of its key (0: not in the map, on the default shard)."""

    shard: str
    state: State
    epoch: int
    revision: int

    @property
    def frozen(self) -> bool:
        """True while a move holds the namespace's writes."""
        return self.state == "frozen"


def _encode(shard: str, state: State, epoch: int) -> bytes:
    return json.dumps({"shard": shard, "state": state, "epoch": epoch}, sort_keys=True).encode()


def _decode(value: bytes | None, revision: int) -> Placement | None:
    try:
        row = json.loads(value or b"")
        shard, state, epoch = str(row["shard"]), row["state"], int(row["epoch"])
    except (ValueError, KeyError, TypeError):
        return None
    if state not in ("active", "frozen"):
        return None
    return Placement(shard, state, epoch, revision)


def check_shard(shard: str) -> str:
    """``shard`` if it is a valid shard name, else InvalidArgument."""
    if not (
        0 < len(shard) <= MAX_SHARD_NAME
        and all(c.isascii() and (c.isalnum() or c in "_-") for c in shard)
    ):
        raise InvalidArgument(f"shard name {shard!r} is not 1-64 of A-Z a-z 0-9 _ -")
    return shard


class LogHandle(Protocol):
    """What the map needs of a :class:`~brain.engine.replication.jetstream_log.JetStreamLog`:
    its connection's JetStream context and event loop."""

    @property
    def jetstream(self) -> JetStreamContext:
        """The JetStream context."""
        ...

    def run(self, coro: Coroutine[object, object, _T], timeout: float) -> _T:
        """Run ``coro`` on the client's loop, waiting at most ``timeout``."""
        ...


class ShardMap:
    """One node's view of the shard map, on a log's connection. Build it with
    :meth:`open`; :meth:`close` stops the watch. Lookups (:meth:`shard_of`) read the
    cache and are safe from any thread; changes go to the bucket and wait for it."""

    def __init__(self, handle: LogHandle, kv: KeyValue, default_shard: str) -> None:
        """Private: use :meth:`ShardMap.open`."""
        self.default_shard = default_shard
        self._handle = handle
        self._kv = kv
        self._cache: dict[str, Placement] = {}
        self._seen = 0
        """The highest revision the watch delivered (or this node wrote)."""
        self._current = threading.Condition()
        self._initial = threading.Event()
        self._watch: asyncio.Task[None] | None = None
        self.on_change: Callable[[str, Placement | None], None] | None = None
        """Told ``(namespace, placement)`` on the client's loop (it must not block)
        after each change the watch delivers; None as placement when a key was
        deleted (the namespace is back on the default shard)."""

    @classmethod
    def open(cls, handle: LogHandle, default_shard: str, *, replicas: int) -> ShardMap:
        """Open (creating when missing) the bucket and start the watch; return once the
        cache holds the map as it was (within :data:`OPEN_DEADLINE_S`)."""
        check_shard(default_shard)
        js = handle.jetstream

        async def bucket() -> KeyValue:
            return await open_bucket(
                js,
                SHARD_MAP_BUCKET,
                history=SHARD_MAP_HISTORY,
                replicas=replicas,
                what="the shard map",
            )

        kv = handle.run(bucket(), OPEN_DEADLINE_S + CALL_TIMEOUT_S)
        opened = cls(handle, kv, default_shard)

        async def start() -> asyncio.Task[None]:
            return asyncio.ensure_future(opened._follow())

        opened._watch = handle.run(start(), CALL_TIMEOUT_S)
        if not opened._initial.wait(OPEN_DEADLINE_S):
            opened.close()
            raise StorageFault(f"the shard map did not load within {OPEN_DEADLINE_S} s")
        return opened

    # --- lookups -----------------------------------------------------------------------

    def shard_of(self, namespace: str) -> Placement:
        """Where ``namespace`` lives, from the cache: the default shard (revision 0)
        when the map does not name it."""
        found = self._cache.get(namespace)
        if found is not None:
            return found
        return Placement(self.default_shard, "active", 0, 0)

    def entries(self) -> dict[str, Placement]:
        """Every mapped namespace, from the cache."""
        return dict(self._cache)

    def wait_current(self, timeout: float = CACHE_BOUND_S) -> bool:
        """Wait until the cache holds every change the bucket held when called; False
        when ``timeout`` passed first (or the bucket did not answer)."""
        try:
            last = self._handle.run(self._last_revision(), API_ATTEMPT_S + CALL_TIMEOUT_S)
        except (TimeoutError, nats.errors.Error, nats.js.errors.Error):
            return False
        deadline = time.monotonic() + timeout
        with self._current:
            while self._seen < last:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._current.wait(left)
        return True

    async def _last_revision(self) -> int:
        status = await asyncio.wait_for(self._kv.status(), API_ATTEMPT_S)
        return int(status.stream_info.state.last_seq)

    # --- changes -------------------------------------------------------------------------

    def assign(self, namespace: str, shard: str) -> Placement:
        """Put ``namespace`` on ``shard`` (active), whether mapped or not: the next epoch,
        compare-and-set on the revision read (Conflict when another change came
        between)."""
        check_shard(shard)
        return self._change(namespace, lambda old: (shard, "active"), None)

    def freeze(self, namespace: str) -> Placement:
        """Mark ``namespace`` frozen on its shard (a move is about to cut it over): the
        next epoch, compare-and-set as :meth:`assign`."""
        return self._change(namespace, lambda old: (old.shard, "frozen"), None)

    def thaw(self, namespace: str, expected_revision: int) -> Placement:
        """Mark ``namespace`` active again on its shard (a move given up) if its key is
        still at ``expected_revision``; Conflict otherwise."""
        return self._change(namespace, lambda old: (old.shard, "active"), expected_revision)

    def cut_over(self, namespace: str, to_shard: str, expected_revision: int) -> Placement:
        """Put ``namespace`` on ``to_shard`` (active) if its key is still at
        ``expected_revision`` (0: not in the map yet); Conflict otherwise. Of two
        cut-overs from the same revision, one wins."""
        check_shard(to_shard)
        return self._change(namespace, lambda old: (to_shard, "active"), expected_revision)

    def _change(
        self,
        namespace: str,
        new: Callable[[Placement], tuple[str, State]],
        expected: int | None,
    ) -> Placement:
        key = namespace_key(namespace)

        async def attempt() -> Placement:
            js = self._handle.jetstream
            found, _ = await read_last(js, SHARD_MAP_BUCKET, key)
            revision = found.revision
            old = None if found.value is None else _decode(found.value, revision)
            # Never written, or unreadable: the namespace is on the default shard.
            current = old or Placement(self.default_shard, "active", 0, 0)
            if expected is not None and revision != expected:
                raise Conflict(
                    f"the shard map entry of namespace {namespace!r} is at revision "
                    f"{revision}, not {expected}: another change came first"
                )
            shard, state = new(current)
            epoch = current.epoch + 1
            try:
                stored = await compare_and_set(
                    js, SHARD_MAP_BUCKET, key, _encode(shard, state, epoch), revision
                )
            except KeyChanged:
                raise Conflict(
                    f"the shard map entry of namespace {namespace!r} changed while "
                    "this change was made"
                ) from None
            return Placement(shard, state, epoch, stored)

        placement = self._handle.run(
            asyncio.wait_for(attempt(), CAS_DEADLINE_S + API_ATTEMPT_S),
            CAS_DEADLINE_S + API_ATTEMPT_S + CALL_TIMEOUT_S,
        )
        self._store(namespace, placement)
        return placement

    # --- the watch ---------------------------------------------------------------------

    def _store(self, namespace: str, placement: Placement | None, revision: int = 0) -> None:
        with self._current:
            known = self._cache.get(namespace)
            if placement is None:
                if known is None or known.revision <= revision:
                    self._cache.pop(namespace, None)
            elif known is None or known.revision < placement.revision:
                self._cache[namespace] = placement
            self._seen = max(self._seen, revision, placement.revision if placement else 0)
            self._current.notify_all()

    async def _follow(self) -> None:
        """Feed the cache from a watch of every key, from each key's last revision on."""
        await follow_bucket(self._kv, self._apply, self._initial.set, what="the shard map")

    def _apply(self, entry: KeyValue.Entry) -> None:
        namespace = namespace_of(entry.key)
        revision = entry.revision or 0
        if namespace is None:
            return
        placement: Placement | None = None
        if entry.operation is None:
            placement = _decode(entry.value, revision)
            if placement is None:
                log.warning("the shard map entry %s is not readable; ignored", entry.key)
                return
        self._store(namespace, placement, revision)
        if self._initial.is_set() and self.on_change is not None:
            self.on_change(namespace, placement)

    def close(self) -> None:
        """Stop the watch (the connection stays the log's)."""
        watch = self._watch
        if watch is None:
            return
        self._watch = None

        async def cancel() -> None:
            watch.cancel()
            await asyncio.gather(watch, return_exceptions=True)

        with contextlib.suppress(TimeoutError, ValueError):
            self._handle.run(cancel(), CALL_TIMEOUT_S)
