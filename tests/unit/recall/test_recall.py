"""RECALL and EXPLAIN through the engine: arms, fusion, the filter chain and its counts,
the as-of truth table, abstention, evidence, forgetting, and the indexes' lifecycle.

These run with the hashing embedder (tests/unit/conftest.py), whose vectors share
a direction exactly when texts share words: enough to exercise the semantic arm's
plumbing. Retrieval quality is measured by ``python -m bench quality``.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import pytest

import brain
from brain.engine.database import Database
from brain.engine.index import lexical
from brain.engine.index.documents import STATEMENT_DOC
from brain.engine.index.tokens import tokenize
from brain.engine.recall.graph import cue_entities, graph_search
from brain.engine.records.filters import Filters
from brain.engine.store.scope import Scope
from brain.engine.write.tuning import DEFAULT_RESOLUTION
from brain.errors import AsOfInFuture, InvalidArgument
from brain.wire.messages.entity_ops import EntityCreate, EntityCreateOk
from brain.wire.messages.memory_ops import Encode, EncodeOk, Forget
from brain.wire.messages.recall_ops import (
    ArmWeights,
    ExplainOk,
    ExplainRequest,
    Recall,
    RecallOk,
)
from brain.wire.messages.records import Evidence
from brain.wire.messages.relation_ops import RelationCreate, RelationCreateOk, RelationTombstone
from brain.wire.messages.statement_ops import (
    StatementCreate,
    StatementCreateOk,
    StatementDraft,
    StatementRetract,
    StatementSupersede,
    StatementSupersedeOk,
    StatementTombstone,
)
from brain.wire.messages.values import EntityRef, EntityValue, NameRef, TextValue, Value
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message
from tests.unit.common import NS, rid

LEXICAL = ArmWeights(semantic=0.0, lexical=1.0, graph=0.0)
SEMANTIC = ArmWeights(semantic=1.0, lexical=0.0, graph=0.0)
GRAPH = ArmWeights(semantic=0.0, lexical=0.0, graph=1.0)


def run(db: Database, opcode: Opcode, request: Message, ns: str = NS) -> Message:
    return db.execute(ns, opcode, request)


def remember(db: Database, text: str, **kw: object) -> bytes:
    made = run(db, Opcode.ENCODE, Encode(request_id=rid(), text=text, **kw))  # type: ignore[arg-type]
    assert isinstance(made, EncodeOk)
    return made.memory_id


def say(db: Database, subject: str, predicate: str, value: str, **kw: object) -> StatementCreateOk:
    request = StatementCreate(
        request_id=rid(),
        kind=str(kw.pop("kind", "fact")),
        subject=NameRef(name=subject),
        predicate=predicate,
        object_=TextValue(text=value),
        **kw,  # type: ignore[arg-type]
    )
    made = run(db, Opcode.STATEMENT_CREATE, request)
    assert isinstance(made, StatementCreateOk)
    return made


def recall(db: Database, cue: str, ns: str = NS, **kw: object) -> RecallOk:
    answer = run(db, Opcode.RECALL, Recall(cue=cue, **kw), ns)  # type: ignore[arg-type]
    assert isinstance(answer, RecallOk)
    return answer


def ids(answer: RecallOk) -> list[bytes]:
    return [h.id for h in answer.hits]


def entity(db: Database, name: str, *aliases: str) -> bytes:
    made = run(db, Opcode.ENTITY_CREATE, EntityCreate(request_id=rid(), name=name, aliases=aliases))
    assert isinstance(made, EntityCreateOk)
    return made.entity_id


def state(db: Database, subject: bytes, predicate: str, value: Value) -> bytes:
    """A statement about the entity ``subject``."""
    request = StatementCreate(
        request_id=rid(),
        kind="fact",
        subject=EntityRef(entity=subject),
        predicate=predicate,
        object_=value,
    )
    made = run(db, Opcode.STATEMENT_CREATE, request)
    assert isinstance(made, StatementCreateOk)
    return made.statement_id


def link(db: Database, first: bytes, type_: str, second: bytes) -> bytes:
    request = RelationCreate(
        request_id=rid(), type_=type_, from_=EntityRef(entity=first), to=EntityRef(entity=second)
    )
    made = run(db, Opcode.RELATION_CREATE, request)
    assert isinstance(made, RelationCreateOk)
    return made.relation_id


def tombstone(db: Database, statement_id: bytes) -> None:
    run(db, Opcode.STATEMENT_TOMBSTONE, StatementTombstone(request_id=rid(), id=statement_id))


def supersede(db: Database, old: bytes, subject: str, predicate: str, text: str) -> bytes:
    made = run(
        db,
        Opcode.STATEMENT_SUPERSEDE,
        StatementSupersede(
            request_id=rid(),
            old=old,
            new=StatementDraft(
                kind="fact",
                subject=NameRef(name=subject),
                predicate=predicate,
                object_=TextValue(text=text),
            ),
        ),
    )
    assert isinstance(made, StatementSupersedeOk)
    return made.statement_id


# --- the tokenizer and BM25 ---------------------------------------------------------------


def test_tokens_keep_identifiers_and_stem_words() -> None:
    assert tokenize("The user_id of Boundary-layer flows, v2.1 x86_64 RUNNING") == [
        "user_id",
        "boundari",
        "layer",
        "flow",
        "v2",
        "x86_64",
        "run",
    ]
    assert tokenize("a I of the") == []


def test_bm25_scores_are_okapi_with_lucene_idf(db: Database) -> None:
    texts = ["zebra zebra lion", "zebra tiger", "tiger tiger tiger eagle"]
    memories = [remember(db, t) for t in texts]
    answer = recall(db, "zebra", arms=LEXICAL)
    assert ids(answer) == memories[:2]
    with db._store.read() as txn:
        scored = dict(lexical.search(db._store, txn, _scope(), "zebra", 10))
    n, df, average = 3, 2, (3 + 2 + 4) / 3
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))

    def bm25(tf: int, length: int) -> float:
        return idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / average))

    assert scored[b"m" + memories[0]] == pytest.approx(bm25(2, 3))
    assert scored[b"m" + memories[1]] == pytest.approx(bm25(1, 2))


def _scope() -> Scope:
    return Scope.of(NS, None)


# --- arms and fusion ----------------------------------------------------------------------


def test_each_arm_finds_what_it_should(db: Database) -> None:
    paris = remember(db, "Alice moved to Paris in the spring")
    remember(db, "Bob drinks green tea every morning")
    works = say(db, "Alice", "works_at", "Globex")
    lexical_only = recall(db, "paris spring", arms=LEXICAL)
    assert ids(lexical_only) == [paris]
    assert lexical_only.hits[0].ranks.lexical == 1 and lexical_only.hits[0].ranks.semantic is None
    semantic_only = recall(db, "paris spring", arms=SEMANTIC)
    assert semantic_only.hits[0].id == paris and semantic_only.hits[0].ranks.semantic == 1
    graph_only = recall(db, "what about alice", arms=GRAPH)
    assert ids(graph_only) == [works.statement_id]
    assert graph_only.coverage.arms == ("graph",)
    assert graph_only.coverage.candidates.semantic == graph_only.coverage.candidates.lexical == 0


def test_fusion_is_reciprocal_rank_with_weights(db: Database) -> None:
    first = remember(db, "kestrel falcon")
    second = remember(db, "kestrel")
    answer = recall(
        db, "kestrel falcon", rrf_k=10, arms=ArmWeights(semantic=2.0, lexical=1.0, graph=0.0)
    )
    for hit in answer.hits:
        expected = 0.0
        if hit.ranks.semantic is not None:
            expected += 2.0 / (10 + hit.ranks.semantic)
        if hit.ranks.lexical is not None:
            expected += 1.0 / (10 + hit.ranks.lexical)
        assert hit.score == pytest.approx(expected)
    assert ids(answer) == [first, second]
    # Equal scores break by record id, the lowest first (spec/04-retrieval.md §5): the
    # twins score alike, so only their ids can order them.
    twins = [remember(db, f"osprey {i}") for i in range(3)]
    tied = recall(db, "osprey", arms=ArmWeights(semantic=0.0, lexical=1.0, graph=0.0), top_k=3)
    assert sorted(h.score for h in tied.hits) == [h.score for h in reversed(tied.hits)]
    assert ids(tied) == sorted(twins)
    assert [h.ranks.lexical for h in tied.hits] == [1, 2, 3]


@pytest.mark.parametrize(("fusion", "tied_score"), [("convex", 1.0), ("rrf", 1.0 / (60 + 1))])
def test_fusion_ties_break_by_record_id_across_arms(
    db: Database, fusion: str, tied_score: float
) -> None:
    """One record found only by the lexical arm at rank 1, another only by the semantic
    arm at rank 1: equal weights give equal scores under either fusion, and the lower id
    comes first even though fusion meets the semantic arm's candidates first."""
    import struct

    import numpy as np

    def vector(values: np.ndarray) -> bytes:
        return struct.pack("<384f", *values.tolist())

    axis = np.zeros(384)
    axis[7] = 1.0
    away = np.zeros(384)
    away[383] = 1.0
    noise = np.random.default_rng(7).standard_normal((99, 384))
    noise[:, [7, 383]] = 0.0
    # Orthogonal to the query, behind every other vector: past the semantic arm's
    # max(3·top_k, 100) candidates, so this one is found by its words alone.
    lexical_only = remember(db, "a heron on the weir", vector=vector(away))
    semantic_only = remember(db, "a picture of the sky", vector=vector(axis))
    for i, row in enumerate(noise):  # each nearer the query than ``away``, none exactly on it
        remember(db, f"filler number {i}", vector=vector(axis + row))
    assert lexical_only < semantic_only  # ids grow with time: the lexical one is older
    answer = recall(
        db,
        "heron",
        vector=vector(axis),
        arms=ArmWeights(semantic=1.0, lexical=1.0, graph=0.0),
        fusion=fusion,
        top_k=2,
    )
    assert answer.coverage.candidates.semantic == 100
    assert answer.coverage.candidates.lexical == 1
    first, second = answer.hits
    assert (first.id, second.id) == (lexical_only, semantic_only)
    assert (first.ranks.lexical, first.ranks.semantic) == (1, None)
    assert (second.ranks.semantic, second.ranks.lexical) == (1, None)
    assert first.score == second.score == tied_score


