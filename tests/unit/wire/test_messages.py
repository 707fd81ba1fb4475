"""The message classes of every opcode (spec/01-wire.md §6, §9): registry, round trips, refusals."""

from __future__ import annotations

import copy
import dataclasses
import math
import struct
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brain import cbor
from brain.errors import InvalidArgument
from brain.wire.messages.control import CancelStreamOk
from brain.wire.messages.entity_ops import EntityMerge
from brain.wire.messages.recall_ops import ExplainOk, ExplainRequest, Hit, Recall, RecallOk
from brain.wire.messages.records import Evidence, Memory, Statement
from brain.wire.messages.relation_ops import (
    MAX_TRAVERSE_DEPTH,
    RelationCreate,
    RelationDraft,
    RelationTraverse,
)
from brain.wire.messages.schema_ops import SchemaPut
from brain.wire.messages.statement_ops import (
    StatementCreate,
    StatementDraft,
    StatementList,
    StatementSupersede,
)
from brain.wire.messages.values import I64_MAX, I64_MIN, EntityRef, TextValue
from brain.wire.opcodes import CONTROL_OPCODES, Opcode, Permission, required_permission
from brain.wire.registry import MESSAGES, request_class, response_class
from brain.wire.schema import Message, field_keys
from protocol.examples import examples

ID = bytes(range(16))
OTHER_ID = bytes(range(16, 32))

Payload = dict[str, object]


# --- registry ------------------------------------------------------------------------


def test_every_opcode_is_registered_with_message_classes() -> None:
    assert set(MESSAGES) == set(Opcode)
    for opcode in Opcode:
        assert issubclass(request_class(opcode), Message)
        assert issubclass(response_class(opcode), Message)


def test_unsubscribe_answers_like_cancel_stream() -> None:
    assert response_class(Opcode.UNSUBSCRIBE) is CancelStreamOk


def test_examples_cover_every_opcode() -> None:
    assert set(examples()) == {opcode.name for opcode in Opcode}


_NO_REQUEST_ID = {Opcode.TXN_BEGIN, Opcode.TXN_COMMIT, Opcode.TXN_ABORT, Opcode.SCHEMA_PUT}
"""Writes whose spec/01-wire.md §9 payload does not list ``request_id``."""

_TXN_WRITES = {
    Opcode.ENCODE,
    Opcode.STATEMENT_CREATE,
    Opcode.STATEMENT_SUPERSEDE,
    Opcode.STATEMENT_TOMBSTONE,
    Opcode.STATEMENT_RETRACT,
    Opcode.ENTITY_CREATE,
    Opcode.RELATION_CREATE,
    Opcode.RELATION_SUPERSEDE,
    Opcode.RELATION_TOMBSTONE,
    Opcode.FORGET,
    Opcode.ENTITY_UPDATE,
    Opcode.ENTITY_MERGE,
    Opcode.ENTITY_UNMERGE,
    Opcode.ENTITY_TOMBSTONE,
    Opcode.REVIEW_DECIDE,
}
"""Writes whose spec/01-wire.md §9 payload lists ``txn_id?``: every write but SCHEMA_PUT."""

_TXN_READS = {
    Opcode.MEMORY_GET,
    Opcode.ENTITY_GET,
    Opcode.STATEMENT_GET,
    Opcode.STATEMENT_HISTORY,
    Opcode.RELATION_GET,
    Opcode.STATEMENT_LIST,
    Opcode.ENTITY_LIST,
    Opcode.RELATION_LIST,
    Opcode.REVIEW_LIST,
    Opcode.RELATION_TRAVERSE,
    Opcode.RECALL,
    Opcode.EXPLAIN,
}
"""Reads that take ``txn_id?`` (spec/01-wire.md §6): those by id, the lists and the
traversal see a transaction's writes; RECALL and EXPLAIN refuse it."""


