"""Entities: ``brain entity add|get|update|resolve|merge|unmerge|list|tombstone``.

Where a verb reads an entity (``entity get``, ``relation list``, ``relation
traverse``, ``recall --anchor``) it may be named instead of given by id: the
name must resolve exactly (name or alias) to one live entity, as
:func:`resolve_entity` checks; ``name:<text>`` forces a name that looks like an id.
Writes take ids only, so that a fuzzy guess never changes anything.
"""

from __future__ import annotations

import argparse

from brain.cli.verbs.arguments import argument, parse_attribute, parse_id
from brain.cli.verbs.context import Request, VerbContext
from brain.cli.verbs.options import Parents, SubParsers, add_group, add_verb, id_arg, time_arg
from brain.cli.verbs.output import cell
from brain.cli.verbs.paging import add_paging_options, follow_pages, page_footer
from brain.cli.verbs.short_ids import entity_short_id, resolve_short_id, short_id_arg
from brain.cli.verbs.views import entity_panel, entity_table
from brain.errors import NotFound
from brain.wire.messages.entity_ops import (
    EntityCreate,
    EntityCreateOk,
    EntityGet,
    EntityGetOk,
    EntityHistory,
    EntityHistoryOk,
    EntityList,
    EntityListOk,
    EntityMerge,
    EntityMergeOk,
    EntityResolve,
    EntityResolveOk,
    EntityTombstone,
    EntityTombstoneOk,
    EntityUnmerge,
    EntityUnmergeOk,
    EntityUpdate,
    EntityUpdateOk,
)
from brain.wire.opcodes import Opcode

__all__ = ["register", "resolve_entity"]

_EXACT_TIERS = ("exact", "alias")

entity_id = short_id_arg("entity")
"""An entity id: whole, or the short form tables print (:mod:`~brain.cli.verbs.short_ids`)."""


def resolve_entity(
    ctx: VerbContext, text: str, *, what: str = "entity", as_of: int | None = None
) -> bytes:
    """The entity ``text`` names: an id (``<hex>``, ``id:<hex>``), its short form
    (``…TAIL``, ``id:…TAIL``), or a name or alias that ENTITY_RESOLVE matches exactly
    and unambiguously; else NOT_FOUND."""
    short = entity_short_id(text)
    if short is not None:
        return resolve_short_id(ctx, short, ctx.space)
    prefix, colon, rest = text.partition(":")
    if colon and prefix in ("id", "entity"):
        text = rest
    elif colon and prefix == "name":
        return _resolve_name(ctx, rest, what, as_of)
    try:
        return parse_id(text)
    except ValueError:
        return _resolve_name(ctx, text, what, as_of)


def _resolve_name(ctx: VerbContext, name: str, what: str, as_of: int | None) -> bytes:
    answer = ctx.call(
        Opcode.ENTITY_RESOLVE,
        EntityResolve(space=ctx.space, name=name, as_of=as_of),
        EntityResolveOk,
    )
    exact = [m for m in answer.matches if m.tier in _EXACT_TIERS]
    if answer.resolved is not None and not answer.ambiguous and exact:
        return answer.resolved
    if len(exact) > 1:
        ids = ", ".join(m.entity_id.hex() for m in exact)
        raise NotFound(f"{what} {name!r} names several entities ({ids}); give an id", field=what)
    closest = ", ".join(f"{m.name} ({m.entity_id.hex()})" for m in answer.matches[:3])
    hint = f"; closest: {closest}" if closest else f"; try `brain entity resolve {name!r}`"
    raise NotFound(f"no entity is named {name!r} exactly{hint}", field=what)


def _attributes(items: list[tuple[str, object]] | None) -> dict[str, object] | None:
    if not items:
        return None
    return dict(items)


