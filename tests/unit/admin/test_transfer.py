"""Export and import: a database with supersessions, tombstones and forgets, moved
into an empty one, answers STATEMENT_HISTORY and RECALL ``as_of`` past instants
exactly as the original does."""

from __future__ import annotations

from pathlib import Path

import pytest

import brain
from brain.engine.admin.transfer import EXPORT_FORMAT, Header, Row
from brain.engine.database import Database
from brain.errors import Conflict, InvalidArgument
from brain.wire.messages.memory_ops import Encode, EncodeOk, Forget
from brain.wire.messages.recall_ops import Recall, RecallOk
from brain.wire.messages.records import Evidence
from brain.wire.messages.statement_ops import (
    StatementCreate,
    StatementCreateOk,
    StatementDraft,
    StatementHistory,
    StatementHistoryOk,
    StatementSupersede,
    StatementSupersedeOk,
    StatementTombstone,
)
from brain.wire.messages.values import NameRef, TextValue
from brain.wire.opcodes import Opcode
from tests.unit.common import NS, rid


def _history_of(db: Database, statement_id: bytes) -> StatementHistoryOk:
    answer = db.execute(NS, Opcode.STATEMENT_HISTORY, StatementHistory(id=statement_id))
    assert isinstance(answer, StatementHistoryOk)
    return answer


def _recall(db: Database, cue: str, as_of: int | None) -> RecallOk:
    answer = db.execute(NS, Opcode.RECALL, Recall(cue=cue, as_of=as_of, top_k=20))
    assert isinstance(answer, RecallOk)
    return answer


def _fill(db: Database) -> tuple[list[bytes], list[int]]:
    """Writes with a history, and the instants worth asking about."""
    instants: list[int] = []
    note = db.execute(NS, Opcode.ENCODE, Encode(request_id=rid(), text="Alice joined Initech"))
    assert isinstance(note, EncodeOk)
    first = db.execute(
        NS,
        Opcode.STATEMENT_CREATE,
        StatementCreate(
            request_id=rid(),
            kind="fact",
            subject=NameRef(name="Alice"),
            predicate="works_at",
            object_=TextValue(text="Initech"),
            evidence=(Evidence(memory=note.memory_id),),
        ),
    )
    assert isinstance(first, StatementCreateOk)
    instants.append(first.recorded_at)
    second = db.execute(
        NS,
        Opcode.STATEMENT_SUPERSEDE,
        StatementSupersede(
            request_id=rid(),
            old=first.statement_id,
            new=StatementDraft(
                kind="fact",
                subject=NameRef(name="Alice"),
                predicate="works_at",
                object_=TextValue(text="Globex"),
                valid_from=5,
            ),
        ),
    )
    assert isinstance(second, StatementSupersedeOk)
    instants.append(second.recorded_at)
    other = db.execute(
        NS,
        Opcode.STATEMENT_CREATE,
        StatementCreate(
            request_id=rid(),
            kind="preference",
            subject=NameRef(name="Alice"),
            predicate="likes",
            object_=TextValue(text="jazz"),
        ),
    )
    assert isinstance(other, StatementCreateOk)
    db.execute(
        NS, Opcode.STATEMENT_TOMBSTONE, StatementTombstone(request_id=rid(), id=other.statement_id)
    )
    later = db.execute(NS, Opcode.ENCODE, Encode(request_id=rid(), text="later"))
    assert isinstance(later, EncodeOk)
    instants.append(later.recorded_at)
    db.execute(NS, Opcode.FORGET, Forget(request_id=rid(), memory=note.memory_id, mode="hard"))
    db.execute(NS, Opcode.ENCODE, Encode(request_id=rid(), text="in another space", space="b"))
    assert db.wait_indexed()
    return [first.statement_id, second.statement_id, other.statement_id], instants


def _copy(source: Database, target: Database, batch: int = 7) -> int:
    lines = list(source.export(NS))
    header, rows, trailer = lines[0], lines[1:-1], lines[-1]
    assert header["format"] == EXPORT_FORMAT and trailer == {
        "end": True,
        "rows": len(rows),
        "scopes": trailer["scopes"],
    }
    head = Header(NS, bytes.fromhex(str(header["export_id"])), int(str(header["clock"])))
    parsed = [
        Row(str(r["table"]).encode(), bytes.fromhex(str(r["key"])), bytes.fromhex(str(r["value"])))
        for r in rows
    ]
    for start in range(0, len(parsed), batch):
        target.import_rows(head, parsed[start : start + batch], start)
    named = trailer["scopes"]
    assert isinstance(named, list)
    target.finish_import(head, len(parsed), [bytes.fromhex(str(scope)) for scope in named])
    return len(parsed)


def test_an_import_answers_exactly_as_the_original(tmp_path: Path) -> None:
    with brain.open(tmp_path / "a") as source, brain.open(tmp_path / "b") as target:
        statements, instants = _fill(source)
        assert _copy(source, target) > 20
        for statement_id in statements:
            assert _history_of(target, statement_id) == _history_of(source, statement_id)
        for cue in ("where does Alice work", "jazz", "Initech"):
            for as_of in (*instants, None):
                mine, theirs = _recall(source, cue, as_of), _recall(target, cue, as_of)
                assert [(h.id, h.ranks, h.statement, h.memory) for h in theirs.hits] == [
                    (h.id, h.ranks, h.statement, h.memory) for h in mine.hits
                ], (cue, as_of)
        # Later writes are recorded after everything imported.
        later = target.execute(NS, Opcode.ENCODE, Encode(request_id=rid(), text="after"))
        assert isinstance(later, EncodeOk) and later.recorded_at > instants[-1]
        # Running the import again resumes, and changes nothing.
        assert _copy(source, target, batch=50) > 20
        assert _history_of(target, statements[0]) == _history_of(source, statements[0])


def test_an_import_fills_only_empty_spaces(tmp_path: Path) -> None:
    with brain.open(tmp_path / "a") as source, brain.open(tmp_path / "b") as target:
        _fill(source)
        target.execute(NS, Opcode.ENCODE, Encode(request_id=rid(), text="already here"))
        with pytest.raises(Conflict):
            _copy(source, target)
        lines = list(source.export(NS))
        head = Header("other", bytes.fromhex(str(lines[0]["export_id"])), 1)
        row = lines[1]
        wrong = Row(str(row["table"]).encode(), bytes.fromhex(str(row["key"])), b"")
        with pytest.raises(InvalidArgument):
            target.import_rows(head, [wrong])
        with pytest.raises(InvalidArgument):
            target.import_rows(Header(NS, bytes(16), 1), [Row(b"change_log", wrong.key, b"")])
