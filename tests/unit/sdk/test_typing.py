"""Both facades are typed for ``mypy --strict``: a usage example that exercises each
family of methods type-checks with the exact result types, and misuse that would
fail at run time (an unknown direction or decision, a coroutine left unawaited, a
write method's positional arguments out of place) is an error before it runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[3]

GOOD: Final = """
from typing import assert_type

from brain import AsyncBrain, Brain
from brain.sdk import results
from brain.wire.messages.schema_ops import PredicateDecl, Schema
from brain.wire.messages.txn_ops import TxnCommitted


def blocking(db: Brain) -> None:
    m = assert_type(db.remember("Dan moved to Berlin."), results.Remembered)
    s = db.create_statement("Dan", "lives_in", "Berlin", evidence=[m])
    assert_type(s, results.StatementWritten)
    assert_type(db.tombstone_statement(s, reason="wrong"), results.TombstoneResult)
    assert_type(db.explain("Dan", as_of=s.recorded_at), results.Explained)
    dan = assert_type(db.create_entity("Dan", aliases=["D"]), results.EntityMade)
    assert_type(db.resolve_entity("D"), results.Resolution)
    assert_type(db.merge_entities(dan, dan.id.hex()), results.Merged)
    edge = assert_type(db.create_relation("knows", dan, "Eve"), results.RelationWritten)
    assert_type(db.list_relations(dan, direction="out"), results.RelationPage)
    assert_type(db.traverse(dan, depth=2, types=["knows"]), results.Traversal)
    assert_type(db.tombstone_relation(edge), results.TombstoneResult)
    for item in db.list_reviews():
        assert_type(db.decide_review(item, "keep_both"), int)
        assert_type(db.decide_review(item, "merge", into=dan), int)
    assert_type(db.put_schema(predicates=[PredicateDecl(name="p", stateful=True)]), int)
    assert_type(db.get_schema(), Schema)
    assert_type(db.ping(), results.Pong)
    block = db.transaction()
    with block as tx:
        assert_type(tx, Brain)
        tx.create_statement("Dan", "works_at", "Initech")
    assert_type(block.committed, TxnCommitted | None)


async def awaited(db: AsyncBrain) -> None:
    m = assert_type(await db.remember("Dan moved to Berlin."), results.Remembered)
    s = await db.create_statement("Dan", "lives_in", "Berlin", evidence=[m])
    assert_type(await db.recall("Dan", as_of=s.recorded_at), results.Recalled)
    assert_type(await db.render(await db.recall("Dan")), str)
    assert_type(await db.list_entities(prefix="D"), results.EntityPage)
    async with db.transaction() as tx:
        assert_type(tx, AsyncBrain)
        await tx.supersede_statement(s, "Dan", "lives_in", "Paris")
"""

BAD: Final = """
from brain import AsyncBrain, Brain


def blocking(db: Brain) -> None:
    db.list_relations(b"x" * 16, direction="up")  # error: direction
    db.decide_review(b"x" * 16, "maybe")  # error: decision
    db.create_relation("knows", "Dan", "Eve", 0.5)  # error: confidence is keyword-only


async def awaited(db: AsyncBrain) -> None:
    text: str = db.render(await db.recall("Dan"))  # error: a coroutine, not text
    with db.transaction():  # error: the async block is async with
        pass
"""


def test_the_facades_are_typed_for_mypy_strict(tmp_path: Path) -> None:
    good, bad = tmp_path / "good_usage.py", tmp_path / "bad_usage.py"
    good.write_text(GOOD, encoding="utf-8")
    bad.write_text(BAD, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(good), str(bad)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert not [e for e in errors if "good_usage.py" in e], done.stdout
    flagged = {int(m.group(1)) for e in errors if (m := re.search(r"bad_usage\.py:(\d+):", e))}
    expected = {n for n, line in enumerate(BAD.splitlines(), 1) if "# error:" in line}
    assert flagged == expected, done.stdout
