"""Conversational memory on LoCoMo: does RECALL find the turns that answer a question?

    OPENBLAS_NUM_THREADS=1 python -m bench locomo --data PATH [--quick] [--out P] [--no-save]

``PATH`` is a LoCoMo-format file (:mod:`bench.locomo_data`; the public one is
``data/locomo10.json`` of the GitHub repository snap-research/LoCoMo, licence
CC BY-NC 4.0, so the project ships none of it). The suite loads it the way an
agent would: an embedded database in a temporary directory, with the real
MiniLM embedder unless the caller's :class:`DatabaseOptions` say otherwise,
each conversation in a space of its own (:func:`space_name`), every turn
ENCODEd as ``"<speaker>: <text>"`` with ``occurred_at`` its session's date.
Every write is queued before any answer is awaited, so the writer commits them
in large groups; then the suite waits for the vector index. ENCODE stores a
text once per space: a memory is mapped to every turn that carried its text.

Every question of :data:`CUE_CATEGORIES` is a cue, asked in its
conversation's space with RECALL over memories, ``top_k`` :data:`TOP_K`, once
per mode of :data:`MODES` (the server's defaults, and each arm alone). Hits
are expanded to turns (a memory to all its turns, in order, at its rank), and
the question's evidence turns are the relevant ones, each of gain 1:
recall@10 and nDCG@10 read the first 10 turns, recall@50 the first 50. A
question whose evidence names no turn is asked but not scored; an evidence id
that names no turn is counted, reported and left out of the gains.

Abstention (``abstained: true``, which RECALL answers when it has no hit) is
counted per mode for the cues above (on topic: it should not abstain) and for
two sets of off-topic cues: each conversation's questions asked in the next
conversation's space (conversation ``i`` in space ``i + 1 mod n``; measured
only with two conversations or more), and the first :data:`OFF_TOPIC_QUERIES`
Cranfield queries (aeronautics, ``bench/data/cranfield``) in every space.

Two peers answer the same cues after the database is closed, so they never
share the cores with it, one conversation at a time over the texts the
database stored (one per memory): ``bm25s`` set up as its documentation shows
(:mod:`bench.peers.bm25s_english`, as in the ``quality`` suite), and
``dense``, the exact cosine top-k in numpy over the vectors of the project's
own in-process embedder (the database's kind), the cue embedded the same way.

The goals (spec/08-benchmarks.md §5) are held by the hybrid (the ``hybrid``
mode, the server's defaults): at least :data:`GOAL_MARGIN` above the best
single arm on recall@10 and on nDCG@10; recall@10 ≥ :data:`GOAL_RECALL_AT_10`;
nDCG@10 ≥ :data:`GOAL_NDCG_AT_10`; off-topic abstention ≥
:data:`GOAL_OFF_TOPIC_ABSTENTION` on each off-topic set; on-topic abstention ≤
:data:`GOAL_ON_TOPIC_ABSTENTION`. Each is written down as met or NOT MET.

The results hold numbers, ids and counts only: no question, answer or turn
text of the file. A full run writes ``bench/results/locomo.json``;
``--quick`` loads the first conversation and asks its first
:data:`QUICK_QUESTIONS` cues, and writes nothing unless ``--out`` says where.
:func:`run` takes the database options and the modes, so that other options
(an ablation) can be measured the same way; ``--mode NAME=JSON`` adds a mode
from the command line.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import time
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Final

import numpy as np

import brain
from bench import cranfield, harness, metrics
from bench.latency import latency_ms
from bench.locomo_data import CATEGORIES, Conversation, Question, load
from bench.modes import ABLATIONS, HYBRID, Mode, alone, parse_mode, request_of
from bench.peers.bm25s_english import NAME as BM25S
from bench.peers.bm25s_english import EnglishBm25
from brain import cbor
from brain.embed import Embedder, load_embedder
from brain.engine.database import Database, DatabaseOptions
from brain.wire.messages.memory_ops import Encode, EncodeOk
from brain.wire.messages.recall_ops import Recall, RecallOk
from brain.wire.opcodes import Opcode

__all__ = [
    "BASELINE_MODES",
    "CUE_CATEGORIES",
    "MODES",
    "OFF_TOPIC_QUERIES",
    "QUICK_QUESTIONS",
    "TOP_K",
    "Corpus",
    "Loaded",
    "SystemResult",
    "cues_of",
    "format_table",
    "load_corpus",
    "main",
    "ranked_turns",
    "run",
    "run_bm25s",
    "run_dense",
    "run_mode",
    "score_cue",
    "space_name",
]

RESULT_FILE: Final = "locomo.json"
"""The file name of this suite's results inside :data:`bench.harness.RESULTS`."""

NAMESPACE: Final = "default"
"""The namespace of every request; the conversations are kept apart by space."""

