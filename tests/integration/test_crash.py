"""Crash safety of a real server process (spec/05-durability.md §11, tests 2, 3, 5 and 6).

``BRAIN_KILL_ROUNDS`` sets how many ``kill -9`` rounds the load test runs
(default 50, the CI figure; the chaos run uses thousands).
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
import time
from pathlib import Path

import pytest

from brain.client import Client
from brain.errors import BrainError, NotFound, TxnExpired
from brain.wire.messages.memory_ops import Encode, EncodeOk, MemoryGet, MemoryGetOk
from brain.wire.messages.txn_ops import TxnBegin, TxnBegun, TxnCommit, TxnCommitted
from brain.wire.opcodes import Opcode
from tests.integration.conftest import ServerProcess, run_brain, serve_to_exit, start_server
from tests.request_ids import request_id

KILL_ROUNDS = int(os.environ.get("BRAIN_KILL_ROUNDS", "50"))
WRITERS = 4
"""Concurrent client connections writing during each round."""


def _request_id(round_no: int, writer: int, seq: int) -> bytes:
    """Write ``seq`` of ``writer`` in round ``round_no``: 6, 2 and 8 bytes of the id."""
    return request_id(round_no << 80 | writer << 64 | seq)


def _text(request_id: bytes) -> str:
    return f"memory {request_id.hex()}"


def _load(
    server: ServerProcess,
    round_no: int,
    acked: dict[bytes, EncodeOk],
    stop: threading.Event,
    *,
    stop_signal: signal.Signals = signal.SIGKILL,
) -> int:
    """Write from several connections, then send ``stop_signal`` to the server
    mid-load; return the server's exit code."""
    lock = threading.Lock()

    def writer(index: int) -> None:
        try:
            client = Client.connect(
                server.host, server.wire_port, api_key=server.credentials["api_key"], timeout=10
            )
        except BrainError:
            return
        seq = 0
        try:
            while not stop.is_set():
                batch = [
                    (
                        Opcode.ENCODE,
                        Encode(
                            request_id=_request_id(round_no, index, seq + k),
                            text=_text(_request_id(round_no, index, seq + k)),
                        ),
                    )
                    for k in range(8)
                ]
                seq += 8
                results = client.pipeline(batch)
                with lock:
                    for (_, request), result in zip(batch, results, strict=True):
                        if isinstance(result, EncodeOk):
                            assert isinstance(request, Encode)
                            acked[request.request_id] = result
                if any(isinstance(r, BrainError) for r in results):
                    return
        except BrainError:
            return
        finally:
            with contextlib.suppress(BrainError):
                client.close()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(WRITERS)]
    for thread in threads:
        thread.start()
    time.sleep(random.uniform(0.05, 0.4))
    server.process.send_signal(stop_signal)
    code = server.process.wait(timeout=60)
    stop.set()
    for thread in threads:
        thread.join(timeout=30)
    return code


def _verify(server: ServerProcess, acked: dict[bytes, EncodeOk], sample: int) -> None:
    with Client.connect(
        server.host, server.wire_port, api_key=server.credentials["api_key"]
    ) as client:
        items = list(acked.items())
        chosen = items if len(items) <= sample else random.sample(items, sample)
        # Pipelined: a round can acknowledge thousands of writes.
        reads = client.pipeline(
            [(Opcode.MEMORY_GET, MemoryGet(id=answer.memory_id)) for _, answer in chosen]
        )
        retries = client.pipeline(
            [
                (Opcode.ENCODE, Encode(request_id=request_id, text=_text(request_id)))
                for request_id, _ in chosen
            ]
        )
        for (request_id, answer), got, again in zip(chosen, reads, retries, strict=True):
            assert isinstance(got, MemoryGetOk) and got.memory.text == _text(request_id)
            assert again == answer, "a retry must return the first answer and create nothing"


@pytest.mark.timeout(max(300, 12 * KILL_ROUNDS))
def test_kill_9_under_concurrent_writes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    rng_seed = int(os.environ.get("BRAIN_KILL_SEED", str(random.randrange(1 << 30))))
    random.seed(rng_seed)
    total: dict[bytes, EncodeOk] = {}
    acked: dict[bytes, EncodeOk] = {}
    # Each start after a kill first checks what the killed server acknowledged, then
    # is itself killed under load: one start per round.
    for round_no in range(KILL_ROUNDS + 1):
        server = start_server(data)
        try:
            # Everything the last round acknowledged, and a sample of earlier rounds.
            _verify(server, acked, sample=len(acked))
            _verify(server, total, sample=50)
            if round_no == KILL_ROUNDS:
                break
            acked = {}
            _load(server, round_no, acked, threading.Event())
            total.update(acked)
        finally:
            server.stop()
    assert total, f"no write was acknowledged in {KILL_ROUNDS} rounds (seed {rng_seed})"


def _wal_segment(data: Path) -> Path:
    return sorted((data / "wal").glob("wal-*.log"))[-1]


