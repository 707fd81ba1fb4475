"""Every write's index rows follow from its records (brain/engine/index/derive.py).

One script of writes (memories, statements through new names, aliases and moved
names, supersession, tombstone, retraction, soft and hard forgets with their
cascades, renames, merge and unmerge, ambiguous names decided both ways, a
transaction) runs twice. With the indexer stopped, every write must leave the
lexical rows, ``embed_queue`` and ``purge_queue`` as the documents' current
texts say: a document with text indexed (its postings those of its text unless
a re-index of it waits), one without text gone from every index and queued for
the purge. With the indexer running, after each write has been indexed, every
document with text has the postings of its current text and a vector, and no
other has either.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import brain
from brain import cbor
from brain.engine.database import Database
from brain.engine.index import lexical
from brain.engine.index.documents import MEMORY_DOC, STATEMENT_DOC, document_text
from brain.engine.index.upkeep import ADD, PURGE_QUEUE, REINDEX
from brain.engine.index.vectors import EMBED_QUEUE, VECTOR_LABELS, VECTORS, decode_vector_row
from brain.engine.store.scope import Scope
from brain.engine.write.plan import read_counter
from brain.wire.messages.entity_ops import (
    EntityCreate,
    EntityCreateOk,
    EntityMerge,
    EntityMergeOk,
    EntityUnmerge,
    EntityUpdate,
)
from brain.wire.messages.memory_ops import Encode, EncodeOk, Forget
from brain.wire.messages.records import Evidence
from brain.wire.messages.review_ops import ReviewDecide, ReviewList, ReviewListOk
from brain.wire.messages.statement_ops import (
    StatementCreate,
    StatementCreateOk,
    StatementDraft,
    StatementRetract,
    StatementSupersede,
    StatementSupersedeOk,
    StatementTombstone,
)
from brain.wire.messages.txn_ops import TxnBegin, TxnBegun, TxnCommit
from brain.wire.messages.values import EntityRef, EntityValue, NameRef, TextValue, Value
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message
from tests.unit.common import NS, rid

SCOPE = Scope.of(NS, None)
Check = Callable[[Database, str], None]


def _rows(db: Database, table: bytes) -> dict[bytes, bytes]:
    with db._store.read() as txn:
        return {bytes(k): bytes(v) for k, v in txn.cursor(db=db._store.table(table))}


def _texts(db: Database) -> dict[bytes, str | None]:
    """Every document of the scope (scope-prefixed key) and its current text (None:
    its text left the store)."""
    store = db._store
    found: dict[bytes, str | None] = {}
    with store.read() as txn:
        for tag, table in ((MEMORY_DOC, b"memories"), (STATEMENT_DOC, b"statements")):
            for key in _rows(db, table):
                doc = tag + key[len(SCOPE.prefix) :]
                found[SCOPE.key(doc)] = document_text(store, txn, SCOPE, doc)
    return found


def _assert_postings_match_documents(db: Database) -> None:
    """The postings and the counters are exactly those of the ``lex_docs`` rows."""
    expected: set[bytes] = set()
    tokens = 0
    for key, row in _rows(db, lexical.DOCS).items():
        stored = cbor.decode(row)
        assert isinstance(stored, list)
        length, terms = stored
        assert isinstance(length, int) and isinstance(terms, list)
        tokens += length
        expected |= {SCOPE.key(bytes(th), key[len(SCOPE.prefix) :]) for th, _ in terms}
    stats = _rows(db, lexical.STATS)
    assert set(_rows(db, lexical.POSTINGS)) == expected
    assert read_counter(stats.get(SCOPE.key(b"docs"))) == len(_rows(db, lexical.DOCS))
    assert read_counter(stats.get(SCOPE.key(b"tokens"))) == tokens


def _assert_gone(
    key: bytes, step: str, docs: dict[bytes, bytes], purge: dict[bytes, bytes]
) -> None:
    assert key not in docs, f"{step}: a document without text keeps its postings"
    assert key in purge, f"{step}: a document whose text left is not queued for the purge"


def check_queued(db: Database, step: str) -> None:
    """The indexer is stopped: every write's own index rows, as its texts say."""
    docs, queue = _rows(db, lexical.DOCS), _rows(db, EMBED_QUEUE)
    purge, vectors = _rows(db, PURGE_QUEUE), _rows(db, VECTORS)
    for key, text in _texts(db).items():
        if text is None:
            _assert_gone(key, step, docs, purge)
            assert key not in queue, f"{step}: a document never embedded stays queued"
            continue
        assert key in docs, f"{step}: {text!r} is not indexed"
        pending = queue.get(key, b"")[:1]
        assert pending in (ADD, REINDEX), f"{step}: {text!r} is not queued for embedding"
        if docs[key] != lexical.doc_row(text):
            assert pending == REINDEX, f"{step}: {text!r} has stale postings and no re-index"
    assert not vectors
    _assert_postings_match_documents(db)