SPACE_PREFIX: Final = "locomo."
"""Conversation ``i`` lives in space ``locomo.<i>`` (sample ids need not be valid space names)."""

EMBEDDER: Final = "minilm"
"""The real model: a quality figure taken with the test-only hashing embedder means nothing."""

CUE_CATEGORIES: Final = (1, 2, 3, 4)
"""The categories asked as cues: category 5 (adversarial) has no evidence to find."""

TOP_K: Final = 50
"""Hits asked of each RECALL: as deep as recall@50 looks."""

HIT_DEPTH: Final = metrics.NDCG_DEPTH
"""The turns recall@10 and nDCG@10 read: the 10 hits a RECALL returns by default."""

RECORDS: Final = ("memory",)
"""Turns are memories; the filter says what is scored."""

INDEX_TIMEOUT_S: Final = 3600.0
"""Longest wait for the vector index to take the turns: the numpy MiniLM embeds a few
dozen short turns a second on two cores, so ten conversations take minutes; an hour
means something is stuck."""

QUICK_CONVERSATIONS: Final = 1
"""Conversations a quick run loads: a few hundred turns, well under a minute of embedding."""

QUICK_QUESTIONS: Final = 40
"""Cues a quick run asks (each once per mode and peer): enough to see sane figures."""

OFF_TOPIC_QUERIES: Final = 50
"""Cranfield queries asked in every space as off-topic cues: the first ones by id."""

REQUEST_ID_PREFIX: Final = b"locomo"
"""Request ids are this prefix, the conversation and the turn, so a replayed load is idempotent."""

_REQUEST_ID_BYTES: Final = 16
"""Request ids are 16 bytes on the wire (spec/01-wire.md §2)."""

_CONVERSATION_ID_BYTES: Final = 2
"""Bytes of a request id that number the conversation (up to 65,536 conversations)."""

_ROUND: Final = 4
"""Decimal places kept for scores and rates in the JSON: differences below 1e-4 are noise."""

_SECONDS_ROUND: Final = 3
"""Decimal places kept for durations in seconds."""

MODES: Final[Mapping[str, Mode]] = {
    HYBRID: {},
    "semantic": alone("semantic"),
    "lexical": alone("lexical"),
    "graph": alone("graph"),
}
"""The modes every run asks: the server's defaults, and each arm alone (its own
ranking, the baseline it is measured against; :mod:`bench.modes`)."""

BASELINE_MODES: Final[Mapping[str, Mode]] = {
    "before": {"fusion": "rrf", "context": False, "named_time": False, "min_relevance": -1.0},
}
"""What ``--baseline`` asks of a database without the extractor: equal-weight RRF and
none of the steps after fusion nor the relevance floor, i.e. RECALL's defaults before
the convex fusion, the context, the named times, the floor and the extractor (the
arms themselves are unchanged, so the arm modes serve as their own baseline)."""

SINGLE_ARMS: Final = ("semantic", "lexical", "graph")
"""The modes the hybrid is measured against (those of them that were run)."""

DENSE: Final = "dense"
"""The name of the exact-cosine peer in the results."""

ON_TOPIC: Final = "on_topic"
ROTATED: Final = "off_topic_rotated"
CRANFIELD: Final = "off_topic_cranfield"
CUE_SETS: Final = (ON_TOPIC, ROTATED, CRANFIELD)
"""The cue sets whose abstention is counted: the questions in their own conversation's
space, in the next conversation's, and Cranfield queries in every space."""

METRICS: Final = (
    ("recall_at_10", "recall@10"),
    ("recall_at_50", "recall@50"),
    ("ndcg_at_10", "nDCG@10"),
)
"""Each scored metric's JSON key and its name in tables."""

GOAL_MARGIN: Final = 0.05
"""How far above the best single arm the hybrid must be, on recall@10 and nDCG@10: fusing
three arms should find clearly more than the best of them alone."""

GOAL_RECALL_AT_10: Final = 0.72
"""The hybrid's recall@10 goal: most evidence turns among the ten hits an agent reads."""

GOAL_NDCG_AT_10: Final = 0.55
"""The hybrid's nDCG@10 goal: the evidence near the top of those ten."""

GOAL_OFF_TOPIC_ABSTENTION: Final = 0.80
"""The share of off-topic cues the hybrid should abstain on: a memory that has nothing on
the cue should say so rather than return its nearest neighbours."""

GOAL_ON_TOPIC_ABSTENTION: Final = 0.05
"""The most on-topic cues the hybrid may abstain on: abstaining must not cost recall."""


