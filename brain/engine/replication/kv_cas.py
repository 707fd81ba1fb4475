"""A compare-and-set on one key of a JetStream key-value bucket that holds in a cluster.

A bucket's own ``update(last=revision)`` sends ``Nats-Expected-Last-Subject-Sequence``,
which nats-server checks before it proposes the message to the stream's replicas and
not against the messages already proposed: two updates from the same revision sent at
once may both be stored (nats-server issue 4320, fixed in 2.9.21). The stream-wide
``Nats-Expected-Last-Sequence`` is checked against what was proposed, which is what the
log's fence relies on too (spec/05-durability.md §14.2). So a change here reads the
bucket's last sequence and the key's last message from the stream's leader, then
publishes with both headers: the stream stores it only if nothing at all was stored
in the bucket since the read. A refusal because another key changed meanwhile is read
again and tried again; a change of this key is the caller's conflict.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Final

import nats.errors
import nats.js.errors
from nats.js import JetStreamContext

__all__ = ["CAS_DEADLINE_S", "KeyChanged", "LastValue", "compare_and_set", "read_last"]

CAS_DEADLINE_S: Final = 5.0
"""How long one compare-and-set keeps trying while other keys of the bucket change
under it: the bucket's changes are rare (namespace moves, keys), so a few tries do."""

WRONG_LAST_SEQUENCE: Final = (10071, 10164)
"""JetStream's error codes for a publish whose expected last sequence did not hold."""

RETRY_PAUSE_S: Final = 0.01
"""Pause before reading again after another key's change refused a publish."""

KV_OPERATION: Final = "KV-Operation"
"""The header a deleted or purged key's marker carries."""


class KeyChanged(Exception):
    """The key is not at the revision the change expected."""

    def __init__(self, revision: int) -> None:
        super().__init__(f"the key is at revision {revision}")
        self.revision = revision


@dataclass(frozen=True, slots=True)
class LastValue:
    """A key's last message: its revision (0: never written) and value (None: never
    written, deleted or purged)."""

    revision: int
    value: bytes | None


def _stream(bucket: str) -> str:
    return f"KV_{bucket}"


def _subject(bucket: str, key: str) -> str:
    return f"$KV.{bucket}.{key}"


async def read_last(js: JetStreamContext, bucket: str, key: str) -> tuple[LastValue, int]:
    """The key's last message and the bucket's last sequence, both from the stream's
    leader; the key's revision is at most that sequence."""
    while True:
        info = await js.stream_info(_stream(bucket))
        last = int(info.state.last_seq)
        try:
            message = await js.get_msg(_stream(bucket), subject=_subject(bucket, key))
        except nats.js.errors.NotFoundError:
            return LastValue(0, None), last
        revision = int(message.seq or 0)
        if revision > last:
            continue  # changed between the two reads: read both again
        deleted = message.headers is not None and message.headers.get(KV_OPERATION)
        return LastValue(revision, None if deleted else (message.data or b"")), last


async def compare_and_set(
    js: JetStreamContext,
    bucket: str,
    key: str,
    value: bytes,
    expected: int,
    *,
    delete: bool = False,
) -> int:
    """Store ``value`` under ``key`` (``delete``: a delete marker instead) if the key's
    last revision is ``expected`` (0: never written); its new revision.
    :class:`KeyChanged` when it is not; TimeoutError when other changes kept refusing
    it for :data:`CAS_DEADLINE_S`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CAS_DEADLINE_S
    while True:
        current, last = await read_last(js, bucket, key)
        if current.revision != expected:
            raise KeyChanged(current.revision)
        headers = {
            "Nats-Expected-Last-Sequence": str(last),
            "Nats-Expected-Last-Subject-Sequence": str(expected),
        }
        if delete:
            headers[KV_OPERATION] = "DEL"
        try:
            ack = await js.publish(_subject(bucket, key), b"" if delete else value, headers=headers)
        except nats.js.errors.APIError as exc:
            if exc.err_code not in WRONG_LAST_SEQUENCE:
                raise
        else:
            return int(ack.seq)
        if loop.time() > deadline:
            raise nats.errors.TimeoutError
        await asyncio.sleep(RETRY_PAUSE_S)
