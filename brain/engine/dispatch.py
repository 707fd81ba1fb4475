"""Which engine function serves which opcode.

Every data opcode has one planner (a write: changes and answer, planned by
:mod:`brain.engine.planner` around it) or one reader (a read: an answer from a
snapshot). The transaction opcodes are served by the planner and the database.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from brain.engine.recall.handlers import RECALL_READS
from brain.engine.records import forgetting, reviews, schema, statement_reads, statements
from brain.engine.records.entities import ENTITY_READS, ENTITY_WRITES
from brain.engine.records.memories import plan_encode, read_memory_get
from brain.engine.records.relations import RELATION_READS, RELATION_WRITES
from brain.engine.write.plan import Change
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message

__all__ = ["POINT_READS", "READS", "WRITES", "ReadHandler", "WritePlanner"]


# Each planner takes (PlanContext, scope, request) and each reader (ReadContext,
# scope, request) for its own request class, so the request parameter is loose here.
WritePlanner = Callable[..., tuple[list[Change], Message]]
ReadHandler = Callable[..., Message]

WRITES: Final[dict[Opcode, WritePlanner]] = {
    Opcode.ENCODE: plan_encode,
    Opcode.STATEMENT_CREATE: statements.plan_create,
    Opcode.STATEMENT_SUPERSEDE: statements.plan_supersede,
    Opcode.STATEMENT_TOMBSTONE: statements.plan_tombstone,
    Opcode.STATEMENT_RETRACT: statements.plan_retract,
    Opcode.SCHEMA_PUT: schema.plan_schema_put,
    Opcode.FORGET: forgetting.plan_forget,
    Opcode.REVIEW_DECIDE: reviews.plan_review_decide,
    **RELATION_WRITES,
    **ENTITY_WRITES,
}
READS: Final[dict[Opcode, ReadHandler]] = {
    Opcode.MEMORY_GET: read_memory_get,
    Opcode.STATEMENT_GET: statement_reads.read_get,
    Opcode.STATEMENT_HISTORY: statement_reads.read_history,
    Opcode.STATEMENT_LIST: statement_reads.read_list,
    Opcode.SCHEMA_GET: schema.read_schema_get,
    Opcode.REVIEW_LIST: reviews.read_review_list,
    **RELATION_READS,
    **ENTITY_READS,
    **RECALL_READS,
}

POINT_READS: Final = frozenset(
    {Opcode.MEMORY_GET, Opcode.STATEMENT_GET, Opcode.ENTITY_GET, Opcode.RELATION_GET}
)
"""The reads whose work is bounded by a few key lookups, whatever the data: one
record by id, its state row, and what its references answer as (at most
``MAX_MERGE_HOPS`` entity rows per reference). The server answers them on its
event loop (spec/06-operations.md §11); a read that scans (a LIST, a
history, a traverse, a recall) is not one of them."""