@dataclasses.dataclass(frozen=True, slots=True)
class Loaded:
    """One conversation as stored: its space and memory id → its turns (by position)."""

    conversation: Conversation
    space: str
    turns_by_memory: dict[bytes, tuple[int, ...]]
    """Every memory, in the order first stored, with the positions (in
    :attr:`Conversation.turns`) of the turns that carried its text, ascending."""
    deduplicated: int
    """Turns whose ENCODE answered with the memory of an earlier turn of the same text."""
    position_of: dict[str, int]
    """Each turn's position in :attr:`Conversation.turns`, by its ``dia_id``."""

    @property
    def memories(self) -> tuple[bytes, ...]:
        """Every memory id, in :attr:`turns_by_memory` order."""
        return tuple(self.turns_by_memory)

    def texts(self) -> list[str]:
        """The stored text of every memory, in :attr:`turns_by_memory` order."""
        turns = self.conversation.turns
        return [turns[positions[0]].memory_text for positions in self.turns_by_memory.values()]


@dataclasses.dataclass(frozen=True, slots=True)
class Corpus:
    """What loading produced: each conversation as stored, and the costs."""

    loaded: tuple[Loaded, ...]
    load_s: float
    index_s: float
    indexed: bool


@dataclasses.dataclass(frozen=True, slots=True)
class CueScore:
    """One scored cue: its category and its three figures."""

    category: int
    recall_at_10: float
    recall_at_50: float
    ndcg_at_10: float


@dataclasses.dataclass(slots=True)
class SystemResult:
    """A mode's or a peer's scores, latencies (seconds) and abstentions per cue set."""

    scores: dict[tuple[int, int], CueScore] = dataclasses.field(default_factory=dict)
    """By (conversation position, question index)."""
    latencies_s: list[float] = dataclasses.field(default_factory=list)
    """One per on-topic cue."""
    asked: dict[str, int] = dataclasses.field(default_factory=dict)
    abstained: dict[str, int] = dataclasses.field(default_factory=dict)
    empty_answers: int = 0
    """On-topic cues answered with no hit (for a peer: no text scored above 0)."""
    seconds: float = 0.0


def space_name(position: int) -> str:
    """The space of the conversation at ``position`` in the file."""
    return f"{SPACE_PREFIX}{position}"


def cues_of(conversation: Conversation, limit: int | None = None) -> list[Question]:
    """The conversation's questions of :data:`CUE_CATEGORIES`, in file order, at most ``limit``."""
    cues = [q for q in conversation.questions if q.category in CUE_CATEGORIES]
    return cues if limit is None else cues[:limit]


def _request(mode: Mode, space: str, cue: str) -> Recall:
    return request_of(mode, cue, top_k=TOP_K, records=RECORDS, space=space)


def _request_id(conversation: int, turn: int) -> bytes:
    head = REQUEST_ID_PREFIX + conversation.to_bytes(_CONVERSATION_ID_BYTES, "big")
    return head + turn.to_bytes(_REQUEST_ID_BYTES - len(head), "big")


def load_corpus(db: Database, conversations: Sequence[Conversation]) -> Corpus:
    """ENCODE every turn into its conversation's space, then wait for the vector index.

    Every write is queued before any answer is awaited; the load time ends with
    the last acknowledgement, and the index time is the wait for the embedder
    to catch up after it."""
    started = time.perf_counter()
    pending: list[list[Future[bytes]]] = []
    for c, conversation in enumerate(conversations):
        space = space_name(c)
        futures: list[Future[bytes]] = []
        for session in conversation.sessions:
            for turn in session.turns:
                request = Encode(
                    request_id=_request_id(c, len(futures)),
                    space=space,
                    text=turn.memory_text,
                    occurred_at=session.occurred_at,
                )
                futures.append(db.submit(NAMESPACE, Opcode.ENCODE, request))
        pending.append(futures)
    loaded: list[Loaded] = []
    for c, (conversation, futures) in enumerate(zip(conversations, pending, strict=True)):
        positions: dict[bytes, list[int]] = {}
        deduplicated = 0
        for position, future in enumerate(futures):
            answer = EncodeOk.from_wire(cbor.decode(future.result()))
            owners = positions.setdefault(answer.memory_id, [])
            deduplicated += bool(answer.deduplicated or owners)
            owners.append(position)
        loaded.append(
            Loaded(
                conversation=conversation,
                space=space_name(c),
                turns_by_memory={memory: tuple(turns) for memory, turns in positions.items()},
                deduplicated=deduplicated,
                position_of={turn.dia_id: i for i, turn in enumerate(conversation.turns)},
            )
        )
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    indexed = db.wait_indexed(timeout=INDEX_TIMEOUT_S)
    return Corpus(
        loaded=tuple(loaded),
        load_s=load_s,
        index_s=time.perf_counter() - started,
        indexed=indexed,
    )


