"""The PostgreSQL peer: a real cluster, its settings, and the bitemporal as-of query."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg
import pytest

import bench.peers.postgres as peer
from bench.datagen import Entity, StatementSpec
from bench.pgload import GET, LIST_AS_OF, LIST_LIMIT, SPACE, PgWriter, create_entities, from_ns

ALICE = Entity(0, "Mirela Okafor", "person")
FIRST = StatementSpec(0, "fact", 0, "lives_in", "Lisbon", 10**18, None, None)
SECOND = StatementSpec(1, "fact", 0, "lives_in", "Oslo", 2 * 10**18, None, 0)


async def _write_chain(conninfo: str, entities: list[int]) -> list[tuple[int, int]]:
    writer = PgWriter(conninfo, entities)
    await writer.open()
    try:
        first = await writer.write(FIRST, None, b"r" * 16)
        second = await writer.write(SECOND, first[0], b"s" * 16)
    finally:
        await writer.close()
    return [first, second]


def _objects(conn: psycopg.Connection[tuple[object, ...]], subject: int, as_of: int) -> list[str]:
    rows = conn.execute(
        LIST_AS_OF,
        {
            "space": SPACE,
            "subject": subject,
            "predicate": "lives_in",
            "as_of": from_ns(as_of),
            "limit": LIST_LIMIT,
        },
    ).fetchall()
    return [str(row[5]) for row in rows]


def test_peer_runs_durable_and_answers_as_of() -> None:
    """A supersession hides the old row from now on, and as_of before it restores it."""
    assert (peer.BIN / "postgres").exists(), "apt-get install postgresql-15 (see .ci/run)"
    with peer.postgres_server() as pg:
        assert pg.version.startswith("15.")
        conninfo = pg.create_database("peer_test")
        with psycopg.connect(conninfo, autocommit=True) as conn:
            for name in ("fsync", "synchronous_commit", "full_page_writes"):
                row = conn.execute(f"SHOW {name}").fetchone()
                assert row == ("on",)
        entities = create_entities(conninfo, [ALICE])
        (first_id, first_at), (second_id, second_at) = asyncio.run(_write_chain(conninfo, entities))
        assert second_at > first_at
        with psycopg.connect(conninfo, autocommit=True) as conn:
            assert _objects(conn, entities[0], first_at) == ["Lisbon"]
            assert _objects(conn, entities[0], second_at) == ["Oslo"]
            assert _objects(conn, entities[0], first_at - 1000) == []
            got = conn.execute(GET, {"id": second_id, "space": SPACE}).fetchone()
            assert got is not None
            assert got[12] == first_id and got[13] == first_id and got[14] == 2
        data_dir = pg.data_dir
    assert not data_dir.exists()


def test_missing_binaries_name_the_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Without the package the error says what to install."""
    monkeypatch.setattr(peer, "BIN", tmp_path)
    with (
        pytest.raises(peer.PostgresMissing, match="apt-get install postgresql-15"),
        peer.postgres_server(),
    ):
        pass
