"""FORGET (spec/02-data-model.md §3): a memory forgotten softly or hard, and what depended on it.

- **soft**: the memory becomes inactive (``forgotten: "soft"``, ``forgotten_at``)
  but its text stays; a statement whose every evidence memory is now forgotten
  is tombstoned with ``tombstone_reason: source_forgotten``.
- **hard**: the text and the vector are removed from the memory row, the
  text key (the SHA-256 of the normalised text, :mod:`brain.engine.store.text_keys`)
  goes into the forget ledger (the hash only), and a statement whose every
  evidence memory is forgotten is retracted to a husk. ENCODE of the same text
  into the same space, or of one that differs only in Unicode composition or
  whitespace, then answers ``FORGOTTEN`` unless it sets ``override_forgotten``
  (which is audited).

Either way the memories' mention rows (:mod:`brain.engine.records.mentions`) are
marked ``record_invalidated_at``; a hard forget also drops the names from them and
takes the memories out of the name index the graph arm reads, with the counts
of its document frequencies (the names are text of the memory).

The audit entry (``forget_soft`` / ``forget_hard``) names the memories in
``records`` and the statements this forget tombstoned or retracted in
``cascaded``, in the order they were reached.

Either way the memory leaves the deduplication index, so encoding its text
again (where allowed) makes a new memory. A soft forget can be followed by a
hard one; a repeat at the same or a weaker strength changes nothing and
answers ``already_forgotten: true``. The index rows derived from the same
write take the text's postings out, and the version row of every word no
other document holds (:func:`brain.engine.index.lexical.settle`), so an export
or a snapshot made afterwards holds none of it. Removing the text from the WAL,
LMDB's pages and the snapshots in the data directory is the purge's job
(spec/06-operations.md §7).
"""

from __future__ import annotations

from typing import Final

from brain import cbor
from brain.engine.records import statements
from brain.engine.records.audit import audit_entry
from brain.engine.records.memories import memory_row
from brain.engine.records.mentions import forget_mentions
from brain.engine.store.scan import scan_keys
from brain.engine.store.scope import Scope
from brain.engine.store.tables import FORGET_LEDGER, MEMORIES, MEMORY_BY_SHA, MEMORY_BY_TEXT
from brain.engine.store.text_keys import text_key
from brain.engine.write.plan import Change, Delete, Put
from brain.engine.write.writer import PlanContext
from brain.errors import NotFound
from brain.wire.messages.memory_ops import Forget, ForgetOk

__all__ = ["plan_forget"]

_STRENGTH: Final = {"soft": 1, "hard": 2}


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


def _same_text(ctx: PlanContext, scope: Scope, key: bytes) -> list[bytes]:
    """Every memory of ``scope`` whose text has this text key (a soft forget lets the
    same text be stored again, so there may be several)."""
    prefix = scope.key(key)
    table = ctx.store.table(MEMORY_BY_TEXT)
    return [found[len(prefix) :] for found in scan_keys(ctx.txn, table, prefix)]


def plan_forget(ctx: PlanContext, scope: Scope, request: Forget) -> tuple[list[Change], ForgetOk]:
    """FORGET. A hard forget is keyed on the text: every memory of the space holding
    the same text loses it, and their dependent statements are retracted."""
    row = memory_row(ctx.store, ctx.txn, scope, request.memory)
    if row is None:
        raise NotFound(f"no memory {request.memory.hex()} in space {scope.space!r}", field="memory")
    before = _STRENGTH.get(str(row.get("forgotten", "")), 0)
    if before >= _STRENGTH[request.mode]:
        answer = ForgetOk(
            memory_id=request.memory, lsn=ctx.lsn, already_forgotten=True, statements_tombstoned=0
        )
        return [], answer
    # Only a hard forget removes the text, and this memory is not hard-forgotten yet.
    text = row["text"]
    assert isinstance(text, str)
    key = text_key(text)
    targets = _targets(ctx, scope, request, row, key)
    changes: list[Change] = []
    # The dedup entry goes when it names a memory this forget changes; one naming a
    # memory it leaves (an older store may hold two whose texts normalise alike) stays.
    named = ctx.txn.get(scope.key(key), db=ctx.store.table(MEMORY_BY_SHA))
    if named is not None and bytes(named) in targets:
        changes.append(Delete(MEMORY_BY_SHA, scope.key(key)))
    if request.mode == "hard":
        changes.append(Put(FORGET_LEDGER, scope.key(key), ctx.record_time.to_bytes(8, "big")))
    changes += _forgotten_rows(ctx, scope, request.mode, targets)
    changes += forget_mentions(ctx, scope, request.mode, targets)
    cascade, cascaded = _cascade(ctx, scope, request.mode, targets)
    changes += cascade
    operation = f"forget_{request.mode}"
    changes.append(audit_entry(ctx, scope, operation, list(targets), cascaded=cascaded))
    answer = ForgetOk(
        memory_id=request.memory,
        lsn=ctx.lsn,
        already_forgotten=False,
        statements_tombstoned=len(cascaded),
    )
    return changes, answer


def _targets(
    ctx: PlanContext, scope: Scope, request: Forget, row: dict[str, object], key: bytes
) -> dict[bytes, dict[str, object]]:
    """The memories this forget changes, by id: the one named and, for a hard forget,
    every other memory of the space with the same text (once normalised) that still
    holds it."""
    targets = {request.memory: row}
    if request.mode == "hard":
        for other in _same_text(ctx, scope, key):
            other_row = memory_row(ctx.store, ctx.txn, scope, other)
            if other_row is not None and other_row.get("forgotten") != "hard":
                targets[other] = other_row
    return targets


def _forgotten_rows(
    ctx: PlanContext, scope: Scope, mode: str, targets: dict[bytes, dict[str, object]]
) -> list[Change]:
    """The memory rows marked forgotten (a hard forget also drops the text, its
    context and its vector and stamps the time anew; a soft one keeps the first
    ``forgotten_at``)."""
    changes: list[Change] = []
    for memory_id, memory in targets.items():
        updated = dict(memory)
        updated["forgotten"] = mode
        updated.setdefault("forgotten_at", ctx.record_time)
        if mode == "hard":
            updated["forgotten_at"] = ctx.record_time
            # The context is the client's words about the text: it goes with it.
            for field in ("text", "context", "vector"):
                updated.pop(field, None)
        changes.append(Put(MEMORIES, scope.key(memory_id), cbor.encode(updated)))
    return changes


def _cascade(
    ctx: PlanContext, scope: Scope, mode: str, targets: dict[bytes, dict[str, object]]
) -> tuple[list[Change], list[bytes]]:
    """What the forget does to the statements citing ``targets``: each whose
    every evidence memory is now forgotten is retracted (hard) or tombstoned (soft,
    unless it already is). The changes, and the statements changed in the order
    they were reached."""
    changes: list[Change] = []
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
            if mode == "hard":
                changes += statements.retract_changes(ctx, scope, statement)
            elif "tombstoned_at" not in statement.state:
                changes += statements.tombstone_changes(ctx, scope, statement, "source_forgotten")
            else:
                continue
            cascaded.append(statement.id)
    return changes, cascaded
