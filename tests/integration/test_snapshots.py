"""Snapshots and restore (spec/05-durability.md §13 and §11 test 8)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

import brain
from brain.client import Client
from brain.engine.admin.snapshot import list_snapshots, restore_snapshot
from brain.engine.database import Database
from brain.errors import InvalidArgument, NotFound, StorageFault
from brain.wire.messages.memory_ops import Encode, EncodeOk, MemoryGet, MemoryGetOk
from brain.wire.opcodes import Opcode
from tests.integration.conftest import ServerProcess, start_server
from tests.request_ids import request_id as rid


def write(db: Database, n: int) -> EncodeOk:
    answer = db.execute("default", Opcode.ENCODE, Encode(request_id=rid(n), text=f"note {n}"))
    assert isinstance(answer, EncodeOk)
    return answer


def present(db: Database, answer: EncodeOk) -> bool:
    try:
        db.execute("default", Opcode.MEMORY_GET, MemoryGet(id=answer.memory_id))
    except NotFound:
        return False
    return True


def test_snapshot_more_writes_restore(tmp_path: Path) -> None:
    with brain.open(tmp_path / "live") as db:
        before = [write(db, n) for n in range(10)]
        assert db.wait_indexed()
        settled = db.applied_lsn  # the writes and the indexer's records for them
        info = db.snapshot(tmp_path / "bundle")
        after = [write(db, n) for n in range(10, 20)]
    assert info.lsn == settled
    restored = restore_snapshot(tmp_path / "bundle", tmp_path / "restored")
    assert restored.lsn == settled
    with brain.open(tmp_path / "restored") as db:
        assert db.applied_lsn == settled  # nothing was left to index
        assert all(present(db, a) for a in before)
        assert not any(present(db, a) for a in after)
        assert write(db, 99).lsn == settled + 1


def test_damaged_bundle_is_refused_and_nothing_written(tmp_path: Path) -> None:
    with brain.open(tmp_path / "live") as db:
        write(db, 1)
        db.snapshot(tmp_path / "bundle")
    data = tmp_path / "bundle" / "lmdb" / "data.mdb"
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 3] ^= 0x01
    data.write_bytes(bytes(raw))
    with pytest.raises(StorageFault, match="SHA-256"):
        restore_snapshot(tmp_path / "bundle", tmp_path / "target")
    assert not (tmp_path / "target").exists()
    assert not list(tmp_path.glob("target*"))


def test_missing_or_extra_files_and_busy_targets(tmp_path: Path) -> None:
    with brain.open(tmp_path / "live") as db:
        write(db, 1)
        db.snapshot(tmp_path / "bundle")
    (tmp_path / "bundle" / "stray.txt").write_text("x")
    with pytest.raises(StorageFault, match="does not match its manifest"):
        restore_snapshot(tmp_path / "bundle", tmp_path / "t1")
    (tmp_path / "bundle" / "stray.txt").unlink()
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "file").write_text("x")
    with pytest.raises(InvalidArgument, match="not empty"):
        restore_snapshot(tmp_path / "bundle", busy)
    (tmp_path / "bundle" / "MANIFEST.json").write_text("{")
    with pytest.raises(StorageFault):
        restore_snapshot(tmp_path / "bundle", tmp_path / "t2")


def test_snapshot_during_writes_is_a_consistent_prefix(tmp_path: Path) -> None:
    answers: list[EncodeOk] = []
    stop = threading.Event()
    with brain.open(tmp_path / "live") as db:

        def writer() -> None:
            n = 0
            while not stop.is_set():
                answers.append(write(db, 1000 + n))
                n += 1

        thread = threading.Thread(target=writer)
        thread.start()
        while len(answers) < 50:
            threading.Event().wait(0.01)
        info = db.snapshot(tmp_path / "bundle")
        stop.set()
        thread.join()
    restore_snapshot(tmp_path / "bundle", tmp_path / "restored")
    with brain.open(tmp_path / "restored") as db:
        assert db.applied_lsn == info.lsn
        for answer in answers:
            assert present(db, answer) == (answer.lsn <= info.lsn)


def test_admin_snapshot_and_cli_restore(server: ServerProcess, tmp_path: Path) -> None:
    creds = server.credentials
    with Client.connect(server.host, server.wire_port, api_key=creds["api_key"]) as client:
        kept = client.call(Opcode.ENCODE, Encode(request_id=rid(1), text="kept"))
        assert isinstance(kept, EncodeOk)

    def admin(method: str, path: str) -> tuple[int, dict[str, object]]:
        request = urllib.request.Request(
            f"http://127.0.0.1:{server.admin_port}{path}",
            method=method,
            data=b"" if method == "POST" else None,
        )
        request.add_header("Authorization", f"Bearer {creds['admin_token']}")
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())

    status, made = admin("POST", "/v1/snapshots")
    assert status == 201 and isinstance(made["lsn"], int) and made["lsn"] >= kept.lsn
    status, listing = admin("GET", "/v1/snapshots")
    snapshots = listing["snapshots"]
    assert isinstance(snapshots, list)
    assert [s["id"] for s in snapshots] == [made["id"]]
    assert [s.id for s in list_snapshots(server.data_dir / "snapshots")] == [made["id"]]

    with Client.connect(server.host, server.wire_port, api_key=creds["api_key"]) as client:
        client.call(Opcode.ENCODE, Encode(request_id=rid(2), text="after the snapshot"))

    target = tmp_path / "restored"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "brain",
            "snapshot",
            "restore",
            str(made["path"]),
            "--data",
            str(target),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    restored = start_server(target)
    try:
        # The key store came along: the old key still works, and no new credentials were made.
        assert not (target / "credentials.toml").exists()
        with Client.connect(restored.host, restored.wire_port, api_key=creds["api_key"]) as client:
            got = client.call(Opcode.MEMORY_GET, MemoryGet(id=kept.memory_id))
            assert isinstance(got, MemoryGetOk) and got.memory.text == "kept"
            again = client.call(Opcode.ENCODE, Encode(request_id=rid(2), text="after the snapshot"))
            # A new write here, not a replay of the one made after the snapshot.
            assert isinstance(again, EncodeOk) and again.lsn > int(str(made["lsn"]))
    finally:
        restored.stop()


def test_cli_snapshot_create_offline(tmp_path: Path) -> None:
    with brain.open(tmp_path / "d") as db:
        write(db, 1)
        assert db.wait_indexed()
        lsn = db.applied_lsn
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "brain",
            "snapshot",
            "create",
            "--data",
            str(tmp_path / "d"),
            "--out",
            str(tmp_path / "b"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert f"at LSN {lsn}" in result.stdout
    assert (tmp_path / "b" / "MANIFEST.json").exists()
