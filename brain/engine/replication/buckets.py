"""The cluster's key-value buckets (the planner lease, the node registry, the shard map,
the key table): opening one (the bucket when it exists, else created, retried while
the cluster elects) and following every key of one."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

import nats.errors
import nats.js.errors
from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, StorageType
from nats.js.kv import KeyValue

from brain.engine.replication.jetstream_log import OPEN_DEADLINE_S, RETRY_PAUSE_S
from brain.errors import StorageFault

__all__ = ["follow_bucket", "open_bucket"]

log = logging.getLogger("brain.engine")


async def open_bucket(
    js: JetStreamContext, name: str, *, history: int, replicas: int, what: str
) -> KeyValue:
    """The bucket ``name``, created (file storage) when missing; a failure past
    :data:`OPEN_DEADLINE_S` raises :class:`StorageFault` saying it could not open ``what``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + OPEN_DEADLINE_S
    while True:
        try:
            return await js.key_value(name)
        except nats.js.errors.BucketNotFoundError:
            pass
        except (nats.errors.Error, nats.js.errors.Error) as exc:
            if loop.time() > deadline:
                raise StorageFault(f"cannot open {what}: {exc}") from exc
            await asyncio.sleep(RETRY_PAUSE_S)
            continue
        try:
            config = KeyValueConfig(
                bucket=name, history=history, replicas=replicas, storage=StorageType.FILE
            )
            return await js.create_key_value(config)
        except (nats.errors.Error, nats.js.errors.Error) as exc:
            # Another node created it meanwhile, or the cluster is electing.
            if loop.time() > deadline:
                raise StorageFault(f"cannot open {what}: {exc}") from exc
            await asyncio.sleep(RETRY_PAUSE_S)


async def follow_bucket(
    kv: KeyValue,
    on_entry: Callable[[KeyValue.Entry], None],
    on_loaded: Callable[[], None],
    *,
    what: str,
) -> None:
    """Watch every key of ``kv`` until cancelled: ``on_entry`` for each key's last
    revision (delete markers included), then ``on_loaded`` once they were all
    delivered, then ``on_entry`` for each change. A watch that fails is started again
    after :data:`RETRY_PAUSE_S` (it delivers every key's last revision again)."""
    while True:
        try:
            watcher = await kv.watchall()
        except (nats.errors.Error, nats.js.errors.Error) as exc:
            log.warning("watching %s: %s", what, exc)
            await asyncio.sleep(RETRY_PAUSE_S)
            continue
        try:
            async for entry in watcher:
                if entry is None:  # every key's last revision was delivered
                    on_loaded()
                else:
                    on_entry(entry)
        finally:
            with contextlib.suppress(nats.errors.Error, nats.js.errors.Error):
                await watcher.stop()  # type: ignore[no-untyped-call]
