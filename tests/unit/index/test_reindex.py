"""Re-indexing (spec/04 §1): a rename, merge, unmerge or decided name changes the text
of the statements that name the entity, and the indexer brings their postings and
vectors to it (the vector under its own label), exactly once, across restarts and
crashes."""

from __future__ import annotations

from pathlib import Path

import lmdb
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import brain
from brain import cbor
from brain.engine.database import Database
from brain.engine.index import lexical
from brain.engine.index import upkeep as indexing
from brain.engine.index.documents import STATEMENT_DOC, document_text
from brain.engine.index.indexer import _Applied, _plan
from brain.engine.index.postings import PostingsCache
from brain.engine.index.upkeep import REINDEX
from brain.engine.index.vectors import decode_vector_row
from brain.engine.store.scope import Scope
from brain.engine.write.plan import read_counter
from brain.errors import OverBudget, Unavailable
from brain.wire.messages.entity_ops import (
    EntityCreate,
    EntityCreateOk,
    EntityGet,
    EntityGetOk,
    EntityMerge,
    EntityMergeOk,
    EntityUnmerge,
    EntityUpdate,
)
from brain.wire.messages.recall_ops import ArmWeights, Recall, RecallOk
from brain.wire.messages.review_ops import ReviewDecide, ReviewList, ReviewListOk
from brain.wire.messages.statement_ops import (
    StatementCreate,
    StatementCreateOk,
    StatementRetract,
)
from brain.wire.messages.values import EntityRef, EntityValue, NameRef, TextValue, Value
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message
from tests.unit.common import NS, rid

LEXICAL = ArmWeights(semantic=0.0, lexical=1.0, graph=0.0)
SEMANTIC = ArmWeights(semantic=1.0, lexical=0.0, graph=0.0)
SCOPE = Scope.of(NS, None)


def run(db: Database, opcode: Opcode, request: Message) -> Message:
    return db.execute(NS, opcode, request, actor=b"k" * 16)


def entity(db: Database, name: str) -> bytes:
    made = run(db, Opcode.ENTITY_CREATE, EntityCreate(request_id=rid(), name=name))
    assert isinstance(made, EntityCreateOk)
    return made.entity_id


def rename(db: Database, entity_id: bytes, name: str) -> None:
    run(db, Opcode.ENTITY_UPDATE, EntityUpdate(request_id=rid(), id=entity_id, name=name))


def say(db: Database, subject: bytes | str, predicate: str, value: Value) -> StatementCreateOk:
    ref = EntityRef(entity=subject) if isinstance(subject, bytes) else NameRef(name=subject)
    request = StatementCreate(
        request_id=rid(), kind="fact", subject=ref, predicate=predicate, object_=value
    )
    made = run(db, Opcode.STATEMENT_CREATE, request)
    assert isinstance(made, StatementCreateOk)
    return made


def found(db: Database, cue: str, arms: ArmWeights = LEXICAL, **kw: object) -> list[bytes]:
    answer = run(db, Opcode.RECALL, Recall(cue=cue, arms=arms, **kw))  # type: ignore[arg-type]
    assert isinstance(answer, RecallOk)
    return [hit.id for hit in answer.hits]


def rows(db: Database, table: bytes) -> dict[bytes, bytes]:
    with db._store.read() as txn:
        return {bytes(k): bytes(v) for k, v in txn.cursor(db=db._store.table(table))}


def doc(statement_id: bytes) -> bytes:
    return SCOPE.key(STATEMENT_DOC, statement_id)


def assert_lexical_index_is_fresh(db: Database) -> None:
    """Every indexed statement's postings are those of its current text, and the
    counters and postings agree with the documents."""
    store = db._store
    docs = rows(db, lexical.DOCS)
    postings = rows(db, lexical.POSTINGS)
    with store.read() as txn:
        expected_postings: set[bytes] = set()
        tokens = 0
        for key, row in docs.items():
            text = document_text(store, txn, SCOPE, key[len(SCOPE.prefix) :])
            assert text is not None
            assert row == lexical.doc_row(text), text
            fresh = lexical.index_changes(SCOPE, key[len(SCOPE.prefix) :], text)
            expected_postings |= {c.key for c in fresh if c.table == lexical.POSTINGS}
            stored = cbor.decode(row)
            assert isinstance(stored, list)
            tokens += stored[0]
        stats = rows(db, lexical.STATS)
    assert read_counter(stats.get(SCOPE.key(b"docs"))) == len(docs)
    assert read_counter(stats.get(SCOPE.key(b"tokens"))) == tokens
    assert set(postings) == expected_postings


