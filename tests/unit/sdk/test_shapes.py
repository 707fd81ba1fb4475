"""The facade hides nothing the wire carries and claims nothing it does not: every
result has every field of its wire message, ``call``'s overloads are the registry's
pairs, and ``import brain`` stays light."""

from __future__ import annotations

import dataclasses
import inspect
import re
import subprocess
import sys
import typing
from pathlib import Path
from typing import Final

import pytest

from brain.sdk import results
from brain.sdk.aio import AsyncBrain
from brain.sdk.calls import CALLABLE, NOT_CALLABLE
from brain.sdk.sync import Brain
from brain.wire.messages import (
    control,
    entity_ops,
    memory_ops,
    recall_ops,
    relation_ops,
    review_ops,
    statement_ops,
)
from brain.wire.messages import records as wire_records
from brain.wire.messages.common import Tombstoned
from brain.wire.opcodes import Opcode
from brain.wire.registry import MESSAGES
from brain.wire.schema import Message


def field_keys_of(wire: type[Message]) -> list[tuple[str, object]]:
    """A wire message's fields by attribute name (messages are dataclasses)."""
    return [(f.name, f.type) for f in dataclasses.fields(wire)]  # type: ignore[arg-type]


RENAMED: Final = {"memory_id": "id", "statement_id": "id", "entity_id": "id", "relation_id": "id"}
"""A write's answer calls the id it made ``id``, whatever the wire calls it."""

PAIRS: Final[list[tuple[type[object], type[Message]]]] = [
    (results.Memory, wire_records.Memory),
    (results.Mention, wire_records.Mention),
    (results.Evidence, wire_records.Evidence),
    (results.Statement, wire_records.Statement),
    (results.Entity, wire_records.Entity),
    (results.Relation, wire_records.Relation),
    (results.Hit, recall_ops.Hit),
    (results.Recalled, recall_ops.RecallOk),
    (results.StatementPage, statement_ops.StatementListOk),
    (results.Remembered, memory_ops.EncodeOk),
    (results.ForgetResult, memory_ops.ForgetOk),
    (results.StatementWritten, statement_ops.StatementCreateOk),
    (results.StatementWritten, statement_ops.StatementSupersedeOk),
    (results.TombstoneResult, Tombstoned),
    (results.EntityMade, entity_ops.EntityCreateOk),
    (results.RelationWritten, relation_ops.RelationCreateOk),
    (results.RelationWritten, relation_ops.RelationSupersedeOk),
    (results.ReviewItem, review_ops.ReviewItem),
    (results.Explained, recall_ops.ExplainOk),
    (results.EntityPage, entity_ops.EntityListOk),
    (results.EntityMatch, entity_ops.EntityMatch),
    (results.Resolution, entity_ops.EntityResolveOk),
    (results.Merged, entity_ops.EntityMergeOk),
    (results.EntityTombstoned, entity_ops.EntityTombstoneOk),
    (results.RelationPage, relation_ops.RelationListOk),
    (results.TraversalNode, relation_ops.TraversalNode),
    (results.Traversal, relation_ops.RelationTraverseOk),
    (results.Pong, control.Pong),
]


@pytest.mark.parametrize(("result", "wire"), PAIRS, ids=lambda c: c.__name__)
def test_every_wire_field_reaches_the_result(result: type[object], wire: type[Message]) -> None:
    carried = {RENAMED.get(name, name) for name, _ in field_keys_of(wire)}
    shown = {f.name for f in dataclasses.fields(result)} - {"wire"}  # type: ignore[arg-type]
    assert carried, wire
    assert shown == carried


@pytest.mark.parametrize("facade", [Brain, AsyncBrain], ids=lambda c: c.__name__)
def test_calls_overloads_are_the_registrys_pairs(facade: type[Brain | AsyncBrain]) -> None:
    overloads = typing.get_overloads(facade.call)
    pairs = {}
    for overload in overloads:
        hints = typing.get_type_hints(overload)
        pairs[hints["request"]] = hints["return"]
    expected = {
        request: response
        for opcode, (request, response) in MESSAGES.items()
        if opcode not in NOT_CALLABLE
    }
    assert pairs == expected
    assert set(CALLABLE.values()) | set(NOT_CALLABLE) == set(Opcode)


def test_the_async_twin_has_every_method_with_the_same_arguments() -> None:
    def public(cls: type[object]) -> dict[str, object]:
        return {
            name: getattr(cls, name)
            for name in dir(cls)
            if not name.startswith("_") and callable(getattr(cls, name))
        }

    blocking, twin = public(Brain), public(AsyncBrain)
    assert set(blocking) == set(twin)
    for name, method in blocking.items():
        awaited = twin[name]
        assert list(inspect.signature(method).parameters) == list(  # type: ignore[arg-type]
            inspect.signature(awaited).parameters  # type: ignore[arg-type]
        ), name
        synchronous = {"transaction", "joined"}  # they make objects; they send nothing
        assert inspect.iscoroutinefunction(awaited) == (name not in synchronous), name


def test_the_wire_spec_lists_every_method() -> None:
    spec = (Path(__file__).resolve().parents[3] / "spec" / "01-wire.md").read_text("utf-8")
    section = spec[spec.index("## 10. The Python facade") :]
    listed = set(re.findall(r"^\| `(\w+)\(", section, flags=re.MULTILINE))
    # How a facade is made and unmade, and joined to a transaction, is told in prose.
    told_apart = {"connect", "open", "close", "joined"}
    methods = {n for n in dir(Brain) if not n.startswith("_") and callable(getattr(Brain, n))}
    assert listed == methods - told_apart


def test_import_brain_is_light_and_names_the_facade_lazily() -> None:
    code = (
        "import sys, brain\n"
        "heavy = [m for m in ('brain.sdk', 'brain.client', 'brain.engine', 'brain.wire', 'numpy')"
        " if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "from brain import AsyncBrain, Brain, Instant\n"
        "assert Brain.__module__ == 'brain.sdk.sync'\n"
        "assert AsyncBrain.__module__ == 'brain.sdk.aio'\n"
        "assert 'brain.engine.database' not in sys.modules\n"
        "assert Instant.__module__ == 'brain.sdk.times'\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"