def ranked_turns(
    memories: Sequence[bytes], turns_by_memory: Mapping[bytes, Sequence[int]]
) -> list[int]:
    """Ranked memories as ranked turns (positions), best first, each turn once.

    A memory stands for every turn that carried its text, in order, at its
    rank. A memory that was never loaded is an error: the answer came from
    somewhere else."""
    ranked: list[int] = []
    seen: set[int] = set()
    for memory in memories:
        turns = turns_by_memory.get(memory)
        if turns is None:
            raise RuntimeError(f"memory {memory.hex()} was never loaded into this space")
        for turn in turns:
            if turn not in seen:
                seen.add(turn)
                ranked.append(turn)
    return ranked


def score_cue(category: int, ranked: Sequence[int], relevant: Collection[int]) -> CueScore:
    """Recall@10, recall@50 and nDCG@10 (gain 1 per evidence turn) of a ranking of turns."""
    gains = dict.fromkeys(relevant, 1)
    return CueScore(
        category=category,
        recall_at_10=metrics.recall_at_k(ranked, relevant, HIT_DEPTH),
        recall_at_50=metrics.recall_at_k(ranked, relevant, TOP_K),
        ndcg_at_10=metrics.ndcg_at_k(ranked, gains, HIT_DEPTH),
    )


def _evidence_turns(loaded: Loaded, question: Question) -> set[int]:
    return {loaded.position_of[dia_id] for dia_id in question.evidence}


def _recall(db: Database, space: str, cue: str, mode: Mode) -> tuple[RecallOk, float]:
    request = _request(mode, space, cue)
    started = time.perf_counter()
    answer = db.execute(NAMESPACE, Opcode.RECALL, request)
    elapsed = time.perf_counter() - started
    if not isinstance(answer, RecallOk):
        raise TypeError(f"RECALL answered {type(answer).__name__}")
    return answer, elapsed


def _memory_ids(answer: RecallOk) -> list[bytes]:
    for hit in answer.hits:
        if hit.record != "memory":
            raise RuntimeError(f"RECALL over memories answered a {hit.record} hit")
    return [hit.id for hit in answer.hits]


def _count(result: SystemResult, cue_set: str, abstained: bool) -> None:
    result.asked[cue_set] = result.asked.get(cue_set, 0) + 1
    result.abstained[cue_set] = result.abstained.get(cue_set, 0) + abstained


def run_mode(
    db: Database,
    mode: Mode,
    corpus: Corpus,
    cues: Sequence[Sequence[Question]],
    off_topic: Sequence[str],
) -> SystemResult:
    """Ask every cue with ``mode`` in its own space (scored and timed), then the off-topic
    cues (abstention only). ``cues[i]`` are conversation ``i``'s.

    One unscored RECALL first warms the mode's code paths, so the first timed
    cue does not pay for them."""
    result = SystemResult()
    started = time.perf_counter()
    first = next((c for c, asked in enumerate(cues) if asked), None)
    if first is not None:
        _recall(db, corpus.loaded[first].space, cues[first][0].question, mode)
    for c, loaded in enumerate(corpus.loaded):
        for question in cues[c]:
            answer, elapsed = _recall(db, loaded.space, question.question, mode)
            result.latencies_s.append(elapsed)
            result.empty_answers += not answer.hits
            _count(result, ON_TOPIC, answer.abstained)
            relevant = _evidence_turns(loaded, question)
            if relevant:
                ranked = ranked_turns(_memory_ids(answer), loaded.turns_by_memory)
                result.scores[(c, question.index)] = score_cue(question.category, ranked, relevant)
    spaces = len(corpus.loaded)
    if spaces > 1:
        for c in range(spaces):
            other = corpus.loaded[(c + 1) % spaces].space
            for question in cues[c]:
                answer, _ = _recall(db, other, question.question, mode)
                _count(result, ROTATED, answer.abstained)
    for loaded in corpus.loaded:
        for query in off_topic:
            answer, _ = _recall(db, loaded.space, query, mode)
            _count(result, CRANFIELD, answer.abstained)
    result.seconds = time.perf_counter() - started
    return result


def _score_peer(
    result: SystemResult, c: int, loaded: Loaded, question: Question, found: Sequence[int]
) -> None:
    """Score a peer's ranking of memory positions (in :attr:`Loaded.turns_by_memory` order)."""
    memories = loaded.memories
    result.empty_answers += not found
    relevant = _evidence_turns(loaded, question)
    if relevant:
        ranked = ranked_turns([memories[i] for i in found], loaded.turns_by_memory)
        result.scores[(c, question.index)] = score_cue(question.category, ranked, relevant)


