"""The embedding child process: the same rows as in this process, a lower OS priority,
failures that cost one call, and a life no longer than its server's
(``brain/embed/process.py``, ``brain/embed/worker.py``, spec/04-retrieval.md §3).

Every child here is a real ``python -m brain.embed.worker``; the hashing embedder
starts in a fraction of a second, MiniLM only where a comparison needs it.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import numpy as np
import pytest

import brain
from brain.embed import INSTALL_COMMAND, ModelMissing, load_embedder
from brain.embed.batching import BULK_CHUNK_TEXTS, BatchingEmbedder, EmbedderClosed, Priority
from brain.embed.hashing import HashingEmbedder
from brain.embed.minilm import find_model_dir
from brain.embed.process import MAX_REQUEST_TEXTS, EmbedWorkerFailed, ProcessEmbedder
from brain.embed.worker import BULK_EMBED_NICE, MAX_FRAME_BYTES, read_frame, write_frame
from brain.engine.database import DatabaseOptions
from brain.wire.messages.memory_ops import Encode
from brain.wire.messages.recall_ops import Recall, RecallOk
from brain.wire.messages.records import MAX_MEMORY_TEXT_CHARS
from brain.wire.opcodes import Opcode
from tests.unit.common import NS, rid

DEADLINE_S: Final = 20.0
"""How long a test waits for a process to start or end (only a broken build gets
near it: a child ends within a second of its EOF)."""

INDEX_WAIT_S: Final = 90.0
"""How long a MiniLM test waits for its documents to be indexed: far past a child's
start and twenty short texts at nice 10 on a loaded two-core machine."""

MAX_NICE: Final = 19
"""The lowest priority Linux has: ``os.nice`` stops there."""

TEXTS: Final = [
    "the quiet tenant keeps bees",
    "",
    "Grüße aus Köln, 東京 and ünïcödé",
    "a lone surrogate \ud800 survives the trip",
    "é" * 600_000,  # 1.2 MB of UTF-8: past the wire's 1 MiB bound on a CBOR text
    *(f"document {i} about the budget review" for i in range(40)),
]


@pytest.fixture
def hashing() -> Iterator[ProcessEmbedder]:
    with ProcessEmbedder("hashing") as embedder:
        yield embedder


def minilm_dir() -> Path:
    try:
        return find_model_dir()
    except ModelMissing:
        pytest.skip("the MiniLM package is not installed")


def alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def embedding_children() -> list[int]:
    """This process's running children that are embedding processes."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:  # it ended while we looked
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == os.getpid() and b"brain.embed.worker" in command and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def wait_gone(pid: int) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while alive(pid):
        assert time.monotonic() < deadline, f"process {pid} still runs"
        time.sleep(0.02)


# --- the same rows --------------------------------------------------------------------------


def test_rows_are_bit_identical_to_the_hashing_embedder_here(hashing: ProcessEmbedder) -> None:
    here = HashingEmbedder()
    assert (hashing.name, hashing.dimensions) == (here.name, here.dimensions)
    rows = hashing.embed(TEXTS)
    assert rows.dtype == np.float32 and rows.flags.writeable and rows.flags.c_contiguous
    assert np.array_equal(rows, here.embed(TEXTS))
    assert rows.tobytes() == here.embed(TEXTS).tobytes()
    assert hashing.embed([]).shape == (0, hashing.dimensions)


def test_rows_are_bit_identical_to_minilm_here() -> None:
    folder = minilm_dir()
    here = load_embedder("minilm", model_dir=folder)
    texts = [*TEXTS[:3], "word " * 400, *TEXTS[4:20]]
    with ProcessEmbedder("minilm", model_dir=folder) as child:
        assert (child.name, child.dimensions) == (here.name, here.dimensions)
        assert child.embed(texts).tobytes() == here.embed(texts).tobytes()
        # What the model refuses here it refuses there, and the child goes on.
        pid, surrogate = child.pid, [TEXTS[3]]
        with pytest.raises(TypeError) as here_raised:
            here.embed(surrogate)
        with pytest.raises(EmbedWorkerFailed, match="raised TypeError in its process") as raised:
            child.embed(surrogate)
        assert str(here_raised.value) in str(raised.value)
        assert child.pid == pid
        assert child.embed(texts[:2]).tobytes() == here.embed(texts[:2]).tobytes()


# --- refused in the caller ------------------------------------------------------------------