@pytest.mark.parametrize("opcode", sorted(set(Opcode) - CONTROL_OPCODES), ids=lambda o: o.name)
def test_common_request_fields(opcode: Opcode) -> None:
    keys = dict(field_keys(request_class(opcode)))
    assert keys.get("space") is False, "every data request takes an optional space"
    is_write = required_permission(opcode) in (Permission.WRITE, Permission.ADMIN)
    if is_write and opcode not in _NO_REQUEST_ID:
        assert keys.get("request_id") is True
    else:
        assert "request_id" not in keys
    if opcode in _TXN_WRITES or opcode in _TXN_READS:
        assert keys.get("txn_id") is False
    elif opcode not in (Opcode.TXN_COMMIT, Opcode.TXN_ABORT):
        assert "txn_id" not in keys


def test_explain_takes_exactly_recalls_request() -> None:
    assert field_keys(ExplainRequest) == field_keys(Recall)


@pytest.mark.parametrize(
    ("create", "draft"),
    [(StatementCreate, StatementDraft), (RelationCreate, RelationDraft)],
)
def test_create_is_draft_plus_common_fields(create: type[Message], draft: type[Message]) -> None:
    extra = {("space", False), ("request_id", True), ("txn_id", False)}
    assert set(field_keys(create)) == set(field_keys(draft)) | extra


# --- round trips ---------------------------------------------------------------------


def _example_cases() -> list[tuple[str, str]]:
    return [(opcode.name, side) for opcode in Opcode for side in ("request", "response")]


@pytest.mark.parametrize(("name", "side"), _example_cases())
def test_example_round_trips(name: str, side: str) -> None:
    opcode = Opcode[name]
    cls = request_class(opcode) if side == "request" else response_class(opcode)
    wire = examples()[name][side]
    message = cls.from_wire(wire)
    assert message.to_wire() == wire
    assert cls.from_wire(cbor.decode(cbor.encode(wire))) == message
    assert cbor.encode(message.to_wire()) == cbor.encode(wire)


def test_examples_are_deterministic() -> None:
    first = {name: cbor.encode(pair) for name, pair in examples().items()}
    second = {name: cbor.encode(pair) for name, pair in examples().items()}
    assert first == second


def test_messages_are_frozen() -> None:
    message = Evidence(memory=ID)
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.memory = OTHER_ID  # type: ignore[misc]


def test_built_in_code_is_validated_too() -> None:
    draft = StatementDraft(
        kind="fact", subject=EntityRef(entity=ID), predicate="likes", object_=TextValue(text="tea")
    )
    assert draft.to_wire()["object"] == {"text": "tea"}
    assert draft.confidence is None, "the server applies the 1.0 default"
    with pytest.raises(InvalidArgument) as caught:
        StatementDraft(
            kind="fact",
            subject=EntityRef(entity=ID),
            predicate="likes",
            object_=TextValue(text="tea"),
            confidence=2.0,
        )
    assert caught.value.field == "confidence"


def test_nested_fields_refuse_subclasses() -> None:
    """A subclass would put its extra keys on the wire (a draft with request_id, an
    EXPLAIN hit with its record)."""
    draft = StatementDraft.from_wire(_example("STATEMENT_SUPERSEDE")["new"])
    create = StatementCreate(
        request_id=ID,
        kind=draft.kind,
        subject=draft.subject,
        predicate=draft.predicate,
        object_=draft.object_,
    )
    with pytest.raises(InvalidArgument) as caught:
        StatementSupersede(request_id=ID, old=OTHER_ID, new=create)
    assert caught.value.field == "new"
    hits = _example("RECALL", "response")["hits"]
    assert isinstance(hits, list)
    explain = ExplainOk.from_wire(_example("EXPLAIN", "response"))
    with pytest.raises(InvalidArgument) as caught:
        dataclasses.replace(explain, hits=(Hit.from_wire(hits[0]),))
    assert caught.value.field == "hits[0]"


def test_null_reads_as_absent() -> None:
    wire = examples()["STATEMENT_GET"]["request"]
    assert request_class(Opcode.STATEMENT_GET).from_wire({**wire, "space": None}).to_wire() == {
        "id": wire["id"]
    }


