"""The planner lease: which node plans the writes of a shard (spec/05-durability.md §14.3).

The lease is one key of the JetStream key-value bucket :data:`LEASE_BUCKET` (history
1, :data:`~brain.engine.replication.options.REPLICAS` replicas): the shard's name,
whose value names the holder (a node id) and the term it renews within. Every
change of it is a compare-and-set on the key's revision: ``create`` takes a key
nobody holds, ``update(last=revision)`` renews or takes over, ``delete(last=...)``
releases; of two nodes racing, one wins and the other sees the new revision.

**Expiry without shared clocks.** Nothing compares one machine's clock with
another's. The holder counts its term from the moment it *sent* its last successful
renewal (monotonic clock), so its lease ends no later than the term after the
stored revision appeared. A node that wants the lease counts the term from the
moment it *first saw* the current revision, and takes over only when that revision
stayed unchanged for a whole term plus :data:`TAKEOVER_MARGIN_S`. So the holder
stops planning before anyone else can start, as long as the two monotonic clocks
run at about the same rate. The fence on the log's publishes
(``Nats-Expected-Last-Sequence``) is the second lock: a deposed planner that has
not noticed yet (its process paused, say) is refused by the stream.

The holder renews every ``term * RENEW_FRACTION`` on the log's client event loop;
a renewal not acknowledged by the end of the term, or refused because another node
took the key, loses the lease: :attr:`PlannerLease.on_lost` is told (the database stops
planning) and :meth:`PlannerLease.refusal` answers why.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable
from typing import Final

import nats.errors
import nats.js.errors
from nats.js.api import KeyValueConfig, StorageType
from nats.js.kv import KeyValue

from brain.engine.replication.jetstream_log import (
    API_ATTEMPT_S,
    CALL_TIMEOUT_S,
    OPEN_DEADLINE_S,
    RETRY_PAUSE_S,
    JetStreamLog,
)
from brain.engine.replication.options import DEFAULT_LEASE_TERM_S
from brain.errors import StorageFault

__all__ = [
    "DEFAULT_LEASE_TERM_S",
    "LEASE_BUCKET",
    "RENEW_FRACTION",
    "TAKEOVER_MARGIN_S",
    "PlannerLease",
]

log = logging.getLogger("brain.engine")

LEASE_BUCKET: Final = "BRAIN_PLANNERS"
"""The key-value bucket of every shard's planner lease (one key per shard)."""

RENEW_FRACTION: Final = 1 / 3
"""The holder renews every third of its term: one renewal lost (an election, a
reconnect) still leaves a second try before the term ends."""

TAKEOVER_MARGIN_S: Final = 1.0
"""What a taker waits beyond a whole term of an unchanged revision: room for the two
nodes' monotonic clocks to drift apart and for the holder's thread to notice its
term ended, so the holder has stopped before the taker starts."""


def _encode(node: str, term_s: float) -> bytes:
    return json.dumps({"node": node, "term_s": term_s}, sort_keys=True).encode()


def _decode(value: bytes | None) -> tuple[str, float]:
    """The holder and term of a lease value; an unreadable value counts as held by
    nobody named, for the default term."""
    try:
        row = json.loads(value or b"")
        return str(row["node"]), float(row["term_s"])
    except (ValueError, KeyError, TypeError):
        return "?", DEFAULT_LEASE_TERM_S


