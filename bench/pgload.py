"""Load-generator sessions and a loader for the PostgreSQL peer (:mod:`bench.peers.postgres`).

Each session is one psycopg 3 :class:`~psycopg.AsyncConnection` whose
statements are prepared on first use (``prepare_threshold=0``). Every session
runs in autocommit mode, as psycopg's documentation recommends for single
statements: a write is one INSERT, its own transaction, acknowledged when it
returns (committed, WAL flushed with ``synchronous_commit=on``), as our
STATEMENT_CREATE is acknowledged when its WAL record is durable; no BEGIN and
COMMIT round trips around it. Reads are single SELECTs, with no transaction
block kept open between them.

:class:`PgWriter` writes a generated world (entities, statements and
supersessions) for the point suite; a supersession is an UPDATE of the old
row's ``record_invalidated_at`` and the INSERT of its successor, in one
transaction, at one record instant.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any, Final

import psycopg

from bench.datagen import Entity, StatementSpec

__all__ = [
    "GET",
    "INSERT",
    "LIST_AS_OF",
    "LIST_LIMIT",
    "SPACE",
    "PgGetSession",
    "PgInsertSession",
    "PgListSession",
    "PgSession",
    "PgWriter",
    "create_entities",
    "from_ns",
    "pg_get",
    "pg_insert",
    "pg_list_as_of",
    "to_ns",
]

LIST_LIMIT: Final = 100
"""Rows per list query: our STATEMENT_LIST's default page (``DEFAULT_LIST_LIMIT``)."""

SPACE: Final = "default"
"""The one space the suites write to, as our server's default space."""

_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

_COLUMNS: Final = (
    "id, space, subject, predicate, kind, object, confidence, valid_from, valid_to, event_at, "
    "recorded_at, record_invalidated_at, supersedes, chain_root, version"
)

INSERT: Final = """
INSERT INTO statements (id, chain_root, space, subject, predicate, kind, object,
                        valid_from, event_at, request_id)
SELECT n.id, n.id, %(space)s, %(subject)s, %(predicate)s, %(kind)s, %(object)s,
       %(valid_from)s, %(event_at)s, %(request_id)s
FROM (SELECT nextval('statement_ids') AS id) AS n
RETURNING id, recorded_at
"""
"""A new chain's first statement; it is its own ``chain_root``."""

INVALIDATE: Final = """
UPDATE statements SET record_invalidated_at = clock_timestamp()
WHERE id = %(old)s AND space = %(space)s AND record_invalidated_at IS NULL
RETURNING chain_root, version, record_invalidated_at
"""
"""The first half of a supersession: the old statement stops being believed now."""

INSERT_SUCCESSOR: Final = """
INSERT INTO statements (id, chain_root, version, supersedes, recorded_at, space, subject,
                        predicate, kind, object, valid_from, event_at, request_id)
VALUES (nextval('statement_ids'), %(chain_root)s, %(version)s, %(old)s, %(recorded_at)s,
        %(space)s, %(subject)s, %(predicate)s, %(kind)s, %(object)s, %(valid_from)s,
        %(event_at)s, %(request_id)s)
RETURNING id, recorded_at
"""
"""The second half: the successor, recorded at the instant the old one was invalidated."""

GET: Final = f"SELECT {_COLUMNS} FROM statements WHERE id = %(id)s AND space = %(space)s"
"""STATEMENT_GET's counterpart."""

LIST_AS_OF: Final = f"""
SELECT {_COLUMNS} FROM statements
WHERE space = %(space)s AND subject = %(subject)s AND predicate = %(predicate)s
  AND recorded_at <= %(as_of)s
  AND (record_invalidated_at IS NULL OR record_invalidated_at > %(as_of)s)
ORDER BY recorded_at, id
LIMIT %(limit)s
"""
"""STATEMENT_LIST by subject and predicate ``as_of`` a record instant: the bitemporal
predicate of spec/04-retrieval.md §5 step 6, in record order, one page."""


