"""One key table for a cluster: every node's API keys kept in step through a JetStream
key-value bucket (spec/05-durability.md §14.11).

The bucket :data:`KEYS_BUCKET` holds one key per API key, ``k.`` and the hex of its
id; the value is JSON of the key's record and the hex of its SHA-256 (never the
secret). A deleted key leaves the bucket's delete marker, which stays: a node that
was down when the key was deleted still learns of it. Each node keeps its own
:class:`~brain.server.keys.KeyStore` as the copy AUTH reads, so AUTH never goes to
NATS; :class:`KeySync` brings the two together both ways:

- a key in the bucket and not in the store is stored (audited ``via: cluster``);
- a key deleted in the bucket and still in the store is deleted from it, which ends
  the connections using it (the store's revocation listeners);
- a key in the store that the bucket never held (the first-start key, one made by
  ``brain keys create`` on the data directory, one made before the node joined) is
  published to the bucket, with a compare-and-set on "never written" so a key deleted
  in the cluster is never brought back.

The admin port's key routes go through :meth:`KeySync.create_key` and
:meth:`KeySync.delete_key`: the bucket first, so a key the route answered with is
in the cluster's table, then this node's store.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Coroutine
from typing import Final, Protocol

import nats.errors
import nats.js.errors
from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from brain.engine.replication.buckets import follow_bucket, open_bucket
from brain.engine.replication.jetstream_log import CALL_TIMEOUT_S, OPEN_DEADLINE_S
from brain.engine.replication.kv_cas import CAS_DEADLINE_S, KeyChanged, compare_and_set
from brain.errors import NotFound, StorageFault, Unavailable
from brain.server.keys import KeyRecord, KeyStore, key_digest, mint_key
from brain.wire.opcodes import Permission

__all__ = ["KEYS_BUCKET", "KEY_SYNC_BOUND_S", "KeySync"]

log = logging.getLogger("brain.server")

KEYS_BUCKET: Final = "BRAIN_KEYS"
"""The key-value bucket of the cluster's API keys (one key per API key)."""

KEYS_HISTORY: Final = 1
"""Revisions kept per key: a key is written once and deleted once, and only the last
(the record, or the delete marker) is ever read."""

KEY_PREFIX: Final = "k."
"""What every key's bucket key starts with (then the hex of the key id)."""

LOCAL_POLL_S: Final = 0.5
"""How often a node looks whether its own key store changed behind it (``brain keys
create`` on its data directory while it runs): a read of one counter."""

KEY_SYNC_BOUND_S: Final = 2.0
"""How soon a key created or deleted on one node is in (or gone from) every node's
store on a healthy cluster: the bucket's push in milliseconds, or a poll of the
local store (:data:`LOCAL_POLL_S`), with room for a busy machine. The tests hold the
nodes to it."""

CHANGE_TIMEOUT_S: Final = CAS_DEADLINE_S + CALL_TIMEOUT_S
"""How long the admin port's key change waits for the bucket before it is answered
UNAVAILABLE."""

CHANGE_RETRY_MS: Final = 1000
"""Retry advice with that UNAVAILABLE: the NATS servers are electing or unreachable,
which takes seconds."""


class LinkHandle(Protocol):
    """What the key table needs of the node's cluster link."""

    @property
    def jetstream(self) -> JetStreamContext:
        """The JetStream context."""
        ...


def bucket_key(key_id: bytes) -> str:
    """The bucket key of the API key ``key_id``."""
    return KEY_PREFIX + key_id.hex()


def _encode(digest: bytes, record: KeyRecord) -> bytes:
    return json.dumps({**record.to_json(), "sha256": digest.hex()}, sort_keys=True).encode()


def _decode(value: bytes) -> tuple[bytes, KeyRecord] | None:
    try:
        row = json.loads(value)
        record = KeyRecord(
            bytes.fromhex(row["key_id"]),
            str(row["namespace"]),
            frozenset(Permission(str(p)) for p in row["permissions"]),
            int(row["created_at"]),
        )
        return bytes.fromhex(row["sha256"]), record
    except (ValueError, KeyError, TypeError):
        return None


