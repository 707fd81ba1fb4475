"""RECALL and EXPLAIN: hybrid retrieval and its account (spec/04-retrieval.md §5, §6)."""

from __future__ import annotations

from typing import Annotated, Final

from brain.errors import InvalidArgument
from brain.wire.messages.common import ReadRequest, check_validity, check_vector
from brain.wire.messages.records import Citation, Memory, Statement
from brain.wire.messages.values import (
    MAX_LIST_LIMIT,
    U64_MAX,
    Confidence,
    Id,
    Kind,
    Nanos,
    Predicate,
    RecordType,
    Space,
    UInt,
    Vector,
)
from brain.wire.schema import Choice, Finite, Len, Message, Range, wire_message

__all__ = [
    "FUSIONS",
    "MAX_CUE_CHARS",
    "MAX_PREDICATE_FILTER",
    "MAX_TOP_K",
    "ArmScores",
    "ArmWeights",
    "Candidates",
    "Coverage",
    "Explain",
    "ExplainOk",
    "ExplainRequest",
    "Hit",
    "RankedHit",
    "Ranks",
    "Recall",
    "RecallOk",
    "Survivors",
    "Timings",
]

MAX_TOP_K: Final = MAX_LIST_LIMIT
"""Most hits one RECALL returns (spec/04-retrieval.md §6)."""

MAX_CUE_CHARS: Final = 64 * 1024
"""Longest cue: a query, possibly a whole conversation turn, never a corpus."""

MAX_PREDICATE_FILTER: Final = 1024
"""Most predicates one RECALL filters on: a schema's vocabulary, not a data set."""

_KINDS: Final = 3
_RECORD_TYPES: Final = 2
_ARMS: Final = ("semantic", "lexical", "graph")

Weight = Annotated[float, Range(0.0, None), Finite()]
"""An arm's weight in fusion: 0 disables the arm."""

Rank = Annotated[int, Range(1, U64_MAX)]
"""A rank within one arm, counted from 1."""

ArmName = Annotated[str, Choice(_ARMS)]
"""A retrieval arm."""

Score = Annotated[float, Finite()]
"""A fused score (spec/04-retrieval.md §5)."""

FUSIONS: Final = ("convex", "rrf")
"""The fusion functions a RECALL may ask for (spec/04-retrieval.md §5)."""

FusionName = Annotated[str, Choice(FUSIONS)]
"""How the arms' rankings become one."""

Relevance = Annotated[float, Range(-1.0, 1.0), Finite()]
"""A cosine similarity between the cue and a record (spec/04-retrieval.md §6)."""


@wire_message
class ArmWeights(Message):
    """``arms``: each arm's weight (server default 1.0 each; 0 disables one)."""

    semantic: Weight | None = None
    lexical: Weight | None = None
    graph: Weight | None = None


def _fusion_fields(request: Recall) -> None:
    """``rrf_k`` belongs to RRF: it asks for it, and a convex fusion has none."""
    if request.fusion == "convex" and request.rrf_k is not None:
        raise InvalidArgument("rrf_k applies to fusion rrf only", field="rrf_k")


@wire_message
class Recall(ReadRequest):
    """RECALL: search statements and memories by ``cue``, fuse the arms, filter.

    Defaults are the server's and stay absent on the wire: ``top_k`` 10, fusion
    ``convex`` (``rrf`` when ``rrf_k`` is given, its default 60), the server's arm
    weights, the conversational context on, the embedder's relevance floor, both
    record types. A list filter, when given, is never empty (an empty filter would
    be ambiguous: nothing, or no filter?)."""

    cue: Annotated[str, Len(0, MAX_CUE_CHARS)]
    top_k: Annotated[int, Range(1, MAX_TOP_K)] | None = None
    vector: Vector | None = None
    entity_anchor: Id | None = None
    arms: ArmWeights | None = None
    fusion: FusionName | None = None
    rrf_k: Rank | None = None
    context: bool | None = None
    """False leaves out the conversational context (spec/04-retrieval.md §5)."""
    named_time: bool | None = None
    """False leaves out the preference for the times the cue names (spec/04-retrieval.md §5)."""
    min_relevance: Relevance | None = None
    """The relevance floor below which the answer abstains; -1 never abstains
    (spec/04-retrieval.md §6)."""
    records: Annotated[tuple[RecordType, ...], Len(1, _RECORD_TYPES)] | None = None
    kinds: Annotated[tuple[Kind, ...], Len(1, _KINDS)] | None = None
    predicates: Annotated[tuple[Predicate, ...], Len(1, MAX_PREDICATE_FILTER)] | None = None
    valid_at: Nanos | None = None
    valid_from: Nanos | None = None
    valid_to: Nanos | None = None
    min_confidence: Confidence | None = None
    include_tombstoned: bool | None = None
    include_superseded: bool | None = None
    as_of: Nanos | None = None
    explain: bool | None = None
    txn_id: Id | None = None
    """Always refused (``INVALID_ARGUMENT``): the key exists so that the refusal can say
    why a recall cannot run inside a transaction (spec/05-durability.md §8)."""

    cross_checks = (check_vector, check_validity, _fusion_fields)