def test_graph_arm_walks_two_hops_with_falling_scores(db: Database) -> None:
    near = say(db, "Dana", "likes", "jazz")
    knows = run(
        db,
        Opcode.RELATION_CREATE,
        RelationCreate(
            request_id=rid(), type_="knows", from_=NameRef(name="Dana"), to=NameRef(name="Eli")
        ),
    )
    assert knows is not None
    one_hop = say(db, "Eli", "likes", "chess")
    eli_row = run(db, Opcode.STATEMENT_GET, _get(one_hop.statement_id))
    eli = eli_row.statement.subject  # type: ignore[attr-defined]
    assert isinstance(eli, EntityRef)
    request = StatementCreate(
        request_id=rid(),
        kind="fact",
        subject=NameRef(name="Fay"),
        predicate="mentors",
        object_=EntityValue(entity=eli.entity),
    )
    two_hops = run(db, Opcode.STATEMENT_CREATE, request)
    assert isinstance(two_hops, StatementCreateOk)
    far = say(db, "Fay", "likes", "opera")
    answer = recall(db, "Dana", arms=GRAPH)
    assert ids(answer)[:1] == [near.statement_id]
    found = set(ids(answer))
    assert {one_hop.statement_id, two_hops.statement_id, far.statement_id} <= found
    # An anchor starts the walk without naming anyone.
    anchored = recall(db, "", arms=GRAPH, entity_anchor=eli.entity)
    assert ids(anchored)[0] in (one_hop.statement_id, two_hops.statement_id)


