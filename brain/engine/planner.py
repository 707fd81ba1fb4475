"""The planning every write shares, and the transaction opcodes built from it.

A write's planner (:data:`brain.engine.dispatch.WRITES`) returns its record
changes and answer; :func:`plan_write` wraps them with the idempotency check and
row, with the index changes derived from them
(:func:`brain.engine.index.derive.index_entries`) and with the change log's
entries (:func:`brain.engine.write.change_log.change_entries`), both read off the
record changes and the state before them: no planner writes an index row or a
log entry itself, so none can forget one. The transaction opcodes
are planned here too, from the same pieces: a buffered write is planned (its
record changes and idempotency rows, :func:`plan_records`) in a nested LMDB
transaction holding the changes its transaction's earlier writes kept, which
is then thrown away; a read in a transaction runs on the same kept changes;
and a commit plans every buffered write again, once each, in order, into one
plan. No request plans a transaction's earlier writes again but the commit,
so a transaction of n writes costs n plannings to buffer and n to commit
(spec/05-durability.md §8).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Protocol

from brain import cbor
from brain.engine.dispatch import READS, WRITES
from brain.engine.index.derive import index_entries
from brain.engine.records.entity_history import history_entries
from brain.engine.store.scope import Scope
from brain.engine.write import budget, idempotency
from brain.engine.write.change_log import change_entries
from brain.engine.write.plan import Change, Plan, apply_changes
from brain.engine.write.reads import ReadContext
from brain.engine.write.transactions import BufferedWrite, IdSource, TxnRegistry, kept_units
from brain.engine.write.writer import Failed, PlanContext, Replay
from brain.errors import BrainError, TxnExpired
from brain.wire.messages.txn_ops import TxnCommit, TxnCommitted
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message

__all__ = [
    "Planned",
    "answer_key",
    "plan_buffered",
    "plan_commit",
    "plan_records",
    "plan_single",
    "plan_write",
    "read_in_txn",
]


class WriteRequest(Protocol):
    """What every write request carries (spec/01-wire.md §4)."""

    request_id: bytes
    space: str | None


def _as_write(request: Message) -> WriteRequest:
    assert hasattr(request, "request_id") and hasattr(request, "space")
    return request


@dataclass(frozen=True, slots=True)
class Planned:
    """A write's own changes: what its planner returned, its idempotency rows, its answer."""

    scope: Scope
    changes: list[Change]
    rows: list[Change]
    payload: bytes


def plan_records(
    ctx: PlanContext, namespace: str, opcode: Opcode, request: Message
) -> Planned | Replay:
    """A write with a ``request_id``, planned with its idempotency check but without
    the index and change-log entries derived from it: the stored answer, or its
    record changes, idempotency rows and answer."""
    write = _as_write(request)
    scope = Scope.of(namespace, write.space)
    digest = idempotency.request_digest(opcode, request)
    stored = idempotency.lookup(ctx.store, ctx.txn, scope, write.request_id, digest)
    if stored is not None:
        return Replay(stored)
    changes, answer = WRITES[opcode](ctx, scope, request)
    # The entity history goes with the record changes, so a transaction's reads see its
    # buffered entities on the record axis too (at record time 0, until the commit).
    changes += history_entries(changes, ctx.record_time)
    payload = cbor.encode(answer.to_wire())
    rows = idempotency.row_changes(scope, write.request_id, digest, payload, ctx.record_time)
    return Planned(scope, changes, rows, payload)


