"""The audit log (SEMANTICS.md §4): an append-only entry for every forget,
tombstone, retract, merge, unmerge and review decision.

An entry records who (the key id of the request), what (the operation and the
record ids), when (its record time) and why (the reason given, if any). Its
key is ``scope ‖ recorded_at ‖ lsn ‖ sequence``: scoped like every key, and in
time order within the scope. Entries are never changed or removed.
"""

from __future__ import annotations

from typing import Final

from brain.engine.plan import Change, Put
from brain.engine.scope import Scope
from brain.engine.writer import PlanContext
from brain.wire import cbor

__all__ = ["AUDIT", "audit_entry"]

AUDIT: Final = b"audit"


def audit_entry(
    ctx: PlanContext,
    scope: Scope,
    operation: str,
    records: list[bytes],
    *,
    reason: str | None = None,
    sequence: int = 0,
) -> Change:
    """One audit entry for a write planned in ``ctx``."""
    entry: dict[str, object] = {
        "namespace": scope.namespace,
        "space": scope.space,
        "key_id": ctx.actor,
        "operation": operation,
        "records": records,
        "recorded_at": ctx.record_time,
        "lsn": ctx.lsn,
    }
    if reason is not None:
        entry["reason"] = reason
    key = scope.key(
        ctx.record_time.to_bytes(8, "big"), ctx.lsn.to_bytes(8, "big"), sequence.to_bytes(2, "big")
    )
    return Put(AUDIT, key, cbor.encode(entry))