def run_bm25s(
    corpus: Corpus, cues: Sequence[Sequence[Question]]
) -> tuple[SystemResult, dict[str, object]]:
    """bm25s over each conversation's stored texts, asked every cue; scored like a mode.

    Each cue's time covers tokenizing it and ``retrieve``; the index time is the
    sum over conversations. Returns the scores and how the peer was set up."""
    result = SystemResult()
    started = time.perf_counter()
    index_s = 0.0
    config: dict[str, object] = {}
    for c, loaded in enumerate(corpus.loaded):
        peer = EnglishBm25(loaded.texts())
        index_s += peer.index_s
        config = peer.config()
        for question in cues[c]:
            begun = time.perf_counter()
            found = peer.ranked(question.question, TOP_K)
            result.latencies_s.append(time.perf_counter() - begun)
            _score_peer(result, c, loaded, question, found)
    result.seconds = time.perf_counter() - started
    config.update(top_k=TOP_K, index_seconds=round(index_s, _SECONDS_ROUND), per="conversation")
    return result, config


def run_dense(
    corpus: Corpus, cues: Sequence[Sequence[Question]], embedder: Embedder
) -> tuple[SystemResult, dict[str, object]]:
    """Exact cosine top-k in numpy over ``embedder``'s vectors of each conversation's stored
    texts, the cue embedded the same way; scored like a mode.

    The vectors are unit length, so cosine is the dot product; ties keep the
    order the texts were stored in. Each cue's time covers embedding it and the
    search; the index time is embedding the texts."""
    result = SystemResult()
    started = time.perf_counter()
    index_s = 0.0
    for c, loaded in enumerate(corpus.loaded):
        begun = time.perf_counter()
        vectors = embedder.embed(loaded.texts())
        index_s += time.perf_counter() - begun
        for question in cues[c]:
            begun = time.perf_counter()
            cue = embedder.embed([question.question])[0]
            similarity = vectors @ cue
            best = np.argsort(-similarity, kind="stable")[:TOP_K]
            result.latencies_s.append(time.perf_counter() - begun)
            _score_peer(result, c, loaded, question, [int(i) for i in best])
    result.seconds = time.perf_counter() - started
    config: dict[str, object] = {
        "name": DENSE,
        "embedder": embedder.name,
        "search": "exact cosine (dot product of unit vectors), numpy argsort, stable",
        "top_k": TOP_K,
        "per": "conversation",
        "index_seconds": round(index_s, _SECONDS_ROUND),
    }
    return result, config


def _figures(scores: Sequence[CueScore]) -> dict[str, object]:
    """The three metrics' means over ``scores`` and how many cues they average (None: none)."""
    if not scores:
        return {key: None for key, _ in METRICS} | {"scored": 0}
    figures: dict[str, object] = {
        key: round(metrics.mean(getattr(score, key) for score in scores), _ROUND)
        for key, _ in METRICS
    }
    figures["scored"] = len(scores)
    return figures


def _abstention(result: SystemResult) -> dict[str, object]:
    """Per cue set, the share of cues abstained on (None: the set was not asked)."""
    out: dict[str, object] = {}
    for cue_set in CUE_SETS:
        asked = result.asked.get(cue_set, 0)
        abstained = result.abstained.get(cue_set, 0)
        out[cue_set] = {
            "rate": round(abstained / asked, _ROUND) if asked else None,
            "abstained": abstained,
            "asked": asked,
        }
    return out


def _summary(result: SystemResult, *, abstains: bool) -> dict[str, object]:
    scores = list(result.scores.values())
    summary: dict[str, object] = {
        "overall": _figures(scores),
        "by_category": {
            str(category): {
                "name": CATEGORIES[category],
                **_figures([s for s in scores if s.category == category]),
            }
            for category in CUE_CATEGORIES
        },
        "latency_ms": latency_ms(result.latencies_s),
        "empty_answers": result.empty_answers,
        "seconds": round(result.seconds, _SECONDS_ROUND),
    }
    if abstains:
        summary["abstention"] = _abstention(result)
    return summary


def _verdict(
    statement: str, value: float | None, bound: float, *, at_least: bool
) -> dict[str, object]:
    """A goal's record: ``met`` is None when the figure was not measured."""
    met = None if value is None else (value >= bound if at_least else value <= bound)
    return {
        "statement": statement,
        "value": None if value is None else round(value, _ROUND),
        "bound": round(bound, _ROUND),
        "at_least": at_least,
        "met": met,
    }


def _mean_of(result: SystemResult, key: str) -> float | None:
    scores = list(result.scores.values())
    return metrics.mean(getattr(s, key) for s in scores) if scores else None


def _rate(result: SystemResult, cue_set: str) -> float | None:
    asked = result.asked.get(cue_set, 0)
    return result.abstained.get(cue_set, 0) / asked if asked else None


