"""One module names every LMDB table: ``brain/engine/store/tables.py``.

No other module of the engine spells a table's name, the store opens exactly the
tables named there, and the data model documents every one of them.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Final

import lmdb

from brain.engine.store import tables
from brain.engine.store.env import Store

ROOT: Final = Path(__file__).resolve().parents[3]

ENGINE: Final = ROOT / "brain" / "engine"

TABLES_MODULE: Final = ENGINE / "store" / "tables.py"

DATA_MODEL: Final = ROOT / "spec" / "02-data-model.md"

TABLE_CALLS: Final = frozenset({"table", "open_db", "Put", "Delete", "Add"})
"""Calls whose first argument is a table: any bytes literal there is a table named in
place, known or not."""


def _named_tables(path: Path) -> dict[str, bytes]:
    """The upper-case bytes constants a module assigns, by constant name."""
    named: dict[str, bytes] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        target: ast.expr | None = None
        value: ast.expr | None = None
        if isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        if (
            isinstance(target, ast.Name)
            and target.id.isupper()
            and isinstance(value, ast.Constant)
            and isinstance(value.value, bytes)
        ):
            named[target.id] = value.value
    return named


def _call_name(node: ast.Call) -> str | None:
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    if isinstance(node.func, ast.Name):
        return node.func.id
    return None


def _violations(path: Path, root: Path, names: frozenset[bytes]) -> list[str]:
    """Where ``path`` spells a table name itself: a bytes literal equal to one of
    ``names``, or any bytes literal given as the table of a table call."""
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    shown = path.relative_to(root)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in names:
            found.append(f"{shown}:{node.lineno}: {node.value!r}")
        elif isinstance(node, ast.Call) and _call_name(node) in TABLE_CALLS and node.args:
            first = node.args[0]
            if (
                isinstance(first, ast.Constant)
                and isinstance(first.value, bytes)
                and first.value not in names
            ):
                found.append(f"{shown}:{first.lineno}: {first.value!r} (not a table)")
    return found


def _engine_violations(root: Path, names: frozenset[bytes]) -> list[str]:
    return [
        violation
        for path in sorted(root.rglob("*.py"))
        if path != TABLES_MODULE
        for violation in _violations(path, root, names)
    ]


def _section(markdown: str, heading: str) -> str:
    """The text of the ``##`` section titled ``heading``, up to the next ``##``."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## )", markdown, re.M | re.S)
    assert match, f"no section {heading!r}"
    return match.group(1)


def _undocumented(section: str, names: frozenset[bytes]) -> list[bytes]:
    return sorted(name for name in names if f"`{name.decode()}`" not in section)


NAMES: Final = frozenset(_named_tables(TABLES_MODULE).values())


def test_each_table_is_named_once_by_its_own_name() -> None:
    named = _named_tables(TABLES_MODULE)
    assert named, "tables.py names no table"
    assert len(set(named.values())) == len(named), "a table is named twice"
    for constant, name in named.items():
        assert constant == name.decode().upper(), constant


def test_no_other_engine_module_spells_a_table_name() -> None:
    assert _engine_violations(ENGINE, NAMES) == []


def test_the_check_finds_a_table_named_in_place(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text('txn.get(key, db=store.table(b"memories"))\n', encoding="utf-8")
    assert _engine_violations(tmp_path, NAMES) == ["planted.py:1: b'memories'"]
    planted.write_text('changes.append(Put(b"scratch", key, b""))\n', encoding="utf-8")
    assert _engine_violations(tmp_path, NAMES) == ["planted.py:1: b'scratch' (not a table)"]
    planted.write_text('EXCLUDED = {b"change_log", b"meta"}\n', encoding="utf-8")
    assert len(_engine_violations(tmp_path, NAMES)) == 2


def test_the_store_opens_exactly_the_named_tables(tmp_path: Path) -> None:
    assert tuple(_named_tables(TABLES_MODULE).values()) == tables.TABLES
    store = Store(tmp_path / "lmdb")
    try:
        assert tuple(store.tables) == tables.TABLES
    finally:
        store.close()
    # What LMDB itself holds: the main database's keys are the named databases.
    env = lmdb.open(str(tmp_path / "lmdb"), readonly=True, lock=False, max_dbs=1)
    try:
        with env.begin() as txn:
            opened = {bytes(key) for key, _ in txn.cursor()}
    finally:
        env.close()
    assert opened == NAMES


def test_every_table_is_in_the_data_model() -> None:
    section = _section(DATA_MODEL.read_text(encoding="utf-8"), "2. Tables")
    assert _undocumented(section, NAMES) == []


def test_the_check_finds_an_undocumented_table() -> None:
    section = "| `memories` | `S ‖ memory_id` | memory row |\n"
    assert _undocumented(section, frozenset({b"memories", b"memory_by_sha"})) == [b"memory_by_sha"]