# --- rejections ----------------------------------------------------------------------


def _example(name: str, side: str = "request") -> Payload:
    return copy.deepcopy(examples()[name][side])


def _field_error(cls: type[Message], payload: object) -> str | None:
    with pytest.raises(InvalidArgument) as caught:
        cls.from_wire(payload)
    return caught.value.field


def _child(target: object, step: str) -> object:
    """What ``step`` (a key, or ``[i]`` for an index) addresses in ``target``."""
    if step.startswith("["):
        assert isinstance(target, list)
        return target[int(step[1:-1])]
    assert isinstance(target, dict)
    return target[step]


def _assign(target: object, step: str, value: object) -> None:
    if step.startswith("["):
        assert isinstance(target, list)
        target[int(step[1:-1])] = value
    else:
        assert isinstance(target, dict)
        target[step] = value


def _set(path: str, value: object) -> Callable[[Payload], None]:
    """A mutation setting ``path`` (dots and ``[i]`` indexes) to ``value``."""

    def mutate(payload: Payload) -> None:
        target: object = payload
        steps = path.replace("[", ".[").split(".")
        for step in steps[:-1]:
            target = _child(target, step)
        _assign(target, steps[-1], value)

    return mutate


def _drop(key: str) -> Callable[[Payload], None]:
    def mutate(payload: Payload) -> None:
        del payload[key]

    return mutate


def _both(*mutations: Callable[[Payload], None]) -> Callable[[Payload], None]:
    def mutate(payload: Payload) -> None:
        for one in mutations:
            one(payload)

    return mutate


