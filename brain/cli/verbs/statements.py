"""Statements: ``brain statement add|get|supersede|tombstone|retract|list`` and
``brain history`` (STATEMENT_CREATE … STATEMENT_LIST, spec/02-data-model.md §5).

A SUBJECT is read by :func:`~brain.cli.verbs.arguments.parse_ref` (``id:<hex>``,
``memory:<hex>``, else a name), an OBJECT by ``--object-type`` (text unless
said). ``--kind`` defaults to ``fact``, or ``event`` when ``--event-at`` is given.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Final, TypeVar

from brain.cli.verbs.arguments import (
    OBJECT_TYPES,
    argument,
    parse_evidence,
    parse_object,
    parse_ref,
)
from brain.cli.verbs.connect import UsageProblem
from brain.cli.verbs.context import Request, VerbContext
from brain.cli.verbs.options import Parents, SubParsers, add_group, add_verb, time_arg
from brain.cli.verbs.paging import add_paging_options, follow_pages, page_footer
from brain.cli.verbs.short_ids import short_id_arg
from brain.cli.verbs.views import entity_ids, statement_panel, statement_table
from brain.wire.messages.records import Statement
from brain.wire.messages.review_ops import ReviewList, ReviewListOk
from brain.wire.messages.statement_ops import (
    StatementCreate,
    StatementCreateOk,
    StatementDraft,
    StatementGet,
    StatementGetOk,
    StatementHistory,
    StatementHistoryOk,
    StatementList,
    StatementListOk,
    StatementRetract,
    StatementRetracted,
    StatementSupersede,
    StatementSupersedeOk,
    StatementTombstone,
    StatementTombstoned,
)
from brain.wire.messages.values import MAX_LIST_LIMIT, EntityRef, PendingRef, Ref
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message

__all__ = ["KINDS", "confidence_arg", "opened_review", "register", "say_review", "word"]

KINDS: Final = ("fact", "preference", "event")
"""Statement kinds (spec/02-data-model.md §5)."""

MAX_AS_OF_PAGES: Final = 100
"""Pages of the subject's statements ``statement get --as-of`` reads looking for one
statement: 100,000 rows of one subject and predicate, far past any real chain."""

T = TypeVar("T")

statement_id = short_id_arg("statement")
"""A statement id: whole, or the short form tables print (:mod:`~brain.cli.verbs.short_ids`)."""

entity_id = short_id_arg("entity")


def _confidence(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"a confidence is between 0 and 1, not {text}")
    return value


confidence_arg = argument(_confidence)


def word(parse: Callable[[str], T], text: str, what: str) -> T:
    """``parse(text)``, its ValueError made a usage problem naming ``what``."""
    try:
        return parse(text)
    except ValueError as exc:
        raise UsageProblem(f"{what}: {exc}") from None


def _add_draft_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("subject", metavar="SUBJECT", help="id:<hex>, memory:<hex>, or a name")
    parser.add_argument("predicate", metavar="PREDICATE")
    parser.add_argument("object", metavar="OBJECT", help="read as --object-type (default text)")
    parser.add_argument("--kind", choices=KINDS, help="default fact (event with --event-at)")
    parser.add_argument("--confidence", type=confidence_arg, metavar="X", help="0 to 1 (1)")
    parser.add_argument("--valid-from", type=time_arg, metavar="DATE", help="true from")
    parser.add_argument("--valid-to", type=time_arg, metavar="DATE", help="true until (excl.)")
    parser.add_argument("--event-at", type=time_arg, metavar="DATE", help="when the event was")
    parser.add_argument(
        "--evidence",
        # One memory per flag (repeat it): a list-taking flag would swallow the
        # positional arguments written after it.
        action="append",
        type=argument(parse_evidence),
        metavar="MEMORY_ID",
        help="a memory the claim rests on (MEMORY_ID or MEMORY_ID:SHA256; repeat)",
    )
    parser.add_argument("--object-type", choices=OBJECT_TYPES, default="text")
    parser.add_argument("--subject-type", metavar="TYPE", help="entity type of a SUBJECT name")
    parser.add_argument("--source", metavar="TEXT", help="who or what produced the claim")


def register(commands: SubParsers, parents: Parents) -> None:
    """Add the ``statement`` verbs and ``history``."""
    group = add_group(commands, "statement", help="record, correct and read statements")
    add = add_verb(
        group,
        "add",
        _add,
        parents,
        build=_build_add,
        help="record a statement (STATEMENT_CREATE)",
        description="Record SUBJECT PREDICATE OBJECT. A predicate declared stateful "
        "supersedes the subject's current value.",
    )
    _add_draft_options(add)

    get = add_verb(group, "get", _get, parents, help="show one statement (STATEMENT_GET)")
    get.add_argument("id", type=statement_id, metavar="ID")
    get.add_argument(
        "--as-of",
        type=time_arg,
        metavar="DATE",
        help="show it as the database believed it then (found through STATEMENT_LIST)",
    )

    supersede = add_verb(
        group,
        "supersede",
        _supersede,
        parents,
        build=_build_supersede,
        help="correct a statement with a new version (STATEMENT_SUPERSEDE)",
        description="Replace the current statement ID by SUBJECT PREDICATE OBJECT (same "
        "subject). With --valid-from the old one's validity closes there, from now on.",
    )
    supersede.add_argument("id", type=statement_id, metavar="ID")
    _add_draft_options(supersede)

    tombstone = add_verb(
        group,
        "tombstone",
        _tombstone,
        parents,
        build=_build_tombstone,
        help="soft-delete a statement (STATEMENT_TOMBSTONE)",
    )
    tombstone.add_argument("id", type=statement_id, metavar="ID")
    tombstone.add_argument("--reason", metavar="TEXT", help="a note for the audit log")

    retract = add_verb(
        group,
        "retract",
        _retract,
        parents,
        build=_build_retract,
        help="retract a statement: its claim is gone for good (STATEMENT_RETRACT)",
    )
    retract.add_argument("id", type=statement_id, metavar="ID")

    listing = add_verb(
        group,
        "list",
        _list,
        parents,
        help="list statements through the filter chain (STATEMENT_LIST)",
        description="List statements in record order. --valid-at asks what was true then; "
        "--as-of what the database believed then (superseded and tombstoned rows "
        "believed then come back).",
    )
    who = listing.add_mutually_exclusive_group()
    who.add_argument("--subject", metavar="NAME", help="a subject as for add (a name, id:<hex>)")
    who.add_argument("--subject-id", type=entity_id, metavar="ID", help="an entity id")
    listing.add_argument("--subject-type", metavar="TYPE", help="entity type of a --subject name")
    listing.add_argument("--predicate", metavar="P")
    listing.add_argument("--kind", choices=KINDS)
    listing.add_argument("--valid-at", type=time_arg, metavar="DATE")
    listing.add_argument("--as-of", type=time_arg, metavar="DATE")
    listing.add_argument("--include-tombstoned", action="store_true")
    listing.add_argument("--include-superseded", action="store_true")
    add_paging_options(listing)

    history = add_verb(
        commands,
        "history",
        _history,
        parents,
        help="every version of a statement's chain (STATEMENT_HISTORY)",
    )
    history.add_argument("id", type=statement_id, metavar="ID")


def _draft_fields(args: argparse.Namespace) -> dict[str, object]:
    """The StatementDraft fields the command line gives."""
    kind = args.kind or ("event" if args.event_at is not None else "fact")
    return {
        "kind": kind,
        "subject": word(lambda t: parse_ref(t, type_=args.subject_type), args.subject, "SUBJECT"),
        "predicate": args.predicate,
        "object_": word(lambda t: parse_object(t, args.object_type), args.object, "OBJECT"),
        "confidence": args.confidence,
        "evidence": tuple(args.evidence) if args.evidence else None,
        "source": args.source,
        "valid_from": args.valid_from,
        "valid_to": args.valid_to,
        "event_at": args.event_at,
    }


def _build_add(ctx: VerbContext) -> Request:
    message = StatementCreate(
        space=ctx.space,
        request_id=ctx.request_id(),
        **_draft_fields(ctx.args),  # type: ignore[arg-type]
    )
    return Request(Opcode.STATEMENT_CREATE, message, StatementCreateOk)


def _written(ctx: VerbContext, answer: StatementCreateOk | StatementSupersedeOk) -> int:
    out = ctx.printer
    if out.json_output:
        out.json(answer)
        return 0
    if ctx.args.quiet:
        out.raw(answer.statement_id.hex() + "\n")
        return 0
    out.line(
        "statement ",
        (answer.statement_id.hex(), "cyan"),
        f" recorded (version {answer.version}, LSN {answer.lsn}, "
        f"recorded {out.time(answer.recorded_at)})",
    )
    if answer.superseded is not None:
        out.line("superseded ", (answer.superseded.hex(), "yellow"))
    return 0


def _add(ctx: VerbContext) -> int:
    answer = ctx.send(_build_add(ctx))
    assert isinstance(answer, StatementCreateOk)
    code = _written(ctx, answer)
    review = opened_review(ctx, answer.statement_id)
    if review is not None:
        say_review(ctx, *review)
    return code


CONTRADICTION_DECISIONS: Final = "keep_both|supersede|reject_new"
NAME_DECISIONS: Final = "merge|distinct"


def opened_review(ctx: VerbContext, statement_id: bytes) -> tuple[bytes, str] | None:
    """The review item the statement just written waits for, and its kind, if any.

    STATEMENT_CREATE's answer does not say, so one pipelined round trip asks: the
    statement itself (a subject stored as ``{"pending": review_id}`` waits for an
    ambiguous name's decision) and the open items (a contradiction names the new
    statement last, spec/02-data-model.md §7). REVIEW_LIST has no cursor: an item
    past its first :data:`MAX_LIST_LIMIT` open ones is not seen.
    """
    requests: list[tuple[Opcode, Message]] = [
        (Opcode.STATEMENT_GET, StatementGet(space=ctx.space, id=statement_id)),
        (Opcode.REVIEW_LIST, ReviewList(space=ctx.space, limit=MAX_LIST_LIMIT)),
    ]
    got, listed = ctx.client().pipeline(requests)
    if isinstance(got, StatementGetOk) and isinstance(got.statement.subject, PendingRef):
        return got.statement.subject.pending, "ambiguous_entity"
    if isinstance(listed, ReviewListOk):
        for item in listed.items:
            if item.kind == "contradiction" and item.records[-1] == statement_id:
                return item.review_id, item.kind
    return None


def say_review(
    ctx: VerbContext,
    review_id: bytes,
    kind: str,
    *,
    record: str = "statement",
    waiting: str = "subject",
) -> None:
    """A line naming the review and one with the command that decides it: on standard
    output for a person, on standard error beside ``--json`` or ``--quiet`` (whose
    output stays as parseable as without it). An ambiguous name's item names the
    ``record`` written and which of its ends (``waiting``) carries the name."""
    ident = review_id.hex()
    if kind == "contradiction":
        what, choices = " opened: the statement contradicts a current one", CONTRADICTION_DECISIONS
    else:
        # Writes naming the same ambiguous name join one open item: it may be older.
        what, choices = f": the {waiting}'s name is ambiguous; the {record} waits", NAME_DECISIONS
    decide = f"decide it: brain review decide {ident} {choices}"
    out = ctx.printer
    if out.json_output or ctx.args.quiet:
        out.note(f"review {ident}{what}")
        out.note(decide)
    else:
        out.line(("review ", "yellow"), (ident, "cyan"), what)
        out.line(decide)


def _build_supersede(ctx: VerbContext) -> Request:
    draft = StatementDraft(**_draft_fields(ctx.args))  # type: ignore[arg-type]
    message = StatementSupersede(
        space=ctx.space, request_id=ctx.request_id(), old=ctx.args.id, new=draft
    )
    return Request(Opcode.STATEMENT_SUPERSEDE, message, StatementSupersedeOk)


def _supersede(ctx: VerbContext) -> int:
    answer = ctx.send(_build_supersede(ctx))
    assert isinstance(answer, StatementSupersedeOk)
    return _written(ctx, answer)


def _build_tombstone(ctx: VerbContext) -> Request:
    message = StatementTombstone(
        space=ctx.space, request_id=ctx.request_id(), id=ctx.args.id, reason=ctx.args.reason
    )
    return Request(Opcode.STATEMENT_TOMBSTONE, message, StatementTombstoned)


def _tombstone(ctx: VerbContext) -> int:
    answer = ctx.send(_build_tombstone(ctx))
    assert isinstance(answer, StatementTombstoned)
    return _ended(ctx, answer, "tombstoned")


def _build_retract(ctx: VerbContext) -> Request:
    message = StatementRetract(space=ctx.space, request_id=ctx.request_id(), id=ctx.args.id)
    return Request(Opcode.STATEMENT_RETRACT, message, StatementRetracted)


def _retract(ctx: VerbContext) -> int:
    answer = ctx.send(_build_retract(ctx))
    assert isinstance(answer, StatementRetracted)
    return _ended(ctx, answer, "retracted")


def _ended(ctx: VerbContext, answer: StatementTombstoned | StatementRetracted, what: str) -> int:
    out = ctx.printer
    if out.json_output:
        out.json(answer)
    elif ctx.args.quiet:
        out.raw(answer.id.hex() + "\n")
    else:
        out.line(
            "statement ",
            (answer.id.hex(), "cyan"),
            f" {what} at {out.time(answer.tombstoned_at)} (LSN {answer.lsn})",
        )
    return 0


def _get(ctx: VerbContext) -> int:
    ident: bytes = ctx.args.id
    answer = ctx.call(Opcode.STATEMENT_GET, StatementGet(space=ctx.space, id=ident), StatementGetOk)
    statement: Statement | None = answer.statement
    if ctx.args.as_of is not None:
        statement = _believed_at(ctx, answer.statement, ctx.args.as_of)
        if statement is None:
            when = ctx.printer.time(ctx.args.as_of)
            ctx.printer.err.print(
                f"brain: statement {ident.hex()} was not believed at {when} "
                "(recorded later, or retracted) — leave out --as-of to see it as it is now",
                markup=False,
            )
            return 1
        answer = StatementGetOk(statement=statement)
        if not ctx.printer.json_output:
            ctx.printer.note(
                f"validity as believed at {ctx.printer.time(ctx.args.as_of)}; "
                "chain links and record times as they are now"
            )
    _show_one(ctx, answer)
    return 0


def _show_one(ctx: VerbContext, answer: StatementGetOk) -> None:
    out = ctx.printer
    if out.json_output:
        out.json(answer)
        return
    names = ctx.entity_names(entity_ids([answer.statement]))
    labels = out.labels(answer, names, detail=True)
    out.show(statement_panel(answer.statement, out, labels, as_of=ctx.args.as_of))


def _believed_at(ctx: VerbContext, now: Statement, as_of: int) -> Statement | None:
    """The statement ``now`` as STATEMENT_LIST shows it ``as_of``, or None when it was
    not believed then. GET has no ``as_of``; LIST does, and narrows by subject,
    predicate and kind to the rows that can be this one."""
    if now.subject is None:
        return None  # retracted: a husk is never restored
    if isinstance(now.subject, PendingRef):
        raise UsageProblem(
            "--as-of cannot find a statement whose subject waits for review "
            "(brain review list); leave out --as-of"
        )
    subject: Ref = now.subject
    cursor: bytes | None = None
    for _ in range(MAX_AS_OF_PAGES):
        request = StatementList(
            space=ctx.space,
            subject=subject,
            predicate=now.predicate,
            kind=now.kind,
            as_of=as_of,
            include_superseded=True,
            include_tombstoned=True,
            limit=MAX_LIST_LIMIT,
            cursor=cursor,
        )
        page = ctx.call(Opcode.STATEMENT_LIST, request, StatementListOk)
        for row in page.statements:
            if row.id == now.id:
                return row
        # Rows come in record order: past this statement's record time it cannot follow.
        if page.cursor is None or any(r.recorded_at > now.recorded_at for r in page.statements):
            return None
        cursor = page.cursor
    return None


def _list(ctx: VerbContext) -> int:
    args = ctx.args
    subject: Ref | None = None
    if args.subject is not None:
        subject = word(lambda t: parse_ref(t, type_=args.subject_type), args.subject, "--subject")
    elif args.subject_id is not None:
        subject = EntityRef(entity=args.subject_id)

    def page(cursor: bytes | None) -> StatementListOk:
        request = StatementList(
            space=ctx.space,
            subject=subject,
            predicate=args.predicate,
            kind=args.kind,
            valid_at=args.valid_at,
            as_of=args.as_of,
            include_superseded=True if args.include_superseded else None,
            include_tombstoned=True if args.include_tombstoned else None,
            limit=args.limit,
            cursor=cursor,
        )
        return ctx.call(Opcode.STATEMENT_LIST, request, StatementListOk)

    rows, cursor = follow_pages(page, args, lambda answer: answer.statements)
    answer = StatementListOk(statements=tuple(rows), cursor=cursor)
    out = ctx.printer
    if out.json_output:
        out.json(answer)
        return 0
    if answer.statements:
        names = ctx.entity_names(entity_ids(answer.statements))
        labels = out.labels(answer, names)
        out.show(statement_table(answer.statements, out, labels, as_of=args.as_of))
    page_footer(out, len(answer.statements), ("statement", "statements"), answer.cursor)
    return 0


def _history(ctx: VerbContext) -> int:
    request = StatementHistory(space=ctx.space, id=ctx.args.id)
    answer = ctx.call(Opcode.STATEMENT_HISTORY, request, StatementHistoryOk)
    out = ctx.printer
    if out.json_output:
        out.json(answer)
        return 0
    names = ctx.entity_names(entity_ids(answer.versions))
    root = answer.versions[0].chain_root.hex() if answer.versions else ctx.args.id.hex()
    out.show(
        statement_table(answer.versions, out, out.labels(answer, names), title=f"chain {root}")
    )
    return 0