def check_indexed(db: Database, step: str) -> None:
    """The indexer is running: once it caught up, postings and vectors are the texts'."""
    assert db.wait_indexed()
    docs, queue = _rows(db, lexical.DOCS), _rows(db, EMBED_QUEUE)
    purge, vectors = _rows(db, PURGE_QUEUE), _rows(db, VECTORS)
    assert not queue, f"{step}: the indexer left {len(queue)} entries"
    texts = _texts(db)
    for key, text in texts.items():
        if text is None:
            _assert_gone(key, step, docs, purge)
            assert key not in vectors, f"{step}: a document without text keeps its vector"
            continue
        assert docs.get(key) == lexical.doc_row(text), f"{step}: stale postings for {text!r}"
        assert key in vectors, f"{step}: {text!r} has no vector"
    labels = _rows(db, VECTOR_LABELS)
    assert len(labels) == len(vectors)
    for key, row in vectors.items():
        label, _ = decode_vector_row(row)
        assert labels[SCOPE.key(label.to_bytes(8, "big"))] == key[len(SCOPE.prefix) :]
    assert set(vectors) <= set(texts)
    _assert_postings_match_documents(db)


class _Writes:
    """The script's writes against ``db``, each followed by ``check``."""

    def __init__(self, db: Database, check: Check) -> None:
        self.db = db
        self.check = check

    def run(self, step: str, opcode: Opcode, request: Message) -> Message:
        """Execute one write, then check the index rows."""
        answer = self.db.execute(NS, opcode, request, actor=b"k" * 16)
        self.check(self.db, step)
        return answer

    def encode(self, text: str) -> bytes:
        """ENCODE ``text``: the memory's id."""
        made = self.run(f"ENCODE {text!r}", Opcode.ENCODE, Encode(request_id=rid(), text=text))
        assert isinstance(made, EncodeOk)
        return made.memory_id

    def entity(self, name: str, *aliases: str) -> bytes:
        """ENTITY_CREATE ``name`` with ``aliases``: the entity's id."""
        request = EntityCreate(request_id=rid(), name=name, aliases=aliases or None)
        made = self.run(f"ENTITY_CREATE {name}", Opcode.ENTITY_CREATE, request)
        assert isinstance(made, EntityCreateOk)
        return made.entity_id

    def say(self, subject: bytes | str, predicate: str, value: Value, *memories: bytes) -> bytes:
        """STATEMENT_CREATE a fact about ``subject`` (an entity id or a name), citing
        ``memories``: the statement's id."""
        ref = EntityRef(entity=subject) if isinstance(subject, bytes) else NameRef(name=subject)
        evidence = tuple(Evidence(memory=m) for m in memories) or None
        request = StatementCreate(
            request_id=rid(),
            kind="fact",
            subject=ref,
            predicate=predicate,
            object_=value,
            evidence=evidence,
        )
        made = self.run(f"STATEMENT_CREATE {predicate}", Opcode.STATEMENT_CREATE, request)
        assert isinstance(made, StatementCreateOk)
        return made.statement_id

    def forget(self, memory: bytes, mode: str) -> None:
        """FORGET ``memory`` softly or hard."""
        request = Forget(request_id=rid(), memory=memory, mode=mode)
        self.run(f"FORGET {mode}", Opcode.FORGET, request)

    def rename(self, entity_id: bytes, name: str) -> None:
        """Give an entity a new name."""
        request = EntityUpdate(request_id=rid(), id=entity_id, name=name)
        self.run(f"rename to {name}", Opcode.ENTITY_UPDATE, request)

    def decide(self, decision: str) -> None:
        """Decide the one open ambiguous-name review."""
        listed = self.db.execute(NS, Opcode.REVIEW_LIST, ReviewList())
        assert isinstance(listed, ReviewListOk)
        (item,) = [i for i in listed.items if i.kind == "ambiguous_entity"]
        into = item.records[0] if decision == "merge" else None  # the best candidate
        request = ReviewDecide(
            request_id=rid(), review_id=item.review_id, decision=decision, into=into
        )
        self.run(f"REVIEW_DECIDE {decision}", Opcode.REVIEW_DECIDE, request)


def run_script(db: Database, check: Check) -> None:
    """The scripted writes, with ``check`` after each."""
    w = _Writes(db, check)
    paris_memory = w.encode("Alice moved to Paris in spring")
    tea = w.encode("Bob likes green tea")
    cello = w.encode("Carol plays the cello")
    w.encode("Bob likes green tea")  # the same text: the first memory, nothing indexed
    alice = w.entity("Alice", "Ally")
    paris = w.entity("Paris")
    lives = w.say(alice, "lives_in", EntityValue(entity=paris), paris_memory)
    w.say("Bob", "likes", TextValue(text="green tea"), tea)  # a new entity, named by the write
    chess = w.say("Ally", "plays", TextValue(text="chess"))  # through an alias: Alice's name
    w.say("Carol", "plays", TextValue(text="cello"), cello)
    w.say("carol", "owns", TextValue(text="a cat"), cello, paris_memory)
    _revise_statements(w, alice, lives, chess)

    w.forget(cello, "soft")  # Carol's statements: one tombstoned, one still cites a live memory
    w.forget(tea, "hard")  # Bob's statement retracted with it
    w.forget(cello, "hard")  # after the soft one: its text goes now

    _move_names(w, alice, paris)
    _decide_ambiguous_names(w)
    _commit_a_transaction(w, alice)

    w.rename(alice, "Alicia")  # subject and object of statements
    w.forget(paris_memory, "hard")  # the last evidence of Carol's cat: a cascade


