"""Relations: ``brain relation add|get|supersede|tombstone|list|traverse``.

FROM and TO are refs as a statement's SUBJECT is (``id:<hex>`` or a name, which a
write resolves or creates); a relation's ends are entities, never memories.
"""

from __future__ import annotations

import argparse
from typing import Final

from brain.cli.verbs.arguments import argument, parse_evidence, parse_ref
from brain.cli.verbs.context import Request, VerbContext
from brain.cli.verbs.entities import resolve_entity
from brain.cli.verbs.options import Parents, SubParsers, add_group, add_verb, id_arg, time_arg
from brain.cli.verbs.output import cell
from brain.cli.verbs.paging import add_paging_options, follow_pages, page_footer
from brain.cli.verbs.statements import confidence_arg, say_review, word
from brain.cli.verbs.views import entity_ids, relation_panel, relation_table
from brain.wire.messages.relation_ops import (
    MAX_TRAVERSE_DEPTH,
    RelationCreate,
    RelationCreateOk,
    RelationDraft,
    RelationGet,
    RelationGetOk,
    RelationList,
    RelationListOk,
    RelationSupersede,
    RelationSupersedeOk,
    RelationTombstone,
    RelationTombstoned,
    RelationTraverse,
    RelationTraverseOk,
)
from brain.wire.messages.values import PendingRef
from brain.wire.opcodes import Opcode

__all__ = ["register"]

DIRECTIONS: Final = ("out", "in", "both")

DEFAULT_DEPTH: Final = 2
"""Hops ``relation traverse`` walks unless told: friends of friends, the graph arm's
reach (spec/04-retrieval.md §4)."""


def _depth(text: str) -> int:
    value = int(text)
    if not 1 <= value <= MAX_TRAVERSE_DEPTH:
        raise ValueError(f"depth is 1 to {MAX_TRAVERSE_DEPTH}, not {value}")
    return value


def _add_draft_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("type", metavar="TYPE", help="the relation type, such as works_with")
    parser.add_argument("from_", metavar="FROM", help="id:<hex> or a name")
    parser.add_argument("to", metavar="TO", help="id:<hex> or a name")
    parser.add_argument("--from-type", metavar="TYPE", help="entity type of a FROM name")
    parser.add_argument("--to-type", metavar="TYPE", help="entity type of a TO name")
    parser.add_argument("--confidence", type=confidence_arg, metavar="X", help="0 to 1 (1)")
    parser.add_argument(
        "--evidence",
        # One memory per flag (repeat it): a list-taking flag would swallow the
        # positional arguments written after it.
        action="append",
        type=argument(parse_evidence),
        metavar="MEMORY_ID",
        help="a memory the relation rests on (MEMORY_ID or MEMORY_ID:SHA256; repeat)",
    )
    parser.add_argument("--valid-from", type=time_arg, metavar="DATE")
    parser.add_argument("--valid-to", type=time_arg, metavar="DATE")