def test_append_after_a_torn_tail_then_kill(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = start_server(data)
    creds = server.credentials
    first: dict[bytes, EncodeOk] = {}
    with Client.connect(server.host, server.wire_port, api_key=creds["api_key"]) as client:
        for n in range(20):
            request_id = _request_id(1, 0, n)
            answer = client.call(
                Opcode.ENCODE, Encode(request_id=request_id, text=_text(request_id))
            )
            assert isinstance(answer, EncodeOk)
            first[request_id] = answer
    server.process.send_signal(signal.SIGKILL)
    server.process.wait()
    server.stop()
    # A crash inside an append leaves part of a record at the end of the segment.
    with _wal_segment(data).open("ab") as fh:
        fh.write(b"\x12\x34\x56\x78\x00\x00\x00\x40\x00")
    server = start_server(data)
    second: dict[bytes, EncodeOk] = {}
    with Client.connect(server.host, server.wire_port, api_key=creds["api_key"]) as client:
        for n in range(20):
            request_id = _request_id(2, 0, n)
            answer = client.call(
                Opcode.ENCODE, Encode(request_id=request_id, text=_text(request_id))
            )
            assert isinstance(answer, EncodeOk)
            second[request_id] = answer
    server.process.send_signal(signal.SIGKILL)
    server.process.wait()
    server.stop()
    server = start_server(data)
    try:
        _verify(server, {**first, **second}, sample=40)
    finally:
        server.stop()


def test_flipped_bit_refuses_startup_and_verify_names_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = start_server(data)
    with Client.connect(
        server.host, server.wire_port, api_key=server.credentials["api_key"]
    ) as client:
        for n in range(10):
            request_id = _request_id(3, 0, n)
            client.call(Opcode.ENCODE, Encode(request_id=request_id, text=_text(request_id) * 20))
    server.stop()
    segment = _wal_segment(data)
    raw = bytearray(segment.read_bytes())
    # Flip one bit in the middle of the file: inside a complete record, not the last.
    raw[len(raw) // 2] ^= 0x10
    segment.write_bytes(bytes(raw))
    before = segment.read_bytes()

    result = run_brain("wal", "verify", "--data", str(data))
    assert result.returncode == 3, result.stdout + result.stderr
    assert "LSN" in result.stdout and segment.name in result.stdout

    proc = serve_to_exit(data)
    assert proc.returncode == 1
    assert "LSN" in proc.stderr and segment.name in proc.stderr
    assert segment.read_bytes() == before, "a refused start must change nothing on disk"


@pytest.mark.parametrize("missing", ["wal"])
def test_wal_verify_cannot_run_without_a_wal(tmp_path: Path, missing: str) -> None:
    result = run_brain("wal", "verify", "--data", str(tmp_path / "empty"))
    assert result.returncode == 2 and missing in result.stderr


def _begin(client: Client) -> bytes:
    answer = client.call(Opcode.TXN_BEGIN, TxnBegin())
    assert isinstance(answer, TxnBegun)
    return answer.txn_id


def _kill(server: ServerProcess) -> None:
    server.process.send_signal(signal.SIGKILL)
    server.process.wait()
    server.stop()


def _exists(client: Client, memory_id: bytes) -> bool:
    try:
        client.call(Opcode.MEMORY_GET, MemoryGet(id=memory_id))
    except NotFound:
        return False
    return True


def test_transaction_killed_before_and_after_commit(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = start_server(data)
    key = server.credentials["api_key"]
    with Client.connect(server.host, server.wire_port, api_key=key) as client:
        txn = _begin(client)
        pending = [
            client.call(
                Opcode.ENCODE, Encode(request_id=_request_id(7, 0, n), text=f"p{n}", txn_id=txn)
            )
            for n in range(5)
        ]
    _kill(server)  # killed before the commit: nothing of it may exist
    server = start_server(data)
    with Client.connect(server.host, server.wire_port, api_key=key) as client:
        assert not any(_exists(client, p.memory_id) for p in pending if isinstance(p, EncodeOk))
        with pytest.raises(TxnExpired):
            client.call(Opcode.TXN_COMMIT, TxnCommit(txn_id=txn))
        txn = _begin(client)
        for n in range(5):
            client.call(
                Opcode.ENCODE, Encode(request_id=_request_id(8, 0, n), text=f"c{n}", txn_id=txn)
            )
        committed = client.call(Opcode.TXN_COMMIT, TxnCommit(txn_id=txn))
        assert isinstance(committed, TxnCommitted)
    _kill(server)  # killed after the commit was acknowledged: all of it must exist
    server = start_server(data)
    try:
        with Client.connect(server.host, server.wire_port, api_key=key) as client:
            for result in committed.results:
                assert _exists(client, EncodeOk.from_wire(result).memory_id)
    finally:
        server.stop()


def test_dropped_connection_aborts_its_transactions(server: ServerProcess) -> None:
    key = server.credentials["api_key"]
    first = Client.connect(server.host, server.wire_port, api_key=key)
    txn = _begin(first)
    first.call(Opcode.ENCODE, Encode(request_id=_request_id(9, 0, 0), text="orphan", txn_id=txn))
    first.close()
    time.sleep(0.2)
    with (
        Client.connect(server.host, server.wire_port, api_key=key) as second,
        pytest.raises(TxnExpired),
    ):
        second.call(Opcode.TXN_COMMIT, TxnCommit(txn_id=txn))


def test_sigterm_under_write_load_loses_nothing_acknowledged(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = start_server(data)
    acked: dict[bytes, EncodeOk] = {}
    try:
        code = _load(server, 0, acked, threading.Event(), stop_signal=signal.SIGTERM)
    finally:
        server.stop()
    assert code == 0, "SIGTERM is a clean shutdown"
    assert acked
    server = start_server(data)
    try:
        _verify(server, acked, sample=len(acked))
    finally:
        server.stop()