@wire_message
class ExplainRequest(Recall):
    """EXPLAIN: RECALL's request, answered with the account of how it was served."""


@wire_message
class Ranks(Message):
    """A hit's rank in every arm that found it."""

    semantic: Rank | None = None
    lexical: Rank | None = None
    graph: Rank | None = None


ArmScore = Annotated[float, Finite()]
"""One arm's own score of a hit: cosine similarity (semantic), BM25 (lexical), or the
graph arm's connection score (spec/04-retrieval.md §2 to §4)."""


@wire_message
class ArmScores(Message):
    """A hit's own score in every arm that found it, before fusion."""

    semantic: ArmScore | None = None
    lexical: ArmScore | None = None
    graph: ArmScore | None = None
    context: ArmScore | None = None
    """Not an arm: what the hit's neighbours in its conversation added to its fused
    score (spec/04-retrieval.md §5)."""
    named_time: ArmScore | None = None
    """Not an arm: what the hit's falling in a time the cue names added to its fused
    score (spec/04-retrieval.md §5)."""


@wire_message
class RankedHit(Message):
    """A hit without its record: what EXPLAIN lists."""

    record: RecordType
    id: Id
    score: Score
    ranks: Ranks
    arm_scores: ArmScores


def _hit_shape(hit: Hit) -> None:
    """A hit carries only the record of its own type, and evidence only for statements."""
    if hit.record != "statement":
        for key in ("statement", "evidence"):
            if getattr(hit, key) is not None:
                raise InvalidArgument(f"a {hit.record} hit has no {key}", field=key)
    if hit.record != "memory" and hit.memory is not None:
        raise InvalidArgument(f"a {hit.record} hit has no memory", field="memory")


@wire_message
class Hit(RankedHit):
    """One RECALL hit: its record and, for a statement, its evidence with hashes."""

    statement: Statement | None = None
    memory: Memory | None = None
    evidence: tuple[Citation, ...] | None = None

    cross_checks = (_hit_shape,)


@wire_message
class Candidates(Message):
    """How many candidates each arm produced."""

    semantic: UInt
    lexical: UInt
    graph: UInt


@wire_message
class Coverage(Message):
    """What was searched, so that an empty answer says what it is empty of."""

    space: Space
    arms: tuple[ArmName, ...]
    corpus: UInt
    candidates: Candidates
    as_of: Nanos | None = None
    valid_at: Nanos | None = None
    min_confidence: Confidence | None = None
    relevance: Relevance | None = None
    """The best cosine similarity between the cue and a record the filters kept (or,
    when the semantic arm found none of them, its weakest candidate's, which bounds
    theirs); absent when the semantic arm did not run (spec/04-retrieval.md §6)."""
    relevance_floor: Relevance | None = None
    """The floor the answer was held to; present when one applied. ``relevance`` below
    it is why the answer abstained."""
    embed_backlog: UInt | None = None
    """Entries of the scope's ``embed_queue`` in the answer's snapshot, counted up to
    1,000: documents the search could not see in the vector index yet (nor, for a
    statement an entity's rename re-indexes, by its new words); absent when none
    (spec/04-retrieval.md §3, §6)."""
    index_wait_ms: UInt | None = None
    """Milliseconds the recall waited for the vector index to take in its scope's
    acknowledged writes, at most ``retrieval.index_wait_s``; absent when it did not
    wait (spec/04-retrieval.md §3)."""


@wire_message
class Survivors(Message):
    """How many candidates were left after fusion and after each filter step."""

    fused: UInt
    type_: UInt
    temporal: UInt
    confidence: UInt
    tombstone: UInt
    supersession: UInt
    as_of: UInt
    limit: UInt


@wire_message
class Timings(Message):
    """Microseconds spent in each stage of a recall."""

    embed: UInt
    semantic: UInt
    lexical: UInt
    graph: UInt
    fuse: UInt
    filter_: UInt
    total: UInt


@wire_message
class Explain(Message):
    """The account of a recall: survivors per step, as-of restorations, timings."""

    survivors: Survivors
    restored_by_as_of: UInt
    fusion: FusionName
    timings_us: Timings
    rrf_k: Rank | None = None
    """Present for fusion ``rrf``."""


def _abstains_when_empty(answer: RecallOk) -> None:
    """Zero hits answer ``abstained: true`` (spec/04-retrieval.md §6)."""
    if not answer.hits and not answer.abstained:
        raise InvalidArgument("an answer without hits must abstain", field="abstained")


@wire_message
class RecallOk(Message):
    """The answer to RECALL; ``explain`` is present when the request asked for it."""

    hits: tuple[Hit, ...]
    abstained: bool
    coverage: Coverage
    explain: Explain | None = None

    cross_checks = (_abstains_when_empty,)


@wire_message
class ExplainOk(Message):
    """The answer to EXPLAIN: the account, the coverage and the ranked hits."""

    explain: Explain
    coverage: Coverage
    hits: tuple[RankedHit, ...]
