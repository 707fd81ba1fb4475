"""How records look to a person: statement, relation and entity tables, detail panels.

Shared by the verbs that show records (get, list, history, recall, traverse).
Every function takes the :class:`~brain.cli.verbs.output.Printer` (times, ids)
and the :class:`~brain.cli.verbs.output.Labels` of the screen it draws on.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from brain.cli.verbs.output import Labels, Printer, cell, to_json
from brain.wire.messages.records import Entity, Evidence, Memory, Relation, Statement
from brain.wire.messages.values import (
    BoolValue,
    EntityRef,
    EntityValue,
    FloatValue,
    IntValue,
    MemoryRef,
    MemoryValue,
    NameRef,
    PendingRef,
    StatementValue,
    SubjectRef,
    TextValue,
    TimeValue,
    Value,
)
from brain.wire.schema import Message

if TYPE_CHECKING:  # rich loads when something is drawn (brain.cli.verbs.output)
    from rich.console import RenderableType
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

__all__ = [
    "detail_panel",
    "entity_ids",
    "entity_panel",
    "entity_state",
    "entity_table",
    "memory_panel",
    "ref_text",
    "relation_panel",
    "relation_table",
    "statement_panel",
    "statement_state",
    "statement_table",
    "validity_text",
    "value_text",
]

_STATE_STYLE = {
    "current": "green",
    "superseded": "yellow",
    "tombstoned": "red",
    "retracted": "red",
}


def entity_ids(records: Iterable[Message]) -> list[bytes]:
    """The entities the records name as subject, object or relation end, to look up."""
    found: dict[bytes, None] = {}
    for record in records:
        if isinstance(record, Statement):
            if isinstance(record.subject, EntityRef):
                found[record.subject.entity] = None
            if isinstance(record.object_, EntityValue):
                found[record.object_.entity] = None
        elif isinstance(record, Relation):
            for end in (record.from_, record.to):
                if isinstance(end, EntityRef):
                    found[end.entity] = None
    return list(found)


def ref_text(ref: SubjectRef, labels: Labels) -> str:
    """A subject or relation end: an entity by name, a memory, a pending name."""
    if isinstance(ref, EntityRef):
        return labels.entity(ref.entity)
    if isinstance(ref, MemoryRef):
        return f"memory {ref.memory.hex()}"  # whole: no short form of it resolves
    if isinstance(ref, PendingRef):
        return f"pending review {labels.id(ref.pending)}"
    assert isinstance(ref, NameRef)
    return ref.name if ref.type_ is None else f"{ref.name} ({ref.type_})"


def value_text(value: Value, labels: Labels, printer: Printer, *, compact: bool = False) -> str:
    """A statement's object as text (a time ``compact``, to the second, in a table)."""
    if isinstance(value, TextValue):
        return value.text
    if isinstance(value, IntValue):
        return str(value.int_)
    if isinstance(value, FloatValue):
        return repr(value.float_)
    if isinstance(value, BoolValue):
        return "true" if value.bool_ else "false"
    if isinstance(value, TimeValue):
        return printer.time(value.time, compact=compact)
    if isinstance(value, EntityValue):
        return labels.entity(value.entity)
    if isinstance(value, MemoryValue):
        return f"memory {value.memory.hex()}"  # whole: no short form of it resolves
    assert isinstance(value, StatementValue)
    return f"statement {labels.id(value.statement)}"


def statement_state(statement: Statement | Relation, as_of: int | None = None) -> str:
    """``current``, ``superseded``, ``tombstoned`` or ``retracted``: as believed now, or
    with ``as_of`` as the database believed it at that instant (the record axis).

    A tombstone counts from its ``tombstoned_at``, a supersession from the old row's
    ``record_invalidated_at`` (the record time of the write that superseded it): one
    recorded after ``as_of`` had not happened then. A retraction shows whatever the
    instant, since the husk no longer holds the claim it would be shown for.
    """
    if isinstance(statement, Statement) and statement.tombstone_reason == "retracted":
        return "retracted"
    tombstoned = statement.tombstoned_at
    if tombstoned is not None and (as_of is None or tombstoned <= as_of):
        return "tombstoned"
    invalidated = statement.record_invalidated_at
    if statement.superseded_by is not None and (
        as_of is None or invalidated is None or invalidated <= as_of
    ):
        return "superseded"
    return "current"