def hnsw_count(db: Database) -> int:
    scope = db.retrieval.indexes._scopes[SCOPE.prefix]
    return int(scope.index.get_current_count())


# --- renames ------------------------------------------------------------------------------


def test_a_rename_reindexes_both_arms_under_the_same_label(db: Database) -> None:
    acme = entity(db, "Acme")
    made = say(db, acme, "makes", TextValue(text="anvils")).statement_id
    named = say(db, "Wile", "buys_from", EntityValue(entity=acme)).statement_id
    other = say(db, "Roadrunner", "eats", TextValue(text="birdseed")).statement_id
    assert db.wait_indexed()
    assert sorted(found(db, "Acme")) == sorted([made, named])
    cue = "Initech anvils"
    cache = PostingsCache()
    with db._store.read() as txn:
        warm = lexical.search(db._store, txn, SCOPE, cue, 10, cache=cache)
    before = rows(db, b"vectors")
    count, size = hnsw_count(db), db.retrieval.indexes.size(SCOPE.prefix)

    rename(db, acme, "Initech")
    queued = rows(db, b"embed_queue")
    assert set(queued) == {doc(made), doc(named)}
    assert all(value[:1] == REINDEX for value in queued.values())
    assert db.wait_indexed()
    assert rows(db, b"embed_queue") == {}

    assert sorted(found(db, "Initech")) == sorted([made, named])
    assert found(db, "Acme") == []
    assert found(db, "birdseed") == [other]
    # Every changed term's version rose, so postings cached before are not used after.
    with db._store.read() as txn:
        cold = lexical.search(db._store, txn, SCOPE, cue, 10)
        assert lexical.search(db._store, txn, SCOPE, cue, 10, cache=cache) == cold != warm
    after = rows(db, b"vectors")
    embedder = db.retrieval.embedder
    with db._store.read() as txn:
        for statement_id in (made, named):
            old_label, _ = decode_vector_row(before[doc(statement_id)])
            label, vector = decode_vector_row(after[doc(statement_id)])
            assert label == old_label
            text = document_text(db._store, txn, SCOPE, STATEMENT_DOC + statement_id)
            assert text is not None and "Initech" in text
            assert np.array_equal(vector, embedder.embed([text])[0])
            # The HNSW entry of the label holds the new vector too.
            held = db.retrieval.indexes._scopes[SCOPE.prefix].index.get_items([label])[0]
            assert np.allclose(held, vector, atol=1e-6)
    assert after[doc(other)] == before[doc(other)]
    assert hnsw_count(db) == count and db.retrieval.indexes.size(SCOPE.prefix) == size
    assert found(db, "Initech makes anvils", SEMANTIC)[0] == made
    assert_lexical_index_is_fresh(db)


def test_a_rename_to_the_same_words_changes_nothing(db: Database) -> None:
    acme = entity(db, "Acme")
    say(db, acme, "makes", TextValue(text="anvils"))
    assert db.wait_indexed()
    before = (rows(db, lexical.POSTINGS), rows(db, lexical.STATS), rows(db, b"vectors"))
    rename(db, acme, "ACME")  # casefolded away: the same tokens
    assert db.wait_indexed()
    assert (rows(db, lexical.POSTINGS), rows(db, lexical.STATS), rows(db, b"vectors")) == before


def test_a_rename_before_the_first_embedding_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "d"
    db = brain.open(path)
    db.retrieval.indexer.close()  # nothing is embedded until the reopen below
    acme = entity(db, "Acme")
    made = say(db, acme, "makes", TextValue(text="anvils")).statement_id
    assert rows(db, b"embed_queue")[doc(made)][:1] == b"+"
    rename(db, acme, "Initech")
    # The pending ADD became a REINDEX, which embeds as an ADD does.
    assert rows(db, b"embed_queue")[doc(made)][:1] == REINDEX
    db.close()
    with brain.open(path) as again:
        assert again.wait_indexed()
        assert found(again, "Initech") == [made] and found(again, "Acme") == []
        assert doc(made) in rows(again, b"vectors")
        assert_lexical_index_is_fresh(again)