def _goal(results: Mapping[str, SystemResult]) -> dict[str, dict[str, object]]:
    """Every goal of the hybrid, on unrounded figures, each with whether it was met."""
    hybrid = results[HYBRID]
    goals: dict[str, dict[str, object]] = {}
    arms = [mode for mode in SINGLE_ARMS if mode in results]
    for key, label in (("recall_at_10", "recall@10"), ("ndcg_at_10", "nDCG@10")):
        ours = _mean_of(hybrid, key)
        means = {mode: _mean_of(results[mode], key) for mode in arms}
        measured = {mode: value for mode, value in means.items() if value is not None}
        best = max(measured, key=lambda mode: measured[mode]) if measured else None
        bound = measured[best] + GOAL_MARGIN if best is not None else GOAL_MARGIN
        verdict = _verdict(
            f"hybrid {label} >= best single arm + {GOAL_MARGIN}",
            ours if best is not None else None,
            bound,
            at_least=True,
        )
        verdict["best_single_arm"] = best
        verdict["best_single_arm_value"] = (
            round(measured[best], _ROUND) if best is not None else None
        )
        goals[f"{key}_over_best_arm"] = verdict
    goals["recall_at_10"] = _verdict(
        f"hybrid recall@10 >= {GOAL_RECALL_AT_10}",
        _mean_of(hybrid, "recall_at_10"),
        GOAL_RECALL_AT_10,
        at_least=True,
    )
    goals["ndcg_at_10"] = _verdict(
        f"hybrid nDCG@10 >= {GOAL_NDCG_AT_10}",
        _mean_of(hybrid, "ndcg_at_10"),
        GOAL_NDCG_AT_10,
        at_least=True,
    )
    for cue_set in (ROTATED, CRANFIELD):
        goals[f"{cue_set}_abstention"] = _verdict(
            f"hybrid abstains on >= {GOAL_OFF_TOPIC_ABSTENTION} of {cue_set} cues",
            _rate(hybrid, cue_set),
            GOAL_OFF_TOPIC_ABSTENTION,
            at_least=True,
        )
    goals["on_topic_abstention"] = _verdict(
        f"hybrid abstains on <= {GOAL_ON_TOPIC_ABSTENTION} of on-topic cues",
        _rate(hybrid, ON_TOPIC),
        GOAL_ON_TOPIC_ABSTENTION,
        at_least=False,
    )
    return goals


def _summary_rows(goals: Mapping[str, Mapping[str, object]]) -> list[dict[str, object]]:
    """The results-table rows: one per measured goal, our figure against its bound."""
    rows: list[dict[str, object]] = []
    for verdict in goals.values():
        value = verdict["value"]
        if not isinstance(value, float):
            continue  # not measured (one conversation has no neighbour to rotate to)
        best = verdict.get("best_single_arm_value")
        row = harness.row(
            f"LoCoMo: {verdict['statement']}",
            "share",
            value,
            peer=best if isinstance(best, float) else None,
            peer_name=f"our {verdict['best_single_arm']} arm" if isinstance(best, float) else None,
        )
        row.update(
            goal=verdict["statement"],
            bound=verdict["bound"],
            at_least=verdict["at_least"],
            met=verdict["met"],
        )
        rows.append(row)
    return rows


def _cell(value: object) -> str:
    return f"{value:.4f}" if isinstance(value, float) else "—"