def register(commands: SubParsers, parents: Parents) -> None:
    """Add the ``relation`` verbs."""
    group = add_group(commands, "relation", help="typed edges between entities")
    add = add_verb(
        group,
        "add",
        _add,
        parents,
        build=_build_add,
        help="record a relation (RELATION_CREATE)",
        description="Record FROM -TYPE-> TO. A type with a constrained cardinality "
        "supersedes the current edge on its constrained end.",
    )
    _add_draft_options(add)

    get = add_verb(group, "get", _get, parents, help="show one relation (RELATION_GET)")
    get.add_argument("id", type=id_arg, metavar="ID")

    supersede = add_verb(
        group,
        "supersede",
        _supersede,
        parents,
        build=_build_supersede,
        help="correct a relation with a new version (RELATION_SUPERSEDE)",
    )
    supersede.add_argument("id", type=id_arg, metavar="ID")
    _add_draft_options(supersede)

    tombstone = add_verb(
        group,
        "tombstone",
        _tombstone,
        parents,
        build=_build_tombstone,
        help="soft-delete a relation (RELATION_TOMBSTONE)",
    )
    tombstone.add_argument("id", type=id_arg, metavar="ID")
    tombstone.add_argument("--reason", metavar="TEXT", help="a note for the audit log")

    listing = add_verb(group, "list", _list, parents, help="an entity's relations (RELATION_LIST)")
    listing.add_argument("entity", metavar="ENTITY", help="an id, or an exact name or alias")
    listing.add_argument("--direction", choices=DIRECTIONS, default="both")
    listing.add_argument("--type", metavar="TYPE")
    listing.add_argument("--valid-at", type=time_arg, metavar="DATE")
    listing.add_argument("--as-of", type=time_arg, metavar="DATE")
    add_paging_options(listing)

    traverse = add_verb(
        group,
        "traverse",
        _traverse,
        parents,
        help="walk the graph from an entity (RELATION_TRAVERSE)",
    )
    traverse.add_argument("from_", metavar="FROM", help="an id, or an exact name or alias")
    traverse.add_argument(
        "--type", action="append", dest="types", metavar="TYPE", help="follow only TYPE (repeat)"
    )
    traverse.add_argument("--direction", choices=DIRECTIONS, help="default both")
    traverse.add_argument(
        "--depth",
        type=argument(_depth),
        default=DEFAULT_DEPTH,
        metavar="N",
        help=f"hops, 1 to {MAX_TRAVERSE_DEPTH} (default {DEFAULT_DEPTH})",
    )
    traverse.add_argument("--valid-at", type=time_arg, metavar="DATE")
    traverse.add_argument("--as-of", type=time_arg, metavar="DATE")
    traverse.add_argument("--limit", type=int, metavar="N", help="most nodes (default 100)")


def _draft_fields(args: argparse.Namespace) -> dict[str, object]:
    return {
        "type_": args.type,
        "from_": word(lambda t: parse_ref(t, type_=args.from_type), args.from_, "FROM"),
        "to": word(lambda t: parse_ref(t, type_=args.to_type), args.to, "TO"),
        "confidence": args.confidence,
        "evidence": tuple(args.evidence) if args.evidence else None,
        "valid_from": args.valid_from,
        "valid_to": args.valid_to,
    }


def _build_add(ctx: VerbContext) -> Request:
    message = RelationCreate(
        space=ctx.space,
        request_id=ctx.request_id(),
        **_draft_fields(ctx.args),  # type: ignore[arg-type]
    )
    return Request(Opcode.RELATION_CREATE, message, RelationCreateOk)


def _written(ctx: VerbContext, answer: RelationCreateOk | RelationSupersedeOk) -> int:
    out = ctx.printer
    if out.json_output:
        out.json(answer)
    elif ctx.args.quiet:
        out.raw(answer.relation_id.hex() + "\n")
    else:
        out.line(
            "relation ",
            (answer.relation_id.hex(), "cyan"),
            f" recorded (LSN {answer.lsn}, recorded {out.time(answer.recorded_at)})",
        )
        if answer.superseded is not None:
            out.line("superseded ", (answer.superseded.hex(), "yellow"))
    return 0


def _add(ctx: VerbContext) -> int:
    answer = ctx.send(_build_add(ctx))
    assert isinstance(answer, RelationCreateOk)
    code = _written(ctx, answer)
    # An end named by an ambiguous name is stored as {"pending": review_id}; the
    # answer does not say, so the relation is read back to name the review.
    got = ctx.call(
        Opcode.RELATION_GET, RelationGet(space=ctx.space, id=answer.relation_id), RelationGetOk
    )
    for end, ref in (("FROM", got.relation.from_), ("TO", got.relation.to)):
        if isinstance(ref, PendingRef):
            say_review(ctx, ref.pending, "ambiguous_entity", record="relation", waiting=end)
    return code