def from_ns(nanos: int | None) -> dt.datetime | None:
    """A nanosecond Unix time as a UTC ``timestamptz`` value (microseconds kept)."""
    if nanos is None:
        return None
    return _EPOCH + dt.timedelta(microseconds=nanos // 1000)


def to_ns(value: dt.datetime | None) -> int | None:
    """A ``timestamptz`` value as nanoseconds since the Unix epoch."""
    if value is None:
        return None
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 10**9 + delta.microseconds * 1000


class PgSession:
    """One connection to the peer, in autocommit mode; subclasses say what one step sends."""

    def __init__(self, params: Mapping[str, Any], session_no: int) -> None:
        self.params = params
        self.session_no = session_no
        self._conn: psycopg.AsyncConnection[Any] | None = None

    @property
    def conn(self) -> psycopg.AsyncConnection[Any]:
        """The open connection."""
        assert self._conn is not None, "open() first"
        return self._conn

    async def open(self) -> None:
        """Connect; every statement is prepared server-side on its first execution."""
        self._conn = await psycopg.AsyncConnection.connect(
            self.params["conninfo"], autocommit=True, prepare_threshold=0
        )

    async def step(self, n: int) -> None:
        """One request; subclasses define it."""
        raise NotImplementedError

    async def close(self) -> None:
        """Close the connection."""
        if self._conn is not None:
            await self._conn.close()

    def request_id(self, n: int) -> bytes:
        """A request id unique to this session and step, as :class:`BrainSession`'s."""
        run = int(self.params.get("run", 0))
        return run.to_bytes(4, "big") + self.session_no.to_bytes(4, "big") + n.to_bytes(8, "big")

    def pick(self, n: int, count: int) -> int:
        """The item of a ``count``-long list step ``n`` asks for (the same walk as ours)."""
        return (self.session_no * 7919 + n * 104_729) % count


class PgInsertSession(PgSession):
    """One INSERT, its own transaction: a fact about one of ``params["entities"]``."""

    async def step(self, n: int) -> None:
        entities = self.params["entities"]
        subject = entities[(self.session_no * 7919 + n) % len(entities)]
        async with self.conn.cursor() as cur:
            await cur.execute(
                INSERT,
                {
                    "space": SPACE,
                    "subject": subject,
                    "predicate": "works_on",
                    "kind": "fact",
                    "object": f"task {self.session_no}-{n}",
                    "valid_from": None,
                    "event_at": None,
                    "request_id": self.request_id(n),
                },
            )
            await cur.fetchone()


class PgGetSession(PgSession):
    """One statement by id, from ``params["ids"]``."""

    async def step(self, n: int) -> None:
        ids = self.params["ids"]
        async with self.conn.cursor() as cur:
            await cur.execute(GET, {"id": ids[self.pick(n, len(ids))], "space": SPACE})
            if await cur.fetchone() is None:
                raise LookupError("statement not found")


class PgListSession(PgSession):
    """One page of a subject's statements of a predicate as of ``params["as_of"]`` (ns)."""

    async def step(self, n: int) -> None:
        pairs = self.params["pairs"]
        subject, predicate = pairs[self.pick(n, len(pairs))]
        async with self.conn.cursor() as cur:
            await cur.execute(
                LIST_AS_OF,
                {
                    "space": SPACE,
                    "subject": subject,
                    "predicate": predicate,
                    "as_of": from_ns(self.params["as_of"]),
                    "limit": LIST_LIMIT,
                },
            )
            await cur.fetchall()


def pg_insert(params: Mapping[str, Any], session_no: int) -> PgInsertSession:
    """Factory for :mod:`bench.loadgen`: ``"bench.pgload:pg_insert"``."""
    return PgInsertSession(params, session_no)


def pg_get(params: Mapping[str, Any], session_no: int) -> PgGetSession:
    """Factory for :mod:`bench.loadgen`: ``"bench.pgload:pg_get"``."""
    return PgGetSession(params, session_no)


def pg_list_as_of(params: Mapping[str, Any], session_no: int) -> PgListSession:
    """Factory for :mod:`bench.loadgen`: ``"bench.pgload:pg_list_as_of"``."""
    return PgListSession(params, session_no)


def create_entities(conninfo: str, entities: Sequence[Entity]) -> list[int]:
    """Insert the world's entities (one transaction); their ids, in the world's order."""
    ids: list[int] = []
    with psycopg.connect(conninfo) as conn, conn.cursor() as cur:
        for entity in entities:
            cur.execute(
                "INSERT INTO entities (space, name, type) VALUES (%s, %s, %s) RETURNING id",
                (SPACE, entity.name, entity.type_),
            )
            row = cur.fetchone()
            assert row is not None
            ids.append(int(row[0]))
    return ids


class PgWriter:
    """Writes one statement at a time on its own connection (a loader's worker)."""

    def __init__(self, conninfo: str, entity_ids: Sequence[int]) -> None:
        self.conninfo = conninfo
        self.entity_ids = entity_ids
        self._conn: psycopg.AsyncConnection[Any] | None = None

    async def open(self) -> None:
        """Connect (autocommit off: each write is one explicit transaction)."""
        self._conn = await psycopg.AsyncConnection.connect(self.conninfo, prepare_threshold=0)

    async def close(self) -> None:
        """Close the connection."""
        if self._conn is not None:
            await self._conn.close()

    async def write(
        self, spec: StatementSpec, old: int | None, request_id: bytes
    ) -> tuple[int, int]:
        """Create ``spec`` (superseding ``old`` when given); its id and record time (ns)."""
        assert self._conn is not None, "open() first"
        values: dict[str, object] = {
            "space": SPACE,
            "subject": self.entity_ids[spec.subject],
            "predicate": spec.predicate,
            "kind": spec.kind,
            "object": spec.object_,
            "valid_from": from_ns(spec.valid_from),
            "event_at": from_ns(spec.event_at),
            "request_id": request_id,
        }
        async with self._conn.cursor() as cur:
            if old is None:
                await cur.execute(INSERT, values)
            else:
                await cur.execute(INVALIDATE, {"old": old, "space": SPACE})
                invalidated = await cur.fetchone()
                if invalidated is None:
                    raise LookupError(f"statement {old} is not current")
                root, version, at = invalidated
                await cur.execute(
                    INSERT_SUCCESSOR,
                    {**values, "old": old, "chain_root": root, "version": version + 1,
                     "recorded_at": at},
                )  # fmt: skip
            row = await cur.fetchone()
        await self._conn.commit()
        assert row is not None
        recorded = to_ns(row[1])
        assert recorded is not None
        return int(row[0]), recorded