def test_graph_arm_resolves_alias_and_fuzzy_names(db: Database) -> None:
    """The cue names its entity by exact name, by alias, or misspelt (fuzzy): each finds
    the same walk, whose statements score 1, 1/2 and 1/3 at hops 0, 1 and 2."""
    harriet = entity(db, "Harriet Vane", "Harry")
    peter = entity(db, "Peter")
    bunter = entity(db, "Bunter")
    entity(db, "Unrelated Person")
    writes = state(db, harriet, "writes", TextValue(text="detective novels"))
    link(db, harriet, "knows", peter)
    plays = state(db, peter, "plays", TextValue(text="cricket"))
    serves = state(db, bunter, "serves", EntityValue(entity=peter))  # reaches Bunter at hop 2
    polishes = state(db, bunter, "polishes", TextValue(text="silver"))
    expected = {
        STATEMENT_DOC + writes: 1.0,
        STATEMENT_DOC + plays: 1.0 / 2,
        STATEMENT_DOC + serves: 1.0 / 2,
        STATEMENT_DOC + polishes: 1.0 / 3,
    }
    for cue in ("Harriet Vane", "what did harry write", "Hariet Vane"):
        with db._store.read() as txn:
            starts = cue_entities(db._store, txn, _scope(), cue, DEFAULT_RESOLUTION)
            assert starts == {harriet}, cue
            scored = graph_search(
                db._store, txn, _scope(), starts=starts, filters=Filters(), limit=100
            )
        assert dict(scored) == expected, cue
        answer = recall(db, cue, arms=GRAPH)
        assert ids(answer) == [writes, *sorted((plays, serves)), polishes], cue
        assert [h.ranks.graph for h in answer.hits] == [1, 2, 3, 4]
    with db._store.read() as txn:
        assert cue_entities(db._store, txn, _scope(), "Wimsey", DEFAULT_RESOLUTION) == set()
    assert recall(db, "Wimsey", arms=GRAPH).abstained


