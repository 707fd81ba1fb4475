"""A term's version row in ``lex_stats`` lives exactly while some document holds the term
(spec/04-retrieval.md §2): forgetting, retracting or re-indexing away the last document
holding a word leaves no hash of it; a word indexed again starts above every version it
had, so cached postings of its earlier life are never served."""

from __future__ import annotations

import hashlib

from brain import cbor
from brain.engine.database import Database
from brain.engine.index import lexical
from brain.engine.index.documents import MEMORY_DOC, STATEMENT_DOC
from brain.engine.store.scope import SCOPE_PREFIX_BYTES, Scope
from brain.engine.store.tables import LEX_DOCS, LEX_POSTINGS, LEX_STATS
from brain.engine.write.plan import read_counter
from brain.wire.messages.entity_ops import EntityCreate, EntityCreateOk, EntityUpdate
from brain.wire.messages.memory_ops import Encode, EncodeOk, Forget
from brain.wire.messages.records import Evidence
from brain.wire.messages.statement_ops import (
    StatementCreate,
    StatementCreateOk,
    StatementRetract,
)
from brain.wire.messages.values import EntityRef, NameRef, TextValue
from brain.wire.opcodes import Opcode
from tests.unit.common import NS, rid

SCOPE = Scope.of(NS, None)
_VERSION_ROW = SCOPE_PREFIX_BYTES + len(b"v:") + 8


def _hash(token: str) -> bytes:
    return hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()


def _rows(db: Database, table: bytes) -> dict[bytes, bytes]:
    with db._store.read() as txn:
        return {bytes(k): bytes(v) for k, v in txn.cursor(db=db._store.table(table))}


def _versioned_terms(db: Database) -> set[bytes]:
    rows = _rows(db, LEX_STATS)
    return {k[-8:] for k in rows if len(k) == _VERSION_ROW and k[SCOPE_PREFIX_BYTES:][:2] == b"v:"}


def _posted_terms(db: Database) -> set[bytes]:
    return {k[SCOPE_PREFIX_BYTES : SCOPE_PREFIX_BYTES + 8] for k in _rows(db, LEX_POSTINGS)}


def _assert_rows_follow_the_postings(db: Database, gone: list[str]) -> None:
    """Version rows are exactly the terms with postings; BM25's counters are exact."""
    assert db.wait_indexed()
    assert _versioned_terms(db) == _posted_terms(db)
    assert not {_hash(t) for t in gone} & _versioned_terms(db)
    docs = _rows(db, LEX_DOCS)
    stats = _rows(db, LEX_STATS)
    assert read_counter(stats.get(SCOPE.key(b"docs"))) == len(docs)
    tokens = 0
    for row in docs.values():
        stored = cbor.decode(row)
        assert isinstance(stored, list)
        tokens += stored[0]
    assert read_counter(stats.get(SCOPE.key(b"tokens"))) == tokens


def _encode(db: Database, text: str) -> bytes:
    made = db.execute(NS, Opcode.ENCODE, Encode(request_id=rid(), text=text))
    assert isinstance(made, EncodeOk)
    return made.memory_id


def _say(db: Database, subject: NameRef | EntityRef, text: str, *cites: bytes) -> bytes:
    made = db.execute(
        NS,
        Opcode.STATEMENT_CREATE,
        StatementCreate(
            request_id=rid(),
            kind="fact",
            subject=subject,
            predicate="notes",
            object_=TextValue(text=text),
            evidence=tuple(Evidence(memory=m) for m in cites),
        ),
    )
    assert isinstance(made, StatementCreateOk)
    return made.statement_id


def _entity(db: Database, name: str) -> bytes:
    made = db.execute(NS, Opcode.ENTITY_CREATE, EntityCreate(request_id=rid(), name=name))
    assert isinstance(made, EntityCreateOk)
    return made.entity_id


def _searches(db: Database, cue: str) -> tuple[list[tuple[bytes, float]], ...]:
    """The cue's lexical search without the postings cache, then twice with it."""
    store, cache = db._store, db.retrieval.postings
    with store.read() as txn:
        return (
            lexical.search(store, txn, SCOPE, cue, 10),
            lexical.search(store, txn, SCOPE, cue, 10, cache=cache),
            lexical.search(store, txn, SCOPE, cue, 10, cache=cache),
        )


def test_the_last_document_holding_a_word_takes_its_row_along(db: Database) -> None:
    pin = _encode(db, "the lobby door pin is 4417")
    _say(db, NameRef(name="Lobby"), "door code 4417 lobby", pin)  # cites it: the cascade
    _encode(db, "meet in the lobby")
    _assert_rows_follow_the_postings(db, [])
    assert _hash("4417") in _versioned_terms(db)
    # One plan removes both documents holding "4417": the row goes, "lobby" stays.
    db.execute(NS, Opcode.FORGET, Forget(request_id=rid(), memory=pin, mode="hard"))
    _assert_rows_follow_the_postings(db, ["4417", "pin", "door", "code"])
    assert _hash("lobbi") in _versioned_terms(db)
    retracted = _say(db, NameRef(name="Quartz"), "shelf seventeen")
    _assert_rows_follow_the_postings(db, [])
    db.execute(NS, Opcode.STATEMENT_RETRACT, StatementRetract(request_id=rid(), id=retracted))
    _assert_rows_follow_the_postings(db, ["shelf", "seventeen", "quartz"])
    # A re-index (the indexer's own write) drops the old name's row.
    gnome = _entity(db, "Gnome")
    _say(db, EntityRef(entity=gnome), "likes tea")
    _assert_rows_follow_the_postings(db, [])
    db.execute(NS, Opcode.ENTITY_UPDATE, EntityUpdate(request_id=rid(), id=gnome, name="Trellis"))
    _assert_rows_follow_the_postings(db, ["gnome"])


def test_a_word_indexed_again_is_never_served_its_old_postings(db: Database) -> None:
    # A word's second life that did not start above the scope's floor could reach a
    # version its first life's postings are cached under (first here: the floor is 0).
    # Through the indexer's re-index: a retracted word comes back as a new name.
    old = _say(db, NameRef(name="Alpha"), "flumph")
    plain, cold, warm = _searches(db, "flumph")
    assert plain == cold == warm and plain[0][0] == STATEMENT_DOC + old
    db.execute(NS, Opcode.STATEMENT_RETRACT, StatementRetract(request_id=rid(), id=old))
    gnome = _entity(db, "Gnome")
    new = _say(db, EntityRef(entity=gnome), "likes tea")
    db.execute(NS, Opcode.ENTITY_UPDATE, EntityUpdate(request_id=rid(), id=gnome, name="Flumph"))
    assert db.wait_indexed()
    plain, cold, warm = _searches(db, "flumph")
    assert plain == cold == warm and [key for key, _ in plain] == [STATEMENT_DOC + new]
    # Through a write's own index rows: a memory forgotten, the word encoded again.
    first = _encode(db, "zyxwv marks the spot")
    plain, cold, warm = _searches(db, "zyxwv")
    assert plain == cold == warm and plain[0][0] == MEMORY_DOC + first
    db.execute(NS, Opcode.FORGET, Forget(request_id=rid(), memory=first, mode="hard"))
    again = _encode(db, "zyxwv again")
    plain, cold, warm = _searches(db, "zyxwv")
    assert plain == cold == warm and [key for key, _ in plain] == [MEMORY_DOC + again]
