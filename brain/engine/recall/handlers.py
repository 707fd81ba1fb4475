"""The RECALL and EXPLAIN readers (spec/04-retrieval.md §5, §6).

Both run the same search (:mod:`brain.engine.recall.search`). RECALL then
reads its hits' records: **abstention** — no hit answers ``abstained: true``,
and the coverage says what was searched either way; **evidence** — each
statement hit carries its evidence memories with their SHA-256 (a memory
forgotten since has no hash left to give and is left out). EXPLAIN answers
the account and its hits without their records.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from brain.engine.index.documents import STATEMENT_DOC
from brain.engine.recall.fusion import Candidate
from brain.engine.recall.search import Search, search
from brain.engine.records.memories import get_memory, memory_row
from brain.engine.records.refs import AnswersAs
from brain.engine.records.statements import get_loaded, to_message
from brain.engine.store.scope import Scope
from brain.engine.write.reads import ReadContext
from brain.wire.messages.recall_ops import (
    ArmScores,
    Explain,
    ExplainOk,
    ExplainRequest,
    Hit,
    RankedHit,
    Ranks,
    Recall,
    RecallOk,
)
from brain.wire.messages.records import Citation
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message

__all__ = ["RECALL_READS", "read_explain", "read_recall"]


def _ranks(candidate: Candidate) -> Ranks:
    return Ranks(**candidate.ranks)


def _arm_scores(candidate: Candidate) -> ArmScores:
    return ArmScores(
        **candidate.scores,
        context=candidate.context or None,
        named_time=candidate.named_time or None,
    )


def _explain(found: Search) -> Explain:
    return Explain(
        survivors=found.survivors,
        restored_by_as_of=found.restored,
        fusion=found.fusion.method,
        rrf_k=found.fusion.rrf_k,
        timings_us=found.timings,
    )


def _evidence(ctx: ReadContext, scope: Scope, content: dict[str, object]) -> tuple[Citation, ...]:
    cited = content.get("evidence")
    citations: list[Citation] = []
    for item in cited if isinstance(cited, list) else []:
        memory_id = item.get("memory") if isinstance(item, dict) else None
        if not isinstance(memory_id, bytes):
            continue
        row = memory_row(ctx.store, ctx.txn, scope, memory_id)
        sha = None if row is None else row.get("sha256")
        if isinstance(sha, bytes) and "text" in (row or {}):
            citations.append(Citation(memory=memory_id, sha256=sha))
    return tuple(citations)


def _hit(
    ctx: ReadContext, scope: Scope, request: Recall, candidate: Candidate, answers: AnswersAs
) -> Hit:
    ranks = _ranks(candidate)
    if candidate.key[:1] == STATEMENT_DOC:
        loaded = get_loaded(ctx.store, ctx.txn, scope, candidate.key[1:], "id")
        statement = to_message(loaded, scope, request.as_of, answers=answers)
        return Hit(
            record="statement",
            id=candidate.key[1:],
            score=candidate.score,
            ranks=ranks,
            arm_scores=_arm_scores(candidate),
            statement=statement,
            evidence=_evidence(ctx, scope, loaded.content),
        )
    memory = get_memory(ctx.store, ctx.txn, scope, candidate.key[1:])
    return Hit(
        record="memory",
        id=candidate.key[1:],
        score=candidate.score,
        ranks=ranks,
        arm_scores=_arm_scores(candidate),
        memory=memory,
    )


def read_recall(ctx: ReadContext, scope: Scope, request: Recall) -> RecallOk:
    """RECALL: the hits, whether the answer abstains, what was searched, and on request
    the account of how."""
    found = search(ctx, scope, request, account=bool(request.explain))
    # Hits about one entity show it as what it answers as, worked out once for all.
    answers = AnswersAs(ctx.store, ctx.txn, scope, as_of=request.as_of)
    hits = tuple(_hit(ctx, scope, request, c, answers) for c in found.hits)
    return RecallOk(
        hits=hits,
        abstained=not hits,
        coverage=found.coverage,
        explain=_explain(found) if request.explain else None,
    )


def read_explain(ctx: ReadContext, scope: Scope, request: ExplainRequest) -> ExplainOk:
    """EXPLAIN: RECALL's account, and its hits without their records."""
    found = search(ctx, scope, request, account=True)
    hits = tuple(
        RankedHit(
            record=c.record, id=c.key[1:], score=c.score, ranks=_ranks(c), arm_scores=_arm_scores(c)
        )
        for c in found.hits
    )
    return ExplainOk(explain=_explain(found), coverage=found.coverage, hits=hits)


RECALL_READS: Final[dict[Opcode, Callable[..., Message]]] = {
    Opcode.RECALL: read_recall,
    Opcode.EXPLAIN: read_explain,
}
"""The retrieval readers, for :data:`brain.engine.dispatch.READS`."""
