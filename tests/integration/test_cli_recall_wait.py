"""``brain recall`` says what it waits for when the semantic index lags behind.

A server with the real embedder embeds the indexer's documents in a child process
(spec/04-retrieval.md §3). Stopping that child (SIGSTOP) holds a written memory out
of the vector index, so a recall waits ``retrieval.index_wait_s`` for it and then
answers without it: the command, a process of its own with standard error a pipe,
prints one line saying what it waits for once the wait passes a second, and after
the answer how long it waited and what the index lacked.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from brain.cli.verbs.recall import WAIT_NOTE_S
from tests.integration.conftest import ServerProcess, start_server

INDEX_WAIT_S: Final = 3
"""The server's longest wait for its index: past the command's note, short for a test."""

CHILD_WAIT_S: Final = 30
"""Longest the embedding child may take to appear after the server starts."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server with the real embedder (and so its child process), waiting 3 s."""
    proc = start_server(
        tmp_path_factory.mktemp("wait") / "data",
        env={"BRAIN_RETRIEVAL__INDEX_WAIT_S": str(INDEX_WAIT_S)},
    )
    try:
        yield proc
    finally:
        proc.stop()


def _embedding_child(server_pid: int) -> int:
    """The pid of the server's ``brain.embed.worker`` child, once it runs."""
    deadline = time.monotonic() + CHILD_WAIT_S
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                command = (entry / "cmdline").read_bytes()
            except OSError:
                continue  # ended while looked at
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            if parent == server_pid and b"brain.embed.worker" in command:
                return int(entry.name)
        time.sleep(0.1)
    raise AssertionError("the server started no embedding child")


def _brain(server: ServerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRAIN_")}
    env.update(BRAIN_HOST=server.host, BRAIN_PORT=str(server.wire_port))
    env.update(BRAIN_DATA=str(server.data_dir), COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "brain", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=True,
    )


def test_a_recall_waiting_for_the_index_says_so(server: ServerProcess) -> None:
    child = _embedding_child(server.process.pid)
    os.kill(child, signal.SIGSTOP)
    try:
        _brain(server, "memory", "add", "Hugo keeps bees on the roof.")
        started = time.monotonic()
        done = _brain(server, "recall", "who keeps bees?", "--json")
        took = time.monotonic() - started
    finally:
        os.kill(child, signal.SIGCONT)
    coverage = json.loads(done.stdout)["coverage"]  # standard output: the answer alone
    assert coverage["embed_backlog"] == 1 and coverage["index_wait_ms"] >= 1000 * INDEX_WAIT_S
    assert took > WAIT_NOTE_S
    lines = done.stderr.splitlines()
    waiting = [line for line in lines if "waiting for the server" in line]
    assert len(waiting) == 1 and "semantic index" in waiting[0]  # one line, no spinner
    assert "\x1b" not in done.stderr and "\r" not in done.stderr
    assert lines[-1] == (
        f"the semantic index lagged behind the writes: the recall waited "
        f"{coverage['index_wait_ms'] / 1000:.1f} s for it; 1 document was not in it yet, "
        "so not searched by meaning"
    )


def test_a_quick_recall_says_nothing_more(server: ServerProcess) -> None:
    # The index has caught up (the child runs again): nothing to wait for.
    deadline = time.monotonic() + CHILD_WAIT_S
    while True:
        done = _brain(server, "recall", "who keeps bees?", "--json")
        if "embed_backlog" not in json.loads(done.stdout)["coverage"]:
            break
        assert time.monotonic() < deadline, "the index never caught up"
        time.sleep(0.2)
    again = _brain(server, "recall", "who keeps bees?")
    assert again.stderr == "" and "Hugo keeps bees" in again.stdout
