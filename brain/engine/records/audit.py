"""The audit log (spec/02-data-model.md §9): an append-only entry for every forget,
tombstone, retract, merge, unmerge, review decision and extraction.

An entry records who (the key id of the request), what (the operation and the
record ids), when (its record time) and why (the reason given, if any). An
entry whose operation reached further records than it names (a forget that
tombstones or retracts the statements citing the memory) lists those in
``cascaded``; an extraction adds its own fields (``details``: input hash,
extractor, outputs as hashes, cost), never a name's text, so a later hard forget
leaves no text in the log. Its
key is ``scope ‖ recorded_at ‖ lsn ‖ entry id``: scoped like every key, and in
time order within the scope. Entries are never changed or removed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from brain import cbor
from brain.engine.store.env import Store
from brain.engine.store.scan import scan
from brain.engine.store.scope import Scope, namespace_id
from brain.engine.store.tables import AUDIT
from brain.engine.write.plan import Change, Put
from brain.engine.write.writer import PlanContext
from brain.errors import Internal

__all__ = ["DEFAULT_AUDIT_LIMIT", "MAX_AUDIT_LIMIT", "audit_entry", "read_audit"]

DEFAULT_AUDIT_LIMIT: Final = 100
"""Entries the admin route answers when it names no limit."""

MAX_AUDIT_LIMIT: Final = 10_000
"""Most entries one call answers; the log itself is never truncated."""


def audit_entry(
    ctx: PlanContext,
    scope: Scope,
    operation: str,
    records: list[bytes],
    *,
    reason: str | None = None,
    cascaded: list[bytes] | None = None,
    details: Mapping[str, object] | None = None,
) -> Change:
    """One audit entry for a write planned in ``ctx``; ``cascaded`` names the records
    the operation changed as a consequence (kept only when there are some);
    ``details`` are the operation's own fields (an extraction's input, extractor,
    outputs and cost), which never replace the fields every entry has."""
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
    if cascaded:
        entry["cascaded"] = cascaded
    for field, value in (details or {}).items():
        if field in entry:
            # A planner passing one is a bug: the common fields are what the log is read by.
            raise Internal(f"an audit entry's details cannot replace its {field!r}")
        entry[field] = value
    # A fresh id ends the key: the writes of one transaction share a record time and
    # an LSN, and each of their entries must stand.
    key = scope.key(ctx.record_time.to_bytes(8, "big"), ctx.lsn.to_bytes(8, "big"), ctx.ids.new())
    return Put(AUDIT, key, cbor.encode(entry))


def read_audit(store: Store, namespace: str, limit: int) -> list[dict[str, object]]:
    """The newest ``limit`` entries of every space of ``namespace``, newest first."""
    prefix = namespace_id(namespace)
    entries: list[dict[str, object]] = []
    with store.read() as txn:
        for _, value in scan(txn, store.table(AUDIT), prefix):
            entry = cbor.decode_stored(value)
            assert isinstance(entry, dict)
            entries.append({str(k): v for k, v in entry.items()})
    # Keys are ordered by space first; the answer is ordered by time across spaces.
    entries.sort(key=lambda e: (int(str(e["recorded_at"])), int(str(e["lsn"]))), reverse=True)
    return entries[:limit]
