"""What statements and relations share: a content row written once, a state row of stamps.

Both record types live on the two axes of spec/03-time.md §1 the same way. The
content row holds what the client said (and the record time it was learned);
the state row holds what happened to it later, each with its record time:
``superseded_by``, ``record_invalidated_at`` (set once, never cleared),
``tombstoned_at`` and ``tombstone_reason``, and the validity close a
supersession makes (``closed_valid_to`` learned at ``closed_at``, §3). This
module loads such a pair and computes the stamps, so both types follow one
rule.
"""

from __future__ import annotations

from dataclasses import dataclass

import lmdb

from brain.engine.store.env import Store
from brain.engine.store.rows import load_row, opt_int
from brain.engine.store.scope import Scope
from brain.errors import NotFound

__all__ = ["Versioned", "load_versioned", "superseded_state", "tombstoned_state"]


@dataclass(frozen=True, slots=True)
class Versioned:
    """A record's content row and state row, as read in one transaction."""

    id: bytes
    content: dict[str, object]
    state: dict[str, object]

    @property
    def current(self) -> bool:
        """Neither superseded nor tombstoned."""
        return "superseded_by" not in self.state and "tombstoned_at" not in self.state

    @property
    def retracted(self) -> bool:
        """Reduced to a husk."""
        return self.state.get("tombstone_reason") == "retracted"

    def int_field(self, name: str) -> int | None:
        """An integer field of the content row (a time), or None."""
        return opt_int(self.content.get(name))

    def record_axis(self) -> dict[str, object]:
        """The stamps the filter chain judges, as ``RowTimes`` keyword arguments."""
        state = self.state
        return {
            "recorded_at": int(str(self.content["recorded_at"])),
            "valid_from": self.int_field("valid_from"),
            "valid_to": self.int_field("valid_to"),
            "event_at": self.int_field("event_at"),
            "closed_valid_to": opt_int(state.get("closed_valid_to")),
            "closed_at": opt_int(state.get("closed_at")),
            "record_invalidated_at": opt_int(state.get("record_invalidated_at")),
            "tombstoned_at": opt_int(state.get("tombstoned_at")),
            "superseded": "superseded_by" in state,
            "retracted": self.retracted,
        }


def load_versioned(
    store: Store,
    txn: lmdb.Transaction,
    scope: Scope,
    tables: tuple[bytes, bytes],
    record_id: bytes,
    *,
    what: str,
    field: str,
) -> Versioned:
    """The record ``record_id`` of ``scope`` from (content table, state table);
    NOT_FOUND naming ``field`` otherwise."""
    content_table, state_table = tables
    content = load_row(store, txn, content_table, scope.key(record_id))
    # Keys are scope-prefixed already; the row's own scope is checked as a second lock.
    if (
        content is None
        or content.get("namespace") != scope.namespace
        or content.get("space") != scope.space
    ):
        raise NotFound(f"no {what} {record_id.hex()} in space {scope.space!r}", field=field)
    state = load_row(store, txn, state_table, scope.key(record_id)) or {}
    return Versioned(record_id, content, state)


def superseded_state(
    old: Versioned, new_id: bytes, new_valid_from: int | None, record_time: int
) -> dict[str, object]:
    """``old``'s state once ``new_id`` supersedes it at ``record_time``.

    When the old record has no end of validity (and is no event) and the new one
    has a ``valid_from``, the old one is closed there, from this record time on
    (spec/03-time.md §4: a split, never a rewrite). A new version valid from before
    the old one began leaves the old one the empty interval ``[from, from)``,
    never an inverted one.
    """
    state = dict(old.state)
    state["superseded_by"] = new_id
    state.setdefault("record_invalidated_at", record_time)
    if (
        old.int_field("valid_to") is None
        and old.int_field("event_at") is None
        and new_valid_from is not None
    ):
        old_from = old.int_field("valid_from")
        state["closed_valid_to"] = (
            new_valid_from if old_from is None else max(new_valid_from, old_from)
        )
        state["closed_at"] = record_time
    return state


def tombstoned_state(old: Versioned, reason: str, record_time: int) -> dict[str, object]:
    """``old``'s state once tombstoned at ``record_time`` with ``tombstone_reason``."""
    state = dict(old.state)
    state["tombstoned_at"] = record_time
    state["tombstone_reason"] = reason
    state.setdefault("record_invalidated_at", record_time)
    return state