def test_a_retracted_statement_is_not_brought_back(tmp_path: Path) -> None:
    path = tmp_path / "d"
    db = brain.open(path)
    db.retrieval.indexer.close()
    acme = entity(db, "Acme")
    gone = say(db, acme, "makes", TextValue(text="anvils")).statement_id
    kept = say(db, acme, "sells", TextValue(text="rockets")).statement_id
    rename(db, acme, "Initech")
    run(db, Opcode.STATEMENT_RETRACT, StatementRetract(request_id=rid(), id=gone))
    assert doc(gone) not in rows(db, b"embed_queue")
    db.close()
    with brain.open(path) as again:
        assert again.wait_indexed()
        assert found(again, "Initech") == [kept]
        assert doc(gone) not in rows(again, lexical.DOCS)
        assert doc(gone) not in rows(again, b"vectors")
        assert_lexical_index_is_fresh(again)


def test_as_of_recalls_search_the_current_names(db: Database) -> None:
    acme = entity(db, "Acme")
    made = say(db, acme, "makes", TextValue(text="anvils"))
    rename(db, acme, "Initech")
    assert db.wait_indexed()
    # The as-of filter judges rows, not names: the statement was believed then, and
    # it is found by what its subject is called now.
    assert found(db, "Initech", as_of=made.recorded_at) == [made.statement_id]
    assert found(db, "Acme", as_of=made.recorded_at) == []


