"""FORGET (SEMANTICS.md §4): a memory forgotten softly or hard, and what depended on it.

- **soft**: the memory becomes inactive (``forgotten: "soft"``, ``forgotten_at``)
  but its text stays; a statement whose every evidence memory is now forgotten
  is tombstoned with ``tombstone_reason: source_forgotten``.
- **hard**: the text and the vector are removed from the memory row, the
  SHA-256 of the text goes into the forget ledger (the hash only), and a
  statement whose every evidence memory is forgotten is retracted to a husk.
  ENCODE of the same text into the same space then answers ``FORGOTTEN``
  unless it sets ``override_forgotten`` (which is audited).

The audit entry (``forget_soft`` / ``forget_hard``) names the memories in
``records`` and the statements this forget tombstoned or retracted in
``cascaded``, in the order they were reached.

Either way the memory leaves the deduplication index, so encoding its text
again (where allowed) makes a new memory. A soft forget can be followed by a
hard one; a repeat at the same or a weaker strength changes nothing and
answers ``already_forgotten: true``. Removing the text from the WAL, the
checkpoints and LMDB's free pages is the purge's job (spec/05-durability.md).
"""

from __future__ import annotations

from typing import Final

from brain import cbor
from brain.engine.index.documents import MEMORY_DOC
from brain.engine.index.upkeep import unindex_document
from brain.engine.records import statements
from brain.engine.records.audit import audit_entry
from brain.engine.records.memories import BY_SHA, BY_TEXT, MEMORIES, memory_row
from brain.engine.store.scope import Scope
from brain.engine.write.plan import Change, Delete, Put
from brain.engine.write.writer import PlanContext
from brain.errors import NotFound
from brain.wire.messages.memory_ops import Forget, ForgetOk

__all__ = ["LEDGER", "is_forgotten_text", "plan_forget"]

LEDGER: Final = b"forget_ledger"
_STRENGTH: Final = {"soft": 1, "hard": 2}


def is_forgotten_text(ctx: PlanContext, scope: Scope, sha256: bytes) -> bool:
    """True when text with this hash was hard-forgotten in ``scope``."""
    return ctx.txn.get(scope.key(sha256), db=ctx.store.table(LEDGER)) is not None


def _all_forgotten(
    ctx: PlanContext, scope: Scope, memory_ids: list[bytes], now_forgotten: set[bytes]
) -> bool:
    for memory_id in memory_ids:
        if memory_id in now_forgotten:
            continue
        row = memory_row(ctx.store, ctx.txn, scope, memory_id)
        if row is None or "forgotten" not in row:
            return False
    return True


def _same_text(ctx: PlanContext, scope: Scope, sha: bytes) -> list[bytes]:
    """Every memory of ``scope`` whose text has this hash (a soft forget lets the same
    text be stored again, so there may be several)."""
    prefix = scope.key(sha)
    cursor = ctx.txn.cursor(db=ctx.store.table(BY_TEXT))
    found: list[bytes] = []
    if cursor.set_range(prefix):
        for key, _ in cursor:
            raw = bytes(key)
            if not raw.startswith(prefix):
                break
            found.append(raw[len(prefix) :])
    return found


def plan_forget(ctx: PlanContext, scope: Scope, request: Forget) -> tuple[list[Change], ForgetOk]:
    """FORGET. A hard forget is keyed on the text: every memory of the space holding
    the same text loses it, and their dependent statements are retracted."""
    row = memory_row(ctx.store, ctx.txn, scope, request.memory)
    if row is None:
        raise NotFound(f"no memory {request.memory.hex()} in space {scope.space!r}", field="memory")
    before = _STRENGTH.get(str(row.get("forgotten", "")), 0)
    wanted = _STRENGTH[request.mode]
    if before >= wanted:
        answer = ForgetOk(
            memory_id=request.memory, lsn=ctx.lsn, already_forgotten=True, statements_tombstoned=0
        )
        return [], answer
    sha = row["sha256"]
    assert isinstance(sha, bytes)
    targets = {request.memory: row}
    if request.mode == "hard":
        for other in _same_text(ctx, scope, sha):
            other_row = memory_row(ctx.store, ctx.txn, scope, other)
            if other_row is not None and other_row.get("forgotten") != "hard":
                targets[other] = other_row
    changes: list[Change] = [Delete(BY_SHA, scope.key(sha))]
    if request.mode == "hard":
        changes.append(Put(LEDGER, scope.key(sha), ctx.record_time.to_bytes(8, "big")))
    for memory_id, memory in targets.items():
        updated = dict(memory)
        updated["forgotten"] = request.mode
        updated.setdefault("forgotten_at", ctx.record_time)
        if request.mode == "hard":
            updated["forgotten_at"] = ctx.record_time
            updated.pop("text", None)
            updated.pop("vector", None)
            changes += unindex_document(ctx, scope, MEMORY_DOC + memory_id)
        changes.append(Put(MEMORIES, scope.key(memory_id), cbor.encode(updated)))
    cascaded: list[bytes] = []
    done: set[bytes] = set()
    forgotten_now = set(targets)
    for memory_id in targets:
        for statement in statements.citing(ctx, scope, memory_id):
            if statement.id in done or statement.retracted:
                continue
            if not _all_forgotten(ctx, scope, statements.evidence_of(statement), forgotten_now):
                continue
            done.add(statement.id)
            if request.mode == "hard":
                changes += statements.retract_changes(ctx, scope, statement)
            elif "tombstoned_at" not in statement.state:
                changes += statements.tombstone_changes(ctx, scope, statement, "source_forgotten")
            else:
                continue
            cascaded.append(statement.id)
    operation = f"forget_{request.mode}"
    changes.append(audit_entry(ctx, scope, operation, list(targets), cascaded=cascaded))
    answer = ForgetOk(
        memory_id=request.memory,
        lsn=ctx.lsn,
        already_forgotten=False,
        statements_tombstoned=len(cascaded),
    )
    return changes, answer