def register(commands: SubParsers, parents: Parents) -> None:
    """Add the ``entity`` verbs."""
    group = add_group(commands, "entity", help="create, resolve, merge and read entities")
    attr = argument(parse_attribute)

    add = add_verb(
        group, "add", _add, parents, build=_build_add, help="create an entity (ENTITY_CREATE)"
    )
    add.add_argument("name", metavar="NAME")
    add.add_argument("--type", metavar="TYPE")
    add.add_argument("--alias", action="append", metavar="NAME", help="another name (repeat)")
    add.add_argument(
        "--attr", action="append", type=attr, metavar="K=V", help="K=TEXT or K:=JSON (repeat)"
    )

    get = add_verb(group, "get", _get, parents, help="show one entity (ENTITY_GET)")
    get.add_argument("entity", metavar="ENTITY", help="an id, or an exact name or alias")
    get.add_argument(
        "--as-of", type=time_arg, metavar="DATE", help="as believed at DATE (a name too)"
    )

    history = add_verb(
        group,
        "history",
        _history,
        parents,
        help="every version of an entity on the record axis (ENTITY_HISTORY)",
    )
    history.add_argument("entity", metavar="ENTITY", help="an id, or an exact name or alias")

    update = add_verb(
        group,
        "update",
        _update,
        parents,
        write=True,
        help="rename, change aliases, replace attributes (ENTITY_UPDATE)",
    )
    update.add_argument("id", type=entity_id, metavar="ID")
    update.add_argument("--name", metavar="NAME", help="the new name (the old is not kept)")
    update.add_argument("--add-alias", action="append", metavar="NAME")
    update.add_argument("--remove-alias", action="append", metavar="NAME")
    attributes = update.add_mutually_exclusive_group()
    attributes.add_argument(
        "--attr",
        action="append",
        type=attr,
        metavar="K=V",
        help="the attributes, replacing all of them (repeat)",
    )
    attributes.add_argument("--clear-attributes", action="store_true")

    resolve = add_verb(
        group, "resolve", _resolve, parents, help="which entities a name means (ENTITY_RESOLVE)"
    )
    resolve.add_argument("name", metavar="NAME")
    resolve.add_argument("--type", metavar="TYPE")
    resolve.add_argument("--limit", type=int, metavar="N", help="most matches (default 10)")
    resolve.add_argument(
        "--as-of", type=time_arg, metavar="DATE", help="among the entities believed at DATE"
    )

    merge = add_verb(
        group,
        "merge",
        _merge,
        parents,
        write=True,
        help="merge one entity into another (ENTITY_MERGE)",
        description="Merge MERGE into KEEP: MERGE's names become KEEP's aliases and its "
        "records answer as KEEP's. Undo with `brain entity unmerge MERGE_ID`.",
    )
    merge.add_argument("keep", type=entity_id, metavar="KEEP")
    merge.add_argument("merge", type=entity_id, metavar="MERGE")

    unmerge = add_verb(
        group,
        "unmerge",
        _unmerge,
        parents,
        write=True,
        help="undo a merge exactly (ENTITY_UNMERGE)",
    )
    unmerge.add_argument("merge_id", type=id_arg, metavar="MERGE_ID")

    listing = add_verb(group, "list", _list, parents, help="list live entities (ENTITY_LIST)")
    listing.add_argument("--type", metavar="TYPE")
    listing.add_argument("--prefix", metavar="TEXT", help="names starting with TEXT")
    listing.add_argument(
        "--as-of", type=time_arg, metavar="DATE", help="the entities as believed at DATE"
    )
    add_paging_options(listing)

    tombstone = add_verb(
        group,
        "tombstone",
        _tombstone,
        parents,
        write=True,
        help="soft-delete an entity (ENTITY_TOMBSTONE)",
    )
    tombstone.add_argument("id", type=entity_id, metavar="ID")


def _build_add(ctx: VerbContext) -> Request:
    args = ctx.args
    message = EntityCreate(
        space=ctx.space,
        request_id=ctx.request_id(),
        name=args.name,
        type_=args.type,
        aliases=tuple(args.alias) if args.alias else None,
        attributes=_attributes(args.attr),
    )
    return Request(Opcode.ENTITY_CREATE, message, EntityCreateOk)


def _add(ctx: VerbContext) -> int:
    answer = ctx.send(_build_add(ctx))
    assert isinstance(answer, EntityCreateOk)
    out = ctx.printer
    if out.json_output:
        out.json(answer)
    elif ctx.args.quiet:
        out.raw(answer.entity_id.hex() + "\n")
    else:
        out.line("entity ", (answer.entity_id.hex(), "cyan"), f" created (LSN {answer.lsn})")
    return 0


def _get(ctx: VerbContext) -> int:
    as_of = ctx.args.as_of
    ident = resolve_entity(ctx, ctx.args.entity, as_of=as_of)
    request = EntityGet(space=ctx.space, id=ident, as_of=as_of)
    answer = ctx.call(Opcode.ENTITY_GET, request, EntityGetOk)
    if ctx.printer.json_output:
        ctx.printer.json(answer)
    else:
        ctx.printer.show(entity_panel(answer.entity, ctx.printer))
    return 0


def _history(ctx: VerbContext) -> int:
    ident = resolve_entity(ctx, ctx.args.entity)
    request = EntityHistory(space=ctx.space, id=ident)
    answer = ctx.call(Opcode.ENTITY_HISTORY, request, EntityHistoryOk)
    out = ctx.printer
    if out.json_output:
        out.json(answer)
        return 0
    table = out.table(
        "recorded", "until", "name", "aliases", "state", title=f"entity {ident.hex()}"
    )
    for version in answer.versions:
        until = version.record_invalidated_at
        state = "tombstoned" if version.tombstoned_at is not None else "live"
        if version.merged_into is not None:
            state = f"merged into {version.merged_into.hex()}"
        table.add_row(
            cell(out.time(version.recorded_at, compact=True)),
            cell("" if until is None else out.time(until, compact=True)),
            cell(version.name),
            cell(", ".join(version.aliases)),
            cell(state),
        )
    out.show(table)
    return 0