_NAN = float("nan")
_BAD_CASES: list[tuple[str, str, str, Callable[[Payload], None], str]] = [
    # (id, opcode, side, mutation, expected field)
    ("unknown key", "STATEMENT_CREATE", "request", _set("colour", "red"), "colour"),
    (
        "unknown nested key",
        "STATEMENT_SUPERSEDE",
        "request",
        _set("new.subject.nick", "x"),
        "new.subject.nick",
    ),
    ("missing request_id", "STATEMENT_CREATE", "request", _drop("request_id"), "request_id"),
    ("missing request_id forget", "FORGET", "request", _drop("request_id"), "request_id"),
    ("missing nested", "STATEMENT_SUPERSEDE", "request", _set("new.subject", {}), "new.subject"),
    ("wrong type", "STATEMENT_CREATE", "request", _set("predicate", 5), "predicate"),
    ("wrong type bool", "RECALL", "request", _set("include_tombstoned", 1), "include_tombstoned"),
    ("wrong type top_k", "RECALL", "request", _set("top_k", "10"), "top_k"),
    ("wrong type array", "RECALL", "request", _set("kinds", "fact"), "kinds"),
    (
        "nested name",
        "STATEMENT_SUPERSEDE",
        "request",
        _set("new.subject.name", ""),
        "new.subject.name",
    ),
    (
        "evidence id",
        "STATEMENT_CREATE",
        "request",
        _set("evidence[0].memory", b"short"),
        "evidence[0].memory",
    ),
    (
        "nested evidence id",
        "STATEMENT_SUPERSEDE",
        "request",
        _set("new.evidence[1].memory", ID[:15]),
        "new.evidence[1].memory",
    ),
    (
        "evidence sha",
        "STATEMENT_CREATE",
        "request",
        _set("evidence[0].sha256", ID),
        "evidence[0].sha256",
    ),
    ("bad id length", "STATEMENT_GET", "request", _set("id", ID + b"!"), "id"),
    ("bad request_id", "ENCODE", "request", _set("request_id", b""), "request_id"),
    ("event without event_at", "STATEMENT_CREATE", "request", _drop("event_at"), "event_at"),
    (
        "fact with event_at",
        "STATEMENT_SUPERSEDE",
        "request",
        _set("new.event_at", 1),
        "new.event_at",
    ),
    (
        "valid_from after valid_to",
        "STATEMENT_SUPERSEDE",
        "request",
        _set("new.valid_to", 0),
        "new.valid_to",
    ),
    ("relation validity", "RELATION_CREATE", "request", _set("valid_to", 0), "valid_to"),
    (
        "recall validity",
        "RECALL",
        "request",
        _both(_set("valid_from", 10), _set("valid_to", 9)),
        "valid_to",
    ),
    (
        "confidence 1.5",
        "STATEMENT_SUPERSEDE",
        "request",
        _set("new.confidence", 1.5),
        "new.confidence",
    ),
    (
        "confidence NaN",
        "STATEMENT_SUPERSEDE",
        "request",
        _set("new.confidence", _NAN),
        "new.confidence",
    ),
    ("confidence negative", "RELATION_CREATE", "request", _set("confidence", -0.1), "confidence"),
    ("min_confidence NaN", "RECALL", "request", _set("min_confidence", _NAN), "min_confidence"),
    ("top_k 0", "RECALL", "request", _set("top_k", 0), "top_k"),
    ("top_k 1001", "EXPLAIN", "request", _set("top_k", 1001), "top_k"),
    ("rrf_k 0", "RECALL", "request", _set("rrf_k", 0), "rrf_k"),
    ("negative weight", "RECALL", "request", _set("arms.semantic", -1.0), "arms.semantic"),
    ("infinite weight", "RECALL", "request", _set("arms.graph", math.inf), "arms.graph"),
    ("empty filter", "RECALL", "request", _set("kinds", []), "kinds"),
    ("bad record type", "RECALL", "request", _set("records", ["entity"]), "records[0]"),
    ("depth 6", "RELATION_TRAVERSE", "request", _set("depth", 6), "depth"),
    ("depth 0", "RELATION_TRAVERSE", "request", _set("depth", 0), "depth"),
    ("space upper case", "STATEMENT_GET", "request", _set("space", "Work"), "space"),
    ("space empty", "ENCODE", "request", _set("space", ""), "space"),
    ("space too long", "RECALL", "request", _set("space", "a" * 65), "space"),
    ("space with blank", "TXN_BEGIN", "request", _set("space", "my space"), "space"),
    ("bad kind", "STATEMENT_CREATE", "request", _set("kind", "opinion"), "kind"),
    ("bad list kind", "STATEMENT_LIST", "request", _set("kind", "opinion"), "kind"),
    ("bad direction", "RELATION_LIST", "request", _set("direction", "up"), "direction"),
    ("bad forget mode", "FORGET", "request", _set("mode", "medium"), "mode"),
    ("bad decision", "REVIEW_DECIDE", "request", _set("decision", "maybe"), "decision"),
    (
        "bad cardinality",
        "SCHEMA_PUT",
        "request",
        _set("relation_types[0].cardinality", "few_to_few"),
        "relation_types[0].cardinality",
    ),
    (
        "duplicate predicate",
        "SCHEMA_PUT",
        "request",
        _set("predicates[1].name", "works_at"),
        "predicates[1].name",
    ),
    (
        "two ref keys",
        "STATEMENT_CREATE",
        "request",
        _set("subject", {"entity": ID, "name": "x"}),
        "subject",
    ),
    (
        "two value keys",
        "STATEMENT_CREATE",
        "request",
        _set("object", {"text": "a", "int": 1}),
        "object",
    ),
    ("ref with no key", "RELATION_CREATE", "request", _set("to", {"type": "company"}), "to"),
    (
        "int value too big",
        "STATEMENT_CREATE",
        "request",
        _set("object", {"int": 1 << 63}),
        "object.int",
    ),
    ("vector not float32", "ENCODE", "request", _set("vector", b"\x00" * 6), "vector"),
    ("vector empty", "RECALL", "request", _set("vector", b""), "vector"),
    ("vector NaN", "RECALL", "request", _set("vector", struct.pack("<2f", 1.0, _NAN)), "vector"),
    ("empty memory text", "ENCODE", "request", _set("text", ""), "text"),
    ("cursor empty", "STATEMENT_LIST", "request", _set("cursor", b""), "cursor"),
    ("limit 0", "ENTITY_LIST", "request", _set("limit", 0), "limit"),
    ("limit 1001", "REVIEW_LIST", "request", _set("limit", 1001), "limit"),
    (
        "merge into itself",
        "ENTITY_MERGE",
        "request",
        _set("merge", examples()["ENTITY_MERGE"]["request"]["keep"]),
        "merge",
    ),
    # predicate shape: one line of visible text, no whitespace at either end
    ("blank predicate", "STATEMENT_CREATE", "request", _set("predicate", "   "), "predicate"),
    ("predicate newline", "STATEMENT_CREATE", "request", _set("predicate", "a\nb"), "predicate"),
    ("predicate NUL", "STATEMENT_CREATE", "request", _set("predicate", "\x00"), "predicate"),
    ("predicate padded", "STATEMENT_LIST", "request", _set("predicate", " works_at"), "predicate"),
    (
        "predicate trailing",
        "STATEMENT_LIST",
        "request",
        _set("predicate", "works_at\t"),
        "predicate",
    ),
    (
        "predicate zero-width",
        "STATEMENT_SUPERSEDE",
        "request",
        _set("new.predicate", "works\u200bat"),
        "new.predicate",
    ),
    (
        "predicate line separator",
        "STATEMENT_CREATE",
        "request",
        _set("predicate", "a\u2028b"),
        "predicate",
    ),
    (
        "predicate too long",
        "STATEMENT_CREATE",
        "request",
        _set("predicate", "p" * 1025),
        "predicate",
    ),
    (
        "declared predicate blank",
        "SCHEMA_PUT",
        "request",
        _set("predicates[1].name", "\u3000"),
        "predicates[1].name",
    ),
    (
        "declared relation type control",
        "SCHEMA_PUT",
        "request",
        _set("relation_types[0].name", "employed\x7fby"),
        "relation_types[0].name",
    ),
    ("relation type blank", "RELATION_CREATE", "request", _set("type", " "), "type"),
    (
        "superseding relation type",
        "RELATION_SUPERSEDE",
        "request",
        _set("new.type", "knows\r\n"),
        "new.type",
    ),
    ("relation list type", "RELATION_LIST", "request", _set("type", "\x1b[0m"), "type"),
    ("traverse type", "RELATION_TRAVERSE", "request", _set("types[1]", ""), "types[1]"),
    ("recall predicate", "RECALL", "request", _set("predicates[0]", "works_at "), "predicates[0]"),
    ("empty alias", "ENTITY_CREATE", "request", _set("aliases[1]", ""), "aliases[1]"),
    ("attributes not a map", "ENTITY_UPDATE", "request", _set("attributes", [1]), "attributes"),
    ("bad subscribe record", "SUBSCRIBE", "request", _set("records", ["user"]), "records[0]"),
    ("stream 0", "UNSUBSCRIBE", "request", _set("stream", 0), "stream"),
    ("negative timeout", "TXN_BEGIN", "request", _set("timeout_ms", -1), "timeout_ms"),
    # answers are validated too
    (
        "bad tombstone reason",
        "STATEMENT_GET",
        "response",
        _set("statement.tombstone_reason", "bored"),
        "statement.tombstone_reason",
    ),
    (
        "statement without kind",
        "STATEMENT_GET",
        "response",
        _set("statement.kind", None),
        "statement.kind",
    ),
    (
        "retracted with subject",
        "STATEMENT_LIST",
        "response",
        _set("statements[1].subject", {"entity": ID}),
        "statements[1].subject",
    ),
    (
        "hard forgotten with text",
        "MEMORY_GET",
        "response",
        _set("memory.forgotten", "hard"),
        "memory.text",
    ),
    (
        "memory hit with statement",
        "RECALL",
        "response",
        _set("hits[1].statement", examples()["STATEMENT_GET"]["response"]["statement"]),
        "hits[1].statement",
    ),
    (
        "citation without hash",
        "RECALL",
        "response",
        _set("hits[0].evidence[0]", {"memory": ID}),
        "hits[0].evidence[0].sha256",
    ),
    ("rank 0", "EXPLAIN", "response", _set("hits[0].ranks.semantic", 0), "hits[0].ranks.semantic"),
    ("bad arm name", "RECALL", "response", _set("coverage.arms[0]", "psychic"), "coverage.arms[0]"),
    (
        "missing survivor",
        "EXPLAIN",
        "response",
        _set("explain.survivors.type", None),
        "explain.survivors.type",
    ),
    ("empty answer not abstaining", "RECALL", "response", _set("hits", []), "abstained"),
    ("bad tier", "ENTITY_RESOLVE", "response", _set("matches[0].tier", "guess"), "matches[0].tier"),
    ("hop 6", "RELATION_TRAVERSE", "response", _set("nodes[1].hop", 6), "nodes[1].hop"),
    ("bad review kind", "REVIEW_LIST", "response", _set("items[0].kind", "spam"), "items[0].kind"),
    ("event op", "SUBSCRIBE", "response", _set("op", "Create!"), "op"),
    ("version 0", "STATEMENT_CREATE", "response", _set("version", 0), "version"),
]


