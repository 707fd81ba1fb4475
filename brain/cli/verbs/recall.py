"""Retrieval: ``brain recall`` and ``brain explain`` (RECALL, EXPLAIN; spec/04-retrieval.md).

``recall`` shows the hits as a table, ``--render`` as the prompt text of
:func:`~brain.client.render.render_hits` (each body fenced and labelled as data),
``--json`` as the exact answer. ``explain`` shows how a recall was served: the
survivors of each filter step, the time of each stage, what was searched.
"""

from __future__ import annotations

import argparse
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Final, TypeVar

from brain.cli.verbs.arguments import argument, parse_arms, parse_choices
from brain.cli.verbs.connect import UsageProblem
from brain.cli.verbs.context import VerbContext
from brain.cli.verbs.entities import resolve_entity
from brain.cli.verbs.options import Parents, SubParsers, add_verb, time_arg
from brain.cli.verbs.output import Labels, Printer, cell, printable
from brain.cli.verbs.statements import KINDS, confidence_arg
from brain.cli.verbs.views import entity_ids, ref_text, statement_state, validity_text, value_text
from brain.wire.messages.recall_ops import (
    FUSIONS,
    MAX_TOP_K,
    Coverage,
    Explain,
    ExplainOk,
    ExplainRequest,
    Hit,
    RankedHit,
    Ranks,
    Recall,
    RecallOk,
)
from brain.wire.messages.records import Statement
from brain.wire.opcodes import Opcode

if TYPE_CHECKING:  # rich loads when something is drawn (brain.cli.verbs.output)
    from rich.table import Table
    from rich.text import Text

__all__ = ["WAIT_NOTE_S", "lag_note", "register"]

RECORD_TYPES: Final = ("statement", "memory")

WAIT_NOTE_S: Final = 1.0
"""How long a recall may take before the command says what it waits for: past the
round trip and the cue's embedding (milliseconds), the wait is the server's, for
the semantic index to take in the space's recent writes (spec/04-retrieval.md §3)."""

SNIPPET_CHARS: Final = 240
"""Longest memory text a hit table shows: a few lines, enough to recognise it;
``--render`` and ``--json`` show every character."""


def _top_k(text: str) -> int:
    value = int(text)
    if not 1 <= value <= MAX_TOP_K:
        raise ValueError(f"top-k is 1 to {MAX_TOP_K}, not {value}")
    return value


