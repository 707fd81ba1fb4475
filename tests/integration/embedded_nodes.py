"""What the tests of embedded cluster nodes share: a node's options on a shard of the
test cluster, and a memory written through a node with a numbered request id."""

from __future__ import annotations

from brain.engine.database import Database, DatabaseOptions
from brain.engine.replication import JetStreamLogOptions
from brain.wire.messages.memory_ops import Encode, EncodeOk
from brain.wire.opcodes import Opcode
from tests.request_ids import request_id as rid

__all__ = ["encode", "node_options"]


def node_options(servers: tuple[str, ...], shard: str, node: str, term_s: float) -> DatabaseOptions:
    """Options of node ``node`` of ``shard`` on the cluster ``servers``, with the hashing
    embedder and a planner lease of ``term_s`` seconds."""
    return DatabaseOptions(
        embedder="hashing",
        jetstream=JetStreamLogOptions(servers, shard=shard, node=node, lease_term_s=term_s),
    )


def encode(db: Database, n: int, text: str) -> EncodeOk:
    """ENCODE ``text`` in the default namespace with request id ``n``."""
    answer = db.execute("default", Opcode.ENCODE, Encode(request_id=rid(n), text=text))
    assert isinstance(answer, EncodeOk)
    return answer
