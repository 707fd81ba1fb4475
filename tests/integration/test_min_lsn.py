"""A read's ``min_lsn`` on a single node (spec/01-wire.md §4): met at once when the
node applied it, refused at once (``INVALID_ARGUMENT``) beyond the node's log, and
sent by the SDK per call or under ``read_your_writes``."""

from __future__ import annotations

import time

import pytest

from brain.errors import InvalidArgument
from brain.sdk import Brain
from brain.wire.opcodes import Opcode
from tests.integration.conftest import ServerProcess

REFUSAL_S = 1.0
"""A refusal beyond the log is immediate: far below the wait bound of 5 s."""


def test_min_lsn_met_and_beyond_the_log(server: ServerProcess) -> None:
    key = server.credentials["api_key"]
    with Brain.connect(server.host, server.wire_port, api_key=key) as db:
        written = db.remember("Ada moved to Lisbon in May.")
        # Met: the point read (answered on the event loop) and a recall (a pool).
        assert db.get_memory(written.id, min_lsn=written.lsn).id == written.id
        assert db.get_memory(written.id, min_lsn=0).id == written.id
        found = db.recall("Lisbon", min_lsn=written.lsn)
        assert any(hit.id == written.id for hit in found.hits)
        assert db.list_statements(min_lsn=written.lsn).statements == ()
        db.get_schema(min_lsn=written.lsn)
        # Beyond the log on the node that plans it: refused at once, by field.
        for read in (
            lambda: db.get_memory(written.id, min_lsn=written.lsn + 1000),
            lambda: db.recall("Lisbon", min_lsn=written.lsn + 1000),
            lambda: db.list_entities(min_lsn=written.lsn + 1000),
        ):
            began = time.monotonic()
            with pytest.raises(InvalidArgument) as refused:
                read()
            assert time.monotonic() - began < REFUSAL_S
            assert refused.value.field == "min_lsn"
            assert f"min_lsn {written.lsn + 1000}" in refused.value.message


def test_read_your_writes_sends_the_last_lsn(server: ServerProcess) -> None:
    key = server.credentials["api_key"]
    with Brain.connect(server.host, server.wire_port, api_key=key, read_your_writes=True) as db:
        assert db.consistency.last_lsn == 0
        first = db.remember("Grace keeps bees.")
        second = db.remember("Grace sells honey.")
        assert db.consistency.last_lsn == second.lsn > first.lsn
        assert db.get_memory(first.id).id == first.id
        # The facade's reads now carry its last LSN: one beyond the log shows it.
        db.consistency.last_lsn = second.lsn + 50
        with pytest.raises(InvalidArgument) as refused:
            db.get_memory(first.id)
        assert f"min_lsn {second.lsn + 50}" in refused.value.message
        # A call's own min_lsn wins over the remembered one.
        assert db.get_memory(first.id, min_lsn=second.lsn).id == first.id


@pytest.mark.parametrize("value", [-1, "7", 1.5, 2**64, True])
def test_bad_min_lsn_refused_by_the_codec(server: ServerProcess, value: object) -> None:
    client = server.client()
    assert client.handshake(server.credentials["api_key"]).opcode == 0x0082
    client.send(Opcode.MEMORY_GET, 1, {"id": b"\x01" * 16, "min_lsn": value})
    reply = client.recv()
    assert reply.error_name == "INVALID_ARGUMENT", reply
    assert reply.body["field"] == "min_lsn"


def test_writes_take_no_min_lsn(server: ServerProcess) -> None:
    client = server.client()
    assert client.handshake(server.credentials["api_key"]).opcode == 0x0082
    client.send(Opcode.ENCODE, 1, {"text": "x", "request_id": b"\x02" * 16, "min_lsn": 1})
    reply = client.recv()
    assert reply.error_name == "INVALID_ARGUMENT", reply
