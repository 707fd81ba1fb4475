"""Damaged files met at start: a real server refuses to start, says which file is damaged
and what to do, and changes nothing (spec/05-durability.md §3.3, §4, §5).

Each start runs ``brain serve`` in a process of its own: before the data-file check a
truncated LMDB file killed the server with SIGBUS, printing nothing.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from brain.client import Client
from brain.engine.wal import WriteAheadLog, encode_record
from brain.wire.messages.memory_ops import Encode, EncodeOk
from brain.wire.opcodes import Opcode
from tests.integration.conftest import run_brain, serve_to_exit, start_server
from tests.request_ids import request_id


def _data_directory(root: Path, writes: int = 30) -> Path:
    """A data directory a real server wrote ``writes`` memories into, then left cleanly."""
    data = root / "data"
    server = start_server(data)
    try:
        with Client.connect(
            server.host, server.wire_port, api_key=server.credentials["api_key"]
        ) as client:
            for n in range(writes):
                answer = client.call(
                    Opcode.ENCODE, Encode(request_id=request_id(n), text=f"memory {n} " * 20)
                )
                assert isinstance(answer, EncodeOk)
    finally:
        assert server.stop() == 0
    return data


def _halve(path: Path) -> bytes:
    os.truncate(path, path.stat().st_size // 2)
    return path.read_bytes()


def test_a_store_truncated_to_half_stops_the_start_with_its_name_and_the_way_out(
    tmp_path: Path,
) -> None:
    data = _data_directory(tmp_path)
    store_file = data / "lmdb" / "data.mdb"
    before = _halve(store_file)
    result = serve_to_exit(data)
    assert result.returncode != -signal.SIGBUS, "the server died of SIGBUS"
    assert result.returncode == 1, result.stderr
    assert str(store_file) in result.stderr and "cut short" in result.stderr
    # This directory's WAL was never checkpointed past LSN 1: it can rebuild the store.
    assert f"move {data / 'lmdb'} aside" in result.stderr
    assert store_file.read_bytes() == before


def test_a_key_store_truncated_to_half_stops_the_start(tmp_path: Path) -> None:
    data = _data_directory(tmp_path, writes=1)
    keys_file = data / "keys" / "data.mdb"
    before = _halve(keys_file)
    result = serve_to_exit(data)
    assert result.returncode != -signal.SIGBUS, "the server died of SIGBUS"
    assert result.returncode == 1, result.stderr
    assert str(keys_file) in result.stderr and "cut short" in result.stderr
    assert "snapshot bundle" in result.stderr
    assert keys_file.read_bytes() == before


def test_a_damaged_header_of_the_last_record_is_reported_and_refuses_the_start(
    tmp_path: Path,
) -> None:
    data = _data_directory(tmp_path, writes=5)
    with WriteAheadLog.open(data / "wal") as wal:
        last = list(wal.read_from(wal.first_lsn))[-1]
    segment = sorted((data / "wal").glob("wal-*.log"))[-1]
    raw = bytearray(segment.read_bytes())
    offset = len(raw) - len(encode_record(last))
    # One bit of the length field (bytes 4-7): the record now seems to run past the
    # end of the file, as a torn append would leave it.
    assert len(last.payload) < 1 << 16
    raw[offset + 5] ^= 0x01
    segment.write_bytes(bytes(raw))
    before = segment.read_bytes()

    verify = run_brain("wal", "verify", "--data", str(data))
    assert verify.returncode == 3, verify.stdout + verify.stderr
    assert "header CRC mismatch" in verify.stdout
    assert segment.name in verify.stdout and f"byte {offset} (LSN {last.lsn})" in verify.stdout

    result = serve_to_exit(data)
    assert result.returncode == 1, result.stderr
    assert segment.name in result.stderr and f"LSN {last.lsn}" in result.stderr
    assert segment.read_bytes() == before, "a refused start must change nothing on disk"