def test_graph_arm_keeps_numbered_names_apart(db: Database) -> None:
    """A cue naming ``Rack 12`` starts from no other rack: digits are not misspellings."""
    racks = {n: entity(db, f"Rack {n}") for n in (11, 12, 13)}
    with db._store.read() as txn:
        for n, rack in racks.items():
            assert cue_entities(db._store, txn, _scope(), f"Rack {n}", DEFAULT_RESOLUTION) == {rack}
        # A misspelt word around the same number still finds it.
        assert cue_entities(db._store, txn, _scope(), "Rak 12", DEFAULT_RESOLUTION) == {racks[12]}
        assert cue_entities(db._store, txn, _scope(), "Rack 14", DEFAULT_RESOLUTION) == set()


def test_graph_walk_follows_only_the_links_of_the_world_asked_about(db: Database) -> None:
    """A relation or statement tombstoned since leads nowhere, unless the request includes
    tombstoned rows or asks as of before the tombstone; the tombstoned statement itself
    is still a candidate, which the chain drops and EXPLAIN counts."""
    ada, bo, cy = entity(db, "Ada"), entity(db, "Bo"), entity(db, "Cy")
    knows = link(db, ada, "knows", bo)
    mentors = state(db, ada, "mentors", EntityValue(entity=cy))
    tea = state(db, bo, "likes", TextValue(text="tea"))
    chess = state(db, cy, "likes", TextValue(text="chess"))
    before = recall(db, "Ada", arms=GRAPH)
    assert ids(before) == [mentors, *sorted((tea, chess))]
    probe = say(db, "Probe", "marks", "time")
    run(db, Opcode.RELATION_TOMBSTONE, RelationTombstone(request_id=rid(), id=knows))
    tombstone(db, mentors)
    now = run(db, Opcode.EXPLAIN, ExplainRequest(cue="Ada", arms=GRAPH))
    assert isinstance(now, ExplainOk)
    assert now.hits == () and now.coverage.candidates.graph == 1
    s = now.explain.survivors
    assert (s.fused, s.confidence, s.tombstone, s.limit) == (1, 1, 0, 0)
    wider = recall(db, "Ada", arms=GRAPH, include_tombstoned=True)
    assert ids(wider) == ids(before)
    past = recall(db, "Ada", arms=GRAPH, as_of=probe.recorded_at, explain=True)
    assert ids(past) == ids(before)
    assert past.explain is not None and past.explain.restored_by_as_of == 1


