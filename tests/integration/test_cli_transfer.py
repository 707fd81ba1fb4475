"""``brain export`` and ``brain import`` against real servers: the records move with
their history; a namespace of more than a thousand embedded records (each row with
its vector about 3 KB in the file, the whole several times the admin port's 1 MiB
body limit) arrives whole, counted, and answers RECALL from its vectors; an import
stopped by a stopped server or by a refused batch continues where it stopped; a cut
file is refused; an unknown namespace exports nothing and leaves no file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest

from brain.client import Client
from brain.server.http import ADMIN_MAX_BODY
from brain.wire.messages.memory_ops import Encode, EncodeOk
from brain.wire.messages.recall_ops import ArmWeights, Recall, RecallOk
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

RECORDS: Final = 1_100
"""Embedded memories in the large export: more than a thousand, each row of a vector
about 3 KB of hex, so no single admin body of 1 MiB could carry a batch of them."""

EMBEDDED_WAIT_S: Final = 300.0
"""Longest wait for the source's indexer to embed every memory (seconds on an idle
machine; generous for a loaded one)."""


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


def _admin_call(server: ServerProcess, method: str, path: str, body: object = None) -> object:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{server.admin_port}{path}",
        data,
        method=method,
        headers={"Authorization": f"Bearer {server.credentials['admin_token']}"},
    )
    with urllib.request.urlopen(request, timeout=120) as answer:
        return json.load(answer)


def _wait_embedded(server: ServerProcess) -> None:
    deadline = time.monotonic() + EMBEDDED_WAIT_S
    while True:
        stats = _admin_call(server, "GET", "/v1/stats")
        assert isinstance(stats, dict)
        if stats["embed_backlog"] == 0:
            return
        assert time.monotonic() < deadline, f"still {stats['embed_backlog']} to embed"
        time.sleep(0.2)


@dataclass(frozen=True)
class Export:
    """A source server holding :data:`RECORDS` embedded memories, and its export."""

    source: ServerProcess
    path: Path
    texts: list[str]

    @property
    def lines(self) -> list[str]:
        """The file's lines: header, rows, trailer."""
        return self.path.read_text().splitlines()


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Export]:
    """One source for the module: filling it is most of each test's work."""
    where = tmp_path_factory.mktemp("large")
    source = start_server(where / "source", env=FAST)
    try:
        texts = [
            f"field note {i}: {i % 41} herons and {i * 7 % 97} egrets at pond{i}"
            for i in range(RECORDS)
        ]
        with Client.connect(
            source.host, source.wire_port, api_key=source.credentials["api_key"]
        ) as client:
            writes = [
                (Opcode.ENCODE, Encode(request_id=os.urandom(16), text=text)) for text in texts
            ]
            answers = client.pipeline(writes, timeout=600)
        assert all(isinstance(answer, EncodeOk) for answer in answers)
        _wait_embedded(source)
        dump = where / "dump.jsonl"
        exported = _brain("export", *_admin(source), "--out", str(dump), "--quiet")
        assert exported.returncode == 0, exported.stderr
        yield Export(source, dump, texts)
    finally:
        source.stop()


def _rows(lines: list[str]) -> list[dict[str, str]]:
    return [json.loads(line) for line in lines[1:-1]]


def _semantic_top(server: ServerProcess, text: str) -> tuple[str | None, int | None]:
    """The first hit of a RECALL of ``text`` on vectors alone: its text and rank."""
    only_vectors = ArmWeights(semantic=1.0, lexical=0.0, graph=0.0)
    with Client.connect(server.host, server.wire_port, api_key=server.credentials["api_key"]) as c:
        answer = c.call(Opcode.RECALL, Recall(cue=text, top_k=3, arms=only_vectors))
    assert isinstance(answer, RecallOk) and answer.hits
    top = answer.hits[0]
    return (None if top.memory is None else top.memory.text), top.ranks.semantic