def plan_write(
    ctx: PlanContext, namespace: str, opcode: Opcode, request: Message
) -> tuple[list[Change], bytes] | Replay:
    """Plan one write with its idempotency check: (changes, answer) or the stored answer."""
    if getattr(request, "request_id", None) is None:
        # SCHEMA_PUT: spec/01-wire.md §9 gives it no idempotency key; it is planned as it is.
        scope = Scope.of(namespace, getattr(request, "space", None))
        changes, answer = WRITES[opcode](ctx, scope, request)
        if not changes:
            # A put that changes nothing takes no LSN: its retry must not look like a write.
            return Replay(cbor.encode(answer.to_wire()))
        return changes + index_entries(ctx, scope, changes), cbor.encode(answer.to_wire())
    planned = plan_records(ctx, namespace, opcode, request)
    if isinstance(planned, Replay):
        return planned
    changes = planned.changes
    logged = change_entries(
        ctx.store,
        ctx.txn,
        changes,
        opcode=opcode,
        request=request,
        lsn=ctx.lsn,
        recorded_at=ctx.record_time,
    )
    indexed = index_entries(ctx, planned.scope, changes)
    return changes + indexed + planned.rows + logged, planned.payload


def plan_single(
    ctx: PlanContext, namespace: str, opcode: Opcode, request: Message
) -> Plan | Replay:
    """A write outside any transaction: one plan, one WAL record."""
    planned = plan_write(ctx, namespace, opcode, request)
    if isinstance(planned, Replay):
        return planned
    changes, payload = planned
    return Plan(tuple(changes), (payload,))


def _replay_buffer(
    ctx: PlanContext, namespace: str, writes: list[BufferedWrite]
) -> tuple[list[Change], list[bytes]]:
    """Plan ``writes`` in order inside ``ctx.txn`` (the commit), with the ids each took
    when buffered, applying each so the next sees it."""
    all_changes: list[Change] = []
    answers: list[bytes] = []
    for index, write in enumerate(writes):
        step = replace(ctx, ids=write.ids.replay())
        try:
            planned = plan_write(step, namespace, write.opcode, write.request)
        except BrainError as exc:
            exc.message = f"write {index} of the transaction ({write.opcode.name}): {exc.message}"
            raise
        if isinstance(planned, Replay):
            answers.append(planned.answer)
            continue
        changes, payload = planned
        apply_changes(ctx.store, ctx.txn, changes)
        all_changes.extend(changes)
        answers.append(payload)
    return all_changes, answers


def _apply_kept(ctx: PlanContext, writes: list[BufferedWrite]) -> None:
    """Put the changes ``writes`` kept into ``ctx.txn``, in order: the state they
    leave, as raw puts, with no planner run again."""
    for write in writes:
        apply_changes(ctx.store, ctx.txn, write.kept)


def plan_buffered(
    ctx: PlanContext,
    registry: TxnRegistry,
    namespace: str,
    *,
    txn_id: bytes,
    opcode: Opcode,
    request: Message,
) -> Replay:
    """Plan a write against the state plus its transaction's buffer; buffer it once final.

    Runs on the writer thread, so buffering and commits of one transaction are
    ordered. Nothing is written: in a nested transaction, the changes the
    transaction's earlier writes kept are applied and this write's record
    changes are planned on them, then the nested transaction is aborted. The
    write is staged for the jobs after it in the batch and joins the buffer, with
    the changes it made, only when its batch is final (``after``), so a batch
    planned again after the map grew does not buffer it twice. A write whose
    ``request_id`` is already buffered is a retry: it gets the same answer and
    is not buffered again.
    """
    txn = registry.get(txn_id, namespace, ctx.planning)
    earlier = txn.pending(ctx.planning)
    write = _as_write(request)
    repeat = any(_as_write(w.request).request_id == write.request_id for w in earlier)
    if not repeat:
        registry.check_room(txn, ctx.planning)
    ids = IdSource()
    child = ctx.store.env.begin(write=True, parent=ctx.txn)
    try:
        nested = replace(ctx, txn=child, lsn=0, record_time=0, ids=ids)
        _apply_kept(nested, earlier)
        planned = plan_records(nested, namespace, opcode, request)
    finally:
        child.abort()
    kept: tuple[Change, ...] = ()
    if isinstance(planned, Replay):
        answer = planned.answer
    else:
        answer, kept = planned.payload, (*planned.changes, *planned.rows)
    if repeat:
        return Replay(answer)
    cost = budget.estimate_write(opcode, request) + kept_units(kept)
    buffered = BufferedWrite(opcode, request, ids, kept, cost)
    registry.stage(txn, buffered, ctx.planning)
    return Replay(answer, after=lambda: registry.confirm(txn, buffered))