def _get(statement_id: bytes) -> Message:
    from brain.wire.messages.statement_ops import StatementGet

    return StatementGet(id=statement_id)


# --- the filter chain, as-of and EXPLAIN ------------------------------------------------


def test_explain_counts_every_step(db: Database) -> None:
    a_memory = remember(db, "quasar memo")  # dropped by type (records: statements)
    ended = say(db, "Q", "seen", "quasar ended", valid_from=10, valid_to=20)  # temporal
    unsure = say(db, "Q", "seen", "quasar unsure", confidence=0.1)  # confidence
    gone = say(db, "Q", "seen", "quasar gone")
    run(db, Opcode.STATEMENT_TOMBSTONE, StatementTombstone(request_id=rid(), id=gone.statement_id))
    old = say(db, "Q", "seen", "quasar old")
    run(
        db,
        Opcode.STATEMENT_SUPERSEDE,
        StatementSupersede(
            request_id=rid(),
            old=old.statement_id,
            new=StatementDraft(
                kind="fact",
                subject=NameRef(name="Q"),
                predicate="seen",
                object_=TextValue(text="quasar new"),
            ),
        ),
    )
    kept = [say(db, "Q", "seen", f"quasar kept {i}") for i in range(3)]
    as_of = kept[-1].recorded_at
    late = say(db, "Q", "seen", "quasar late")  # recorded after as_of
    del a_memory, ended, unsure, late
    request = ExplainRequest(
        cue="quasar",
        arms=LEXICAL,
        records=("statement",),
        valid_at=15 + 10**9,
        min_confidence=0.5,
        as_of=as_of,
        top_k=2,
    )
    answer = run(db, Opcode.EXPLAIN, request)
    assert isinstance(answer, ExplainOk)
    s = answer.explain.survivors
    # 10 candidates: memo, ended, unsure, gone, old, new, three kept, late.
    assert (s.fused, s.type_, s.temporal, s.confidence) == (10, 9, 8, 7)
    assert (s.tombstone, s.supersession, s.as_of, s.limit) == (6, 5, 4, 2)
    # "new" superseded "old" before as_of and is kept; "late" fails as-of.
    assert answer.explain.restored_by_as_of == 0
    assert len(answer.hits) == 2
    assert (answer.explain.fusion, answer.explain.rrf_k) == ("convex", None)
    assert answer.explain.timings_us.total >= answer.explain.timings_us.lexical
    same = recall(
        db,
        "quasar",
        arms=LEXICAL,
        records=("statement",),
        valid_at=15 + 10**9,
        min_confidence=0.5,
        as_of=as_of,
        top_k=2,
        explain=True,
    )
    assert same.explain is not None and same.explain.survivors == s
    assert [h.id for h in same.hits] == [h.id for h in answer.hits]
    # Without an explanation the chain stops at the second survivor: same hits.
    for top_k in (1, 2, 3, 4, 5):
        full = recall(db, "quasar", arms=LEXICAL, as_of=as_of, top_k=top_k, explain=True)
        short = recall(db, "quasar", arms=LEXICAL, as_of=as_of, top_k=top_k)
        assert short.explain is None
        assert [(h.id, h.score) for h in short.hits] == [(h.id, h.score) for h in full.hits]
        assert short.abstained == full.abstained and short.coverage == full.coverage


