"""Short ids typed back: the ``…`` tails that tables print, resolved within the space.

Tables show an id as ``…`` and its last hex digits (:mod:`brain.cli.verbs.output`).
An argument naming a statement, an entity or a review item takes that form too:
``…3f9a01c2``, ``...3f9a01c2``, or the bare digits (8 to 31 of them). The wire
has no lookup by part of an id, so the command lists the records of that kind
in the space and keeps those whose id ends with the digits given; exactly one
must. Statements are listed by STATEMENT_LIST with superseded and tombstoned
rows, entities by ENTITY_LIST, review items by REVIEW_LIST (the open ones, the
only ones it shows). A SUBJECT, FROM or TO ``id:…3f9a01c2`` and an ENTITY
argument ``…3f9a01c2`` name an entity the same way, and an OBJECT of
``--object-type entity`` or ``statement`` its entity or statement.

Memories, relations and merges have no listing by space, so a tail of theirs
could not be told apart from the ids the command cannot see: tables print
their ids whole, and their arguments take full ids only.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final, NoReturn

from brain.cli.verbs.arguments import argument, parse_id
from brain.cli.verbs.connect import UsageProblem
from brain.cli.verbs.context import VerbContext
from brain.wire.messages.entity_ops import EntityList, EntityListOk
from brain.wire.messages.review_ops import ReviewList, ReviewListOk
from brain.wire.messages.statement_ops import StatementList, StatementListOk
from brain.wire.messages.values import MAX_LIST_LIMIT
from brain.wire.opcodes import Opcode

__all__ = [
    "KINDS",
    "MAX_SCAN_PAGES",
    "ShortId",
    "parse_short_id",
    "resolve_arguments",
    "resolve_short_id",
    "short_id_arg",
]

KINDS: Final = ("statement", "entity", "review")
"""The records whose short ids resolve: those the wire lists by space."""

MAX_SCAN_PAGES: Final = 100
"""Pages (of :data:`MAX_LIST_LIMIT` rows) a resolution lists: 100,000 records. A space
holding more of the kind is not searched past them; its ids must be given whole."""

REF_ARGUMENTS: Final = ("subject", "from_", "to")
"""Arguments holding a SUBJECT, FROM or TO, where ``id:…TAIL`` names an entity."""

OBJECT_KINDS: Final = {"entity": ("entity", "id:"), "statement": ("statement", "statement:")}
"""``--object-type`` values whose OBJECT is an id of a kind that resolves, and the
prefix the OBJECT may carry."""

_MARKED: Final = re.compile(r"(?:…|\.\.\.)([0-9a-fA-F]{1,31})")
_BARE: Final = re.compile(r"[0-9a-fA-F]{8,31}")
_REF: Final = re.compile(r"(?:id|entity):((?:…|\.\.\.)?[0-9a-fA-F]{1,31})")


@dataclass(frozen=True, slots=True)
class ShortId:
    """An id given by its last hex digits, to resolve before the request is built."""

    kind: str
    tail: str
    """Lowercase hex digits the id ends with."""

    def __str__(self) -> str:
        return f"…{self.tail}"


def _tail(text: str, *, bare: bool) -> str | None:
    """The digits of a short id (``…TAIL``, ``...TAIL``; bare digits when ``bare``)."""
    value = text.strip()
    match = _MARKED.fullmatch(value) or (_BARE.fullmatch(value) if bare else None)
    if match is None:
        return None
    return (match.group(1) if match.lastindex else match.group()).lower()


def parse_short_id(text: str, kind: str) -> bytes | ShortId:
    """A full id (32 hex digits, or a UUID) as bytes; a table's short form as a
    :class:`ShortId` of ``kind`` (one of :data:`KINDS`)."""
    try:
        return parse_id(text)
    except ValueError:
        tail = _tail(text, bare=True)
        if tail is None:
            raise ValueError(
                f"{text!r} is not a {kind} id (32 hex digits, or the short form tables "
                "print, such as …3f9a01c2)"
            ) from None
        return ShortId(kind, tail)


def short_id_arg(kind: str) -> Callable[[str], bytes | ShortId]:
    """``type=`` for an id argument of ``kind`` that takes the short form too."""
    if kind not in KINDS:
        raise ValueError(f"{kind} ids have no short form; the kinds are {', '.join(KINDS)}")
    convert = argument(lambda text: parse_short_id(text, kind))
    convert.__name__ = f"{kind}_id"
    return convert


def _statement_ids(ctx: VerbContext, space: str | None) -> Iterable[list[bytes]]:
    cursor: bytes | None = None
    for _ in range(MAX_SCAN_PAGES):
        request = StatementList(
            space=space,
            include_superseded=True,
            include_tombstoned=True,
            limit=MAX_LIST_LIMIT,
            cursor=cursor,
        )
        page = ctx.call(Opcode.STATEMENT_LIST, request, StatementListOk)
        yield [row.id for row in page.statements]
        if page.cursor is None:
            return
        cursor = page.cursor
    _too_many("statement")


def _entity_ids(ctx: VerbContext, space: str | None) -> Iterable[list[bytes]]:
    cursor: bytes | None = None
    for _ in range(MAX_SCAN_PAGES):
        request = EntityList(space=space, limit=MAX_LIST_LIMIT, cursor=cursor)
        page = ctx.call(Opcode.ENTITY_LIST, request, EntityListOk)
        yield [row.id for row in page.entities]
        if page.cursor is None:
            return
        cursor = page.cursor
    _too_many("entity")


def _review_ids(ctx: VerbContext, space: str | None) -> Iterable[list[bytes]]:
    request = ReviewList(space=space, limit=MAX_LIST_LIMIT)
    answer = ctx.call(Opcode.REVIEW_LIST, request, ReviewListOk)
    yield [item.review_id for item in answer.items]


def _too_many(kind: str) -> NoReturn:
    plural = "entities" if kind == "entity" else f"{kind}s"
    raise UsageProblem(
        f"the space holds more than {MAX_SCAN_PAGES * MAX_LIST_LIMIT:,} {plural}, too many "
        f"to find a short id among; give the full id (--full-ids prints ids whole)"
    )


_LISTERS: Final = {"statement": _statement_ids, "entity": _entity_ids, "review": _review_ids}


def resolve_short_id(ctx: VerbContext, short: ShortId, space: str | None) -> bytes:
    """The one id of ``short.kind`` in ``space`` ending with ``short.tail``; a
    :class:`UsageProblem` naming how many match when that is not exactly one."""
    found: list[bytes] = []
    for page in _LISTERS[short.kind](ctx, space):
        found.extend(raw for raw in page if raw.hex().endswith(short.tail))
    where = f"space {space!r}" if space is not None else "the default space"
    what = "review item" if short.kind == "review" else short.kind
    if len(found) == 1:
        return found[0]
    if not found:
        raise UsageProblem(f"no {what} id in {where} ends with {short.tail} (as {short} does)")
    raise UsageProblem(
        f"{short} matches {len(found)} {what} ids in {where}; give more of its last "
        "digits, or the full id (--full-ids prints ids whole)"
    )


def resolve_arguments(ctx: VerbContext, args: argparse.Namespace) -> None:
    """Replace every short id in ``args`` by the full id it names (a ref's by
    ``id:<hex>``), listing within ``args``'s ``--space``."""
    space = getattr(args, "space", None)
    for name, value in list(vars(args).items()):
        if isinstance(value, ShortId):
            setattr(args, name, resolve_short_id(ctx, value, space))
        elif name in REF_ARGUMENTS and isinstance(value, str):
            match = _REF.fullmatch(value.strip())
            tail = None if match is None else _tail(match.group(1), bare=True)
            if tail is not None:
                entity = resolve_short_id(ctx, ShortId("entity", tail), space)
                setattr(args, name, f"id:{entity.hex()}")
        elif name == "object" and isinstance(value, str):
            kind_prefix = OBJECT_KINDS.get(getattr(args, "object_type", None) or "")
            if kind_prefix is not None:
                kind, prefix = kind_prefix
                word = value.strip().removeprefix(prefix).removeprefix("entity:")
                tail = _tail(word, bare=True)
                if tail is not None:
                    setattr(args, name, resolve_short_id(ctx, ShortId(kind, tail), space).hex())


def entity_short_id(text: str) -> ShortId | None:
    """``…TAIL`` (or ``id:…TAIL``) as an entity's short id, for an ENTITY argument
    that also takes names: bare digits there are a name."""
    value = text.strip()
    for prefix in ("id:", "entity:"):
        if value.startswith(prefix):
            tail = _tail(value.removeprefix(prefix), bare=True)
            return None if tail is None else ShortId("entity", tail)
    tail = _tail(value, bare=False)
    return None if tail is None else ShortId("entity", tail)