@pytest.mark.parametrize(
    ("opcode", "side", "mutate", "field"),
    [
        pytest.param(op, side, mutate, field, id=case)
        for case, op, side, mutate, field in _BAD_CASES
    ],
)
def test_rejection_names_the_field(
    opcode: str, side: str, mutate: Callable[[Payload], None], field: str
) -> None:
    payload = _example(opcode, side)
    mutate(payload)
    cls = request_class(Opcode[opcode]) if side == "request" else response_class(Opcode[opcode])
    assert _field_error(cls, payload) == field


def test_payload_must_be_a_map() -> None:
    assert _field_error(StatementCreate, [1, 2]) is None
    assert _field_error(StatementCreate, {1: "x"}) is None


def test_retracted_statement_is_a_husk() -> None:
    rows = _example("STATEMENT_LIST", "response")["statements"]
    assert isinstance(rows, list)
    husk = Statement.from_wire(rows[1])
    assert husk.subject is None and husk.object_ is None and husk.evidence is None


def test_hard_forgotten_memory_without_text() -> None:
    wire = _example("MEMORY_GET", "response")["memory"]
    assert isinstance(wire, dict)
    del wire["text"]
    del wire["mentions"]  # the names are text of the memory: they go with it
    wire["forgotten"] = "hard"
    assert Memory.from_wire(wire).to_wire() == wire


