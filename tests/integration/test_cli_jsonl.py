"""``brain export --format jsonl`` and ``brain import`` against real servers: the
readable form moves a namespace with its history, the imported server answers as
the original and exports the same bytes, the file reads with jq, a second import
changes nothing, and a cut, changed or malformed file is refused, naming why."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from brain.client import Client
from brain.wire.messages.memory_ops import Encode, EncodeOk
from brain.wire.messages.recall_ops import Recall, RecallOk
from brain.wire.messages.records import Evidence
from brain.wire.messages.statement_ops import (
    StatementCreate,
    StatementCreateOk,
    StatementDraft,
    StatementHistory,
    StatementHistoryOk,
    StatementList,
    StatementSupersede,
    StatementSupersedeOk,
    StatementTombstone,
)
from brain.wire.messages.values import NameRef, TextValue
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message
from tests.integration.conftest import ServerProcess, run_brain, start_server

FAST: Final = {**os.environ, "BRAIN_RETRIEVAL__EMBEDDER": "hashing"}
JQ: Final = shutil.which("jq")


def _admin(server: ServerProcess) -> list[str]:
    return ["--admin-url", f"http://127.0.0.1:{server.admin_port}", "--data", str(server.data_dir)]


def _call(server: ServerProcess, opcode: Opcode, request: Message) -> Message:
    with Client.connect(
        server.host, server.wire_port, api_key=server.credentials["api_key"]
    ) as client:
        return client.call(opcode, request)


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    source = start_server(tmp_path / "a", env=FAST)
    target = start_server(tmp_path / "b", env=FAST)
    try:
        yield source, target
    finally:
        source.stop()
        target.stop()


def _fill(server: ServerProcess) -> list[bytes]:
    """A memory, a chain of two versions citing it, a tombstone: the statements' ids."""
    note = _call(
        server, Opcode.ENCODE, Encode(request_id=os.urandom(16), text="Dan: I moved to Rome.")
    )
    assert isinstance(note, EncodeOk)
    first = _call(
        server,
        Opcode.STATEMENT_CREATE,
        StatementCreate(
            request_id=os.urandom(16),
            kind="fact",
            subject=NameRef(name="Dan"),
            predicate="lives_in",
            object_=TextValue(text="Paris"),
            valid_from=1_711_929_600_000_000_000,
        ),
    )
    assert isinstance(first, StatementCreateOk)
    second = _call(
        server,
        Opcode.STATEMENT_SUPERSEDE,
        StatementSupersede(
            request_id=os.urandom(16),
            old=first.statement_id,
            new=StatementDraft(
                kind="fact",
                subject=NameRef(name="Dan"),
                predicate="lives_in",
                object_=TextValue(text="Rome"),
                valid_from=1_717_200_000_000_000_000,
                evidence=(Evidence(memory=note.memory_id),),
            ),
        ),
    )
    assert isinstance(second, StatementSupersedeOk)
    other = _call(
        server,
        Opcode.STATEMENT_CREATE,
        StatementCreate(
            request_id=os.urandom(16),
            kind="preference",
            subject=NameRef(name="Dan"),
            predicate="likes",
            object_=TextValue(text="espresso"),
        ),
    )
    assert isinstance(other, StatementCreateOk)
    _call(
        server,
        Opcode.STATEMENT_TOMBSTONE,
        StatementTombstone(request_id=os.urandom(16), id=other.statement_id),
    )
    return [first.statement_id, second.statement_id, other.statement_id]


def _reads(server: ServerProcess, statements: list[bytes], instants: list[int]) -> list[object]:
    found: list[object] = []
    for statement_id in statements:
        found.append(_call(server, Opcode.STATEMENT_HISTORY, StatementHistory(id=statement_id)))
    for as_of in (None, *instants):
        listed = StatementList(
            subject=NameRef(name="Dan"),
            as_of=as_of,
            include_superseded=True,
            include_tombstoned=True,
        )
        found.append(_call(server, Opcode.STATEMENT_LIST, listed))
    recalled = _call(server, Opcode.RECALL, Recall(cue="where does Dan live", min_relevance=-1.0))
    assert isinstance(recalled, RecallOk) and recalled.hits
    found.append(sorted(repr((h.id, h.statement, h.memory)) for h in recalled.hits))
    return found


