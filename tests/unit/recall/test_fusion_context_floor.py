"""Convex fusion, the conversational context and the relevance floor
(spec/04-retrieval.md §5, §6), through the engine with the hashing embedder."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brain.embed.hashing import HASHING_NAME
from brain.embed.minilm import MODEL_NAME
from brain.engine.database import Database
from brain.engine.recall.context import CONTEXT_GAP_NS, CONTEXT_WEIGHTS
from brain.engine.recall.fusion import (
    DEFAULT_WEIGHTS,
    NORMALISE_DEPTH,
    Fusion,
    fuse,
    fusion_of,
)
from brain.engine.recall.relevance import RELEVANCE_FLOORS, floor_of
from brain.engine.recall.when import TIME_WEIGHT, Span, cue_spans, in_spans
from brain.errors import InvalidArgument
from brain.wire.messages.memory_ops import Forget
from brain.wire.messages.recall_ops import ArmWeights, ExplainOk, ExplainRequest, Recall
from brain.wire.opcodes import Opcode
from tests.unit.common import rid
from tests.unit.recall.test_recall import LEXICAL, recall, remember, run

HOUR = 3600 * 10**9
T0 = 1_700_000_000 * 10**9


def explain(db: Database, cue: str, **kw: object) -> ExplainOk:
    answer = run(db, Opcode.EXPLAIN, ExplainRequest(cue=cue, **kw))  # type: ignore[arg-type]
    assert isinstance(answer, ExplainOk)
    return answer


# --- fusion ----------------------------------------------------------------------------


def test_convex_fusion_weighs_min_max_scaled_scores() -> None:
    ranked = {
        "semantic": [(b"\x01a", 0.9), (b"\x01b", 0.5), (b"\x01c", 0.1)],
        "lexical": [(b"\x01b", 12.0), (b"\x01d", 3.0)],
        "graph": [],
    }
    fusion = Fusion("convex", {"semantic": 0.4, "lexical": 0.6, "graph": 0.1}, None)
    fused = {c.key: c for c in fuse(ranked, fusion)}
    # semantic scales 0.9..0.1 onto 1..0; lexical 12..3 onto 1..0.
    assert fused[b"\x01a"].score == pytest.approx(0.4 * 1.0)
    assert fused[b"\x01b"].score == pytest.approx(0.4 * 0.5 + 0.6 * 1.0)
    assert fused[b"\x01c"].score == pytest.approx(0.0)
    assert fused[b"\x01d"].score == pytest.approx(0.0)
    assert [c.key for c in fuse(ranked, fusion)][:2] == [b"\x01b", b"\x01a"]
    assert fused[b"\x01b"].scores == {"semantic": 0.5, "lexical": 12.0}
    assert fused[b"\x01b"].ranks == {"semantic": 2, "lexical": 1}


def test_convex_scaling_stops_at_the_normalise_depth() -> None:
    """Scores are scaled over the best NORMALISE_DEPTH only, so a deeper candidate adds
    0 and the scale of the first ones does not depend on how many the arm returned."""
    deep = [(bytes([1]) + i.to_bytes(2, "big"), float(1000 - i)) for i in range(250)]
    short = deep[:NORMALISE_DEPTH]
    fusion = Fusion("convex", {"semantic": 0.0, "lexical": 1.0, "graph": 0.0}, None)
    long_scores = {
        c.key: c.score for c in fuse({"semantic": [], "lexical": deep, "graph": []}, fusion)
    }
    short_scores = {
        c.key: c.score for c in fuse({"semantic": [], "lexical": short, "graph": []}, fusion)
    }
    assert all(long_scores[key] == pytest.approx(short_scores[key]) for key in short_scores)
    assert all(long_scores[key] == 0.0 for key, _ in deep[NORMALISE_DEPTH:])


def test_an_arm_whose_candidates_score_alike_gives_each_its_full_weight() -> None:
    fusion = Fusion("convex", {"semantic": 0.0, "lexical": 0.0, "graph": 0.5}, None)
    fused = fuse(
        {"semantic": [], "lexical": [], "graph": [(b"\x02x", 1.0), (b"\x02y", 1.0)]}, fusion
    )
    assert [c.score for c in fused] == [0.5, 0.5]


def test_below_a_head_that_scores_alike_a_deeper_candidate_adds_nothing() -> None:
    head = [(b"\x02" + i.to_bytes(2, "big"), 1.0) for i in range(NORMALISE_DEPTH)]
    deeper = [(b"\x02\xff\xff", 0.5)]
    fusion = Fusion("convex", {"semantic": 0.0, "lexical": 0.0, "graph": 0.5}, None)
    fused = {
        c.key: c.score
        for c in fuse({"semantic": [], "lexical": [], "graph": head + deeper}, fusion)
    }
    assert all(fused[key] == 0.5 for key, _ in head)
    assert fused[deeper[0][0]] == 0.0


def test_the_request_chooses_the_fusion() -> None:
    assert fusion_of(Recall(cue="x")) == Fusion("convex", DEFAULT_WEIGHTS, None)
    assert fusion_of(Recall(cue="x", rrf_k=10)).method == "rrf"
    assert fusion_of(Recall(cue="x", rrf_k=10)).rrf_k == 10
    assert fusion_of(Recall(cue="x", fusion="rrf")) == Fusion(
        "rrf", {"semantic": 1.0, "lexical": 1.0, "graph": 1.0}, 60
    )
    named = fusion_of(Recall(cue="x", arms=ArmWeights(lexical=2.0)))
    assert named.weights == {**DEFAULT_WEIGHTS, "lexical": 2.0}
    with pytest.raises(InvalidArgument) as refused:
        Recall(cue="x", fusion="convex", rrf_k=10)
    assert refused.value.field == "rrf_k"


def test_explain_shows_each_arms_own_score_and_the_fusion(db: Database) -> None:
    kept = remember(db, "the kestrel hovered over the field")
    remember(db, "a kestrel")
    answer = explain(db, "kestrel hovered", arms=LEXICAL)
    assert answer.explain.fusion == "convex" and answer.explain.rrf_k is None
    top = answer.hits[0]
    assert top.id == kept
    assert top.arm_scores.lexical is not None and top.arm_scores.lexical > 0
    assert top.arm_scores.semantic is None and top.ranks.semantic is None
    both = explain(db, "kestrel hovered", fusion="rrf")
    assert both.explain.fusion == "rrf" and both.explain.rrf_k == 60
    hit = next(h for h in both.hits if h.id == kept)
    assert hit.arm_scores.semantic is not None and -1.0 <= hit.arm_scores.semantic <= 1.0
    # rrf's score is its formula over the ranks, whatever the arms' own scores.
    expected = sum(1.0 / (60 + r) for r in (hit.ranks.semantic, hit.ranks.lexical) if r)
    assert hit.score == pytest.approx(expected)


# --- conversational context ------------------------------------------------------------


def conversation(
    db: Database, texts: list[str], *, at: int, step: int = 0, **kw: object
) -> list[bytes]:
    return [remember(db, text, occurred_at=at + i * step, **kw) for i, text in enumerate(texts)]


TURNS = [
    "Ann: we should plan something",
    "Bob: what did you have in mind",
    "Ann: a trip to the lighthouse",
    "Bob: great, I will bring the camera",
    "Ann: see you then",
]


def test_a_turn_lends_to_its_neighbours_in_the_conversation(db: Database) -> None:
    ids = conversation(db, TURNS, at=T0, step=60 * 10**9)
    answer = explain(db, "lighthouse", arms=LEXICAL, top_k=5)
    by_id = {h.id: h for h in answer.hits}
    source = by_id[ids[2]]
    assert source.ranks.lexical == 1 and source.arm_scores.context is None
    for near, steps in ((1, 1), (3, 1), (0, 2), (4, 2)):
        hit = by_id[ids[near]]
        assert hit.ranks.lexical is None  # found only through its neighbour
        assert hit.arm_scores.context == pytest.approx(CONTEXT_WEIGHTS[steps - 1] * source.score)
        assert hit.score == pytest.approx(hit.arm_scores.context)
    assert [h.id for h in answer.hits] == [ids[2], ids[1], ids[3], ids[0], ids[4]]


def test_context_false_leaves_the_neighbours_out(db: Database) -> None:
    ids = conversation(db, TURNS, at=T0)
    answer = recall(db, "lighthouse", arms=LEXICAL, top_k=5, context=False)
    assert [h.id for h in answer.hits] == [ids[2]]


def test_a_conversation_ends_at_a_gap_another_context_or_a_memory_without_time(
    db: Database,
) -> None:
    before = remember(db, "Ann: much earlier", occurred_at=T0 - CONTEXT_GAP_NS - 1)
    source = remember(db, "Ann: the lighthouse again", occurred_at=T0)
    other = remember(db, "Bob: in another chat", occurred_at=T0, context="another chat")
    timeless = remember(db, "a note with no time")
    after = remember(db, "Ann: after the note", occurred_at=T0)
    answer = recall(db, "lighthouse", arms=LEXICAL, top_k=10)
    found = {h.id for h in answer.hits}
    assert source in found
    assert not found & {before, other, timeless, after}


def test_the_same_context_is_one_conversation_across_other_writes(db: Database) -> None:
    first = remember(db, "Ann: the lighthouse", occurred_at=T0, context="trip")
    reply = remember(db, "Bob: sounds good", occurred_at=T0 + HOUR // 2, context="trip")
    answer = recall(db, "lighthouse", arms=LEXICAL, top_k=10)
    assert [h.id for h in answer.hits] == [first, reply]


def test_memories_without_time_have_no_neighbours(db: Database) -> None:
    docs = [remember(db, text) for text in TURNS]
    answer = recall(db, "lighthouse", arms=LEXICAL, top_k=5)
    assert [h.id for h in answer.hits] == [docs[2]]


def test_a_forgotten_turn_neither_lends_nor_counts_as_a_step(db: Database) -> None:
    ids = conversation(db, TURNS, at=T0)
    run(db, Opcode.FORGET, Forget(request_id=rid(), memory=ids[3], mode="soft"))
    answer = explain(db, "lighthouse", arms=LEXICAL, top_k=5)
    shown = [h.id for h in answer.hits]
    assert ids[3] not in shown
    # Past the forgotten turn, the next one is one step away.
    after = next(h for h in answer.hits if h.id == ids[4])
    assert after.arm_scores.context == pytest.approx(CONTEXT_WEIGHTS[0] * answer.hits[0].score)
    run(db, Opcode.FORGET, Forget(request_id=rid(), memory=ids[2], mode="soft"))
    alone = recall(db, "lighthouse", arms=LEXICAL, top_k=5)
    assert alone.abstained and not alone.hits


def test_a_turn_recorded_after_as_of_lends_nothing(db: Database) -> None:
    early = remember(db, "Ann: we met at noon", occurred_at=T0)
    late = remember(db, "Ann: the lighthouse at dusk", occurred_at=T0 + 60 * 10**9)
    now = explain(db, "lighthouse", arms=LEXICAL, top_k=5)
    assert [h.id for h in now.hits] == [late, early]
    # At as_of the late turn was not yet believed: it is not shown, and lends nothing.
    past = explain(db, "lighthouse", arms=LEXICAL, top_k=5, as_of=_recorded_at(db, early))
    assert past.hits == ()


def _recorded_at(db: Database, memory_id: bytes) -> int:
    from brain.wire.messages.memory_ops import MemoryGet, MemoryGetOk

    got = run(db, Opcode.MEMORY_GET, MemoryGet(id=memory_id))
    assert isinstance(got, MemoryGetOk)
    return got.memory.recorded_at


def test_context_stays_in_its_scope(db: Database) -> None:
    mine = conversation(db, TURNS[:2], at=T0)
    theirs = [
        remember(db, text, occurred_at=T0, space="other") for text in ("Ann: the lighthouse", "x y")
    ]
    answer = recall(db, "lighthouse", arms=LEXICAL, top_k=10)
    assert not {h.id for h in answer.hits} & set(theirs)
    del mine


@settings(max_examples=25, deadline=None)
@given(
    offsets=st.lists(st.integers(0, 3), min_size=2, max_size=6),
    spaces=st.lists(st.sampled_from(["a", "b"]), min_size=6, max_size=6),
)
def test_no_neighbour_crosses_a_scope(
    tmp_path_factory: pytest.TempPathFactory, offsets: list[int], spaces: list[str]
) -> None:
    import brain
    from brain.engine.database import DatabaseOptions

    path = tmp_path_factory.mktemp("ctx") / "data"
    with brain.open(path, DatabaseOptions(embedder="hashing")) as db:
        owners: dict[bytes, str] = {}
        for i, offset in enumerate(offsets):
            space = spaces[i]
            text = f"turn {i} lighthouse" if i == 0 else f"turn {i} words"
            owners[remember(db, text, occurred_at=T0 + offset, space=space)] = space
        for space in ("a", "b"):
            answer = recall(db, "lighthouse words", top_k=10, space=space, min_relevance=-1.0)
            assert all(owners[h.id] == space for h in answer.hits)


# --- the relevance floor ---------------------------------------------------------------


def test_below_the_floor_the_answer_abstains_and_says_why(db: Database) -> None:
    remember(db, "kestrel falcon merlin")
    close = recall(db, "kestrel falcon merlin", min_relevance=0.9)
    assert close.hits and not close.abstained
    assert close.coverage.relevance is not None and close.coverage.relevance >= 0.9
    assert close.coverage.relevance_floor == 0.9
    far = recall(db, "kestrel owl heron swift", min_relevance=0.9)
    assert far.abstained and not far.hits
    assert far.coverage.relevance is not None and far.coverage.relevance < 0.9
    assert far.coverage.relevance_floor == 0.9
    never = recall(db, "kestrel owl heron swift", min_relevance=-1.0)
    assert never.hits and not never.abstained


def test_explain_counts_an_abstained_answer_at_the_limit(db: Database) -> None:
    remember(db, "kestrel falcon merlin")
    answer = explain(db, "kestrel owl heron swift", min_relevance=0.99)
    assert answer.hits == () and answer.explain.survivors.limit == 0
    assert answer.explain.survivors.as_of == 1


def test_without_the_semantic_arm_there_is_no_relevance(db: Database) -> None:
    remember(db, "kestrel falcon merlin")
    answer = recall(db, "kestrel", arms=LEXICAL, min_relevance=0.99)
    assert answer.hits and answer.coverage.relevance is None
    assert answer.coverage.relevance_floor is None


def test_the_default_floor_is_the_embedders_and_none_for_hashing(db: Database) -> None:
    remember(db, "kestrel falcon merlin")
    answer = recall(db, "kestrel")
    assert answer.coverage.relevance is not None and answer.coverage.relevance_floor is None
    assert RELEVANCE_FLOORS.get(HASHING_NAME) is None


def test_which_floor_applies() -> None:
    floor = RELEVANCE_FLOORS[MODEL_NAME]
    plain = Recall(cue="x")
    assert floor_of(plain, MODEL_NAME, ran=True, backlog=0) == floor
    assert floor_of(plain, MODEL_NAME, ran=False, backlog=0) is None
    assert floor_of(plain, MODEL_NAME, ran=True, backlog=3) is None  # the arm saw part
    own = Recall(cue="x", vector=b"\x00" * 4 * 384)
    assert floor_of(own, MODEL_NAME, ran=True, backlog=0) is None  # another model's scale
    asked = Recall(cue="x", min_relevance=0.1)
    assert floor_of(asked, MODEL_NAME, ran=True, backlog=3) == 0.1
    assert floor_of(plain, HASHING_NAME, ran=True, backlog=0) is None


# --- times the cue names ---------------------------------------------------------------


def _ns(year: int, month: int, day: int = 1) -> int:
    from datetime import UTC, datetime

    return int(datetime(year, month, day, tzinfo=UTC).timestamp()) * 10**9


@pytest.mark.parametrize(
    ("cue", "spans"),
    [
        ("what did Ann paint in July 2023?", [Span(2023, 7)]),
        ("on October 13, 2023 she showed it", [Span(2023, 10)]),
        ("on 13 October, 2023 she showed it", [Span(2023, 10)]),
        ("camping in June", [Span(None, 6)]),
        ("the beach in 2023, and again in 2024 and 2023", [Span(2023, None), Span(2024, None)]),
        ("Sept. or Dec 1999", [Span(None, 9), Span(1999, 12)]),
        ("you may go in march", []),  # lowercase: a verb and a noun, not months
        ("room 2150 and 1899", []),
        ("last year, yesterday", []),
    ],
)
def test_the_spans_a_cue_names(cue: str, spans: list[Span]) -> None:
    assert cue_spans(cue) == spans


def test_which_records_fall_in_a_span() -> None:
    from brain.engine.records.filters import RowTimes

    july = [Span(2023, 7)]
    event = RowTimes(
        kind=None, predicate=None, confidence=1.0, recorded_at=0, event_at=_ns(2023, 7, 9)
    )
    assert in_spans(event, july) and in_spans(event, [Span(None, 7)])
    assert not in_spans(event, [Span(2022, 7)]) and not in_spans(event, [Span(None, 8)])
    lasting = RowTimes(
        kind="fact",
        predicate="p",
        confidence=1.0,
        recorded_at=0,
        valid_from=_ns(2021, 3),
        valid_to=_ns(2023, 8),
    )
    assert in_spans(lasting, july) and in_spans(lasting, [Span(2022, None)])
    assert not in_spans(lasting, [Span(2023, 9)])
    assert not in_spans(lasting, [Span(None, 7)])  # a month of any year: events only
    assert not in_spans(None, july)


def test_a_record_in_the_named_time_moves_ahead(db: Database) -> None:
    strong = remember(db, "painted lake", occurred_at=_ns(2023, 5, 2))
    named = remember(
        db, "Ann painted a lake on a long summer afternoon", occurred_at=_ns(2023, 7, 4)
    )
    remember(db, "a lake far away from anything else at all", occurred_at=_ns(2023, 5, 2))
    cue = "lake painted in July 2023"
    off = recall(db, cue, arms=LEXICAL, context=False, named_time=False)
    assert [h.id for h in off.hits][:2] == [strong, named]
    assert off.hits[1].arm_scores.named_time is None
    best = off.hits[0].score
    on = recall(db, cue, arms=LEXICAL, context=False)
    assert [h.id for h in on.hits][:2] == [named, strong]
    assert on.hits[0].arm_scores.named_time == pytest.approx(TIME_WEIGHT * best)
    assert on.hits[0].score == pytest.approx(off.hits[1].score + TIME_WEIGHT * best)
    assert on.hits[1].score == pytest.approx(best)  # outside the span: unchanged