def test_bad_texts_are_refused_before_anything_is_sent(hashing: ProcessEmbedder) -> None:
    pid = hashing.pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)  # a call that reached the child would hang
    try:
        with pytest.raises(TypeError, match="single string"):
            hashing.embed("one string")
        with pytest.raises(TypeError, match="text 1 is int"):
            hashing.embed(["fine", 3])  # type: ignore[list-item]
        with pytest.raises(ValueError, match=f"at most {MAX_REQUEST_TEXTS}"):
            hashing.embed(["x"] * (MAX_REQUEST_TEXTS + 1))
    finally:
        os.kill(pid, signal.SIGCONT)
    # nothing reached the stream: the same child answers the next call in step
    assert np.array_equal(hashing.embed(["after"]), HashingEmbedder().embed(["after"]))
    assert hashing.pid == pid


def test_an_unknown_kind_is_refused_before_a_child_starts() -> None:
    with pytest.raises(ValueError, match="unknown embedder kind 'word2vec'"):
        ProcessEmbedder("word2vec")
    assert embedding_children() == []


# --- failures ------------------------------------------------------------------------------


def test_a_child_killed_mid_call_fails_that_call_and_the_next_starts_another(
    hashing: ProcessEmbedder,
) -> None:
    first = hashing.pid
    assert first is not None
    os.kill(first, signal.SIGSTOP)  # the call below waits inside the child
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            hashing.embed(["the call the child dies in"])
        except BaseException as exc:
            outcome.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    caller.join(0.2)  # only lets the request reach the pipe; the call hangs until the kill
    assert caller.is_alive()
    os.kill(first, signal.SIGKILL)
    caller.join(DEADLINE_S)
    assert not caller.is_alive()
    (error,) = outcome
    assert isinstance(error, EmbedWorkerFailed)
    assert f"process {first} was killed by SIGKILL during a call" in str(error)
    assert hashing.pid is None
    # the next call starts a new child, which answers as the first would have
    assert np.array_equal(hashing.embed(TEXTS[:3]), HashingEmbedder().embed(TEXTS[:3]))
    assert hashing.pid not in (None, first)
    assert not alive(first)


def test_a_model_the_child_cannot_load_raises_model_missing(tmp_path: Path) -> None:
    nowhere = tmp_path / "no-model"
    with pytest.raises(ModelMissing) as raised:
        ProcessEmbedder("minilm", model_dir=nowhere)
    assert raised.value.model_dir == nowhere
    assert str(raised.value).endswith(INSTALL_COMMAND)
    assert embedding_children() == []


def test_a_child_that_dies_before_it_is_ready_names_its_exit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONHOME", str(tmp_path))  # no standard library: Python cannot start
    with pytest.raises(EmbedWorkerFailed, match="exited with status 1 before it was ready"):
        ProcessEmbedder("hashing")
    assert embedding_children() == []


def test_a_child_started_like_an_embedder_is_awaited_at_its_first_call(tmp_path: Path) -> None:
    """Given the embedder it must match, the constructor returns without waiting for
    the child, which loads its model meanwhile; the first call waits for it and
    raises what the constructor would have."""
    like = HashingEmbedder()
    with ProcessEmbedder("hashing", like=like) as child:
        assert (child.name, child.dimensions) == (like.name, like.dimensions)
        assert np.array_equal(child.embed(TEXTS[:3]), like.embed(TEXTS[:3]))
    nowhere = tmp_path / "no-model"
    minilm_like = HashingEmbedder()
    minilm_like.name = "all-MiniLM-L6-v2"
    unloadable = ProcessEmbedder("minilm", model_dir=nowhere, like=minilm_like)
    try:  # the child's failure to load is not the constructor's
        with pytest.raises(ModelMissing):
            unloadable.embed(["a text"])
    finally:
        unloadable.close()
    assert embedding_children() == []


def test_a_child_that_embeds_unlike_its_model_is_refused_and_replaced() -> None:
    """A child whose embedder differs from the one it was started like fails the first
    call, and is stopped; every later call starts a child that must match too."""
    wrong = HashingEmbedder()
    wrong.dimensions = 12
    child = ProcessEmbedder("hashing", like=wrong)
    try:
        for _ in range(2):
            with pytest.raises(EmbedWorkerFailed, match="not 'hashing"):
                child.embed(["a text"])
    finally:
        child.close()
    assert embedding_children() == []


# --- priority and lifetime -----------------------------------------------------------------


def test_the_child_runs_bulk_embed_nice_steps_below_its_server(
    hashing: ProcessEmbedder,
) -> None:
    assert hashing.pid is not None
    server = os.getpriority(os.PRIO_PROCESS, 0)
    child = os.getpriority(os.PRIO_PROCESS, hashing.pid)
    assert child == min(server + BULK_EMBED_NICE, MAX_NICE)
    assert int(Path(f"/proc/{hashing.pid}/stat").read_text().rsplit(")", 1)[1].split()[16]) == (
        child
    )


