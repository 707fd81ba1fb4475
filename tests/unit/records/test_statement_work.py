"""How many rows a statement write and a statement read decode, counted where they are
loaded: a create reads a subject's statements only when a rule needs them, an
as-of LIST reads no row recorded after ``as_of``, and a read works out what a
subject answers as once, however many rows show it (spec/02-data-model.md §5.1, §5.4).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import Final

import pytest

from brain.engine.database import Database
from brain.engine.records import entity_rows, schema, statements
from brain.wire.messages.entity_ops import EntityCreate, EntityCreateOk
from brain.wire.messages.recall_ops import Recall, RecallOk
from brain.wire.messages.schema_ops import PredicateDecl, SchemaPut
from brain.wire.messages.statement_ops import (
    StatementCreate,
    StatementCreateOk,
    StatementList,
    StatementListOk,
)
from brain.wire.messages.values import EntityRef, EntityValue, TextValue, Value
from brain.wire.opcodes import Opcode
from tests.unit.common import NS, rid

ROWS: Final = 30
"""Statements of the subject and predicate each test writes before it counts."""


class Loads:
    """Counts the calls of a function of a module, by its first argument's key (or all)."""

    def __init__(self) -> None:
        self.count: Counter[object] = Counter()

    def wrap(
        self, monkeypatch: pytest.MonkeyPatch, module: object, name: str, key: Callable[..., object]
    ) -> None:
        original = getattr(module, name)

        def counted(*args: object, **kwargs: object) -> object:
            self.count[key(*args, **kwargs)] += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)


def _entity(db: Database, name: str) -> bytes:
    made = db.execute(NS, Opcode.ENTITY_CREATE, EntityCreate(request_id=rid(), name=name))
    assert isinstance(made, EntityCreateOk)
    return made.entity_id


def _create(db: Database, subject: bytes, predicate: str, value: Value) -> StatementCreateOk:
    answer = db.execute(
        NS,
        Opcode.STATEMENT_CREATE,
        StatementCreate(
            request_id=rid(),
            kind="fact",
            subject=EntityRef(entity=subject),
            predicate=predicate,
            object_=value,
        ),
    )
    assert isinstance(answer, StatementCreateOk)
    return answer


def _list(db: Database, **kw: object) -> StatementListOk:
    answer = db.execute(NS, Opcode.STATEMENT_LIST, StatementList(**kw))  # type: ignore[arg-type]
    assert isinstance(answer, StatementListOk)
    return answer


@pytest.fixture
def statement_loads(monkeypatch: pytest.MonkeyPatch) -> Iterator[Loads]:
    """Every statement row the engine loads (``get_loaded``, which writes and reads
    both call), counted."""
    loads = Loads()
    loads.wrap(monkeypatch, statements, "load_versioned", lambda *a, **kw: "statement")
    yield loads


def _settled(db: Database, loads: Loads) -> None:
    """Let the indexer finish what the writes queued (it reads rows too), then count
    from zero."""
    assert db.wait_indexed()
    loads.count.clear()


@pytest.mark.parametrize(
    ("declared", "loaded"),
    [(None, 0), ("fact", ROWS), ("stateful", 1)],
)
def test_a_create_reads_the_subjects_statements_only_for_a_rule(
    db: Database, statement_loads: Loads, declared: str | None, loaded: int
) -> None:
    """An undeclared predicate reads none of the current values; a declared fact reads
    them all (the contradiction review compares them); a stateful one its one value."""
    if declared is not None:
        decl = PredicateDecl(name="p", kind="fact", stateful=declared == "stateful")
        db.execute(NS, Opcode.SCHEMA_PUT, SchemaPut(predicates=(decl,)))
    ada = _entity(db, "Ada")
    for _ in range(ROWS):
        _create(db, ada, "p", TextValue(text="same"))
    _settled(db, statement_loads)
    _create(db, ada, "p", TextValue(text="same"))
    assert statement_loads.count["statement"] == loaded


def test_an_as_of_list_reads_no_row_recorded_later(db: Database, statement_loads: Loads) -> None:
    ada = _entity(db, "Ada")
    written = [_create(db, ada, "p" if i % 2 else "q", TextValue(text=str(i))) for i in range(ROWS)]
    as_of = written[4].recorded_at
    for predicate, expected in (("p", [1, 3]), ("q", [0, 2, 4]), (None, [0, 1, 2, 3, 4])):
        _settled(db, statement_loads)
        answer = _list(db, subject=EntityRef(entity=ada), predicate=predicate, as_of=as_of)
        assert [s.id for s in answer.statements] == [written[i].statement_id for i in expected]
        assert statement_loads.count["statement"] == len(expected), predicate
    # Without a subject, the record-order walk stops there too.
    _settled(db, statement_loads)
    assert len(_list(db, as_of=as_of).statements) == 5
    assert statement_loads.count["statement"] == 5


