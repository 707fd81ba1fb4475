"""Transactions over the wire against a real server: the writes that change records
already stored (ENTITY_UPDATE, FORGET) join one, the reads and lists carrying its
``txn_id`` see them, RECALL refuses it, and ``kill -9`` before the commit leaves
nothing while after it everything stays (spec/05-durability.md §8)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from brain.client import Client
from brain.errors import InvalidArgument, TxnExpired
from brain.wire.messages.entity_ops import (
    EntityCreate,
    EntityCreateOk,
    EntityGet,
    EntityGetOk,
    EntityList,
    EntityListOk,
    EntityUpdate,
    EntityUpdateOk,
)
from brain.wire.messages.memory_ops import (
    Encode,
    EncodeOk,
    Forget,
    ForgetOk,
    MemoryGet,
    MemoryGetOk,
)
from brain.wire.messages.recall_ops import Recall
from brain.wire.messages.txn_ops import TxnBegin, TxnBegun, TxnCommit, TxnCommitted
from brain.wire.opcodes import Opcode
from tests.integration.conftest import ServerProcess, start_server
from tests.request_ids import fresh_request_id as rid

TEXT = "Ann moved to Lyon in the spring."


def _begin(client: Client) -> bytes:
    answer = client.call(Opcode.TXN_BEGIN, TxnBegin())
    assert isinstance(answer, TxnBegun)
    return answer.txn_id


def _kill(server: ServerProcess) -> None:
    server.process.send_signal(signal.SIGKILL)
    server.process.wait()
    server.stop()


def _name(client: Client, entity_id: bytes, txn: bytes | None = None) -> str:
    answer = client.call(Opcode.ENTITY_GET, EntityGet(id=entity_id, txn_id=txn))
    assert isinstance(answer, EntityGetOk)
    return answer.entity.name


def _listed(client: Client, txn: bytes | None = None) -> list[str]:
    answer = client.call(Opcode.ENTITY_LIST, EntityList(txn_id=txn))
    assert isinstance(answer, EntityListOk)
    return [entity.name for entity in answer.entities]


def _text(client: Client, memory_id: bytes, txn: bytes | None = None) -> str | None:
    answer = client.call(Opcode.MEMORY_GET, MemoryGet(id=memory_id, txn_id=txn))
    assert isinstance(answer, MemoryGetOk)
    return answer.memory.text


def _update_and_forget(client: Client, entity_id: bytes, memory_id: bytes) -> bytes:
    """Open a transaction that renames the entity and hard-forgets the memory; check
    that only the transaction sees either; return its id."""
    txn = _begin(client)
    update = EntityUpdate(request_id=rid(), id=entity_id, name="Anne", txn_id=txn)
    renamed = client.call(Opcode.ENTITY_UPDATE, update)
    assert isinstance(renamed, EntityUpdateOk) and renamed.entity.name == "Anne"
    forget = Forget(request_id=rid(), memory=memory_id, mode="hard", txn_id=txn)
    forgot = client.call(Opcode.FORGET, forget)
    assert isinstance(forgot, ForgetOk) and forgot.lsn == 0 and not forgot.already_forgotten
    assert _name(client, entity_id, txn) == "Anne" and _listed(client, txn) == ["Anne"]
    assert _text(client, memory_id, txn) is None
    assert _name(client, entity_id) == "Ann" and _listed(client) == ["Ann"]
    assert _text(client, memory_id) == TEXT
    return txn


def test_entity_update_and_forget_in_a_transaction_across_kills(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = start_server(data)
    key = server.credentials["api_key"]
    with Client.connect(server.host, server.wire_port, api_key=key) as client:
        made = client.call(Opcode.ENTITY_CREATE, EntityCreate(request_id=rid(), name="Ann"))
        assert isinstance(made, EntityCreateOk)
        stored = client.call(Opcode.ENCODE, Encode(request_id=rid(), text=TEXT))
        assert isinstance(stored, EncodeOk)
        entity_id, memory_id = made.entity_id, stored.memory_id
        txn = _update_and_forget(client, entity_id, memory_id)
        with pytest.raises(InvalidArgument) as refused:
            client.call(Opcode.RECALL, Recall(cue="Lyon", txn_id=txn))
        assert refused.value.field == "txn_id" and "indexes" in refused.value.message
    _kill(server)  # before the commit: nothing of the transaction may exist
    server = start_server(data)
    with Client.connect(server.host, server.wire_port, api_key=key) as client:
        assert _name(client, entity_id) == "Ann" and _text(client, memory_id) == TEXT
        with pytest.raises(TxnExpired):
            client.call(Opcode.TXN_COMMIT, TxnCommit(txn_id=txn))
        txn = _update_and_forget(client, entity_id, memory_id)
        committed = client.call(Opcode.TXN_COMMIT, TxnCommit(txn_id=txn))
        assert isinstance(committed, TxnCommitted) and len(committed.results) == 2
        assert _name(client, entity_id) == "Anne" and _text(client, memory_id) is None
    _kill(server)  # after the commit was acknowledged: all of it must stay
    server = start_server(data)
    try:
        with Client.connect(server.host, server.wire_port, api_key=key) as client:
            assert _name(client, entity_id) == "Anne" and _listed(client) == ["Anne"]
            assert _text(client, memory_id) is None
    finally:
        server.stop()
