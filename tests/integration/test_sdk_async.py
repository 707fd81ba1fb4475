"""``AsyncBrain`` (spec/01-wire.md §10) against a real server process and an embedded
database: the main flow of the blocking facade, awaited; a transaction block that
commits and one that aborts; many tasks on one facade; and a write replayed with
its ``request_id`` after a lost connection."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Final, TypeVar

import pytest

from brain import AsyncBrain
from brain.engine.database import DatabaseOptions
from brain.errors import InvalidArgument, NotFound
from brain.sdk import AsyncWireTransport, Instant
from brain.sdk.results import Ref
from brain.wire.messages.memory_ops import MemoryGet, MemoryGetOk
from tests.integration.conftest import ServerProcess, start_server

FAST: Final = {"BRAIN_RETRIEVAL__EMBEDDER": "hashing"}
"""The hashing embedder: what is under test is the facade, not the model."""

T = TypeVar("T")
Opener = Callable[[], Awaitable[AsyncBrain]]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = start_server(Path(tmp_path_factory.mktemp("sdk-async")) / "data", env=FAST)
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(params=["wire", "embedded"])
def opener(request: pytest.FixtureRequest, server: ServerProcess, tmp_path: Path) -> Opener:
    """How to open the facade under test; opened inside the test's own event loop."""
    space = f"async-{request.node.name.split('[')[0][-40:].replace('_', '-')}"

    async def open_facade() -> AsyncBrain:
        if request.param == "wire":
            return await AsyncBrain.connect(
                server.host, server.wire_port, api_key=server.credentials["api_key"], space=space
            )
        return await AsyncBrain.open(
            tmp_path / "embedded", space=space, options=DatabaseOptions(embedder="hashing")
        )

    return open_facade


def run(opener: Opener, scenario: Callable[[AsyncBrain], Awaitable[T]]) -> T:
    """Run ``scenario`` on a freshly opened facade in a new event loop, then close it."""

    async def main() -> T:
        async with await opener() as db:
            return await scenario(db)

    return asyncio.run(main())


def test_remember_state_supersede_recall_as_of_and_forget(opener: Opener) -> None:
    async def scenario(db: AsyncBrain) -> None:
        m = await db.remember("Dan: I moved from Paris to Berlin in May.")
        assert not m.deduplicated and isinstance(m.recorded_at, Instant)
        paris = await db.create_statement("Dan", "lives_in", "Paris", valid_from="2020-01-01")
        berlin = await db.supersede_statement(
            paris, "Dan", "lives_in", "Berlin", evidence=[m], valid_from="2024-05-01"
        )
        assert berlin.superseded == paris.id and berlin.version == 2

        now = await db.get_statement(berlin)
        assert now.object_ == "Berlin" and isinstance(now.subject, Ref)
        then = await db.list_statements(
            subject="Dan", predicate="lives_in", as_of=paris.recorded_at
        )
        assert [s.object_ for s in then.statements] == ["Paris"]
        assert [s.version for s in await db.statement_history(paris)] == [1, 2]

        before = await db.recall(
            "where does Dan live", records=["statement"], as_of=paris.recorded_at
        )
        assert paris.id in [hit.id for hit in before.hits]
        assert berlin.id not in [hit.id for hit in before.hits]
        found = await db.recall("where does Dan live", records=["statement"])
        assert berlin.id in [hit.id for hit in found.hits]
        text = await db.render(found)
        assert "Dan lives_in Berlin" in text and "entity:" not in text

        gone = await db.forget(m, hard=True)
        assert gone.id == m.id and gone.statements_tombstoned == 1
        assert (await db.get_memory(m)).text is None
        assert (await db.get_statement(berlin)).tombstoned_at is not None

        answer = await db.call(MemoryGet(id=m.id))
        assert isinstance(answer, MemoryGetOk) and answer.memory.id == m.id
        pong = await db.ping(nonce=7)
        assert pong.nonce == 7

    run(opener, scenario)


def test_entities_relations_and_reviews_awaited(opener: Opener) -> None:
    async def scenario(db: AsyncBrain) -> None:
        ann = await db.create_entity("Ann", type_="person", aliases=["Annie"])
        bob = await db.create_entity("Bob", type_="person")
        assert (await db.resolve_entity("Annie")).resolved == ann.id
        assert (await db.update_entity(bob, name="Robert")).name == "Robert"
        edge = await db.create_relation("knows", ann, bob)
        walked = await db.traverse(ann, depth=1)
        assert {n.id for n in walked.nodes} == {ann.id, bob.id}
        assert [e.id for e in walked.edges] == [edge.id]
        assert (await db.tombstone_relation(edge)).id == edge.id
        merged = await db.merge_entities(ann, bob)
        assert await db.unmerge_entities(merged) > merged.lsn
        assert len((await db.list_entities(type_="person")).entities) == 2
        assert await db.list_reviews() == ()
        assert (await db.explain("Ann")).coverage.space == db.space
        # A name two entities share, settled by naming the one it means.
        twins = [await db.create_entity("Cy Twin") for _ in range(2)]
        said = await db.create_statement("Cy Twin", "likes", "tea")
        (item,) = await db.list_reviews()
        assert await db.decide_review(item, "merge", into=twins[0]) > said.lsn
        assert (await db.get_statement(said)).subject == Ref(kind="entity", id=twins[0].id)

    run(opener, scenario)


def test_a_transaction_block_commits_and_aborts(opener: Opener) -> None:
    async def scenario(db: AsyncBrain) -> None:
        committing = db.transaction()
        async with committing as tx:
            s = await tx.create_statement("Fay", "works_at", "Initech")
            assert (await tx.get_statement(s)).object_ == "Initech"
            with pytest.raises(NotFound):
                await db.get_statement(s)
            # A schema is what every write is checked against: it never joins one.
            with pytest.raises(InvalidArgument, match="SCHEMA_PUT"):
                await tx.put_schema(entity_types=["person"])
        assert committing.committed is not None and len(committing.committed.results) == 1
        assert (await db.get_statement(s)).object_ == "Initech"

        with pytest.raises(RuntimeError, match="changed my mind"):
            async with db.transaction() as tx:
                dropped = await tx.create_statement("Fay", "works_at", "Globex")
                raise RuntimeError("changed my mind")
        with pytest.raises(NotFound):
            await db.get_statement(dropped)

    run(opener, scenario)


def test_many_tasks_share_one_facade(opener: Opener) -> None:
    async def scenario(db: AsyncBrain) -> None:
        written = await asyncio.gather(*(db.remember(f"note {i}") for i in range(20)))
        assert len({w.id for w in written}) == 20
        read = await asyncio.gather(*(db.get_memory(w) for w in written))
        assert [r.text for r in read] == [f"note {i}" for i in range(20)]

    run(opener, scenario)


def test_a_lost_connection_is_made_again_and_the_write_replayed(server: ServerProcess) -> None:
    async def main() -> None:
        key = server.credentials["api_key"]
        async with await AsyncBrain.connect(server.host, server.wire_port, api_key=key) as db:
            request_id = bytes(range(16, 32))
            first = await db.remember(
                "written before the connection was lost", request_id=request_id
            )
            assert isinstance(db.transport, AsyncWireTransport)
            old = db.transport.client
            # Cut the connection under the client, as a network failure would.
            old._writer.transport.abort()
            await asyncio.sleep(0.05)  # let the reader see the end of the stream
            replayed = await db.remember(
                "written before the connection was lost", request_id=request_id
            )
            assert db.transport.client is not old
            assert (replayed.id, replayed.lsn) == (first.id, first.lsn)

    asyncio.run(main())
