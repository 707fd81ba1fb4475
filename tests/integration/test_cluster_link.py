"""The cluster link carries requests and answers larger than one NATS message
(spec/05-durability.md §14.7), on three ``nats-server`` with the default 1 MiB
``max_payload``: a request of several MiB reaches the shard's planner whole and its
answer of several MiB comes back whole, as do small ones and errors with their codes;
nobody serving a subject is UNAVAILABLE at once; a node taking too many requests in
parts refuses the next OVERLOADED, and parts that never come are given up within the
upload timeout; an answer over the link's bound, or parts announced out of bounds,
are refused at once rather than waited for."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Final

import nats
import pytest

from bench.peers.nats import NatsCluster, start_cluster
from brain import cbor
from brain.errors import Internal, NotFound, Overloaded, Unavailable
from brain.server import cluster_link, link_parts
from brain.server.cluster_link import ClusterLink, Forwarded, plan_subject

MAX_PAYLOAD: Final = 1024 * 1024
"""NATS's default message limit."""

MIB: Final = 1024 * 1024


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsCluster]:
    with start_cluster(tmp_path_factory.mktemp("nats"), max_payload=MAX_PAYLOAD) as running:
        yield running


def request(payload: bytes) -> Forwarded:
    return Forwarded("request", 0x20, payload, "default", b"k" * 16, ("write",), b"o" * 16)


Handler = Callable[[Forwarded], Awaitable[bytes]]

WARM_UP: Final = b"warm-up"
"""A request :func:`answered` sends; handlers answer it and tests do not count it."""


async def answered(asker: ClusterLink, shard: str) -> None:
    """Wait until the planner of ``shard`` answers ``asker`` at all (a fresh cluster's
    servers may still be settling their routes and move a connection), at most 10 s."""
    deadline = time.monotonic() + 10
    while True:
        try:
            await asker.forward(plan_subject(shard), request(WARM_UP), doing="the planner")
            return
        except Unavailable:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


def linked(
    cluster: NatsCluster,
    shard: str,
    handler: Handler,
    test: Callable[[ClusterLink], Awaitable[None]],
    planners: dict[str, ClusterLink] | None = None,
) -> None:
    """Run ``test`` with a link of node ``b`` forwarding to node ``a``, which plans
    ``shard`` and answers with ``handler`` (once it answers at all); ``planners``,
    if given, receives node ``a``'s link by its name."""

    async def warmed(forwarded: Forwarded) -> bytes:
        return b"" if forwarded.payload == WARM_UP else await handler(forwarded)

    async def run() -> None:
        # Both on one server: the planner's subscription is known there once made (on
        # another server it is after the routes tell it, which a retry covers).
        server = cluster.servers[:1]
        planner = await ClusterLink.connect(server, "a", shard)
        if planners is not None:
            planners["a"] = planner
        asker = await ClusterLink.connect(server, "b", shard)
        try:
            assert asker.max_payload == MAX_PAYLOAD
            await planner.serve_plans(warmed)
            await answered(asker, shard)
            await test(asker)
        finally:
            await asker.close()
            await planner.close()

    asyncio.run(run())


def test_large_requests_and_answers_go_whole_in_parts(cluster: NatsCluster) -> None:
    seen: list[int] = []

    async def handler(forwarded: Forwarded) -> bytes:
        seen.append(len(forwarded.payload))
        if forwarded.payload == b"missing":
            raise NotFound("no such record")
        # An answer larger than the request: the request reversed, twice.
        return forwarded.payload[::-1] * 2

    async def test(asker: ClusterLink) -> None:
        subject = plan_subject("big")
        for size in (10, 900 * 1024, 3 * MIB + 7, 7 * MIB):
            payload = bytes(i % 251 for i in range(size))
            answer = await asker.forward(subject, request(payload), doing="the planner")
            assert answer == payload[::-1] * 2
        with pytest.raises(NotFound, match="no such record"):
            await asker.forward(subject, request(b"missing"), doing="the planner")

    linked(cluster, "big", handler, test)
    assert seen == [10, 900 * 1024, 3 * MIB + 7, 7 * MIB, 7]


def test_nobody_serving_is_unavailable_at_once(cluster: NatsCluster) -> None:
    async def handler(forwarded: Forwarded) -> bytes:
        raise AssertionError("never asked")

    async def test(asker: ClusterLink) -> None:
        for payload in (b"small", bytes(2 * MIB)):
            started = time.monotonic()
            with pytest.raises(Unavailable, match="nobody answers") as refused:
                await asker.forward(plan_subject("nobody"), request(payload), doing="them")
            assert refused.value.retry_after_ms == cluster_link.FORWARD_RETRY_MS
            assert time.monotonic() - started < 5.0

    linked(cluster, "served", handler, test)