def test_an_as_of_list_from_a_cursor_reads_from_the_cursor(
    db: Database, statement_loads: Loads
) -> None:
    ada = _entity(db, "Ada")
    written = [_create(db, ada, "p", TextValue(text=str(i))) for i in range(ROWS)]
    as_of = written[9].recorded_at
    ref = EntityRef(entity=ada)
    first = _list(db, subject=ref, predicate="p", as_of=as_of, limit=8)
    assert [s.id for s in first.statements] == [w.statement_id for w in written[:8]]
    assert first.cursor is not None
    for predicate in ("p", None):
        _settled(db, statement_loads)
        rest = _list(
            db, subject=ref, predicate=predicate, as_of=as_of, limit=4, cursor=first.cursor
        )
        assert [s.id for s in rest.statements] == [w.statement_id for w in written[8:10]]
        assert rest.cursor is None
        # The two rows of the page: none before the cursor, none after as_of.
        assert statement_loads.count["statement"] == 2, predicate


def test_a_list_works_out_each_entity_once(db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every row shows the subject and an entity object as what they answer as; each
    entity's row is decoded once for the whole page, not once per row."""
    ada, bob = _entity(db, "Ada"), _entity(db, "Bob")
    for _ in range(ROWS):
        _create(db, ada, "knows", EntityValue(entity=bob))
    assert db.wait_indexed()
    rows = Loads()
    rows.wrap(
        monkeypatch, entity_rows, "entity_row", lambda store, txn, scope, entity_id, **_: entity_id
    )
    answer = _list(db, subject=EntityRef(entity=ada))
    assert len(answer.statements) == ROWS
    assert {s.subject for s in answer.statements} == {EntityRef(entity=ada)}
    assert {s.object_ for s in answer.statements} == {EntityValue(entity=bob)}
    # Ada: once to resolve the request's ref, once for the rows; Bob: once.
    assert rows.count == Counter({ada: 2, bob: 1})


def test_the_schema_is_decoded_once_per_version(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every write of a statement reads the schema in force; its row is decoded once,
    and a put (a new version) is seen by the next write."""
    decoded = Loads()
    decoded.wrap(monkeypatch, schema, "_decode", lambda raw, source: source)
    db.execute(
        NS, Opcode.SCHEMA_PUT, SchemaPut(predicates=(PredicateDecl(name="q", stateful=True),))
    )
    ada = _entity(db, "Ada")
    for _ in range(ROWS):
        _create(db, ada, "p", TextValue(text="many"))
    assert decoded.count == Counter({schema.FROM_NAMESPACE: 1})
    assert len(_list(db, subject=EntityRef(entity=ada), predicate="p").statements) == ROWS
    db.execute(
        NS, Opcode.SCHEMA_PUT, SchemaPut(predicates=(PredicateDecl(name="p", stateful=True),))
    )
    replacing = _create(db, ada, "p", TextValue(text="one"))
    assert replacing.superseded is not None
    assert [s.id for s in _list(db, subject=EntityRef(entity=ada), predicate="p").statements] == [
        replacing.statement_id
    ]
    # The put reads the row it replaces (twice: what stands, and what it changes); the
    # write after it decodes the new row once.
    assert decoded.count == Counter({schema.FROM_NAMESPACE: 4})


def test_a_recall_shows_each_entity_once(db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """RECALL shows each statement hit's subject as the statement reads do: however many
    hits name an entity, its row is decoded as often as for one hit."""
    ada = _entity(db, "Ada")
    for i in range(ROWS):
        _create(db, ada, "likes", TextValue(text=f"tea {i}"))
    assert db.wait_indexed()
    rows = Loads()
    rows.wrap(
        monkeypatch, entity_rows, "entity_row", lambda store, txn, scope, entity_id, **_: entity_id
    )
    decoded = []
    for top_k in (2, 20):
        rows.count.clear()
        answer = db.execute(NS, Opcode.RECALL, Recall(cue="what does Ada like: tea", top_k=top_k))
        assert isinstance(answer, RecallOk) and len(answer.hits) == top_k
        assert {h.statement.subject for h in answer.hits if h.statement} == {EntityRef(entity=ada)}
        decoded.append(rows.count[ada])
    assert decoded[0] == decoded[1]


@pytest.mark.parametrize("extra", [b"", b"\x00", b"\xff" * 1000])
def test_a_cursor_of_any_length_pages_as_its_bytes_say(db: Database, extra: bytes) -> None:
    """A cursor is opaque bytes of up to 1,024: rows at or before it are skipped, also
    when it is longer than any key the walk could start at."""
    ada = _entity(db, "Ada")
    written = [_create(db, ada, "p", TextValue(text=str(i))) for i in range(6)]
    first = _list(db, subject=EntityRef(entity=ada), limit=2)
    assert first.cursor is not None
    cursor = first.cursor + extra
    for predicate in ("p", None):
        rest = _list(db, subject=EntityRef(entity=ada), predicate=predicate, cursor=cursor)
        # A longer cursor sorts after the row it starts with: that row is skipped too.
        assert [s.id for s in rest.statements] == [w.statement_id for w in written[2:]]
    assert [s.id for s in _list(db, cursor=cursor).statements] == [
        w.statement_id for w in written[2:]
    ]