def test_explain_counts_the_graph_arms_candidates_like_any_others(db: Database) -> None:
    """Graph only: every statement the walk reaches goes to the chain, so the tombstone,
    supersession and as-of steps each remove one and as-of restores one, exactly as when
    the lexical arm finds the same statements."""
    gone = say(db, "Zed", "seen", "zircon gone").statement_id
    tombstone(db, gone)  # before as_of: removed at step 4 for good
    old = say(db, "Zed", "seen", "zircon old").statement_id
    new = supersede(db, old, "Zed", "seen", "zircon new")  # before as_of: old removed
    back = say(db, "Zed", "seen", "zircon back").statement_id
    kept = say(db, "Zed", "seen", "zircon kept")
    late = say(db, "Zed", "seen", "zircon late").statement_id  # after as_of
    tombstone(db, back)  # after as_of: removed at step 4, restored at step 6
    counts: list[object] = []
    for cue, arms in (("Zed", GRAPH), ("zircon", LEXICAL)):
        answer = run(db, Opcode.EXPLAIN, ExplainRequest(cue=cue, arms=arms, as_of=kept.recorded_at))
        assert isinstance(answer, ExplainOk)
        s = answer.explain.survivors
        assert (s.fused, s.type_, s.temporal, s.confidence) == (6, 6, 6, 6), cue
        assert (s.tombstone, s.supersession, s.as_of, s.limit) == (4, 3, 3, 3), cue
        assert answer.explain.restored_by_as_of == 1
        assert {h.id for h in answer.hits} == {new, back, kept.statement_id}
        assert late not in {h.id for h in answer.hits}
        counts.append(s)
    assert counts[0] == counts[1]
    now = run(db, Opcode.EXPLAIN, ExplainRequest(cue="Zed", arms=GRAPH))
    assert isinstance(now, ExplainOk)
    s = now.explain.survivors
    assert (s.fused, s.tombstone, s.supersession, s.as_of) == (6, 4, 3, 3)
    assert {h.id for h in now.hits} == {new, kept.statement_id, late}


def test_truth_table_through_recall(db: Database) -> None:
    """spec/04-retrieval.md §5, step 6: each row of the table as a recall."""
    base = say(db, "T", "row", "lynx base")
    t1 = base.recorded_at
    kept = say(db, "T", "row", "lynx later")  # recorded after t1
    # Rows 1-3: recorded before, at, after the instant asked about.
    assert base.statement_id in ids(recall(db, "lynx", arms=LEXICAL, as_of=kept.recorded_at))
    assert base.statement_id in ids(recall(db, "lynx", arms=LEXICAL, as_of=t1))
    assert kept.statement_id not in ids(recall(db, "lynx", arms=LEXICAL, as_of=t1))
    # Row 4: superseded before as_of; row 5: superseded after it (restored); row 6: at it.
    old = say(db, "T", "row2", "ocelot")
    probe = say(db, "T", "row", "lynx probe")
    new = run(
        db,
        Opcode.STATEMENT_SUPERSEDE,
        StatementSupersede(
            request_id=rid(),
            old=old.statement_id,
            new=StatementDraft(
                kind="fact",
                subject=NameRef(name="T"),
                predicate="row2",
                object_=TextValue(text="ocelot two"),
            ),
        ),
    )
    assert isinstance(new, StatementSupersedeOk)
    after = say(db, "T", "row", "lynx after")
    assert old.statement_id not in ids(recall(db, "ocelot", arms=LEXICAL))
    assert old.statement_id not in ids(recall(db, "ocelot", arms=LEXICAL, as_of=after.recorded_at))
    restored = recall(db, "ocelot", arms=LEXICAL, as_of=probe.recorded_at, explain=True)
    assert old.statement_id in ids(restored)
    assert restored.explain is not None and restored.explain.restored_by_as_of == 1
    assert old.statement_id not in ids(recall(db, "ocelot", arms=LEXICAL, as_of=new.recorded_at))
    # Row 7: tombstoned after as_of comes back; row 8: retracted never does.
    gone = say(db, "T", "row3", "serval")
    retracted = say(db, "T", "row3", "serval retracted")
    probe2 = say(db, "T", "row", "lynx probe two")
    run(db, Opcode.STATEMENT_TOMBSTONE, StatementTombstone(request_id=rid(), id=gone.statement_id))
    run(db, Opcode.STATEMENT_RETRACT, StatementRetract(request_id=rid(), id=retracted.statement_id))
    now = recall(db, "serval", arms=LEXICAL)
    assert gone.statement_id not in ids(now) and retracted.statement_id not in ids(now)
    back = recall(db, "serval", arms=LEXICAL, as_of=probe2.recorded_at)
    assert gone.statement_id in ids(back) and retracted.statement_id not in ids(back)
    assert retracted.statement_id not in ids(
        recall(db, "serval", arms=SEMANTIC, as_of=probe2.recorded_at, include_tombstoned=True)
    )
    with pytest.raises(AsOfInFuture):
        recall(db, "serval", as_of=2**62)


