"""``server.idempotency_retention_s`` (spec/05-durability.md §7) on a real server: a
retry inside the retention replays the first answer; once the retention has passed
and a checkpoint swept, the same ``request_id`` is refused, also after a restart."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Final

import pytest

from brain.errors import IdempotencyConflict
from brain.sdk import Brain
from brain.server.config import ConfigError, load_config
from brain.wire.messages.memory_ops import Encode
from tests.integration.conftest import ServerProcess, start_server

RETENTION_S: Final = 1.0
"""Short enough to wait out in a test."""

ENV: Final = {
    "BRAIN_RETRIEVAL__EMBEDDER": "hashing",
    "BRAIN_SERVER__IDEMPOTENCY_RETENTION_S": str(RETENTION_S),
}


def _connect(server: ServerProcess) -> Brain:
    return Brain.connect(server.host, server.wire_port, api_key=server.credentials["api_key"])


def test_a_retry_inside_the_retention_replays_and_one_after_it_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    request = Encode(request_id=os.urandom(16), text="Dan moved to Berlin.")
    server = start_server(data, env=ENV)
    try:
        with _connect(server) as db:
            first = db.call(request)
            assert db.call(request) == first  # inside the window: the same answer
    finally:
        server.stop()
    time.sleep(RETENTION_S * 1.5)
    # The server sweeps at its checkpoints; stopping checkpoints, and so does the start
    # below when it stops again. Between the two the retry meets the mark.
    server = start_server(data, env=ENV)
    try:
        with _connect(server) as db:
            early = db.call(Encode(request_id=os.urandom(16), text="a fresh write"))
            assert early.lsn > first.lsn
    finally:
        server.stop()
    server = start_server(data, env=ENV)
    try:
        with _connect(server) as db:
            with pytest.raises(IdempotencyConflict, match="idempotency retention") as refused:
                db.call(request)
            assert refused.value.field == "request_id"
            # Other content under the stale id is refused the same way.
            with pytest.raises(IdempotencyConflict, match="idempotency retention"):
                db.call(Encode(request_id=request.request_id, text="another text"))
    finally:
        server.stop()


@pytest.mark.parametrize("value", ["0", "-5", "nan"])
def test_the_retention_must_be_positive(value: str) -> None:
    with pytest.raises(ConfigError, match="idempotency_retention_s"):
        load_config(environ={"BRAIN_SERVER__IDEMPOTENCY_RETENTION_S": value})


def test_the_retention_is_read_in_seconds() -> None:
    config = load_config(environ={"BRAIN_SERVER__IDEMPOTENCY_RETENTION_S": "90"})
    assert config.server.idempotency_retention_ns == 90 * 10**9
    assert load_config(environ={}).server.idempotency_retention_s == 24 * 3600