class KeySync:
    """A node's key store kept in step with the cluster's key table. Build it with
    :meth:`open` on the server's event loop; :meth:`close` there too. The change
    methods are for worker threads (the admin port's)."""

    def __init__(self, link: LinkHandle, kv: KeyValue, keys: KeyStore) -> None:
        """Private: use :meth:`KeySync.open`."""
        self._link = link
        self._kv = kv
        self._keys = keys
        self._loop = asyncio.get_running_loop()
        self._table: dict[bytes, tuple[bytes, KeyRecord] | None] = {}
        """The bucket as the watch delivered it: a key id's digest and record, or None
        once deleted."""
        self._changing: set[bytes] = set()
        """Key ids this node's admin port is changing: the change is applied to the
        store by the route itself (audited as its own), not by the reconcile."""
        self._initial = asyncio.Event()
        self._dirty = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    @classmethod
    async def open(cls, link: LinkHandle, keys: KeyStore, *, replicas: int) -> KeySync:
        """Open (creating when missing) the bucket, load it, bring this node's store and
        the bucket together, and keep them so; StorageFault when the bucket does not
        load within :data:`OPEN_DEADLINE_S`."""
        kv = await open_bucket(
            link.jetstream,
            KEYS_BUCKET,
            history=KEYS_HISTORY,
            replicas=replicas,
            what="the cluster's key table",
        )
        sync = cls(link, kv, keys)
        sync._tasks.append(asyncio.ensure_future(sync._follow()))
        try:
            await asyncio.wait_for(sync._initial.wait(), OPEN_DEADLINE_S)
            await sync._reconcile()
        except BaseException as exc:
            await sync.close()
            if isinstance(exc, TimeoutError):
                raise StorageFault(
                    f"the cluster's key table did not load within {OPEN_DEADLINE_S} s"
                ) from None
            raise
        sync._tasks.append(asyncio.ensure_future(sync._keep_in_step()))
        sync._tasks.append(asyncio.ensure_future(sync._watch_local()))
        return sync

    # --- the admin port's changes (worker threads) ----------------------------------------

    def create_key(
        self, namespace: str, permissions: frozenset[Permission], *, via: str
    ) -> tuple[str, KeyRecord]:
        """Mint a key, store it in the cluster's table, then in this node's store; the
        secret and the record. Unavailable when the bucket did not take it."""
        api_key, record = mint_key(namespace, permissions)
        digest = key_digest(api_key)
        self._changing.add(record.key_id)
        try:
            self._run(self._publish(digest, record), "create the key")
            self._keys.adopt([(digest, record)], via=via)
        finally:
            self._changing.discard(record.key_id)
        self._dirty_soon()
        return api_key, record

    def delete_key(self, key_id: bytes, *, via: str) -> KeyRecord:
        """Delete a key from the cluster's table, then from this node's store (which
        ends the connections using it); NotFound when neither knows it."""
        known = self._table.get(key_id)
        record = self._keys.find(key_id) or (known[1] if known else None)
        if record is None:
            raise NotFound(f"no key with id {key_id.hex()}")
        self._changing.add(key_id)
        try:
            self._run(self._delete(key_id), "delete the key")
            with contextlib.suppress(NotFound):  # not in this node's store yet
                return self._keys.delete_key(key_id, via=via)
            return record
        finally:
            self._changing.discard(key_id)
            self._dirty_soon()

    def _dirty_soon(self) -> None:
        """Have the reconcile look again once a change of this node's admin port is
        done (one it skipped meanwhile is then applied)."""
        self._loop.call_soon_threadsafe(self._dirty.set)

    def _run(self, coro: Coroutine[object, object, object], doing: str) -> None:
        future = asyncio.run_coroutine_threadsafe(
            asyncio.wait_for(coro, CAS_DEADLINE_S), self._loop
        )
        try:
            future.result(CHANGE_TIMEOUT_S)
        except (TimeoutError, nats.errors.Error, nats.js.errors.Error) as exc:
            future.cancel()
            raise Unavailable(
                f"could not {doing} in the cluster's key table: {exc or 'no answer'}",
                retry_after_ms=CHANGE_RETRY_MS,
            ) from None

    async def _delete(self, key_id: bytes) -> None:
        await self._kv.delete(bucket_key(key_id))
        self._table[key_id] = None

    async def _publish(self, digest: bytes, record: KeyRecord) -> bool:
        """Put a key the bucket never held; False when it holds it (or its delete
        marker) already."""
        try:
            await compare_and_set(
                self._link.jetstream,
                KEYS_BUCKET,
                bucket_key(record.key_id),
                _encode(digest, record),
                0,
            )
        except KeyChanged:
            return False
        self._table.setdefault(record.key_id, (digest, record))
        return True

    # --- keeping in step ---------------------------------------------------------------

    async def _follow(self) -> None:
        """Feed :attr:`_table` from a watch of every key (each key's last revision,
        delete markers included)."""

        def loaded() -> None:
            self._initial.set()
            self._dirty.set()

        await follow_bucket(self._kv, self._apply, loaded, what="the cluster's key table")

    def _apply(self, entry: KeyValue.Entry) -> None:
        if not entry.key.startswith(KEY_PREFIX):
            return
        try:
            key_id = bytes.fromhex(entry.key[len(KEY_PREFIX) :])
        except ValueError:
            return
        if entry.operation is not None:  # DEL or PURGE
            self._table[key_id] = None
            self._dirty.set()
            return
        found = _decode(entry.value or b"")
        if found is None or found[1].key_id != key_id:
            log.warning("the key table's entry %s is not readable; ignored", entry.key)
            return
        self._table[key_id] = found
        self._dirty.set()

    async def _keep_in_step(self) -> None:
        """Bring the store and the table together after each change of either."""
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            try:
                await self._reconcile()
            except Exception as exc:  # the store or the bucket failed: try again later
                log.warning("keeping the key store in step with the cluster: %s", exc)
                await asyncio.sleep(LOCAL_POLL_S)
                self._dirty.set()

    async def _watch_local(self) -> None:
        """Mark the store dirty when a write transaction (of this process or another)
        changed it."""
        seen = self._keys.last_change()
        while True:
            await asyncio.sleep(LOCAL_POLL_S)
            now = self._keys.last_change()
            if now != seen:
                seen = now
                self._dirty.set()

    async def _reconcile(self) -> None:
        local = await asyncio.to_thread(self._keys.entries)
        have = {record.key_id for _, record in local}
        table = dict(self._table)
        # Read after the table: a key the table holds because this node's admin port
        # is changing it is still in the set (it leaves it only once the store holds
        # the change, which the store's own checks then find).
        changing = set(self._changing)
        table = {k: v for k, v in table.items() if k not in changing}
        have -= changing
        new = [found for key_id, found in table.items() if found and key_id not in have]
        if new:
            await asyncio.to_thread(self._keys.adopt, new, via="cluster")
        for digest, record in local:
            if record.key_id in changing:
                continue
            if record.key_id not in table:
                await self._publish(digest, record)
            elif table[record.key_id] is None:
                with contextlib.suppress(NotFound):
                    await asyncio.to_thread(self._keys.delete_key, record.key_id, via="cluster")

    async def close(self) -> None:
        """Stop the watch and the polls (the connection stays the link's)."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
