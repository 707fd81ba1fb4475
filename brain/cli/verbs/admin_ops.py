"""The space's vocabulary and review queue: ``brain schema get|put``, ``brain review
list|decide`` (SCHEMA_GET, SCHEMA_PUT, REVIEW_LIST, REVIEW_DECIDE).

``schema put`` takes the SCHEMA_PUT payload as a JSON file (``--file``), flags,
or both (the file's declarations first):

- ``--stateful NAME[:KIND]``: a predicate holding one current value per subject;
- ``--predicate NAME[:KIND]``: a declared predicate that accumulates (with kind
  ``fact``, a different value queues a contradiction for review);
- ``--relation-type NAME:CARDINALITY[:symmetric]``;
- ``--entity-type NAME``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

from brain.cli.verbs.arguments import argument
from brain.cli.verbs.connect import UsageProblem
from brain.cli.verbs.context import VerbContext
from brain.cli.verbs.options import Parents, SubParsers, add_group, add_verb
from brain.cli.verbs.output import cell
from brain.cli.verbs.short_ids import short_id_arg
from brain.cli.verbs.statements import KINDS
from brain.errors import BrainError
from brain.wire.messages.review_ops import (
    ReviewDecide,
    ReviewDecided,
    ReviewList,
    ReviewListOk,
)
from brain.wire.messages.schema_ops import (
    PredicateDecl,
    RelationTypeDecl,
    Schema,
    SchemaGet,
    SchemaPut,
    SchemaPutOk,
)
from brain.wire.opcodes import Opcode

__all__ = ["parse_predicate_decl", "parse_relation_type_decl", "register"]

CARDINALITIES: Final = ("many_to_many", "many_to_one", "one_to_many", "one_to_one")
DECISIONS: Final = ("keep_both", "supersede", "reject_new", "merge", "distinct")
"""REVIEW_DECIDE's decisions: the first three settle contradictions, the last two
ambiguous names (spec/02-data-model.md §7)."""


def parse_predicate_decl(text: str, *, stateful: bool) -> PredicateDecl:
    """``NAME`` or ``NAME:KIND`` (KIND one of fact, preference, event)."""
    name, colon, kind = text.rpartition(":")
    if not colon or kind not in KINDS:
        name, kind = text, ""
    if not name:
        raise ValueError(f"{text!r} has no predicate name")
    return PredicateDecl(name=name, kind=kind or None, stateful=stateful)


def parse_relation_type_decl(text: str) -> RelationTypeDecl:
    """``NAME:CARDINALITY`` or ``NAME:CARDINALITY:symmetric``."""
    parts = text.split(":")
    symmetric = None
    if len(parts) == 3 and parts[2] == "symmetric":
        symmetric = True
        parts = parts[:2]
    if len(parts) != 2 or not parts[0] or parts[1] not in CARDINALITIES:
        raise ValueError(
            f"{text!r} is not NAME:CARDINALITY[:symmetric] "
            f"(cardinality one of {', '.join(CARDINALITIES)})"
        )
    return RelationTypeDecl(name=parts[0], cardinality=parts[1], symmetric=symmetric)


def register(commands: SubParsers, parents: Parents) -> None:
    """Add the ``schema`` and ``review`` verbs."""
    schema = add_group(commands, "schema", help="the space's declared vocabulary")
    add_verb(schema, "get", _schema_get, parents, help="show the schema (SCHEMA_GET)")
    put = add_verb(
        schema,
        "put",
        _schema_put,
        parents,
        help="declare predicates, relation types, entity types (SCHEMA_PUT; admin key)",
        description="Declare vocabulary. Each declaration replaces the one of the same "
        "name; nothing is ever removed. Needs a key with the admin permission.",
    )
    put.add_argument("--file", type=Path, metavar="FILE", help="the SCHEMA_PUT payload as JSON")
    put.add_argument(
        "--stateful",
        action="append",
        type=argument(lambda t: parse_predicate_decl(t, stateful=True)),
        metavar="NAME[:KIND]",
        help="a predicate with one current value per subject (repeat)",
    )
    put.add_argument(
        "--predicate",
        action="append",
        type=argument(lambda t: parse_predicate_decl(t, stateful=False)),
        metavar="NAME[:KIND]",
        help="a predicate whose values accumulate (repeat)",
    )
    put.add_argument(
        "--relation-type",
        action="append",
        type=argument(parse_relation_type_decl),
        metavar="NAME:CARDINALITY[:symmetric]",
        help="a relation type and its cardinality (repeat)",
    )
    put.add_argument("--entity-type", action="append", metavar="NAME", help="(repeat)")

    review = add_group(commands, "review", help="contradictions and ambiguous names to decide")
    listing = add_verb(review, "list", _review_list, parents, help="open items (REVIEW_LIST)")
    listing.add_argument("--limit", type=int, metavar="N", help="most items (default 100)")
    decide = add_verb(
        review,
        "decide",
        _review_decide,
        parents,
        write=True,
        help="settle an item (REVIEW_DECIDE)",
        description="Settle a review item. A contradiction: keep_both, supersede (the "
        "newest replaces the others) or reject_new. An ambiguous name: merge --into ID "
        "(the name means that candidate; the others stay as they are) or distinct (a new "
        "entity).",
    )
    decide.add_argument("review_id", type=short_id_arg("review"), metavar="ID")
    decide.add_argument(
        "decision", choices=DECISIONS, metavar="DECISION", help=", ".join(DECISIONS)
    )
    decide.add_argument(
        "--into",
        type=short_id_arg("entity"),
        metavar="ID",
        help="for merge, and required by it: the candidate entity the name means",
    )


def _schema_get(ctx: VerbContext) -> int:
    answer = ctx.call(Opcode.SCHEMA_GET, SchemaGet(space=ctx.space), Schema)
    out = ctx.printer
    if out.json_output:
        out.json(answer)
        return 0
    whose = "the namespace's" if answer.scope == "namespace" else f"space {ctx.space}'s own"
    out.line(f"schema version {answer.version} ({whose})")
    if answer.predicates:
        table = out.table("predicate", "stateful", "kind", title="predicates")
        for decl in answer.predicates:
            table.add_row(cell(decl.name), cell("yes" if decl.stateful else "no"), cell(decl.kind))
        out.show(table)
    if answer.relation_types:
        table = out.table("relation type", "cardinality", "symmetric", title="relation types")
        for rel in answer.relation_types:
            table.add_row(
                cell(rel.name), cell(rel.cardinality), cell("yes" if rel.symmetric else "no")
            )
        out.show(table)
    if answer.entity_types:
        out.line("entity types: " + ", ".join(answer.entity_types))
    if not (answer.predicates or answer.relation_types or answer.entity_types):
        out.note("nothing declared: every predicate accumulates, every relation is many-to-many")
    return 0


def _schema_file(path: Path) -> SchemaPut:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageProblem(f"--file: cannot read {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise UsageProblem(f"--file: {path} is not JSON: {exc}") from None
    try:
        return SchemaPut.from_wire(document)
    except BrainError as exc:
        where = f" ({exc.field})" if exc.field else ""
        raise UsageProblem(
            f"--file: {path} is not a SCHEMA_PUT payload: {exc.message}{where}"
        ) from None


def _schema_put(ctx: VerbContext) -> int:
    args = ctx.args
    base = _schema_file(args.file) if args.file is not None else SchemaPut()
    predicates = [*(base.predicates or ()), *(args.stateful or ()), *(args.predicate or ())]
    relation_types = [*(base.relation_types or ()), *(args.relation_type or ())]
    entity_types = [*(base.entity_types or ()), *(args.entity_type or ())]
    if not (predicates or relation_types or entity_types):
        raise UsageProblem(
            "nothing to declare: give --file, --stateful, --predicate, --relation-type "
            "or --entity-type"
        )
    request = SchemaPut(
        space=ctx.space if ctx.space is not None else base.space,
        predicates=tuple(predicates) or None,
        relation_types=tuple(relation_types) or None,
        entity_types=tuple(entity_types) or None,
    )
    answer = ctx.call(Opcode.SCHEMA_PUT, request, SchemaPutOk)
    if ctx.printer.json_output:
        ctx.printer.json(answer)
    else:
        ctx.printer.line(f"schema version {answer.version}")
    return 0


def _review_list(ctx: VerbContext) -> int:
    answer = ctx.call(
        Opcode.REVIEW_LIST, ReviewList(space=ctx.space, limit=ctx.args.limit), ReviewListOk
    )
    out = ctx.printer
    if out.json_output:
        out.json(answer)
        return 0
    labels = out.labels(answer)
    table = out.table("review id", "kind", "name", "records", "created")
    for item in answer.items:
        # A contradiction names statements, whose short ids resolve; a name's item
        # may name relations too, whose ids are shown whole (short_ids).
        shown = labels.id if item.kind == "contradiction" else bytes.hex
        name = "" if item.name is None else item.name
        if item.type_ is not None:
            name += f" ({item.type_})"
        table.add_row(
            cell(item.review_id.hex(), "cyan"),
            cell(item.kind),
            cell(name),
            cell("\n".join(shown(record) for record in item.records)),
            cell(out.time(item.created_at, compact=True)),
        )
    if answer.items:
        out.show(table)
    count = len(answer.items)
    out.note(f"{count} open item{'' if count == 1 else 's'}")
    return 0


def _review_decide(ctx: VerbContext) -> int:
    args = ctx.args
    request = ReviewDecide(
        space=ctx.space,
        request_id=ctx.request_id(),
        review_id=args.review_id,
        decision=args.decision,
        into=args.into,
    )
    answer = ctx.call(Opcode.REVIEW_DECIDE, request, ReviewDecided)
    out = ctx.printer
    if out.json_output:
        out.json(answer)
    elif args.quiet:
        out.raw(args.review_id.hex() + "\n")
    else:
        out.line(f"review {args.review_id.hex()} decided: {args.decision} (LSN {answer.lsn})")
    return 0
