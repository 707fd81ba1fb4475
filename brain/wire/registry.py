"""Which message classes travel with which opcode.

:data:`MESSAGES` maps every request opcode of spec/01-wire.md §6 to its request class
and its response class. The session decodes requests with it; clients decode
responses with it; golden vectors and the protocol schema are generated from it.
SUBSCRIBE's response class is the class of each frame of its open answer stream;
:data:`STREAM_ENDS` names the class of the frame that ends such a stream
(flagged EOS) when it is cancelled.
"""

from __future__ import annotations

from typing import Final

from brain.wire.messages import (
    control,
    entity_ops,
    memory_ops,
    recall_ops,
    relation_ops,
    review_ops,
    schema_ops,
    statement_ops,
    subscribe_ops,
    txn_ops,
)
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message

__all__ = ["MESSAGES", "STREAM_ENDS", "answer_class", "request_class", "response_class"]

MESSAGES: Final[dict[Opcode, tuple[type[Message], type[Message]]]] = {
    Opcode.HELLO: (control.Hello, control.Welcome),
    Opcode.AUTH: (control.AuthRequest, control.AuthOk),
    Opcode.PING: (control.Ping, control.Pong),
    Opcode.BYE: (control.Bye, control.ByeOk),
    Opcode.CANCEL_STREAM: (control.CancelStream, control.CancelStreamOk),
    Opcode.ENCODE: (memory_ops.Encode, memory_ops.EncodeOk),
    Opcode.RECALL: (recall_ops.Recall, recall_ops.RecallOk),
    Opcode.FORGET: (memory_ops.Forget, memory_ops.ForgetOk),
    Opcode.MEMORY_GET: (memory_ops.MemoryGet, memory_ops.MemoryGetOk),
    Opcode.SUBSCRIBE: (subscribe_ops.Subscribe, subscribe_ops.ChangeEvent),
    Opcode.UNSUBSCRIBE: (subscribe_ops.Unsubscribe, control.CancelStreamOk),
    Opcode.TXN_BEGIN: (txn_ops.TxnBegin, txn_ops.TxnBegun),
    Opcode.TXN_COMMIT: (txn_ops.TxnCommit, txn_ops.TxnCommitted),
    Opcode.TXN_ABORT: (txn_ops.TxnAbort, txn_ops.TxnAborted),
    Opcode.SCHEMA_PUT: (schema_ops.SchemaPut, schema_ops.SchemaPutOk),
    Opcode.SCHEMA_GET: (schema_ops.SchemaGet, schema_ops.Schema),
    Opcode.ENTITY_CREATE: (entity_ops.EntityCreate, entity_ops.EntityCreateOk),
    Opcode.ENTITY_GET: (entity_ops.EntityGet, entity_ops.EntityGetOk),
    Opcode.ENTITY_UPDATE: (entity_ops.EntityUpdate, entity_ops.EntityUpdateOk),
    Opcode.ENTITY_MERGE: (entity_ops.EntityMerge, entity_ops.EntityMergeOk),
    Opcode.ENTITY_UNMERGE: (entity_ops.EntityUnmerge, entity_ops.EntityUnmergeOk),
    Opcode.ENTITY_RESOLVE: (entity_ops.EntityResolve, entity_ops.EntityResolveOk),
    Opcode.ENTITY_LIST: (entity_ops.EntityList, entity_ops.EntityListOk),
    Opcode.ENTITY_TOMBSTONE: (entity_ops.EntityTombstone, entity_ops.EntityTombstoneOk),
    Opcode.ENTITY_HISTORY: (entity_ops.EntityHistory, entity_ops.EntityHistoryOk),
    Opcode.STATEMENT_CREATE: (statement_ops.StatementCreate, statement_ops.StatementCreateOk),
    Opcode.STATEMENT_GET: (statement_ops.StatementGet, statement_ops.StatementGetOk),
    Opcode.STATEMENT_SUPERSEDE: (
        statement_ops.StatementSupersede,
        statement_ops.StatementSupersedeOk,
    ),
    Opcode.STATEMENT_TOMBSTONE: (
        statement_ops.StatementTombstone,
        statement_ops.StatementTombstoned,
    ),
    Opcode.STATEMENT_RETRACT: (statement_ops.StatementRetract, statement_ops.StatementRetracted),
    Opcode.STATEMENT_HISTORY: (statement_ops.StatementHistory, statement_ops.StatementHistoryOk),
    Opcode.STATEMENT_LIST: (statement_ops.StatementList, statement_ops.StatementListOk),
    Opcode.RELATION_CREATE: (relation_ops.RelationCreate, relation_ops.RelationCreateOk),
    Opcode.RELATION_GET: (relation_ops.RelationGet, relation_ops.RelationGetOk),
    Opcode.RELATION_SUPERSEDE: (relation_ops.RelationSupersede, relation_ops.RelationSupersedeOk),
    Opcode.RELATION_TOMBSTONE: (relation_ops.RelationTombstone, relation_ops.RelationTombstoned),
    Opcode.RELATION_LIST: (relation_ops.RelationList, relation_ops.RelationListOk),
    Opcode.RELATION_TRAVERSE: (relation_ops.RelationTraverse, relation_ops.RelationTraverseOk),
    Opcode.EXPLAIN: (recall_ops.ExplainRequest, recall_ops.ExplainOk),
    Opcode.REVIEW_LIST: (review_ops.ReviewList, review_ops.ReviewListOk),
    Opcode.REVIEW_DECIDE: (review_ops.ReviewDecide, review_ops.ReviewDecided),
}


STREAM_ENDS: Final[dict[Opcode, type[Message]]] = {
    Opcode.SUBSCRIBE: subscribe_ops.SubscriptionEnded,
}
"""The message of the EOS frame that ends an open answer stream."""


def answer_class(opcode: Opcode, eos: bool) -> type[Message]:
    """The class of an answer frame of ``opcode``: a stream's last frame is its end."""
    if eos and opcode in STREAM_ENDS:
        return STREAM_ENDS[opcode]
    return MESSAGES[opcode][1]


def request_class(opcode: Opcode) -> type[Message]:
    """The request message class of ``opcode``."""
    return MESSAGES[opcode][0]


def response_class(opcode: Opcode) -> type[Message]:
    """The response message class of ``opcode``."""
    return MESSAGES[opcode][1]