def test_abstaining_answer() -> None:
    wire = _example("RECALL", "response")
    wire.update(hits=[], abstained=True)
    assert RecallOk.from_wire(wire).to_wire() == wire


def test_memory_hit_has_no_evidence() -> None:
    wire = _example("RECALL", "response")["hits"]
    assert isinstance(wire, list)
    memory_hit = {**wire[1], "evidence": [{"memory": ID, "sha256": bytes(32)}]}
    assert _field_error(Hit, memory_hit) == "evidence"


def test_integers_are_accepted_for_floats() -> None:
    wire = _example("STATEMENT_SUPERSEDE")
    _set("new.confidence", 1)(wire)
    message = StatementSupersede.from_wire(wire)
    assert message.new.confidence == 1.0
    assert isinstance(message.new.confidence, float)


def test_merge_and_traverse_bounds_accept_the_edges() -> None:
    # The nearest two ids can be and still name two entities: one bit apart.
    nearest = ID[:-1] + bytes([ID[-1] ^ 1])
    wire: dict[str, object] = {"request_id": ID, "keep": ID, "merge": nearest}
    merge = EntityMerge.from_wire(wire)
    assert (merge.keep, merge.merge) == (ID, nearest)
    assert merge.to_wire() == wire
    for depth in (1, MAX_TRAVERSE_DEPTH):
        wire = {"from": ID, "depth": depth}
        walk = RelationTraverse.from_wire(wire)
        assert walk.depth == depth
        assert walk.to_wire() == wire