def _revise_statements(w: _Writes, alice: bytes, lives: bytes, chess: bytes) -> None:
    """Supersede where Alice lives, tombstone ``chess``, retract the superseding one."""
    draft = StatementDraft(
        kind="fact",
        subject=EntityRef(entity=alice),
        predicate="lives_in",
        object_=TextValue(text="Lyon"),
    )
    newer = w.run(
        "STATEMENT_SUPERSEDE",
        Opcode.STATEMENT_SUPERSEDE,
        StatementSupersede(request_id=rid(), old=lives, new=draft),
    )
    assert isinstance(newer, StatementSupersedeOk)
    w.run(
        "STATEMENT_TOMBSTONE",
        Opcode.STATEMENT_TOMBSTONE,
        StatementTombstone(request_id=rid(), id=chess),
    )
    request = StatementRetract(request_id=rid(), id=newer.statement_id)
    w.run("STATEMENT_RETRACT", Opcode.STATEMENT_RETRACT, request)


def _move_names(w: _Writes, alice: bytes, paris: bytes) -> None:
    """Rename Paris, give it an alias, merge Lutetia into it (a name moved while
    merged) and unmerge."""
    w.rename(paris, "Lutece")
    w.run(
        "alias only",
        Opcode.ENTITY_UPDATE,
        EntityUpdate(request_id=rid(), id=paris, add_aliases=("City of Light",)),
    )
    lutetia = w.entity("Lutetia")
    w.say(lutetia, "was", TextValue(text="roman"))
    w.say(alice, "visited", EntityValue(entity=lutetia))
    merged = w.run(
        "ENTITY_MERGE",
        Opcode.ENTITY_MERGE,
        EntityMerge(request_id=rid(), keep=paris, merge=lutetia),
    )
    assert isinstance(merged, EntityMergeOk)
    w.say("Lutetia", "has", TextValue(text="baths"))  # a moved name: the kept entity's words
    w.run(
        "ENTITY_UNMERGE",
        Opcode.ENTITY_UNMERGE,
        EntityUnmerge(request_id=rid(), merge_id=merged.merge_id),
    )


def _decide_ambiguous_names(w: _Writes) -> None:
    """Statements through names two entities share, decided as a merge and as distinct."""
    w.entity("Jordan Jones", "JJ")
    jamie = w.entity("Jamie Jones", "JJ")
    w.say("JJ", "likes", TextValue(text="jazz"))  # a tie: a pending name
    w.say("jj", "hates", TextValue(text="rain"))  # the same open item
    w.say(jamie, "drives", TextValue(text="a bus"))
    w.decide("merge")  # the pending statements now say the first candidate's name
    w.entity("Kim Kale", "KK")
    w.entity("Kit Kline", "KK")
    w.say("KK", "sings", TextValue(text="opera"))
    w.decide("distinct")


def _commit_a_transaction(w: _Writes, alice: bytes) -> None:
    """A memory and two statements through a new name, buffered in a transaction:
    the index rows change only at its commit, which is checked."""
    db = w.db
    begun = db.execute(NS, Opcode.TXN_BEGIN, TxnBegin())
    assert isinstance(begun, TxnBegun)
    txn = begun.txn_id
    db.execute(NS, Opcode.ENCODE, Encode(request_id=rid(), text="Dana met Alice", txn_id=txn))
    for predicate, value in (
        ("met", EntityValue(entity=alice)),
        ("likes", TextValue(text="markets")),
    ):
        buffered = StatementCreate(
            request_id=rid(),
            kind="fact",
            subject=NameRef(name="Dana"),
            predicate=predicate,
            object_=value,
            txn_id=txn,
        )
        db.execute(NS, Opcode.STATEMENT_CREATE, buffered)
    w.run("TXN_COMMIT", Opcode.TXN_COMMIT, TxnCommit(txn_id=txn))


def test_every_write_leaves_the_index_rows_its_texts_call_for(tmp_path: Path) -> None:
    with brain.open(tmp_path / "d") as db:
        db.retrieval.indexer.close()  # the write's own rows only, nothing the indexer does
        run_script(db, check_queued)


def test_the_indexed_state_follows_every_write(db: Database) -> None:
    run_script(db, check_indexed)