def test_a_rename_too_large_to_log_is_refused(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(indexing, "MAX_REINDEX_DOCUMENTS", 2)
    acme = entity(db, "Acme")
    for thing in ("anvils", "rockets", "magnets"):
        say(db, acme, "makes", TextValue(text=thing))
    with pytest.raises(OverBudget):
        rename(db, acme, "Initech")
    answer = run(db, Opcode.ENTITY_GET, EntityGet(id=acme))
    assert isinstance(answer, EntityGetOk) and answer.entity.name == "Acme"


# --- merges, unmerges and decided names ---------------------------------------------------


def test_merge_and_unmerge_reindex_the_merged_entitys_statements(db: Database) -> None:
    keep, merged = entity(db, "Globex"), entity(db, "Hooli")
    on_keep = say(db, keep, "makes", TextValue(text="widgets")).statement_id
    on_merged = say(db, merged, "makes", TextValue(text="gadgets")).statement_id
    naming = say(db, "Gavin", "runs", EntityValue(entity=merged)).statement_id
    answer = run(db, Opcode.ENTITY_MERGE, EntityMerge(request_id=rid(), keep=keep, merge=merged))
    assert isinstance(answer, EntityMergeOk)
    # Only the merged entity's statements change words.
    assert set(rows(db, b"embed_queue")) <= {doc(on_merged), doc(naming)}
    assert db.wait_indexed()
    assert sorted(found(db, "Globex")) == sorted([on_keep, on_merged, naming])
    assert found(db, "Hooli") == []
    assert_lexical_index_is_fresh(db)

    run(db, Opcode.ENTITY_UNMERGE, EntityUnmerge(request_id=rid(), merge_id=answer.merge_id))
    assert db.wait_indexed()
    assert found(db, "Globex") == [on_keep]
    assert sorted(found(db, "Hooli")) == sorted([on_merged, naming])
    assert_lexical_index_is_fresh(db)


def test_renaming_the_kept_entity_reindexes_what_was_merged_into_it(db: Database) -> None:
    keep, merged = entity(db, "Globex"), entity(db, "Hooli")
    on_merged = say(db, merged, "makes", TextValue(text="gadgets")).statement_id
    run(db, Opcode.ENTITY_MERGE, EntityMerge(request_id=rid(), keep=keep, merge=merged))
    rename(db, keep, "Umbrella")
    assert db.wait_indexed()
    assert found(db, "Umbrella") == [on_merged]
    assert_lexical_index_is_fresh(db)


def test_a_decided_name_is_reindexed(db: Database) -> None:
    smith = entity(db, "Alice Smith")
    entity(db, "Alice Smyth")
    waiting = say(db, "Alice Smoth", "likes", TextValue(text="tea")).statement_id
    assert db.wait_indexed()
    assert found(db, "Smoth") == [waiting]
    listed = run(db, Opcode.REVIEW_LIST, ReviewList())
    assert isinstance(listed, ReviewListOk)
    (item,) = listed.items
    decision = ReviewDecide(
        request_id=rid(), review_id=item.review_id, decision="merge", into=smith
    )
    run(db, Opcode.REVIEW_DECIDE, decision)
    assert db.wait_indexed()
    # The name became an alias of the chosen candidate: the statement is called by its name.
    assert found(db, "Smoth") == []
    assert found(db, "Alice Smith tea") == [waiting]
    assert_lexical_index_is_fresh(db)


def test_a_rename_while_the_indexer_reads_is_not_lost(tmp_path: Path) -> None:
    path = tmp_path / "d"
    db = brain.open(path)
    acme = entity(db, "Acme")
    made = say(db, acme, "makes", TextValue(text="anvils")).statement_id
    assert db.wait_indexed()
    indexer = db.retrieval.indexer
    indexer.close()
    rename(db, acme, "Initech")
    entries = indexer._read_queue().entries  # the indexer reads the text with "Initech"
    rename(db, acme, "Globex")  # ... and a second rename lands before its write
    outcome = _Applied()
    dims = db.retrieval.embedder.dimensions
    db.writer.submit(lambda ctx: _plan(ctx, entries, outcome, dims)).result()
    # The entry it read is no longer the one queued: it is left for the next round.
    assert outcome.skipped == 1 and doc(made) in rows(db, b"embed_queue")
    while indexer._round():  # the thread is stopped: run its rounds here, to idle
        pass
    assert rows(db, b"embed_queue") == {}
    assert found(db, "Globex") == [made] and found(db, "Initech") == []
    assert_lexical_index_is_fresh(db)
    db.close()


# --- durability ---------------------------------------------------------------------------


def test_a_crash_after_the_indexers_log_replays_the_reindex_once(tmp_path: Path) -> None:
    path = tmp_path / "d"
    db = brain.open(path)
    acme = entity(db, "Acme")
    made = say(db, acme, "makes", TextValue(text="anvils")).statement_id
    assert db.wait_indexed()
    old_label, _ = decode_vector_row(rows(db, b"vectors")[doc(made)])
    db.retrieval.indexer.close()
    rename(db, acme, "Initech")

    def crash() -> None:
        raise lmdb.Error("injected crash between the WAL fsync and the LMDB commit")

    # The indexer's round is logged and synced, then its LMDB commit "crashes".
    db.writer.inject_fault_before_commit(crash)
    with pytest.raises(Unavailable):
        db.retrieval.indexer._round()
    db.close()
    with brain.open(path) as again:
        assert again.wait_indexed()
        assert rows(again, b"embed_queue") == {}
        assert found(again, "Initech") == [made] and found(again, "Acme") == []
        assert_lexical_index_is_fresh(again)
        label, vector = decode_vector_row(rows(again, b"vectors")[doc(made)])
        assert label == old_label
        with again._store.read() as txn:
            text = document_text(again._store, txn, SCOPE, STATEMENT_DOC + made)
        assert text is not None
        assert np.array_equal(vector, again.retrieval.embedder.embed([text])[0])
        assert again.retrieval.indexes.size(SCOPE.prefix) == 1


# --- the law ------------------------------------------------------------------------------


NAMES = st.sampled_from(["Acme", "Initech", "Globex Corp", "Umbrella", "Hooli", "acme"])


def test_after_any_renames_every_statement_is_indexed_by_its_current_text(
    db: Database,
) -> None:
    @settings(
        max_examples=20,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(
        first=NAMES,
        second=NAMES,
        renames=st.lists(st.tuples(st.booleans(), NAMES), max_size=4),
        wait_between=st.booleans(),
    )
    def check(first: str, second: str, renames: list[tuple[bool, str]], wait_between: bool) -> None:
        one, two = entity(db, first), entity(db, second)
        say(db, one, "works_with", EntityValue(entity=two))
        say(db, two, "makes", TextValue(text="anvils"))
        for which, name in renames:
            rename(db, one if which else two, name)
            if wait_between:
                assert db.wait_indexed()
        assert db.wait_indexed()
        assert_lexical_index_is_fresh(db)

    check()
