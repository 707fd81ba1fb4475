"""The JSONL export round trip as a property: any history of writes, exported as JSONL
and imported into an empty database, gives the same records (ids, times on both
axes, chains, every stored row but what no read sees) and the same answer to every
read, and the import exports as the very same bytes.

The rows that may differ are named in :func:`_comparable`: the lexical index's term
versions and floor (each counts afresh), the vector labels and each space's vector
state (an import gives labels in document order, and keeps no state for a space
whose vectors all left), and counters left at zero.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Final

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import brain
from brain.engine.admin.import_marks import EXPORTED
from brain.engine.admin.jsonl_format import LINE_TYPES
from brain.engine.admin.jsonl_import import JsonlImport, read_jsonl
from brain.engine.admin.transfer import export_rows
from brain.engine.database import Database, DatabaseOptions
from brain.engine.index.vectors import LABEL_BYTES
from brain.engine.store.scope import SCOPE_PREFIX_BYTES
from brain.engine.store.tables import LEX_STATS, VECTOR_LABELS, VECTOR_SCOPES, VECTORS
from tests.unit.admin.histories import EVERY_KIND, HISTORIES, NS, answers, play

BATCH_ROWS: Final = 40
"""Rows per import batch: several batches per history, as a real import sends them."""

_TERM_VERSION: Final = b"v:"
_FLOOR: Final = b"floor"


def _no_fsync(fd: int) -> None:
    """Durability is not under test; skipping fdatasync keeps the property quick."""


OPTIONS: Final = DatabaseOptions(embedder="hashing", fsync=_no_fsync)


def export_bytes(db: Database, vectors: str = "none") -> bytes:
    """The JSONL export of the histories' namespace, as a file holds it."""
    return "".join(line + "\n" for line in db.export_jsonl(NS, vectors=vectors)).encode()


def import_into(db: Database, read: JsonlImport) -> None:
    """Import ``read`` into ``db`` batch by batch, then close the import."""
    for start in range(0, len(read.rows), BATCH_ROWS):
        db.import_rows(read.header, read.rows[start : start + BATCH_ROWS], start)
    db.finish_import(read.header, len(read.rows), read.scopes)
    assert db.wait_indexed()


def _comparable(db: Database) -> dict[bytes, dict[bytes, bytes]]:
    """Every exported row of the namespace, table by table, as a read could tell it."""
    tables: dict[bytes, dict[bytes, bytes]] = {table: {} for table in EXPORTED}
    with db._store.read() as txn:
        for row in export_rows(db._store, txn, NS):
            key, value = row.key, row.value
            name = key[SCOPE_PREFIX_BYTES:]
            if row.table == LEX_STATS and (
                name.startswith(_TERM_VERSION) or name == _FLOOR or not any(value)
            ):
                continue
            if row.table == VECTORS:
                value = value[LABEL_BYTES:]
            if row.table == VECTOR_LABELS:
                key, value = key[:SCOPE_PREFIX_BYTES] + value, b""
            if row.table == VECTOR_SCOPES:
                continue  # the next label and an LSN, kept even once no vector is left
            tables[row.table][key] = value
    return tables


def round_trip(history: list[tuple[object, ...]], vectors: str) -> bytes:
    """Play ``history``, export it, import the file into an empty database and check
    that the two hold the same rows and give the same answers; the file."""
    with tempfile.TemporaryDirectory(prefix="brain-jsonl-") as directory:
        root = Path(directory)
        with brain.open(root / "a", OPTIONS) as source, brain.open(root / "b", OPTIONS) as target:
            played = play(source, history)
            assert source.wait_indexed()
            data = export_bytes(source, vectors)
            import_into(target, read_jsonl(data))
            assert export_bytes(target, vectors) == data
            mine, theirs = _comparable(source), _comparable(target)
            for table in EXPORTED:
                assert theirs[table] == mine[table], table
            assert answers(target, played) == answers(source, played)
    return data


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(history=HISTORIES, vectors=st.sampled_from(("none", "base64", "list")))
def test_an_imported_jsonl_export_answers_as_the_original(
    history: list[tuple[object, ...]], vectors: str
) -> None:
    round_trip(history, vectors)


def test_a_history_of_every_kind_of_record_round_trips() -> None:
    """Every line type, every stamp: merged and unmerged entities, decided and waiting
    names, a contradiction kept and one superseded, forgets of both strengths, a retraction."""
    data = round_trip(EVERY_KIND, "base64")
    lines = [json.loads(line) for line in data.decode().splitlines()]
    counts = lines[0]["counts"]
    assert all(counts[kind] > 0 for kind in LINE_TYPES), counts
    statements = [line for line in lines if line["type"] == "statement"]
    states = [line.get("state", {}) for line in statements]
    assert any(s.get("tombstone_reason") == "retracted" for s in states)
    assert any("superseded_by" in s and "closed_at" in s for s in states)
    # A decided contradiction's newest statement carries the chain it joined.
    assert any("chain_root" in s and s.get("version") == 2 for s in states)
    memories = [line for line in lines if line["type"] == "memory"]
    assert {m.get("forgotten") for m in memories} >= {"soft", "hard", None}
    assert any("client_vector" in m for m in memories)
    reviews = {line["status"] for line in lines if line["type"] == "review"}
    assert reviews == {"open", "decided"}
    merges = [line for line in lines if line["type"] == "merge"]
    assert {"unmerged_at" in m for m in merges} == {True, False}
    assert any("merged_into" in line for line in lines if line["type"] == "entity")