def _table(
    modes: Mapping[str, Mapping[str, object]],
    peers: Mapping[str, Mapping[str, object]],
    goals: Mapping[str, Mapping[str, object]],
) -> str:
    """The results as Markdown: overall figures, recall@10 per category, then the goals."""
    shown = {**modes, **{f"{name} (peer)": summary for name, summary in peers.items()}}
    lines = [
        "| system | recall@10 | recall@50 | nDCG@10 | p50 ms | p95 ms "
        "| abstain on-topic | abstain rotated | abstain Cranfield |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, summary in shown.items():
        overall, latency = summary["overall"], summary["latency_ms"]
        assert isinstance(overall, dict) and isinstance(latency, dict)
        rates = ["—"] * len(CUE_SETS)
        abstention = summary.get("abstention")
        if isinstance(abstention, dict):
            rates = [_cell(abstention[cue_set]["rate"]) for cue_set in CUE_SETS]
        lines.append(
            f"| {name} | "
            + " | ".join(_cell(overall[key]) for key, _ in METRICS)
            + f" | {latency['p50']:.1f} | {latency['p95']:.1f} | "
            + " | ".join(rates)
            + " |"
        )
    lines += [
        "",
        "| system | "
        + " | ".join(f"{CATEGORIES[c]} r@10 / nDCG@10" for c in CUE_CATEGORIES)
        + " |",
        "|---|" + "---:|" * len(CUE_CATEGORIES),
    ]
    for name, summary in shown.items():
        by_category = summary["by_category"]
        assert isinstance(by_category, dict)
        cells = [
            f"{_cell(by_category[str(c)]['recall_at_10'])} / "
            f"{_cell(by_category[str(c)]['ndcg_at_10'])}"
            for c in CUE_CATEGORIES
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("")
    for verdict in goals.values():
        met = verdict["met"]
        status = "not measured" if met is None else "met" if met else "NOT MET"
        line = f"goal {verdict['statement']}: {status} ({_cell(verdict['value'])}"
        if verdict.get("best_single_arm") is not None:
            line += f" vs {verdict['best_single_arm']} {_cell(verdict['best_single_arm_value'])}"
        lines.append(line + f", bound {verdict['bound']})")
    return "\n".join(lines)


def format_table(result: Mapping[str, object]) -> str:
    """The tables and goal lines of a result document of :func:`run`, as Markdown."""
    modes, peers, goals = result["modes"], result["peers"], result["goal"]
    assert isinstance(modes, dict) and isinstance(peers, dict) and isinstance(goals, dict)
    return _table(modes, peers, goals)


def _collection(
    corpus: Corpus, cues: Sequence[Sequence[Question]], off_topic: int
) -> dict[str, object]:
    """Counts and ids of what was loaded and asked; never a text of the file."""
    per: list[dict[str, object]] = []
    by_category = dict.fromkeys(CATEGORIES, 0)
    without_evidence = unknown = 0
    for loaded, asked in zip(corpus.loaded, cues, strict=True):
        conversation = loaded.conversation
        categories = dict.fromkeys(CATEGORIES, 0)
        for question in conversation.questions:
            categories[question.category] += 1
            by_category[question.category] += 1
        unscored = [q.index for q in asked if not q.evidence]
        unnamed = [
            [q.index, dia_id] for q in conversation.questions for dia_id in q.unknown_evidence
        ]
        without_evidence += len(unscored)
        unknown += len(unnamed)
        per.append(
            {
                "sample_id": conversation.sample_id,
                "space": loaded.space,
                "sessions": len(conversation.sessions),
                "dates_without_session": list(conversation.dates_without_session),
                "turns": len(conversation.turns),
                "memories": len(loaded.turns_by_memory),
                "deduplicated": loaded.deduplicated,
                "questions_by_category": {str(k): n for k, n in categories.items()},
                "cues": len(asked),
                "cues_without_evidence": unscored,
                "unknown_evidence": unnamed,
            }
        )
    return {
        "conversations": len(corpus.loaded),
        "turns": sum(len(loaded.conversation.turns) for loaded in corpus.loaded),
        "memories": sum(len(loaded.turns_by_memory) for loaded in corpus.loaded),
        "deduplicated": sum(loaded.deduplicated for loaded in corpus.loaded),
        "questions_by_category": {str(k): n for k, n in by_category.items()},
        "cues": sum(len(asked) for asked in cues),
        "cues_without_evidence": without_evidence,
        "unknown_evidence_ids": unknown,
        "off_topic_cranfield_queries": off_topic,
        "per_conversation": per,
    }


def run(
    data: Path,
    *,
    quick: bool = False,
    options: DatabaseOptions | None = None,
    modes: Mapping[str, Mode] = MODES,
    off_topic_queries: int = OFF_TOPIC_QUERIES,
    baseline: bool = False,
) -> dict[str, object]:
    """Load ``data``, ask every cue in every mode and of both peers; the result document.

    ``options`` open the database (default: :data:`EMBEDDER`, else the
    defaults); the dense peer embeds with the same kind and model. ``modes``
    must hold :data:`HYBRID`, which the goals are held by. With ``baseline``, a
    second database with the same options but no extractor is loaded after the
    first is closed and asked :data:`BASELINE_MODES`: the pipeline before the
    extractor, the convex fusion and the steps after it, measured in the same run."""
    if HYBRID not in modes:
        raise ValueError(f"the modes must include {HYBRID!r}, which the goals are held by")
    if off_topic_queries < 0:
        raise ValueError("the number of off-topic queries cannot be negative")
    opts = options if options is not None else DatabaseOptions(embedder=EMBEDDER)
    conversations = load(data)
    if quick:
        conversations = conversations[:QUICK_CONVERSATIONS]
    cues = [cues_of(c, QUICK_QUESTIONS if quick else None) for c in conversations]
    off_topic = [q.text for q in cranfield.load_queries()[:off_topic_queries]]
    with (
        tempfile.TemporaryDirectory(prefix="brain-bench-locomo-") as tmp,
        brain.open(Path(tmp) / "data", opts) as db,
    ):
        embedder_name = db.retrieval.embedder.name
        corpus = load_corpus(db, conversations)
        if not corpus.indexed:
            raise RuntimeError(
                f"the vector index did not take the turns within {INDEX_TIMEOUT_S} s"
            )
        started = time.perf_counter()
        results = {
            name: run_mode(db, mode, corpus, cues, off_topic) for name, mode in modes.items()
        }
        query_s = time.perf_counter() - started
    before_seconds: dict[str, float] | None = None
    if baseline:
        with (
            tempfile.TemporaryDirectory(prefix="brain-bench-locomo-before-") as tmp,
            brain.open(Path(tmp) / "data", dataclasses.replace(opts, extractors=())) as db,
        ):
            before = load_corpus(db, conversations)
            if not before.indexed:
                raise RuntimeError("the baseline's vector index did not take the turns")
            for name, mode in BASELINE_MODES.items():
                results[name] = run_mode(db, mode, before, cues, off_topic)
            # The same load without the extractor: what extraction costs ENCODE.
            before_seconds = {
                "load": round(before.load_s, _SECONDS_ROUND),
                "index": round(before.index_s, _SECONDS_ROUND),
            }
    bm25s_result, bm25s_config = run_bm25s(corpus, cues)
    dense_result, dense_config = run_dense(
        corpus, cues, load_embedder(opts.embedder, model_dir=opts.model_dir)
    )
    summaries = {name: _summary(result, abstains=True) for name, result in results.items()}
    for name, mode in modes.items():
        summaries[name]["request"] = dict(mode)
    for name, mode in BASELINE_MODES.items():
        if name in summaries:
            summaries[name]["request"] = {**mode, "database": "extractors=()"}
    peers = {
        BM25S: {**_summary(bm25s_result, abstains=False), "config": bm25s_config},
        DENSE: {**_summary(dense_result, abstains=False), "config": dense_config},
    }
    goals = _goal(results)
    return {
        "suite": "locomo",
        "quick": quick,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            **harness.machine(),
            "openblas_num_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
        },
        "data": {"file": data.name, "format": "LoCoMo (snap-research/LoCoMo, CC BY-NC 4.0)"},
        "embedder": {"kind": opts.embedder, "name": embedder_name},
        "collection": _collection(corpus, cues, len(off_topic)),
        "quick_rule": (
            f"first {QUICK_CONVERSATIONS} conversation, its first {QUICK_QUESTIONS} cues"
            if quick
            else None
        ),
        "recall": {
            "top_k": TOP_K,
            "records": list(RECORDS),
            "cue_categories": list(CUE_CATEGORIES),
            "gain": "binary (evidence turns)",
            "latency": "on-topic cues only",
        },
        "seconds": {
            "load": round(corpus.load_s, _SECONDS_ROUND),
            "index": round(corpus.index_s, _SECONDS_ROUND),
            "queries": round(query_s, _SECONDS_ROUND),
            "baseline_without_extractor": before_seconds,
        },
        "modes": summaries,
        "peers": peers,
        "goal": goals,
        "summary": _summary_rows(goals),
    }


def main(argv: list[str]) -> int:
    """Entry point of the suite."""
    parser = harness.parser("locomo", __doc__)
    parser.add_argument("--data", type=Path, required=True, help="a LoCoMo-format JSON file")
    parser.add_argument(
        "--mode",
        action="append",
        default=[],
        metavar="NAME=JSON",
        help='add a mode: NAME={RECALL fields}, e.g. NAME={"fusion": "rrf"}',
    )
    parser.add_argument("--ablations", action="store_true", help="also ask the modes of ABLATIONS")
    parser.add_argument(
        "--baseline",
        action="store_true",
        help="also load a database without the extractor and ask BASELINE_MODES",
    )
    args = parser.parse_args(argv)
    modes = dict(MODES)
    if args.ablations:
        modes.update(ABLATIONS)
    for text in args.mode:
        try:
            name, mode = parse_mode(text)
        except ValueError as exc:
            parser.error(str(exc))
        modes[name] = mode
    result = run(args.data, quick=args.quick, modes=modes, baseline=args.baseline)
    collection, seconds = result["collection"], result["seconds"]
    assert isinstance(collection, dict) and isinstance(seconds, dict)
    print(
        f"LoCoMo{' (quick)' if args.quick else ''}: {collection['conversations']} conversations, "
        f"{collection['turns']} turns, {collection['memories']} memories "
        f"(deduplicated {collection['deduplicated']}), {collection['cues']} cues "
        f"({collection['cues_without_evidence']} without evidence), "
        f"{collection['unknown_evidence_ids']} evidence ids naming no turn; "
        f"load {seconds['load']} s, index {seconds['index']} s, queries {seconds['queries']} s"
    )
    print()
    print(format_table(result))
    targets: list[Path] = []
    if args.out is not None:
        targets.append(args.out)
    if not args.quick and not args.no_save:
        targets.append(harness.RESULTS / RESULT_FILE)
    for target in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0
