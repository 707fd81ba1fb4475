"""An import resumed at any point ends whole: rows already committed are skipped,
never written twice, a batch that would leave a gap is refused, the import is
finished only with every row in, and what it holds then is exactly the export.
Vectors a batch brings are searchable when the batch answers; an export of a
namespace the database holds nothing of is NOT_FOUND."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

import brain
from brain.engine.admin.import_marks import (
    Mark,
    count_mismatches,
    decode_mark,
    encode_mark,
)
from brain.engine.admin.transfer import Header, Row
from brain.engine.database import Database
from brain.engine.store.scope import Scope
from brain.errors import Conflict, NotFound
from brain.wire.messages.memory_ops import Encode
from brain.wire.messages.recall_ops import ArmWeights, Recall, RecallOk
from brain.wire.opcodes import Opcode
from tests.unit.common import NS, rid

TEXTS = [f"note {i} on the harbour tides, entry{i}" for i in range(40)]


def _export(db: Database) -> tuple[Header, list[Row], list[bytes]]:
    lines = list(db.export(NS))
    header, trailer = lines[0], lines[-1]
    head = Header(NS, bytes.fromhex(str(header["export_id"])), int(str(header["clock"])))
    rows = [
        Row(str(r["table"]).encode(), bytes.fromhex(str(r["key"])), bytes.fromhex(str(r["value"])))
        for r in lines[1:-1]
    ]
    scopes = trailer["scopes"]
    assert isinstance(scopes, list)
    return head, rows, [bytes.fromhex(str(s)) for s in scopes]


def _filled(path: Path) -> Database:
    db = brain.open(path)
    for text in TEXTS:
        db.execute(NS, Opcode.ENCODE, Encode(request_id=rid(), text=text))
    db.execute(NS, Opcode.ENCODE, Encode(request_id=rid(), text="elsewhere", space="b"))
    assert db.wait_indexed()
    return db


def _held(rows: list[Row]) -> dict[bytes, dict[bytes, int]]:
    counted: dict[bytes, Counter[bytes]] = {}
    for row in rows:
        counted.setdefault(row.key[:32], Counter())[row.table] += 1
    return {scope: dict(tables) for scope, tables in counted.items()}


def _semantic_rank(db: Database, text: str) -> int | None:
    only_vectors = ArmWeights(semantic=1.0, lexical=0.0, graph=0.0)
    answer = db.execute(NS, Opcode.RECALL, Recall(cue=text, top_k=5, arms=only_vectors))
    assert isinstance(answer, RecallOk)
    for hit in answer.hits:
        if hit.memory is not None and hit.memory.text == text:
            return hit.ranks.semantic
    return None


def test_an_unknown_namespace_has_no_export(tmp_path: Path) -> None:
    with _filled(tmp_path / "a") as db:
        with pytest.raises(NotFound, match="holds no records"):
            next(iter(db.export("nobody")))
        assert next(iter(db.export(NS)))["namespace"] == NS


def test_a_resumed_import_skips_what_it_holds_and_refuses_gaps(tmp_path: Path) -> None:
    with _filled(tmp_path / "a") as source, brain.open(tmp_path / "b") as target:
        header, rows, scopes = _export(source)
        total = len(rows)
        assert target.import_rows(header, rows[:10], 0).next_row == 10
        # A batch sent again (its answer was lost) writes only the rows after the progress.
        again = target.import_rows(header, rows[:20], 0)
        assert (again.imported, again.next_row) == (10, 20)
        with pytest.raises(Conflict, match="reached row 20"):
            target.import_rows(header, rows[25:30], 25)
        progress = target.import_progress(header)
        assert (progress.next_row, progress.complete) == (20, False)
        with pytest.raises(Conflict, match="continue from row 20"):
            target.finish_import(header, total, scopes)
        # Without a start, a batch follows the rows the import holds.
        assert target.import_rows(header, rows[20:], None).next_row == total
        counts = target.finish_import(header, total, scopes)
        assert counts == _held(rows)
        assert target.import_progress(header).complete
        # Nothing was written twice: the target now exports exactly the source's rows.
        assert _export(target)[1] == rows
        assert target.import_rows(header, rows, 0).imported == 0


def test_imported_vectors_answer_before_the_import_is_finished(tmp_path: Path) -> None:
    with _filled(tmp_path / "a") as source, brain.open(tmp_path / "b") as target:
        header, rows, scopes = _export(source)
        assert _semantic_rank(source, TEXTS[7]) == 1
        # The vectors and the labels naming their documents, nothing after them.
        after_vectors = max(i for i, row in enumerate(rows) if row.table == b"vector_labels") + 1
        target.import_rows(header, rows[:after_vectors], 0)
        assert _semantic_rank(target, TEXTS[7]) == 1
        target.import_rows(header, rows[after_vectors:], after_vectors)
        target.finish_import(header, len(rows), scopes)
        assert _semantic_rank(target, TEXTS[7]) == 1
        prefix = Scope(NS, "default").prefix
        assert target.retrieval.indexes.size(prefix) == len(TEXTS)


def test_an_import_resumed_after_a_restart_answers_from_every_vector(tmp_path: Path) -> None:
    with _filled(tmp_path / "a") as source:
        header, rows, scopes = _export(source)
    # Stopped after the vectors and their labels, before the scope's vector_scopes row:
    # the restarted database has no index of that scope to load.
    stop = max(i for i, row in enumerate(rows) if row.table == b"vector_labels") + 1
    assert rows[stop].table == b"vector_scopes"
    with brain.open(tmp_path / "b") as target:
        target.import_rows(header, rows[:stop], 0)
    with brain.open(tmp_path / "b") as target:
        target.import_rows(header, rows[stop:], None)
        # Every row is in: the vectors answer before the import is closed.
        assert _semantic_rank(target, TEXTS[3]) == 1
        target.finish_import(header, len(rows), scopes)
        assert target.retrieval.indexes.size(Scope(NS, "default").prefix) == len(TEXTS)
    with brain.open(tmp_path / "b") as target:
        assert _semantic_rank(target, TEXTS[31]) == 1


def test_counts_that_differ_are_named() -> None:
    scope = "ab" * 32
    held = {scope: {"memories": 3, "vectors": 3}}
    assert count_mismatches(held, {scope: {"memories": 3, "vectors": 3}}) == []
    (problem,) = count_mismatches(held, {scope: {"memories": 3, "vectors": 2}})
    assert "vectors" in problem and "holds 3 rows, the server 2" in problem
    assert len(count_mismatches(held, {})) == 2
    # A backlog the export carried is embedded by the importing server as it arrives.
    queued = {scope: {"memories": 3, "vectors": 1, "vector_labels": 1, "embed_queue": 2}}
    embedded = {scope: {"memories": 3, "vectors": 3, "vector_labels": 3}}
    assert count_mismatches(queued, embedded) == []
    assert count_mismatches(queued, {scope: {"memories": 3, "vectors": 0}}) != []


def test_marks_keep_progress_and_read_the_older_form() -> None:
    mark = Mark(bytes(range(16)), 1234, complete=False)
    assert decode_mark(encode_mark(mark)) == mark
    assert decode_mark(bytes(range(16))) == Mark(bytes(range(16)), 0, complete=False)