def _export(server: ServerProcess, out: Path, *extra: str) -> None:
    done = run_brain(
        "export", *_admin(server), "--format", "jsonl", "--out", str(out), "--quiet", *extra
    )
    assert done.returncode == 0, done.stderr


def test_a_jsonl_export_moves_a_namespace_through_the_cli(
    servers: tuple[ServerProcess, ServerProcess], tmp_path: Path
) -> None:
    source, target = servers
    statements = _fill(source)
    history = _call(source, Opcode.STATEMENT_HISTORY, StatementHistory(id=statements[1]))
    assert isinstance(history, StatementHistoryOk)
    instants = [v.recorded_at for v in history.versions]
    dump = tmp_path / "dan.jsonl"
    _export(source, dump)
    lines = [json.loads(line) for line in dump.read_text(encoding="utf-8").splitlines()]
    assert lines[0]["type"] == "header" and lines[-1]["type"] == "trailer"
    assert {line["type"] for line in lines[1:-1]} == {"entity", "memory", "statement", "audit"}
    if JQ is not None:  # the json module read every line above; jq reads them too
        run = subprocess.run(
            [JQ, "-r", 'select(.type == "statement") | .object.text', str(dump)],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        )
        assert sorted(run.stdout.split()) == ["Paris", "Rome", "espresso"]

    imported = run_brain("import", str(dump), *_admin(target), "--quiet")
    assert imported.returncode == 0, imported.stderr
    assert _reads(target, statements, instants) == _reads(source, statements, instants)
    again = tmp_path / "again.jsonl"
    _export(target, again)
    assert again.read_bytes() == dump.read_bytes()
    # The same file again resumes a finished import: nothing changes.
    repeated = run_brain("import", str(dump), *_admin(target), "--format", "jsonl", "--quiet")
    assert repeated.returncode == 0, repeated.stderr
    _export(target, again)
    assert again.read_bytes() == dump.read_bytes()

    # A file cut short, changed, or malformed is refused and names why.
    raw = dump.read_bytes().splitlines(keepends=True)
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b"".join(raw[:-1]))
    refused = run_brain("import", str(cut), *_admin(target), "--quiet")
    assert refused.returncode == 1 and "cut short" in refused.stderr
    changed = tmp_path / "changed.jsonl"
    changed.write_bytes(dump.read_bytes().replace(b'"Rome"', b'"Roma"'))
    refused = run_brain("import", str(changed), *_admin(target), "--quiet")
    assert refused.returncode == 1 and "checksum" in refused.stderr
    broken = tmp_path / "broken.jsonl"
    assert json.loads(raw[1])["type"] == "entity"
    raw[1] = raw[1].replace(b'"created_at":"', b'"created_at":"x')
    broken.write_bytes(b"".join(raw))
    refused = run_brain("import", str(broken), *_admin(target), "--quiet")
    assert refused.returncode == 1 and "line 2" in refused.stderr and "created_at" in refused.stderr
    wrong = run_brain("import", str(dump), *_admin(target), "--format", "exact", "--quiet")
    assert wrong.returncode == 1 and "jsonl export, not exact" in wrong.stderr


def test_the_export_route_takes_a_format_and_vectors(
    servers: tuple[ServerProcess, ServerProcess], tmp_path: Path
) -> None:
    source, target = servers
    statements = _fill(source)
    dump = tmp_path / "vectors.jsonl"
    _export(source, dump, "--vectors", "list")
    lines = [json.loads(line) for line in dump.read_text(encoding="utf-8").splitlines()]
    assert lines[0]["vectors"] == "list"
    with_vectors = [line for line in lines if "vector" in line]
    assert with_vectors and all(isinstance(line["vector"], list) for line in with_vectors)
    imported = run_brain("import", str(dump), *_admin(target), "--quiet")
    assert imported.returncode == 0, imported.stderr
    assert _reads(target, statements, []) == _reads(source, statements, [])
    no = run_brain("export", *_admin(source), "--vectors", "base64", "--out", str(dump))
    assert no.returncode == 1 and "--format jsonl only" in no.stderr
    for query, field in (("format=xml", "format"), ("vectors=base64", "vectors")):
        request = urllib.request.Request(
            f"http://127.0.0.1:{source.admin_port}/v1/export?namespace=default&{query}",
            headers={"Authorization": f"Bearer {source.credentials['admin_token']}"},
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 400
        assert json.load(refused.value)["field"] == field