def _rrf_k(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(f"rrf-k is 1 or more, not {value}")
    return value


def _min_relevance(text: str) -> float:
    value = float(text)
    if not -1.0 <= value <= 1.0:
        raise ValueError(f"min-relevance is a cosine similarity, -1 to 1, not {text}")
    return value


def _max_chars(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(f"max-chars is 0 or more, not {value}")
    return value


def _add_recall_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("cue", metavar="CUE", help="what to look for, in words")
    parser.add_argument("--top-k", type=argument(_top_k), metavar="N", help="hits (default 10)")
    parser.add_argument("--as-of", type=time_arg, metavar="DATE", help="believed at DATE")
    parser.add_argument("--valid-at", type=time_arg, metavar="DATE", help="true at DATE")
    parser.add_argument("--valid-from", type=time_arg, metavar="DATE", help="true during […")
    parser.add_argument("--valid-to", type=time_arg, metavar="DATE", help="…) (with --valid-from)")
    parser.add_argument(
        "--records",
        type=argument(lambda t: parse_choices(t, RECORD_TYPES)),
        metavar="statement,memory",
        help="record types to return (default both)",
    )
    parser.add_argument(
        "--kinds",
        type=argument(lambda t: parse_choices(t, KINDS)),
        metavar="fact,preference,event",
        help="statement kinds to return (leaves memories out)",
    )
    parser.add_argument(
        "--predicate",
        action="append",
        dest="predicates",
        metavar="P",
        help="only statements with predicate P (repeat; leaves memories out)",
    )
    parser.add_argument("--min-confidence", type=confidence_arg, metavar="X")
    parser.add_argument("--include-tombstoned", action="store_true")
    parser.add_argument("--include-superseded", action="store_true")
    parser.add_argument(
        "--arms",
        type=argument(parse_arms),
        metavar="semantic=1,lexical=1,graph=0",
        help="arm weights (0 turns an arm off; unnamed arms keep the server's weight)",
    )
    parser.add_argument(
        "--fusion",
        choices=FUSIONS,
        help="convex (the default: weighted sum of scaled scores) or rrf (reciprocal rank)",
    )
    parser.add_argument(
        "--rrf-k", type=argument(_rrf_k), metavar="K", help="RRF's constant (default 60)"
    )
    parser.add_argument(
        "--no-context",
        action="store_true",
        help="leave out the conversational context (neighbouring turns)",
    )
    parser.add_argument(
        "--no-named-time",
        action="store_true",
        help="do not prefer records in the months or years the cue names",
    )
    parser.add_argument(
        "--min-relevance",
        type=argument(_min_relevance),
        metavar="X",
        help="abstain below this cosine similarity (-1: never; default: the server's floor)",
    )
    parser.add_argument(
        "--anchor", metavar="ENTITY", help="start the graph arm here (an id or exact name)"
    )


def register(commands: SubParsers, parents: Parents) -> None:
    """Add ``recall`` and ``explain``."""
    recall = add_verb(
        commands,
        "recall",
        _recall,
        parents,
        help="find statements and memories (RECALL)",
        description="Find statements and memories by meaning, words and the entities the "
        "cue names; fuse; filter by time (--valid-at: true then; --as-of: believed then).",
    )
    _add_recall_options(recall)
    shown = recall.add_mutually_exclusive_group()
    shown.add_argument(
        "--render", action="store_true", help="print the hits as prompt text (render_hits)"
    )
    shown.add_argument("--explain", action="store_true", help="also show how it was served")
    recall.add_argument(
        "--max-chars",
        type=argument(_max_chars),
        metavar="N",
        help="with --render: at most N characters, leaving out whole hits",
    )

    explain = add_verb(
        commands,
        "explain",
        _explain,
        parents,
        help="how a recall is served: survivors per step, timings (EXPLAIN)",
    )
    _add_recall_options(explain)


A = TypeVar("A")


@contextmanager
def _waiting_note(printer: Printer, verb: str) -> Iterator[None]:
    """Say once, on standard error, that the answer is slow in coming, if it takes
    longer than :data:`WAIT_NOTE_S`. One plain line, whether or not standard error is
    a terminal: a log then shows why the command took its time, and a pipe gets no
    spinner's control codes. It is written before anything of the answer."""
    timer = threading.Timer(
        WAIT_NOTE_S,
        printer.note,
        args=(
            f"brain {verb}: waiting for the server: a recall waits for the semantic index "
            "to take in the space's recent writes (at most retrieval.index_wait_s)…",
        ),
    )
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        timer.join()


def _call_noting_wait(ctx: VerbContext, verb: str, call: Callable[[], A]) -> A:
    with _waiting_note(ctx.printer, verb):
        return call()


def lag_note(coverage: Coverage) -> str | None:
    """What the answer says of an index that lagged behind the writes: how long the
    recall waited for it, and how many documents it could not yet search by meaning;
    None when it kept up."""
    parts = []
    if coverage.index_wait_ms is not None and coverage.index_wait_ms >= WAIT_NOTE_S * 1000:
        parts.append(f"the recall waited {coverage.index_wait_ms / 1000:.1f} s for it")
    if coverage.embed_backlog:
        count = coverage.embed_backlog
        many = (
            "1,000 or more documents were"
            if count >= 1000
            else ("1 document was" if count == 1 else f"{count} documents were")
        )
        parts.append(f"{many} not in it yet, so not searched by meaning")
    if not parts:
        return None
    return f"the semantic index lagged behind the writes: {'; '.join(parts)}"


def _note_lag(printer: Printer, coverage: Coverage) -> None:
    note = lag_note(coverage)
    if note is not None:
        printer.note(note)


def _recall_fields(ctx: VerbContext) -> dict[str, object]:
    args = ctx.args
    anchor = None if args.anchor is None else resolve_entity(ctx, args.anchor, what="anchor")
    return {
        "space": ctx.space,
        "cue": args.cue,
        "top_k": args.top_k,
        "entity_anchor": anchor,
        "arms": args.arms,
        "fusion": args.fusion,
        "rrf_k": args.rrf_k,
        "context": False if args.no_context else None,
        "named_time": False if args.no_named_time else None,
        "min_relevance": args.min_relevance,
        "records": args.records,
        "kinds": args.kinds,
        "predicates": tuple(args.predicates) if args.predicates else None,
        "valid_at": args.valid_at,
        "valid_from": args.valid_from,
        "valid_to": args.valid_to,
        "min_confidence": args.min_confidence,
        "include_tombstoned": True if args.include_tombstoned else None,
        "include_superseded": True if args.include_superseded else None,
        "as_of": args.as_of,
    }


def _recall(ctx: VerbContext) -> int:
    args = ctx.args
    if args.render and ctx.printer.json_output:
        raise UsageProblem("--render and --json each print the answer; choose one")
    fields = _recall_fields(ctx)
    request = Recall(explain=True if args.explain else None, **fields)  # type: ignore[arg-type]
    answer = _call_noting_wait(ctx, "recall", lambda: ctx.call(Opcode.RECALL, request, RecallOk))
    out = ctx.printer
    _note_lag(out, answer.coverage)  # on standard error, whatever the output form
    if out.json_output:
        out.json(answer)
        return 0
    records = [hit.statement for hit in answer.hits if hit.statement is not None]
    names = ctx.entity_names(entity_ids(records))
    if args.render:
        from brain.client.render import render_hits  # the client package: loaded on use

        text = render_hits(answer.hits, max_chars=args.max_chars, names=names)
        # Exact for a pipe or a prompt; on a terminal, control characters are shown.
        out.raw(printable(text) if out.is_terminal() else text)
        return 0
    labels = out.labels(answer, names)
    if answer.hits:
        out.show(_hit_table(answer.hits, out, labels, as_of=args.as_of))
    out.line(*_coverage_line(answer.coverage, abstained=answer.abstained))
    if answer.explain is not None:
        _show_explain(out, answer.explain)
    return 0


def _explain(ctx: VerbContext) -> int:
    request = ExplainRequest(**_recall_fields(ctx))  # type: ignore[arg-type]
    answer = _call_noting_wait(ctx, "explain", lambda: ctx.call(Opcode.EXPLAIN, request, ExplainOk))
    out = ctx.printer
    _note_lag(out, answer.coverage)
    if out.json_output:
        out.json(answer)
        return 0
    labels = out.labels(answer)
    if answer.hits:
        table = out.table("#", "score", "record", "id", "ranks", title="hits")
        for index, hit in enumerate(answer.hits, 1):
            table.add_row(*_ranked_cells(index, hit, labels))
        out.show(table)
    out.line(*_coverage_line(answer.coverage, abstained=not answer.hits))
    _show_explain(out, answer.explain)
    return 0


def _ranks_text(ranks: Ranks) -> str:
    parts = [
        f"{name} {rank}"
        for name, rank in (
            ("semantic", ranks.semantic),
            ("lexical", ranks.lexical),
            ("graph", ranks.graph),
        )
        if rank is not None
    ]
    return ", ".join(parts)


def _ranked_cells(index: int, hit: RankedHit, labels: Labels) -> list[Text]:
    return [
        cell(index),
        cell(f"{hit.score:.4f}"),
        cell(hit.record),
        # A memory's id is shown whole: no short form of it resolves (short_ids).
        cell(hit.id.hex() if hit.record == "memory" else labels.id(hit.id), "cyan"),
        cell(_ranks_text(hit.ranks)),
    ]


def _claim(statement: Statement, labels: Labels, printer: Printer, as_of: int | None) -> str:
    if statement.subject is None or statement.object_ is None:
        return "(retracted)"
    claim = (
        f"{ref_text(statement.subject, labels)} {statement.predicate} "
        f"{value_text(statement.object_, labels, printer, compact=True)}"
    )
    state = statement_state(statement, as_of)
    suffix = "" if state == "current" else f", {state}"
    valid = validity_text(statement, printer, compact=True)
    return f"{claim}\n{statement.kind}, valid {valid}{suffix}"


def _hit_table(
    hits: tuple[Hit, ...], printer: Printer, labels: Labels, *, as_of: int | None
) -> Table:
    table = printer.table("#", "score", "record", "id", "content", "ranks")
    for index, hit in enumerate(hits, 1):
        if hit.statement is not None:
            content = _claim(hit.statement, labels, printer, as_of)
        elif hit.memory is not None and hit.memory.text is not None:
            text = hit.memory.text
            content = text if len(text) <= SNIPPET_CHARS else text[:SNIPPET_CHARS] + "…"
        else:
            content = "(forgotten: no text)"
        number, score, record, ident, ranks = _ranked_cells(index, hit, labels)
        table.add_row(number, score, record, ident, cell(content), ranks)
    return table


def _coverage_line(coverage: Coverage, *, abstained: bool) -> list[str | tuple[str, str]]:
    candidates = coverage.candidates
    searched = (
        f"space {coverage.space}: {coverage.corpus} documents; arms {', '.join(coverage.arms)}; "
        f"candidates semantic {candidates.semantic}, lexical {candidates.lexical}, "
        f"graph {candidates.graph}"
    )
    if abstained:
        return [("no hits (abstained) ", "yellow"), searched]
    return [searched]


def _show_explain(printer: Printer, explain: Explain) -> None:
    survivors = explain.survivors
    steps = printer.table("step", "survivors", title="survivors per step")
    for name, count in (
        ("fused", survivors.fused),
        ("type", survivors.type_),
        ("temporal", survivors.temporal),
        ("confidence", survivors.confidence),
        ("tombstone", survivors.tombstone),
        ("supersession", survivors.supersession),
        ("as_of", survivors.as_of),
        ("limit", survivors.limit),
    ):
        steps.add_row(cell(name), cell(count))
    timings = explain.timings_us
    stages = printer.table("stage", "µs", title="timings")
    for name, micros in (
        ("embed", timings.embed),
        ("semantic", timings.semantic),
        ("lexical", timings.lexical),
        ("graph", timings.graph),
        ("fuse", timings.fuse),
        ("filter", timings.filter_),
        ("total", timings.total),
    ):
        stages.add_row(cell(name), cell(micros))
    from rich.columns import Columns

    printer.show(Columns([steps, stages]))
    fusion = explain.fusion if explain.rrf_k is None else f"{explain.fusion}, rrf_k {explain.rrf_k}"
    printer.line(f"restored by as_of: {explain.restored_by_as_of}; fusion {fusion}")
