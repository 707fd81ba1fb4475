"""Memories: raw text an agent saw, stored once per space (ENCODE, MEMORY_GET).

A memory row lives under ``scope ‖ memory_id``; ``memory_by_sha`` maps
``scope ‖ text key`` to the first memory with that text, which is how the
same text in the same space is stored once (spec/02-data-model.md §3 ENCODE). The
text key is the SHA-256 of the normalised text (:mod:`brain.engine.store.text_keys`):
texts that differ only in Unicode composition or whitespace are one text, stored
once and forgotten together; the row's ``sha256`` is of the exact bytes it holds.
A new memory's write also links the names its text mentions
(:mod:`brain.engine.records.mentions`), and MEMORY_GET shows them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

import lmdb

from brain import cbor
from brain.embed import DIMENSIONS
from brain.engine.records.audit import audit_entry
from brain.engine.records.mentions import mentions_of, plan_mentions
from brain.engine.store.env import Store
from brain.engine.store.rows import decode_row
from brain.engine.store.scope import Scope
from brain.engine.store.tables import FORGET_LEDGER, MEMORIES, MEMORY_BY_SHA, MEMORY_BY_TEXT
from brain.engine.store.text_keys import exact_digest, ledger_keys, text_key
from brain.engine.write.plan import Change, Put
from brain.engine.write.reads import ReadContext
from brain.engine.write.writer import PlanContext
from brain.errors import Conflict, Forgotten, InvalidArgument, NotFound
from brain.wire.messages.memory_ops import Encode, EncodeOk, MemoryGet, MemoryGetOk
from brain.wire.messages.records import Evidence, Memory

__all__ = ["check_citations", "get_memory", "memory_row", "plan_encode", "read_memory_get"]


def memory_row(
    store: Store, txn: lmdb.Transaction, scope: Scope, memory_id: bytes
) -> dict[str, object] | None:
    """The stored row of a memory of ``scope``, or None."""
    raw = txn.get(scope.key(memory_id), db=store.table(MEMORIES))
    return None if raw is None else decode_row(bytes(raw))


def get_memory(store: Store, txn: lmdb.Transaction, scope: Scope, memory_id: bytes) -> Memory:
    """The memory ``memory_id`` in ``scope``; NotFound otherwise (also for another scope's id)."""
    raw = txn.get(scope.key(memory_id), db=store.table(MEMORIES))
    if raw is None:
        raise NotFound(f"no memory {memory_id.hex()} in space {scope.space!r}", field="id")
    row = decode_row(bytes(raw))
    # Keys are scope-prefixed already; the row's own scope is checked as a second lock.
    if row["namespace"] != scope.namespace or row["space"] != scope.space:
        raise NotFound(f"no memory {memory_id.hex()} in space {scope.space!r}", field="id")
    shown = {"text", "sha256", "occurred_at", "context", "forgotten", "forgotten_at"}
    fields = {k: v for k, v in row.items() if k in shown}
    memory = Memory.from_wire({"id": memory_id, "recorded_at": row["recorded_at"], **fields})
    mentions = mentions_of(store, txn, scope, memory_id)
    return memory if mentions is None else replace(memory, mentions=mentions)


def check_citations(
    store: Store,
    txn: lmdb.Transaction,
    scope: Scope,
    evidence: Iterable[Evidence],
    prefix: str,
) -> None:
    """Each cited memory exists in ``scope``, is not forgotten, and holds the text
    whose hash is cited; errors name ``{prefix}evidence[i]``."""
    for i, cited in enumerate(evidence):
        memory = memory_row(store, txn, scope, cited.memory)
        field = f"{prefix}evidence[{i}]"
        if memory is None:
            raise NotFound(f"no memory {cited.memory.hex()} in this space", field=f"{field}.memory")
        if "forgotten" in memory:
            raise Conflict(
                f"memory {cited.memory.hex()} was forgotten and cannot be cited",
                field=f"{field}.memory",
            )
        if cited.sha256 is not None and memory.get("sha256") != cited.sha256:
            raise InvalidArgument(
                "the cited sha256 does not match the memory's text", field=f"{field}.sha256"
            )


def read_memory_get(ctx: ReadContext, scope: Scope, request: MemoryGet) -> MemoryGetOk:
    """MEMORY_GET."""
    return MemoryGetOk(memory=get_memory(ctx.store, ctx.txn, scope, request.id))


def plan_encode(ctx: PlanContext, scope: Scope, request: Encode) -> tuple[list[Change], EncodeOk]:
    """ENCODE: store the text once per space; a repeat (the same text once normalised)
    names the first memory."""
    store, txn, lsn, now = ctx.store, ctx.txn, ctx.lsn, ctx.record_time
    digest = exact_digest(request.text)
    key = text_key(request.text)
    override: list[Change] = []
    ledger = store.table(FORGET_LEDGER)
    if any(txn.get(scope.key(k), db=ledger) is not None for k in ledger_keys(request.text)):
        if not request.override_forgotten:
            raise Forgotten(
                "this text was hard-forgotten in this space; set override_forgotten to store it "
                "again (the override is audited)",
                field="text",
            )
        override.append(audit_entry(ctx, scope, "override_forgotten", [digest]))
    existing = txn.get(scope.key(key), db=store.table(MEMORY_BY_SHA))
    if existing is not None:
        first = get_memory(store, txn, scope, bytes(existing))
        # The stored memory's own hash: the one a citation of it must give, which
        # differs from the request's when the two texts differ only as normalising
        # forgives.
        answer = EncodeOk(
            memory_id=first.id,
            lsn=lsn,
            recorded_at=first.recorded_at,
            sha256=first.sha256,
            deduplicated=True,
        )
        return [], answer
    memory_id = ctx.ids.new()
    row: dict[str, object] = {
        "namespace": scope.namespace,
        "space": scope.space,
        "text": request.text,
        "sha256": digest,
        "recorded_at": now,
    }
    if request.occurred_at is not None:
        row["occurred_at"] = request.occurred_at
    if request.context is not None:
        row["context"] = request.context
    if request.vector is not None:
        if len(request.vector) != 4 * DIMENSIONS:
            raise InvalidArgument(
                f"vector has {len(request.vector) // 4} values; this server's embeddings have "
                f"{DIMENSIONS}",
                field="vector",
            )
        row["vector"] = request.vector
    changes: list[Change] = [
        Put(MEMORIES, scope.key(memory_id), cbor.encode(row)),
        Put(MEMORY_BY_SHA, scope.key(key), memory_id),
        Put(MEMORY_BY_TEXT, scope.key(key, memory_id), b""),
        *override,
        *plan_mentions(ctx, scope, memory_id, request.text, digest),
    ]
    answer = EncodeOk(
        memory_id=memory_id, lsn=lsn, recorded_at=now, sha256=digest, deduplicated=False
    )
    return changes, answer