def _same_as_source(large: Export, target: ServerProcess, tmp_path: Path) -> None:
    """The target holds exactly the source's rows, and recalls them by their vectors."""
    again = tmp_path / "again.jsonl"
    exported = _brain("export", *_admin(target), "--out", str(again), "--quiet")
    assert exported.returncode == 0, exported.stderr
    assert _rows(again.read_text().splitlines()) == _rows(large.lines)
    for text in (large.texts[0], large.texts[RECORDS // 2], large.texts[-1]):
        assert _semantic_top(target, text) == (text, 1)


def test_more_than_a_thousand_embedded_records_arrive_whole(large: Export, tmp_path: Path) -> None:
    lines = large.lines
    rows = _rows(lines)
    assert sum(1 for row in rows if row["table"] == "vectors") == RECORDS
    assert sum(len(line) + 1 for line in lines) > 3 * ADMIN_MAX_BODY
    target = start_server(tmp_path / "target", env=FAST)
    try:
        imported = _brain("import", str(large.path), *_admin(target))
        assert imported.returncode == 0, imported.stderr
        said = " ".join(imported.stderr.split())
        assert f"imported {len(rows)} rows" in said and "match the file" in said
        _same_as_source(large, target, tmp_path)
    finally:
        target.stop()


def test_an_import_stopped_with_its_server_continues_where_it_stopped(
    large: Export, tmp_path: Path
) -> None:
    lines = large.lines
    header, rows = json.loads(lines[0]), _rows(lines)
    stopped_at = len(rows) // 2
    target = start_server(tmp_path / "target", env=FAST)
    try:
        # A client that died half-way: batches small enough for any admin body.
        for start in range(0, stopped_at, 200):
            batch = rows[start : min(start + 200, stopped_at)]
            _admin_call(
                target, "POST", "/v1/import", {"header": header, "start": start, "rows": batch}
            )
    finally:
        target.stop()
    target = start_server(tmp_path / "target", env=FAST)
    try:
        query = f"/v1/import?namespace=default&export_id={header['export_id']}"
        assert _admin_call(target, "GET", query) == {
            "next": stopped_at,
            "complete": False,
            "scopes": json.loads(lines[-1])["scopes"],
        }
        imported = _brain("import", str(large.path), *_admin(target))
        assert imported.returncode == 0, imported.stderr
        said = " ".join(imported.stderr.split())
        assert f"continuing an interrupted import at row {stopped_at} of {len(rows)}" in said
        _same_as_source(large, target, tmp_path)
    finally:
        target.stop()


def test_an_import_stopped_by_a_refused_batch_continues_from_that_batch(
    large: Export, tmp_path: Path
) -> None:
    lines = large.lines
    rows = _rows(lines)
    damaged_row = max(i for i, row in enumerate(rows) if row["table"] == "vectors")
    damaged = dict(rows[damaged_row], value=rows[damaged_row]["value"][:-8])  # one float short
    broken = tmp_path / "damaged.jsonl"
    broken.write_text(
        "\n".join([*lines[: damaged_row + 1], json.dumps(damaged), *lines[damaged_row + 2 :]])
        + "\n"
    )
    target = start_server(tmp_path / "target", env=FAST)
    try:
        refused = _brain("import", str(broken), *_admin(target), "--quiet")
        assert refused.returncode == 1
        said = " ".join(refused.stderr.split())
        assert f"row {damaged_row} holds a vector of 383 dimensions" in said, said
        query = f"/v1/import?namespace=default&export_id={json.loads(lines[0])['export_id']}"
        status = _admin_call(target, "GET", query)
        assert isinstance(status, dict) and not status["complete"]
        stopped_at = status["next"]
        assert 0 < stopped_at <= damaged_row
        assert f"the import stopped at row {stopped_at} of {len(rows)}" in said
        assert f"again to continue from row {stopped_at}" in said
        imported = _brain("import", str(large.path), *_admin(target))
        assert imported.returncode == 0, imported.stderr
        assert f"at row {stopped_at} of" in " ".join(imported.stderr.split())
        _same_as_source(large, target, tmp_path)
    finally:
        target.stop()


def test_an_unknown_namespace_exports_nothing(large: Export, tmp_path: Path) -> None:
    out = tmp_path / "nobody.jsonl"
    refused = _brain("export", *_admin(large.source), "--namespace", "nobody", "--out", str(out))
    assert refused.returncode == 1
    assert "namespace 'nobody' holds no records" in " ".join(refused.stderr.split())
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(urllib.error.HTTPError) as answer:
        _admin_call(large.source, "GET", "/v1/export?namespace=nobody")
    assert answer.value.code == 404
    assert json.loads(answer.value.read())["error"] == "NOT_FOUND"