def test_close_ends_the_child_and_is_idempotent() -> None:
    embedder = ProcessEmbedder("hashing")
    pid = embedder.pid
    assert pid is not None and embedding_children() == [pid]
    embedder.close()
    assert not alive(pid) and embedder.pid is None
    embedder.close()
    with pytest.raises(EmbedderClosed):
        embedder.embed(["after"])
    assert embedding_children() == []


def test_the_child_does_not_outlive_a_killed_server() -> None:
    server = textwrap.dedent(
        """
        import time
        from brain.embed.process import ProcessEmbedder

        embedder = ProcessEmbedder("hashing")
        print(embedder.pid, flush=True)
        time.sleep(600)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", server], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert alive(child)
    finally:
        parent.kill()  # SIGKILL: no close(), no cleanup of any kind
        parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()
    wait_gone(child)  # its stdin said EOF: only the killed server held the other end


def test_a_batching_embedder_closes_the_process_embedder_it_was_given() -> None:
    child = ProcessEmbedder("hashing")
    pid = child.pid
    assert pid is not None
    with BatchingEmbedder(HashingEmbedder(), bulk=child) as batcher:
        docs = [f"document {i}" for i in range(2 * BULK_CHUNK_TEXTS + 3)]
        assert np.array_equal(
            batcher.embed(docs, priority=Priority.BULK), HashingEmbedder().embed(docs)
        )
        assert child.pid == pid
    assert not alive(pid) and child.pid is None


def test_a_minilm_database_embeds_its_documents_in_a_child_at_lower_priority(
    tmp_path: Path,
) -> None:
    folder = minilm_dir()
    db = brain.open(tmp_path / "d", DatabaseOptions(embedder="minilm", model_dir=folder))
    try:
        db.submit(NS, Opcode.ENCODE, Encode(request_id=rid(), text="bees in the garden")).result()
        assert db.wait_indexed(INDEX_WAIT_S)
        (child,) = embedding_children()  # it has embedded: it runs at its own priority
        server = os.getpriority(os.PRIO_PROCESS, 0)
        assert os.getpriority(os.PRIO_PROCESS, child) == min(server + BULK_EMBED_NICE, MAX_NICE)
        answer = db.execute(NS, Opcode.RECALL, Recall(cue="who keeps bees", top_k=3))
        assert isinstance(answer, RecallOk) and len(answer.hits) == 1
    finally:
        db.close()
    assert not alive(child) and embedding_children() == []


def test_a_killed_embedding_child_costs_one_round_and_loses_nothing(tmp_path: Path) -> None:
    folder = minilm_dir()
    db = brain.open(tmp_path / "d", DatabaseOptions(embedder="minilm", model_dir=folder))
    texts = [f"note {i}: the beekeeper moved hive {i} to the orchard" for i in range(20)]
    try:
        (first,) = embedding_children()
        os.kill(first, signal.SIGSTOP)  # the indexer's next call waits in it, or finds it dead
        for text in texts:
            db.submit(NS, Opcode.ENCODE, Encode(request_id=rid(), text=text)).result()
        os.kill(first, signal.SIGKILL)
        assert db.wait_indexed(INDEX_WAIT_S)  # after the failed round, its retry, in a new child
        indexer = db.retrieval.indexer
        assert indexer.failures >= 1 and indexer.embedded == len(texts)
        (second,) = embedding_children()
        assert second != first and not alive(first)
        answer = db.execute(NS, Opcode.RECALL, Recall(cue="hive 7 orchard", top_k=len(texts)))
        assert isinstance(answer, RecallOk) and len(answer.hits) == len(texts)
    finally:
        db.close()
    assert embedding_children() == []


# --- frames --------------------------------------------------------------------------------


def test_frames_are_bounded_and_a_torn_one_is_told_from_the_end() -> None:
    stream = io.BytesIO()
    write_frame(stream, b"one")
    write_frame(stream, b"")
    stream.write(b"\x00\x00\x00\x05ab")  # torn: three bytes short
    stream.seek(0)
    assert read_frame(stream) == b"one"
    assert read_frame(stream) == b""
    with pytest.raises(EOFError, match="3 bytes short"):
        read_frame(stream)
    assert read_frame(io.BytesIO()) is None
    too_long = (MAX_FRAME_BYTES + 1).to_bytes(4, "big")
    with pytest.raises(ValueError, match="over"):
        read_frame(io.BytesIO(too_long))


def test_a_frame_holds_the_largest_bulk_chunk_and_the_largest_answer() -> None:
    utf8_bytes_per_char = 4
    chunk = BULK_CHUNK_TEXTS * (MAX_MEMORY_TEXT_CHARS * utf8_bytes_per_char + 9)  # + CBOR heads
    assert chunk + 9 <= MAX_FRAME_BYTES
    assert 1 + MAX_REQUEST_TEXTS * HashingEmbedder().dimensions * 4 <= MAX_FRAME_BYTES