def validity_text(record: Statement | Relation, printer: Printer, *, compact: bool = False) -> str:
    """The validity interval ``[from → to)`` (an event: ``at T``); open ends say so.
    ``compact``: its times to the second, for a table."""
    if isinstance(record, Statement) and record.event_at is not None:
        return f"at {printer.time(record.event_at, compact=compact)}"
    if record.valid_from is None and record.valid_to is None:
        return "always"
    start = (
        "open" if record.valid_from is None else printer.time(record.valid_from, compact=compact)
    )
    end = "open" if record.valid_to is None else printer.time(record.valid_to, compact=compact)
    return f"{start} → {end}"


def _state_cell(record: Statement | Relation, as_of: int | None) -> Text:
    state = statement_state(record, as_of)
    return cell(state, _STATE_STYLE[state])


def statement_table(
    statements: Sequence[Statement],
    printer: Printer,
    labels: Labels,
    *,
    title: str | None = None,
    as_of: int | None = None,
) -> Table:
    """One row per statement: id, version, claim, validity, record time, state; and kind
    and confidence when some row is not a fact held with confidence 1. The state is
    judged ``as_of`` that instant when given (the validity is the server's, already
    as believed then)."""
    show_kind = any(st.kind not in (None, "fact") for st in statements)
    show_conf = any(st.confidence not in (None, 1.0) for st in statements)
    columns = ["id", "v", "subject", "predicate", "object"]
    columns += ["kind"] * show_kind + ["conf"] * show_conf + ["valid", "recorded", "state"]
    table = printer.table(*columns, title=title)
    for st in statements:
        if st.tombstone_reason == "retracted":
            claim = [cell("(retracted)", "dim"), cell(""), cell("")]
        else:
            assert st.subject is not None and st.object_ is not None
            claim = [
                cell(ref_text(st.subject, labels)),
                cell(st.predicate),
                cell(value_text(st.object_, labels, printer, compact=True)),
            ]
        extra = [cell(st.kind)] * show_kind
        extra += [cell("" if st.confidence is None else f"{st.confidence:g}")] * show_conf
        table.add_row(
            cell(labels.id(st.id), "cyan"),
            cell(st.version),
            *claim,
            *extra,
            cell(validity_text(st, printer, compact=True)),
            cell(printer.time(st.recorded_at, compact=True)),
            _state_cell(st, as_of),
        )
    return table


def detail_panel(title: str, rows: Sequence[tuple[str, object]]) -> Panel:
    """A panel of ``field  value`` lines; rows whose value is None are left out."""
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column(overflow="fold")
    for name, value in rows:
        if value is None:
            continue
        grid.add_row(cell(name), value if isinstance(value, Text) else cell(value))
    return Panel(grid, title=Text(title), title_align="left", expand=False)


def _evidence_text(evidence: Sequence[Evidence] | None) -> str | None:
    if not evidence:
        return None
    lines = []
    for item in evidence:
        sha = f" sha256 {item.sha256.hex()}" if item.sha256 is not None else ""
        lines.append(f"memory {item.memory.hex()}{sha}")
    return "\n".join(lines)


def statement_panel(
    statement: Statement, printer: Printer, labels: Labels, *, as_of: int | None = None
) -> Panel:
    """Every field of one statement, ids in full; its state judged ``as_of`` when given."""
    st = statement
    return detail_panel(
        f"statement {st.id.hex()}",
        [
            ("state", _state_cell(st, as_of)),
            ("space", st.space),
            ("kind", st.kind),
            ("subject", None if st.subject is None else ref_text(st.subject, labels)),
            ("predicate", st.predicate),
            ("object", None if st.object_ is None else value_text(st.object_, labels, printer)),
            ("confidence", None if st.confidence is None else f"{st.confidence:g}"),
            ("evidence", _evidence_text(st.evidence)),
            ("source", st.source),
            ("valid", None if st.tombstone_reason == "retracted" else validity_text(st, printer)),
            ("recorded at", printer.time(st.recorded_at)),
            (
                "invalidated at",
                None
                if st.record_invalidated_at is None
                else printer.time(st.record_invalidated_at),
            ),
            ("version", f"{st.version} of chain {st.chain_root.hex()}"),
            ("supersedes", None if st.supersedes is None else st.supersedes.hex()),
            ("superseded by", None if st.superseded_by is None else st.superseded_by.hex()),
            ("tombstoned at", None if st.tombstoned_at is None else printer.time(st.tombstoned_at)),
            ("tombstone reason", st.tombstone_reason),
        ],
    )