def test_an_answer_over_the_bound_is_refused_at_once(cluster: NatsCluster) -> None:
    async def handler(forwarded: Forwarded) -> bytes:
        return bytes(link_parts.MAX_LINK_BYTES + 1)

    async def test(asker: ClusterLink) -> None:
        started = time.monotonic()
        with pytest.raises(Internal, match="over the"):
            await asker.forward(plan_subject("huge"), request(b"x"), doing="the planner")
        assert time.monotonic() - started < 5.0
        with pytest.raises(Unavailable, match="over the"):
            too_big = request(bytes(link_parts.MAX_LINK_BYTES))
            await asker.forward(plan_subject("huge"), too_big, doing="the planner")

    linked(cluster, "huge", handler, test)


def test_uploads_are_bounded_and_given_up_when_their_parts_never_come(
    cluster: NatsCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cluster_link, "UPLOAD_TIMEOUT_S", 2.0)

    async def handler(forwarded: Forwarded) -> bytes:
        return b"ran"

    async def test(asker: ClusterLink) -> None:
        raw = await nats.connect(servers=list(cluster.servers))
        try:
            subject = plan_subject("stalled")
            # Offers whose parts never come hold every upload place.
            inboxes = [raw.new_inbox() for _ in range(cluster_link.MAX_UPLOADS)]
            subs = [await raw.subscribe(inbox) for inbox in inboxes]
            for inbox in inboxes:
                await raw.publish(subject, link_parts.upload(2, 2 * MIB), reply=inbox)
            for sub in subs:
                first = await sub.next_msg(timeout=5)
                assert link_parts.read_send_to(first.data) is not None
            with pytest.raises(Overloaded, match="in parts already"):
                await asker.forward(subject, request(bytes(3 * MIB)), doing="the planner")
            # A small request is still answered meanwhile.
            assert await asker.forward(subject, request(b"small"), doing="it") == b"ran"
            # Each stalled offer is given up and answered, freeing its place.
            for sub in subs:
                given_up = await sub.next_msg(timeout=5)
                assert b"did not receive" in given_up.data
            assert await asker.forward(subject, request(bytes(3 * MIB)), doing="it") == b"ran"
            # Parts announced out of bounds are refused without waiting for them.
            bad = raw.new_inbox()
            sub = await raw.subscribe(bad)
            await raw.publish(subject, cbor.encode({"upload": 9, "bytes": 3}), reply=bad)
            refused = await sub.next_msg(timeout=5)
            assert b"is not a message the link takes" in refused.data
        finally:
            await raw.close()

    linked(cluster, "stalled", handler, test)


def test_a_slow_answer_is_waited_for_and_a_silent_node_given_up(
    cluster: NatsCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cluster_link, "KEEPALIVE_S", 0.1)
    monkeypatch.setattr(cluster_link, "SILENCE_S", 0.6)
    entered = asyncio.Event()
    never = asyncio.Event()

    async def handler(forwarded: Forwarded) -> bytes:
        if forwarded.payload == b"slow":
            await asyncio.sleep(3 * cluster_link.SILENCE_S)  # keepalives meanwhile
            return b"done"
        entered.set()
        await never.wait()  # the node stops before it answers
        return b"never"

    async def test(asker: ClusterLink) -> None:
        subject = plan_subject("silent")
        assert await asker.forward(subject, request(b"slow"), doing="the planner") == b"done"
        # The node that took the request goes without a word (as if killed): the
        # forwarder gives up after SILENCE_S, not after FORWARD_TIMEOUT_S.
        started = time.monotonic()
        asking = asyncio.ensure_future(asker.forward(subject, request(b"hang"), doing="it"))
        await asyncio.wait_for(entered.wait(), 5)
        await planner_of["a"]._client.close()
        with pytest.raises(Unavailable, match="went silent") as refused:
            await asking
        assert refused.value.retry_after_ms == cluster_link.FORWARD_RETRY_MS
        assert time.monotonic() - started < cluster_link.FORWARD_TIMEOUT_S / 4
        never.set()

    planner_of: dict[str, ClusterLink] = {}
    linked(cluster, "silent", handler, test, planners=planner_of)