def read_in_txn(
    ctx: PlanContext,
    registry: TxnRegistry,
    namespace: str,
    *,
    txn_id: bytes,
    opcode: Opcode,
    request: Message,
) -> Replay:
    """A read that sees its transaction's buffered writes: the changes they kept are
    applied in a nested LMDB transaction, the read runs against it, and it is
    thrown away."""
    txn = registry.get(txn_id, namespace, ctx.planning)
    scope = Scope.of(namespace, getattr(request, "space", None))
    child = ctx.store.env.begin(write=True, parent=ctx.txn)
    try:
        _apply_kept(replace(ctx, txn=child), txn.pending(ctx.planning))
        reader = ReadContext(ctx.store, child, ctx.record_time, ctx.resolution)
        answer = READS[opcode](reader, scope, request)
    finally:
        child.abort()
    return Replay(cbor.encode(answer.to_wire()))


def plan_commit(
    ctx: PlanContext, registry: TxnRegistry, namespace: str, request: TxnCommit
) -> Plan | Replay | Failed:
    """TXN_COMMIT: every buffered write again, in order, as one plan and one WAL record.

    The transaction leaves the registry when the batch is final, whether the
    commit succeeded or failed (a failed commit applies nothing and ends it).
    """
    scope = Scope.of(namespace, None)
    digest = idempotency.request_digest(Opcode.TXN_COMMIT, request)
    try:
        txn = registry.get(request.txn_id, namespace, ctx.planning)
    except TxnExpired:
        # A client that lost the answer of a commit that went through asks again:
        # it gets the stored answer, as a repeated write does (spec/01-wire.md §4).
        stored = idempotency.lookup(ctx.store, ctx.txn, scope, _commit_key(request.txn_id), digest)
        if stored is None:
            raise
        return Replay(stored)

    def end() -> None:
        registry.discard(request.txn_id)

    writes = txn.pending(ctx.planning)
    # Ended from here on for the later jobs of this planning, committed or not.
    registry.closing(txn, ctx.planning)
    child = ctx.store.env.begin(write=True, parent=ctx.txn)
    try:
        nested = replace(ctx, txn=child)
        changes, answers = _replay_buffer(nested, namespace, writes)
    except BrainError as exc:
        return Failed(exc, after=end)
    finally:
        child.abort()
    results = tuple(cbor.decode_stored(answer) for answer in answers)
    committed = cbor.encode(TxnCommitted(lsn=ctx.lsn, results=results).to_wire())
    changes += idempotency.row_changes(
        scope, _commit_key(request.txn_id), digest, committed, ctx.record_time
    )
    return Plan(tuple(changes), (*answers, committed), after=end)


def answer_key(namespace: str, opcode: Opcode, request: Message) -> bytes | None:
    """The idempotency table's key for this write's stored answer (a repeat finds it
    there), or None for a write with no idempotency key (SCHEMA_PUT)."""
    if opcode is Opcode.TXN_COMMIT:
        assert isinstance(request, TxnCommit)
        return Scope.of(namespace, None).key(_commit_key(request.txn_id))
    request_id: bytes | None = getattr(request, "request_id", None)
    if request_id is None:
        return None
    return Scope.of(namespace, getattr(request, "space", None)).key(request_id)


def _commit_key(txn_id: bytes) -> bytes:
    """Where a commit's answer is kept in the idempotency table: derived from the
    transaction id, so it can never be taken for a client's own ``request_id``."""
    return hashlib.sha256(b"txn_commit" + txn_id).digest()[:16]
