"""``brain export`` and ``brain import`` against real servers: the records move with
their history, an interrupted import resumes, and a cut file is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from brain.client import Client
from brain.wire.messages.statement_ops import (
    StatementCreate,
    StatementCreateOk,
    StatementDraft,
    StatementHistory,
    StatementHistoryOk,
    StatementSupersede,
)
from brain.wire.messages.values import NameRef, TextValue
from brain.wire.opcodes import Opcode
from tests.integration.conftest import ServerProcess, start_server

FAST = {**os.environ, "BRAIN_RETRIEVAL__EMBEDDER": "hashing"}


def _brain(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "brain", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _admin(server: ServerProcess) -> list[str]:
    return ["--admin-url", f"http://127.0.0.1:{server.admin_port}", "--data", str(server.data_dir)]


def _history(server: ServerProcess, statement_id: bytes) -> StatementHistoryOk:
    with Client.connect(server.host, server.wire_port, api_key=server.credentials["api_key"]) as c:
        answer = c.call(Opcode.STATEMENT_HISTORY, StatementHistory(id=statement_id))
    assert isinstance(answer, StatementHistoryOk)
    return answer


def test_export_import_round_trip(tmp_path: Path) -> None:
    source = start_server(tmp_path / "a", env=FAST)
    target = start_server(tmp_path / "b", env=FAST)
    try:
        with Client.connect(
            source.host, source.wire_port, api_key=source.credentials["api_key"]
        ) as client:
            made = client.call(
                Opcode.STATEMENT_CREATE,
                StatementCreate(
                    request_id=os.urandom(16),
                    kind="fact",
                    subject=NameRef(name="Alice"),
                    predicate="works_at",
                    object_=TextValue(text="Initech"),
                ),
            )
            assert isinstance(made, StatementCreateOk)
            client.call(
                Opcode.STATEMENT_SUPERSEDE,
                StatementSupersede(
                    request_id=os.urandom(16),
                    old=made.statement_id,
                    new=StatementDraft(
                        kind="fact",
                        subject=NameRef(name="Alice"),
                        predicate="works_at",
                        object_=TextValue(text="Globex"),
                    ),
                ),
            )
        dump = tmp_path / "dump.jsonl"
        exported = _brain("export", *_admin(source), "--out", str(dump), "--quiet")
        assert exported.returncode == 0, exported.stderr
        lines = dump.read_text().splitlines()
        assert json.loads(lines[-1])["rows"] == len(lines) - 2
        imported = _brain("import", str(dump), *_admin(target), "--quiet")
        assert imported.returncode == 0, imported.stderr
        assert _history(target, made.statement_id) == _history(source, made.statement_id)
        # Running it again resumes (nothing changes); a cut file is refused.
        again = _brain("import", str(dump), *_admin(target), "--quiet")
        assert again.returncode == 0, again.stderr
        cut = tmp_path / "cut.jsonl"
        cut.write_text("\n".join(lines[:-2]) + "\n")
        refused = _brain("import", str(cut), *_admin(target), "--quiet")
        assert refused.returncode == 1 and "cut short" in refused.stderr
        wrong = _brain("import", str(dump), "--admin-url", "http://127.0.0.1:1", "--token", "x")
        assert wrong.returncode == 1 and "is the server running" in wrong.stderr
    finally:
        source.stop()
        target.stop()