def test_abstention_says_what_was_searched(db: Database) -> None:
    remember(db, "nothing about cats here")
    answer = recall(db, "xylophone", arms=LEXICAL, valid_at=5, min_confidence=0.3)
    assert answer.abstained and answer.hits == ()
    assert answer.coverage.space == "default" and answer.coverage.corpus == 1
    assert answer.coverage.valid_at == 5 and answer.coverage.min_confidence == 0.3
    empty = recall(db, "", arms=LEXICAL)
    assert empty.abstained


def test_statement_hits_carry_checkable_evidence(db: Database) -> None:
    memory = remember(db, "Gus said he adores marmalade")
    sha = hashlib.sha256(b"Gus said he adores marmalade").digest()
    made = say(db, "Gus", "adores", "marmalade", evidence=(Evidence(memory=memory),))
    answer = recall(db, "marmalade", arms=LEXICAL, records=("statement",))
    (hit,) = answer.hits
    assert hit.id == made.statement_id and hit.statement is not None
    assert hit.evidence is not None and [(c.memory, c.sha256) for c in hit.evidence] == [
        (memory, sha)
    ]


def test_a_bad_vector_is_refused(db: Database) -> None:
    with pytest.raises(InvalidArgument) as caught:
        recall(db, "", vector=b"\x00" * 8)
    assert caught.value.field == "vector"


# --- forgetting and the indexes -----------------------------------------------------------


def _stored_keys(db: Database, table: bytes) -> list[bytes]:
    with db._store.read() as txn:
        return [bytes(k) for k, _ in txn.cursor(db=db._store.table(table))]


def test_hard_forget_leaves_no_trace_in_the_indexes(db: Database) -> None:
    secret = remember(db, "the vault code is walrus")
    cited = say(db, "Vault", "code", "walrus", evidence=(Evidence(memory=secret),))
    before = recall(db, "walrus", arms=LEXICAL)
    assert set(ids(before)) == {secret, cited.statement_id}
    assert db.wait_indexed()
    run(db, Opcode.FORGET, Forget(request_id=rid(), memory=secret, mode="hard"))
    assert db.wait_indexed()
    for arms in (LEXICAL, SEMANTIC):
        assert ids(recall(db, "walrus", arms=arms)) == []
        past = recall(db, "walrus", arms=arms, as_of=cited.recorded_at, include_tombstoned=True)
        assert ids(past) == []
    for table in (b"lex_docs", b"vectors", b"embed_queue"):
        assert not any(secret in k or cited.statement_id in k for k in _stored_keys(db, table))
    assert not any(
        k.endswith((b"m" + secret, b"s" + cited.statement_id))
        for k in _stored_keys(db, b"lex_postings")
    )