@pytest.mark.parametrize(
    "predicate", ["works_at", "works at", "a", "p" * 1024, "lives-in/city", "職業", "likes 🍕"]
)
def test_predicate_shape_accepts_visible_text(predicate: str) -> None:
    listed = StatementList.from_wire({"predicate": predicate})
    assert listed.predicate == predicate
    declared = SchemaPut.from_wire(
        {"relation_types": [{"name": predicate, "cardinality": "one_to_one"}]}
    )
    assert declared.to_wire()["relation_types"] == [
        {"name": predicate, "cardinality": "one_to_one"}
    ]


def test_predicate_error_says_what_is_wrong() -> None:
    with pytest.raises(InvalidArgument, match=r"U\+000A \(Cc\) at character 1"):
        StatementList.from_wire({"predicate": "a\nb"})
    with pytest.raises(InvalidArgument, match="must not be blank"):
        StatementList.from_wire({"predicate": "  "})


def test_schema_put_may_be_empty() -> None:
    assert SchemaPut.from_wire({}).to_wire() == {}


# --- property: STATEMENT_CREATE through CBOR -------------------------------------------

_ids = st.binary(min_size=16, max_size=16)
_nanos = st.integers(min_value=I64_MIN, max_value=I64_MAX)
_names = st.text(min_size=1, max_size=30)
_predicates = st.text(
    st.characters(exclude_categories=("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")),
    min_size=1,
    max_size=30,
).filter(lambda text: text == text.strip())
_refs = st.one_of(
    st.fixed_dictionaries({"entity": _ids}),
    st.fixed_dictionaries({"memory": _ids}),
    st.fixed_dictionaries({"name": _names}, optional={"type": _names}),
)
_values = st.one_of(
    st.fixed_dictionaries({"entity": _ids}),
    st.fixed_dictionaries({"text": st.text(max_size=60)}),
    st.fixed_dictionaries({"int": _nanos}),
    st.fixed_dictionaries({"float": st.floats(allow_nan=False)}),
    st.fixed_dictionaries({"bool": st.booleans()}),
    st.fixed_dictionaries({"time": _nanos}),
    st.fixed_dictionaries({"memory": _ids}),
    st.fixed_dictionaries({"statement": _ids}),
)
_evidence = st.fixed_dictionaries(
    {"memory": _ids}, optional={"sha256": st.binary(min_size=32, max_size=32)}
)


@st.composite
def _statement_creates(draw: st.DrawFn) -> Payload:
    kind = draw(st.sampled_from(["fact", "preference", "event"]))
    payload: Payload = draw(
        st.fixed_dictionaries(
            {
                "request_id": _ids,
                "kind": st.just(kind),
                "subject": _refs,
                "predicate": _predicates,
                "object": _values,
            },
            optional={
                "space": st.from_regex(r"[a-z0-9_.\-]{1,64}", fullmatch=True),
                "txn_id": _ids,
                "confidence": st.floats(min_value=0.0, max_value=1.0),
                "evidence": st.lists(_evidence, max_size=4),
                "source": _names,
            },
        )
    )
    if kind == "event":
        payload["event_at"] = draw(_nanos)
    bounds = draw(st.lists(_nanos, max_size=2).map(sorted))
    for key, value in zip(
        draw(st.sampled_from([("valid_from", "valid_to"), ("valid_to",)])), bounds, strict=False
    ):
        payload[key] = value
    return payload


@settings(deadline=None)
@given(_statement_creates())
def test_statement_create_round_trips_through_cbor(payload: Payload) -> None:
    data = cbor.encode(payload)
    message = StatementCreate.from_wire(cbor.decode(data))
    assert message.to_wire() == payload
    assert cbor.encode(message.to_wire()) == data