def _update(ctx: VerbContext) -> int:
    args = ctx.args
    attributes = {} if args.clear_attributes else _attributes(args.attr)
    message = EntityUpdate(
        space=ctx.space,
        request_id=ctx.request_id(),
        id=args.id,
        name=args.name,
        add_aliases=tuple(args.add_alias) if args.add_alias else None,
        remove_aliases=tuple(args.remove_alias) if args.remove_alias else None,
        attributes=attributes,
    )
    answer = ctx.call(Opcode.ENTITY_UPDATE, message, EntityUpdateOk)
    return _show_entity(ctx, answer)


def _show_entity(ctx: VerbContext, answer: EntityUpdateOk) -> int:
    out = ctx.printer
    if out.json_output:
        out.json(answer)
    elif ctx.args.quiet:
        out.raw(answer.entity.id.hex() + "\n")
    else:
        out.show(entity_panel(answer.entity, out))
    return 0


def _resolve(ctx: VerbContext) -> int:
    args = ctx.args
    request = EntityResolve(
        space=ctx.space, name=args.name, type_=args.type, limit=args.limit, as_of=args.as_of
    )
    answer = ctx.call(Opcode.ENTITY_RESOLVE, request, EntityResolveOk)
    out = ctx.printer
    if out.json_output:
        out.json(answer)
        return 0
    labels = out.labels(answer)
    table = out.table("id", "name", "score", "tier")
    for match in answer.matches:
        table.add_row(
            cell(labels.id(match.entity_id), "cyan"),
            cell(match.name),
            cell(f"{match.score:.3f}"),
            cell(match.tier),
        )
    if answer.matches:
        out.show(table)
    if answer.resolved is not None:
        out.line("resolved: ", (answer.resolved.hex(), "cyan"))
    elif answer.ambiguous:
        out.line(
            ("ambiguous: ", "yellow"), "the best matches tie; a write naming it waits for review"
        )
    else:
        out.line(("no match", "yellow"), f" for {args.name!r}")
    return 0


def _merge(ctx: VerbContext) -> int:
    args = ctx.args
    message = EntityMerge(
        space=ctx.space, request_id=ctx.request_id(), keep=args.keep, merge=args.merge
    )
    answer = ctx.call(Opcode.ENTITY_MERGE, message, EntityMergeOk)
    out = ctx.printer
    if out.json_output:
        out.json(answer)
    elif args.quiet:
        out.raw(answer.merge_id.hex() + "\n")
    else:
        out.line(
            f"entity {args.merge.hex()} merged into {args.keep.hex()} (LSN {answer.lsn}); "
            "undo with: brain entity unmerge ",
            (answer.merge_id.hex(), "cyan"),
        )
    return 0


def _unmerge(ctx: VerbContext) -> int:
    message = EntityUnmerge(
        space=ctx.space, request_id=ctx.request_id(), merge_id=ctx.args.merge_id
    )
    answer = ctx.call(Opcode.ENTITY_UNMERGE, message, EntityUnmergeOk)
    out = ctx.printer
    if out.json_output:
        out.json(answer)
    elif not ctx.args.quiet:
        out.line(f"merge {ctx.args.merge_id.hex()} undone (LSN {answer.lsn})")
    return 0


def _list(ctx: VerbContext) -> int:
    args: argparse.Namespace = ctx.args

    def page(cursor: bytes | None) -> EntityListOk:
        request = EntityList(
            space=ctx.space,
            type_=args.type,
            prefix=args.prefix,
            limit=args.limit,
            cursor=cursor,
            as_of=args.as_of,
        )
        return ctx.call(Opcode.ENTITY_LIST, request, EntityListOk)

    rows, cursor = follow_pages(page, args, lambda answer: answer.entities)
    answer = EntityListOk(entities=tuple(rows), cursor=cursor)
    out = ctx.printer
    if out.json_output:
        out.json(answer)
        return 0
    if answer.entities:
        out.show(entity_table(answer.entities, out, out.labels(answer)))
    page_footer(out, len(answer.entities), ("entity", "entities"), answer.cursor)
    return 0


def _tombstone(ctx: VerbContext) -> int:
    message = EntityTombstone(space=ctx.space, request_id=ctx.request_id(), id=ctx.args.id)
    answer = ctx.call(Opcode.ENTITY_TOMBSTONE, message, EntityTombstoneOk)
    out = ctx.printer
    if out.json_output:
        out.json(answer)
    elif ctx.args.quiet:
        out.raw(answer.id.hex() + "\n")
    else:
        out.line("entity ", (answer.id.hex(), "cyan"), f" tombstoned (LSN {answer.lsn})")
    return 0