def memory_panel(memory: Memory, printer: Printer) -> Panel:
    """Every field of one memory, its text last and whole."""
    state = "active" if memory.forgotten is None else f"forgotten ({memory.forgotten})"
    text: RenderableType = (
        cell("(no text: the memory was hard-forgotten)", "dim")
        if memory.text is None
        else cell(memory.text)
    )
    return detail_panel(
        f"memory {memory.id.hex()}",
        [
            ("state", cell(state, "green" if memory.forgotten is None else "red")),
            ("sha256", memory.sha256.hex()),
            (
                "occurred at",
                None if memory.occurred_at is None else printer.time(memory.occurred_at),
            ),
            ("recorded at", printer.time(memory.recorded_at)),
            ("context", memory.context),
            (
                "forgotten at",
                None if memory.forgotten_at is None else printer.time(memory.forgotten_at),
            ),
            ("text", text),
        ],
    )


def _attributes(attributes: dict[str, object]) -> str | None:
    if not attributes:
        return None
    return json.dumps(to_json(attributes), ensure_ascii=False, sort_keys=True)


def entity_state(entity: Entity) -> str:
    """``live``, ``merged`` or ``tombstoned``."""
    if entity.merged_into is not None:
        return "merged"
    if entity.tombstoned_at is not None:
        return "tombstoned"
    return "live"


def entity_panel(entity: Entity, printer: Printer) -> Panel:
    """Every field of one entity, ids in full."""
    state = entity_state(entity)
    return detail_panel(
        f"entity {entity.id.hex()}",
        [
            ("state", cell(state, "green" if state == "live" else "red")),
            ("name", entity.name),
            ("type", entity.type_),
            ("aliases", ", ".join(entity.aliases) or None),
            ("attributes", _attributes(entity.attributes)),
            ("created at", printer.time(entity.created_at)),
            ("merged into", None if entity.merged_into is None else entity.merged_into.hex()),
            (
                "tombstoned at",
                None if entity.tombstoned_at is None else printer.time(entity.tombstoned_at),
            ),
            # The record interval of the version shown (spec/02-data-model.md §4.7).
            ("recorded at", printer.time(entity.recorded_at)),
            (
                "believed until",
                None
                if entity.record_invalidated_at is None
                else printer.time(entity.record_invalidated_at),
            ),
        ],
    )


def entity_table(
    entities: Sequence[Entity], printer: Printer, labels: Labels, *, title: str | None = None
) -> Table:
    """One row per entity."""
    table = printer.table("id", "name", "type", "aliases", "created", title=title)
    for entity in entities:
        table.add_row(
            cell(labels.id(entity.id), "cyan"),
            cell(entity.name),
            cell(entity.type_ or ""),
            cell(", ".join(entity.aliases)),
            cell(printer.time(entity.created_at, compact=True)),
        )
    return table


def relation_table(
    relations: Sequence[Relation],
    printer: Printer,
    labels: Labels,
    *,
    title: str | None = None,
    as_of: int | None = None,
) -> Table:
    """One row per relation: FROM, type, TO, confidence, validity, record time, state
    (judged ``as_of`` that instant when given)."""
    table = printer.table(
        "id", "from", "type", "to", "conf", "valid", "recorded", "state", title=title
    )
    for rel in relations:
        table.add_row(
            # Whole: a relation's short id could not be resolved (brain.cli.verbs.short_ids).
            cell(rel.id.hex(), "cyan"),
            cell(ref_text(rel.from_, labels)),
            cell(rel.type_),
            cell(ref_text(rel.to, labels)),
            cell(f"{rel.confidence:g}"),
            cell(validity_text(rel, printer, compact=True)),
            cell(printer.time(rel.recorded_at, compact=True)),
            _state_cell(rel, as_of),
        )
    return table


def relation_panel(relation: Relation, printer: Printer, labels: Labels) -> Panel:
    """Every field of one relation, ids in full."""
    rel = relation
    return detail_panel(
        f"relation {rel.id.hex()}",
        [
            ("state", _state_cell(rel, None)),
            ("type", rel.type_),
            ("from", ref_text(rel.from_, labels)),
            ("to", ref_text(rel.to, labels)),
            ("confidence", f"{rel.confidence:g}"),
            ("evidence", _evidence_text(rel.evidence)),
            ("valid", validity_text(rel, printer)),
            ("recorded at", printer.time(rel.recorded_at)),
            (
                "invalidated at",
                None
                if rel.record_invalidated_at is None
                else printer.time(rel.record_invalidated_at),
            ),
            ("supersedes", None if rel.supersedes is None else rel.supersedes.hex()),
            ("superseded by", None if rel.superseded_by is None else rel.superseded_by.hex()),
            (
                "tombstoned at",
                None if rel.tombstoned_at is None else printer.time(rel.tombstoned_at),
            ),
        ],
    )