def _build_supersede(ctx: VerbContext) -> Request:
    draft = RelationDraft(**_draft_fields(ctx.args))  # type: ignore[arg-type]
    message = RelationSupersede(
        space=ctx.space, request_id=ctx.request_id(), old=ctx.args.id, new=draft
    )
    return Request(Opcode.RELATION_SUPERSEDE, message, RelationSupersedeOk)


def _supersede(ctx: VerbContext) -> int:
    answer = ctx.send(_build_supersede(ctx))
    assert isinstance(answer, RelationSupersedeOk)
    return _written(ctx, answer)


def _build_tombstone(ctx: VerbContext) -> Request:
    message = RelationTombstone(
        space=ctx.space, request_id=ctx.request_id(), id=ctx.args.id, reason=ctx.args.reason
    )
    return Request(Opcode.RELATION_TOMBSTONE, message, RelationTombstoned)


def _tombstone(ctx: VerbContext) -> int:
    answer = ctx.send(_build_tombstone(ctx))
    assert isinstance(answer, RelationTombstoned)
    out = ctx.printer
    if out.json_output:
        out.json(answer)
    elif ctx.args.quiet:
        out.raw(answer.id.hex() + "\n")
    else:
        out.line(
            "relation ",
            (answer.id.hex(), "cyan"),
            f" tombstoned at {out.time(answer.tombstoned_at)} (LSN {answer.lsn})",
        )
    return 0


def _get(ctx: VerbContext) -> int:
    answer = ctx.call(
        Opcode.RELATION_GET, RelationGet(space=ctx.space, id=ctx.args.id), RelationGetOk
    )
    out = ctx.printer
    if out.json_output:
        out.json(answer)
        return 0
    names = ctx.entity_names(entity_ids([answer.relation]))
    out.show(relation_panel(answer.relation, out, out.labels(answer, names, detail=True)))
    return 0


def _list(ctx: VerbContext) -> int:
    args = ctx.args
    entity = resolve_entity(ctx, args.entity)

    def page(cursor: bytes | None) -> RelationListOk:
        request = RelationList(
            space=ctx.space,
            entity=entity,
            direction=args.direction,
            type_=args.type,
            valid_at=args.valid_at,
            as_of=args.as_of,
            limit=args.limit,
            cursor=cursor,
        )
        return ctx.call(Opcode.RELATION_LIST, request, RelationListOk)

    rows, cursor = follow_pages(page, args, lambda answer: answer.relations)
    answer = RelationListOk(relations=tuple(rows), cursor=cursor)
    out = ctx.printer
    if out.json_output:
        out.json(answer)
        return 0
    if answer.relations:
        names = ctx.entity_names(entity_ids(answer.relations))
        labels = out.labels(answer, names)
        out.show(relation_table(answer.relations, out, labels, as_of=args.as_of))
    page_footer(out, len(answer.relations), ("relation", "relations"), answer.cursor)
    return 0


def _traverse(ctx: VerbContext) -> int:
    args = ctx.args
    start = resolve_entity(ctx, args.from_, what="from")
    request = RelationTraverse(
        space=ctx.space,
        from_=start,
        types=tuple(args.types) if args.types else None,
        direction=args.direction,
        depth=args.depth,
        valid_at=args.valid_at,
        as_of=args.as_of,
        limit=args.limit,
    )
    answer = ctx.call(Opcode.RELATION_TRAVERSE, request, RelationTraverseOk)
    out = ctx.printer
    if out.json_output:
        out.json(answer)
        return 0
    node_ids = [node.entity_id for node in answer.nodes]
    names = ctx.entity_names([*node_ids, *entity_ids(answer.edges)])
    labels = out.labels(answer, names)
    nodes = out.table("hop", "entity", "id", title="nodes")
    for node in answer.nodes:
        nodes.add_row(
            cell(node.hop),
            cell(names.get(node.entity_id, "")),
            cell(labels.id(node.entity_id), "cyan"),
        )
    out.show(nodes)
    if answer.edges:
        out.show(relation_table(answer.edges, out, labels, title="edges", as_of=args.as_of))
    return 0