class PlannerLease:
    """One node's view of one shard's planner lease, on a :class:`JetStreamLog`'s
    connection. Build it with :meth:`open`; :meth:`try_take` takes a free or expired
    lease, :meth:`release` gives it back. Called from one thread at a time (the
    database's opener, then its follower thread); the renewal runs on the client's
    event loop."""

    def __init__(self, log_: JetStreamLog, kv: KeyValue, node: str, term_s: float) -> None:
        """Private: use :meth:`PlannerLease.open`."""
        self.node = node
        self.term_s = term_s
        self.key = log_.options.shard
        self._log = log_
        self._kv = kv
        self._revision: int | None = None
        """The key's revision this node wrote last while it holds the lease."""
        self._valid_until = 0.0
        """Monotonic time the held lease ends unless renewed."""
        self._lost: str | None = None
        self._seen: tuple[int, float] | None = None
        """Another holder's revision and the monotonic time this node first saw it."""
        self._renewal: asyncio.Task[None] | None = None
        self.on_lost: Callable[[str], None] | None = None
        """Told why (on the client's event loop; it must not block) when the held
        lease is lost."""
        self.holder: str | None = None
        """The node that held the lease when this node last looked (itself included)."""
        self.renewals = 0
        """Renewals this node made (``brain_planner_lease_renewals_total``)."""
        self.takeovers = 0
        """Times this node took the lease from a holder that let a whole term pass
        (``brain_planner_takeovers_total``); taking a free key is not counted."""

    @classmethod
    def open(cls, log_: JetStreamLog, node: str, term_s: float) -> PlannerLease:
        """Open (creating when missing) the lease bucket on ``log_``'s cluster."""
        if term_s <= 0:
            raise ValueError(f"a lease term must be positive, not {term_s}")
        js = log_.jetstream

        async def bucket() -> KeyValue:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + OPEN_DEADLINE_S
            while True:
                try:
                    return await js.key_value(LEASE_BUCKET)
                except nats.js.errors.BucketNotFoundError:
                    pass
                try:
                    return await js.create_key_value(
                        KeyValueConfig(
                            bucket=LEASE_BUCKET,
                            history=1,
                            replicas=log_.options.replicas,
                            storage=StorageType.FILE,
                        )
                    )
                except (nats.errors.Error, nats.js.errors.Error) as exc:
                    # Another node created it meanwhile, or the cluster is electing.
                    if loop.time() > deadline:
                        raise StorageFault(f"cannot open the lease bucket: {exc}") from exc
                    await asyncio.sleep(RETRY_PAUSE_S)

        kv = log_.run(bucket(), OPEN_DEADLINE_S + CALL_TIMEOUT_S)
        return cls(log_, kv, node, term_s)

    # --- state ------------------------------------------------------------------------------

    @property
    def held(self) -> bool:
        """Whether this node holds the lease now (taken, renewed in time, not lost)."""
        return (
            self._lost is None
            and self._revision is not None
            and (time.monotonic() < self._valid_until)
        )

    def refusal(self) -> str | None:
        """None while this node may plan and append; else why not."""
        if self.held:
            return None
        if self._lost is not None:
            return self._lost
        if self._revision is None:
            return f"this node ({self.node}) does not hold the planner lease of shard {self.key}"
        return f"the planner lease of shard {self.key} ran out before node {self.node} renewed it"

    # --- taking, renewing, releasing ------------------------------------------------------

    def try_take(self) -> str | None:
        """Take the lease if nobody holds it or its holder let a whole term pass
        without renewing (compare-and-set either way); None when this node holds it
        now, else the node that does."""
        if self.held:
            return None
        started = time.monotonic()
        taken, holder = self._log.run(self._take(started), 2 * API_ATTEMPT_S + CALL_TIMEOUT_S)
        self.holder = holder
        if taken is None:
            return holder
        self._revision = taken
        self._valid_until = started + self.term_s
        self._lost = None
        self._seen = None
        self.holder = self.node
        log.info("node %s holds the planner lease of shard %s", self.node, self.key)
        return None

    async def _take(self, started: float) -> tuple[int | None, str]:
        """(the new revision, this node) when taken, else (None, the holder)."""
        value = _encode(self.node, self.term_s)
        try:
            entry = await self._kv.get(self.key)
        except nats.js.errors.KeyNotFoundError:
            try:
                return await self._kv.create(self.key, value), self.node
            except nats.js.errors.KeyWrongLastSequenceError:
                return None, "another node"  # taken just now; the next look names it
        holder, term_s = _decode(entry.value)
        revision = entry.revision or 0
        if self._seen is None or self._seen[0] != revision:
            self._seen = (revision, started)
            return None, holder
        if started - self._seen[1] < max(term_s, self.term_s) + TAKEOVER_MARGIN_S:
            return None, holder
        try:
            taken = await self._kv.update(self.key, value, last=revision)
        except nats.js.errors.KeyWrongLastSequenceError:
            return None, holder  # renewed or taken meanwhile
        self.takeovers += 1
        return taken, self.node

    def keep(self) -> None:
        """Renew the held lease every ``term * RENEW_FRACTION`` until it is lost or
        released; :attr:`on_lost` is told when it is lost."""

        async def start() -> asyncio.Task[None]:
            return asyncio.ensure_future(self._renew_forever())

        self._renewal = self._log.run(start(), CALL_TIMEOUT_S)

    async def _renew_forever(self) -> None:
        interval = self.term_s * RENEW_FRACTION
        while self._lost is None:
            await asyncio.sleep(interval)
            reason = await self._renew()
            if reason is not None:
                self._lose(reason)
                return

    async def _renew(self) -> str | None:
        """Renew once, trying again until the term ends; None when renewed."""
        value = _encode(self.node, self.term_s)
        unanswered = False
        """Whether an earlier attempt got no answer (it may have been stored)."""
        while True:
            started = time.monotonic()
            if started >= self._valid_until:
                return (
                    f"node {self.node} could not renew the planner lease of shard "
                    f"{self.key} before it ran out"
                )
            try:
                revision = await asyncio.wait_for(
                    self._kv.update(self.key, value, last=self._revision),
                    timeout=max(min(API_ATTEMPT_S, self._valid_until - started), 0.01),
                )
            except nats.js.errors.KeyWrongLastSequenceError:
                if unanswered and await self._stored_unanswered(value):
                    continue  # the renewal whose answer was lost is the key's value
                return (
                    f"another node took the planner lease of shard {self.key} from node {self.node}"
                )
            except (TimeoutError, nats.errors.Error, nats.js.errors.Error) as exc:
                unanswered = True
                log.warning("renewing the planner lease of shard %s: %s", self.key, exc)
                await asyncio.sleep(RETRY_PAUSE_S)
                continue
            self._revision = revision
            self._valid_until = started + self.term_s
            self.renewals += 1
            return None

    async def _stored_unanswered(self, value: bytes) -> bool:
        """After a renewal that got no answer: whether the key holds this node's value
        at a later revision, i.e. that renewal was stored; if so, adopt its revision."""
        try:
            entry = await self._kv.get(self.key)
        except (nats.errors.Error, nats.js.errors.Error):
            return False
        if entry.value != value or self._revision is None:
            return False
        if entry.revision is None or entry.revision <= self._revision:
            return False
        self._revision = entry.revision
        return True

    def _lose(self, reason: str) -> None:
        if self._lost is not None:
            return
        self._lost = reason
        log.error("%s; this node stops planning writes", reason)
        if self.on_lost is not None:
            self.on_lost(reason)

    def abandon(self) -> None:
        """Stop renewing without releasing, as a crashed holder would: the lease runs
        out a term after its last renewal (tests, and a database closing because its
        log failed)."""
        self._stop_renewal()

    def release(self) -> None:
        """Stop renewing and, while this node still holds the lease, delete it
        (compare-and-set), so a follower takes over at once rather than after a term."""
        self._stop_renewal()
        if not self.held or self._revision is None:
            return
        revision = self._revision
        self._lost = f"node {self.node} released the planner lease of shard {self.key}"

        async def delete() -> None:
            await self._kv.delete(self.key, last=revision)

        try:
            self._log.run(delete(), API_ATTEMPT_S + CALL_TIMEOUT_S)
        except (TimeoutError, nats.errors.Error, nats.js.errors.Error) as exc:
            log.warning("releasing the planner lease of shard %s: %s", self.key, exc)

    def _stop_renewal(self) -> None:
        renewal = self._renewal
        if renewal is None:
            return
        self._renewal = None

        async def cancel() -> None:
            renewal.cancel()
            await asyncio.gather(renewal, return_exceptions=True)

        # A closed or stuck loop: its own close cancels the renewal.
        with contextlib.suppress(TimeoutError, ValueError):
            self._log.run(cancel(), CALL_TIMEOUT_S)