def test_soft_forget_hides_a_memory_until_asked_as_of_before(db: Database) -> None:
    memory = remember(db, "a heron at dawn")
    probe = say(db, "P", "probe", "nothing")
    run(db, Opcode.FORGET, Forget(request_id=rid(), memory=memory, mode="soft"))
    assert ids(recall(db, "heron", arms=LEXICAL)) == []
    assert ids(recall(db, "heron", arms=LEXICAL, as_of=probe.recorded_at)) == [memory]


def test_indexes_are_saved_and_reloaded_or_rebuilt(tmp_path: Path) -> None:
    path = tmp_path / "d"
    with brain.open(path) as db:
        wanted = [remember(db, f"pelican number {i}") for i in range(20)]
        assert db.wait_indexed()
        first = ids(recall(db, "pelican number 7", arms=SEMANTIC, top_k=20))
    assert set(first) == set(wanted)
    files = sorted((path / "index").glob("*.hnsw"))
    assert len(files) == 1
    with brain.open(path) as db:
        assert ids(recall(db, "pelican number 7", arms=SEMANTIC, top_k=20)) == first
    # Damaged: the hash no longer matches, so the index is rebuilt from LMDB.
    blob = bytearray(files[0].read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    files[0].write_bytes(bytes(blob))
    with brain.open(path) as db:
        assert ids(recall(db, "pelican number 7", arms=SEMANTIC, top_k=20)) == first
    # Missing altogether: rebuilt too.
    for leftover in (path / "index").iterdir():
        leftover.unlink()
    with brain.open(path) as db:
        assert ids(recall(db, "pelican number 7", arms=SEMANTIC, top_k=20)) == first


def test_stale_index_file_is_rebuilt(tmp_path: Path) -> None:
    path = tmp_path / "d"
    with brain.open(path) as db:
        remember(db, "cormorant one")
        assert db.wait_indexed()
    saved = {p.name: p.read_bytes() for p in (path / "index").iterdir()}
    with brain.open(path) as db:
        late = remember(db, "cormorant two")
        assert db.wait_indexed()
    # Put back the older files: they reflect an LSN before "two" was indexed.
    for name, data in saved.items():
        (path / "index" / name).write_bytes(data)
    with brain.open(path) as db:
        assert late in ids(recall(db, "cormorant two", arms=SEMANTIC))


def test_recall_never_crosses_a_scope(db: Database) -> None:
    mine = remember(db, "shared words in two places", space="a")
    theirs = remember(db, "shared words in two places", space="b")
    other_ns = run(
        db, Opcode.ENCODE, Encode(request_id=rid(), text="shared words in two places"), "other"
    )
    assert isinstance(other_ns, EncodeOk)
    say(db, "Shared", "words", "places", space="b")
    for arms in (LEXICAL, SEMANTIC, GRAPH, None):
        answer = recall(db, "shared words places", space="a", arms=arms)
        assert ids(answer) in ([mine], []) and theirs not in ids(answer)
        assert answer.coverage.corpus == 1


def test_client_vectors_are_checked_and_searched(db: Database) -> None:
    import struct

    with pytest.raises(InvalidArgument) as caught:
        remember(db, "short vector", vector=b"\x00\x00\x80\x3f" * 3)
    assert caught.value.field == "vector"
    direction = [0.0] * 384
    direction[7] = 3.0  # not unit length: the server normalises it
    own = remember(db, "a text with its own vector", vector=struct.pack("<384f", *direction))
    remember(db, "an ordinary text")
    unit = [0.0] * 384
    unit[7] = 1.0
    answer = recall(db, "", arms=SEMANTIC, vector=struct.pack("<384f", *unit))
    assert answer.hits[0].id == own and answer.hits[0].ranks.semantic == 1
