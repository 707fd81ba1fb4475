"""Statements: claims on two time axes, corrected by supersession, never edited.

Storage, every key scope-prefixed:

- ``statements``: ``id`` → the content row, written once (a retraction
  replaces it with a husk: ids, chain links and record times only);
- ``statement_state``: ``id`` → what happened to it later, each a stamp with
  its record time: ``superseded_by``, ``record_invalidated_at``,
  ``tombstoned_at`` and ``tombstone_reason``, and the validity close a
  supersession makes (``closed_valid_to`` learned at ``closed_at``);
- ``statement_by_subject``: ``subject key ‖ predicate hash ‖ recorded_at ‖ id``;
- ``statement_by_subject_time``: ``subject key ‖ recorded_at ‖ id``, the same key
  without the predicate hash (:mod:`brain.engine.store.statement_keys`), written and
  deleted with it;
- ``statement_by_time``: ``recorded_at ‖ id`` (LIST order and paging);
- ``statement_current``: ``subject key ‖ predicate hash ‖ id`` for the
  statements neither superseded nor tombstoned;
- ``statement_chain``: ``chain_root ‖ version`` → ``id`` (HISTORY): the chain
  position the content row gives, unless a decided contradiction joined the
  statement to another chain later, which its state row records
  (:func:`chained_row`);
- ``statement_by_object``: ``entity id ‖ id`` for an object ``{"entity": id}``
  (the graph arm walks from an entity to the statements naming it);
- not the retrieval indexes: they follow from these rows
  (:mod:`brain.engine.index.derive`), a statement indexed when written and
  leaving the indexes when retracted.

A supersession never rewrites the old statement's validity: it stamps the
close and when it was learned, and every answer shows the validity believed
at the query's ``as_of`` (spec/03-time.md §4).
"""

from __future__ import annotations

import hashlib

import lmdb

from brain import cbor
from brain.engine.records.audit import audit_entry
from brain.engine.records.filters import RowTimes, validity_at
from brain.engine.records.memories import check_citations
from brain.engine.records.refs import (
    ENTITY_TAG,
    AnswersAs,
    answers_as,
    keys_answering_as,
    ref_of_key,
    resolve_for_write,
)
from brain.engine.records.review_queue import queue_review
from brain.engine.records.schema import load_schema
from brain.engine.records.versioned import (
    Versioned,
    load_versioned,
    superseded_state,
    tombstoned_state,
)
from brain.engine.store.env import Store
from brain.engine.store.scan import scan_keys
from brain.engine.store.scope import Scope
from brain.engine.store.statement_keys import PREDICATE_HASH_BYTES, subject_time_key
from brain.engine.store.tables import (
    ENTITIES,
    MEMORIES,
    STATEMENT_BY_EVIDENCE,
    STATEMENT_BY_OBJECT,
    STATEMENT_BY_SUBJECT,
    STATEMENT_BY_SUBJECT_TIME,
    STATEMENT_BY_TIME,
    STATEMENT_CHAIN,
    STATEMENT_CURRENT,
    STATEMENT_STATE,
    STATEMENTS,
)
from brain.engine.write.plan import Change, Delete, Put
from brain.engine.write.writer import PlanContext
from brain.errors import Conflict, InvalidArgument, NotFound
from brain.wire.messages.records import Statement
from brain.wire.messages.statement_ops import (
    StatementCreate,
    StatementCreateOk,
    StatementDraft,
    StatementRetract,
    StatementRetracted,
    StatementSupersede,
    StatementSupersedeOk,
    StatementTombstone,
    StatementTombstoned,
)
from brain.wire.messages.values import EntityValue, MemoryValue, StatementValue

__all__ = [
    "chain_of",
    "chained_row",
    "get_loaded",
    "index_rows",
    "plan_create",
    "plan_retract",
    "plan_supersede",
    "plan_tombstone",
    "predicate_hash",
    "rechain_changes",
    "shown_object",
    "statement_times",
    "to_message",
]


def predicate_hash(predicate: str) -> bytes:
    """The hash of ``predicate`` that index keys carry."""
    return hashlib.sha256(predicate.encode("utf-8")).digest()[:PREDICATE_HASH_BYTES]


def _u64(value: int) -> bytes:
    return value.to_bytes(8, "big")


_CHAIN_STAMPS = ("chain_root", "version", "supersedes")
"""The chain position a state row may record: a contradiction decided ``supersede``
joins its newest statement, written as version 1 of its own chain, to the chain of
the statement it supersedes, later than the content row was written."""


def chained_row(content: dict[str, object], state: dict[str, object]) -> dict[str, object]:
    """``content`` with the chain position ``state`` records, where it records one: the
    row whose ``chain_root`` and ``version`` place the statement in ``statement_chain``."""
    moved = {key: state[key] for key in _CHAIN_STAMPS if key in state}
    return {**content, **moved} if moved else content


def chain_of(loaded: Versioned) -> tuple[bytes, int]:
    """The chain ``loaded`` belongs to now and its version in it."""
    row = chained_row(loaded.content, loaded.state)
    root, version = row["chain_root"], row["version"]
    assert isinstance(root, bytes) and isinstance(version, int)
    return root, version


def statement_times(loaded: Versioned) -> RowTimes:
    """What the filter chain judges a statement by."""
    c = loaded.content
    confidence = c.get("confidence")
    return RowTimes(
        kind=str(c["kind"]) if "kind" in c else None,
        predicate=str(c["predicate"]) if "predicate" in c else None,
        confidence=float(confidence) if isinstance(confidence, int | float) else None,
        **loaded.record_axis(),  # type: ignore[arg-type]
    )


def get_loaded(
    store: Store, txn: lmdb.Transaction, scope: Scope, statement_id: bytes, field: str
) -> Versioned:
    """The statement ``statement_id`` of ``scope``; NOT_FOUND otherwise."""
    return load_versioned(
        store,
        txn,
        scope,
        (STATEMENTS, STATEMENT_STATE),
        statement_id,
        what="statement",
        field=field,
    )


def to_message(
    loaded: Versioned,
    scope: Scope,
    believed_at: int | None,
    store: Store | None = None,
    txn: lmdb.Transaction | None = None,
    *,
    answers: AnswersAs | None = None,
) -> Statement:
    """The statement as an answer shows it, with the validity believed at ``believed_at``;
    its subject and object shown as what they answer as when ``answers`` (the read's
    own, so a subject many rows share is worked out once) or ``store`` and ``txn`` are
    given, as stored otherwise."""
    c, s = loaded.content, loaded.state
    root, version = chain_of(loaded)
    wire: dict[str, object] = {
        "id": loaded.id,
        "space": scope.space,
        "recorded_at": c["recorded_at"],
        "version": version,
        "chain_root": root,
    }
    for key in ("supersedes",):
        if key in c:
            wire[key] = c[key]
        elif key in s:
            wire[key] = s[key]
    for key in ("superseded_by", "record_invalidated_at", "tombstoned_at", "tombstone_reason"):
        if key in s:
            wire[key] = s[key]
    if loaded.retracted:
        return Statement.from_wire(wire)
    for key in ("kind", "predicate", "object", "confidence", "evidence", "source", "event_at"):
        if key in c:
            wire[key] = c[key]
    subject = c["subject"]
    assert isinstance(subject, bytes)
    if answers is None and store is not None and txn is not None:
        answers = AnswersAs(store, txn, scope)
    if answers is not None:
        # The statements of a merged entity answer as the kept one's, those of a
        # decided name as the chosen entity's (spec/02-data-model.md §4); so do object values.
        subject = answers(subject)
        wire["object"] = _shown_as(answers, c["object"])
    wire["subject"] = ref_of_key(subject).to_wire()
    start, end = validity_at(statement_times(loaded), believed_at)
    if start is not None:
        wire["valid_from"] = start
    if end is not None:
        wire["valid_to"] = end
    return Statement.from_wire(wire)


# --- writes -------------------------------------------------------------------------------


def _check_references(ctx: PlanContext, scope: Scope, draft: StatementDraft, prefix: str) -> None:
    store, txn = ctx.store, ctx.txn
    target = draft.object_
    checks = (
        (EntityValue, ENTITIES, "entity"),
        (MemoryValue, MEMORIES, "memory"),
        (StatementValue, STATEMENTS, "statement"),
    )
    for cls, table, attr in checks:
        if isinstance(target, cls):
            rid = getattr(target, attr)
            if txn.get(scope.key(rid), db=store.table(table)) is None:
                raise NotFound(
                    f"no {attr} {rid.hex()} in this space", field=f"{prefix}object.{attr}"
                )
    check_citations(store, txn, scope, draft.evidence or (), prefix)


def _content(
    ctx: PlanContext,
    scope: Scope,
    draft: StatementDraft,
    *,
    subject: bytes,
    version: int,
    chain_root: bytes,
    supersedes: bytes | None,
) -> dict[str, object]:
    row: dict[str, object] = {
        "namespace": scope.namespace,
        "space": scope.space,
        "kind": draft.kind,
        "subject": subject,
        "predicate": draft.predicate,
        "object": draft.object_.to_wire(),
        "confidence": 1.0 if draft.confidence is None else draft.confidence,
        "evidence": [e.to_wire() for e in draft.evidence or ()],
        "recorded_at": ctx.record_time,
        "version": version,
        "chain_root": chain_root,
    }
    for key in ("source", "valid_from", "valid_to", "event_at"):
        value = getattr(draft, key)
        if value is not None:
            row[key] = value
    if supersedes is not None:
        row["supersedes"] = supersedes
    return row


def _insert(scope: Scope, statement_id: bytes, row: dict[str, object]) -> list[Change]:
    """The rows and index entries of a new statement."""
    changes: list[Change] = [Put(STATEMENTS, scope.key(statement_id), cbor.encode(row))]
    return changes + index_rows(scope, statement_id, row, current=True)


def index_rows(
    scope: Scope, statement_id: bytes, row: dict[str, object], *, current: bool
) -> list[Change]:
    """The index entries a statement whose content row is ``row`` has while it stands:
    those of a new statement, less ``statement_current`` when it is no longer
    ``current``, and only the record-order and chain entries for a retracted husk
    (:func:`retract_changes` deletes the rest). A new statement's write puts them, and
    an import rebuilds them from an export's records (:mod:`brain.engine.admin.jsonl_rebuild`)."""
    recorded, version, root = row["recorded_at"], row["version"], row["chain_root"]
    assert isinstance(recorded, int) and isinstance(version, int) and isinstance(root, bytes)
    by_time = Put(STATEMENT_BY_TIME, scope.key(_u64(recorded), statement_id), b"")
    chain = Put(STATEMENT_CHAIN, scope.key(root, _u64(version)), statement_id)
    if "subject" not in row:
        return [by_time, chain]
    subject, predicate = row["subject"], row["predicate"]
    assert isinstance(subject, bytes) and isinstance(predicate, str)
    ph = predicate_hash(predicate)
    by_subject = scope.key(subject, ph, _u64(recorded), statement_id)
    changes: list[Change] = [
        Put(STATEMENT_BY_SUBJECT, by_subject, b""),
        Put(STATEMENT_BY_SUBJECT_TIME, subject_time_key(by_subject), b""),
        by_time,
    ]
    if current:
        changes.append(Put(STATEMENT_CURRENT, scope.key(subject, ph, statement_id), b""))
    changes.append(chain)
    changes += [
        Put(STATEMENT_BY_EVIDENCE, scope.key(memory_id, statement_id), b"")
        for memory_id in _evidence_ids(row)
    ]
    target = _object_entity(row)
    if target is not None:
        changes.append(Put(STATEMENT_BY_OBJECT, scope.key(target, statement_id), b""))
    return changes


def shown_object(store: Store, txn: lmdb.Transaction, scope: Scope, value: object) -> object:
    """A stored object value as answers show it: ``{"entity": id}`` of a merged-away
    entity as the end of its merge chain, anything else as stored."""
    return _shown_as(AnswersAs(store, txn, scope), value)


def _shown_as(answers: AnswersAs, value: object) -> object:
    """:func:`shown_object` with a read's own :class:`AnswersAs`."""
    target = value.get("entity") if isinstance(value, dict) else None
    if not isinstance(target, bytes):
        return value
    return {"entity": answers(ENTITY_TAG + target)[1:]}


def _object_entity(row: dict[str, object]) -> bytes | None:
    """The entity a statement's object names, if it names one."""
    value = row.get("object")
    target = value.get("entity") if isinstance(value, dict) else None
    return target if isinstance(target, bytes) else None


def _evidence_ids(row: dict[str, object]) -> list[bytes]:
    cited = row.get("evidence")
    if not isinstance(cited, list):
        return []
    return [
        e["memory"] for e in cited if isinstance(e, dict) and isinstance(e.get("memory"), bytes)
    ]


def _no_longer_current(scope: Scope, loaded: Versioned) -> Delete:
    subject, predicate = loaded.content["subject"], loaded.content["predicate"]
    assert isinstance(subject, bytes) and isinstance(predicate, str)
    return Delete(STATEMENT_CURRENT, scope.key(subject, predicate_hash(predicate), loaded.id))


def _put_state(scope: Scope, statement_id: bytes, state: dict[str, object]) -> Put:
    return Put(STATEMENT_STATE, scope.key(statement_id), cbor.encode(state))


def superseded_changes(
    ctx: PlanContext, scope: Scope, old: Versioned, new_id: bytes, new_valid_from: int | None
) -> list[Change]:
    """Stamp ``old`` as superseded by ``new_id`` now, with the validity split of §3."""
    state = superseded_state(old, new_id, new_valid_from, ctx.record_time)
    return [_put_state(scope, old.id, state), _no_longer_current(scope, old)]


def rechain_changes(scope: Scope, newest: Versioned, older: Versioned) -> list[Change]:
    """Join ``newest``, alone in the chain it was created as, to ``older``'s chain as
    the version after it, ``supersedes`` it: stamps in ``newest``'s state row (its
    content row is written once) and its ``statement_chain`` entry moved. ``older``
    is current, so that version is free."""
    own_root, own_version = chain_of(newest)
    root, version = chain_of(older)
    state = {**newest.state, "chain_root": root, "version": version + 1, "supersedes": older.id}
    return [
        _put_state(scope, newest.id, state),
        Delete(STATEMENT_CHAIN, scope.key(own_root, _u64(own_version))),
        Put(STATEMENT_CHAIN, scope.key(root, _u64(version + 1)), newest.id),
    ]


def tombstone_changes(
    ctx: PlanContext, scope: Scope, loaded: Versioned, reason: str
) -> list[Change]:
    """Stamp ``loaded`` tombstoned now with ``tombstone_reason`` ``reason``."""
    state = tombstoned_state(loaded, reason, ctx.record_time)
    return [_put_state(scope, loaded.id, state), _no_longer_current(scope, loaded)]


def _canonical_subject(ctx: PlanContext, scope: Scope, subject: object) -> bytes:
    assert isinstance(subject, bytes)
    return answers_as(ctx.store, ctx.txn, scope, subject)


def _shown(ctx: PlanContext, scope: Scope, value: object) -> object:
    return shown_object(ctx.store, ctx.txn, scope, value)


def current_ids(ctx: PlanContext, scope: Scope, subject: bytes, predicate: str) -> list[bytes]:
    """The current statements of ``subject`` and ``predicate`` (including those stored
    under every key that answers as what ``subject`` answers as), oldest id first per
    subject key."""
    answered = answers_as(ctx.store, ctx.txn, scope, subject)
    subjects = keys_answering_as(ctx.store, ctx.txn, scope, answered)
    table = ctx.store.table(STATEMENT_CURRENT)
    found: list[bytes] = []
    for each in subjects:
        prefix = scope.key(each, predicate_hash(predicate))
        found += [key[len(prefix) :] for key in scan_keys(ctx.txn, table, prefix)]
    return found


def load(ctx: PlanContext, scope: Scope, statement_id: bytes, field: str = "id") -> Versioned:
    """A statement of ``scope`` for a planner; NotFound otherwise."""
    return get_loaded(ctx.store, ctx.txn, scope, statement_id, field)


def plan_create(
    ctx: PlanContext, scope: Scope, request: StatementCreate
) -> tuple[list[Change], StatementCreateOk]:
    """STATEMENT_CREATE, with the schema's rules for the predicate.

    A stateful predicate supersedes the subject's current value(s) and the new
    statement continues that chain. A predicate declared ``kind: fact`` and not
    stateful keeps both and queues a ``contradiction`` review item when a
    current statement of the same subject says something else. Any other
    predicate reads none of the subject's statements, so its cost does not grow
    with how many it has.
    """
    _check_references(ctx, scope, request, "")
    subject, changes = resolve_for_write(ctx, scope, request.subject, "subject")
    statement_id = ctx.ids.new()
    schema = load_schema(ctx.store, ctx.txn, scope)
    stateful = schema.is_stateful(request.predicate)
    decl = schema.predicate(request.predicate)
    declared_fact = decl is not None and decl.get("kind") == "fact"
    current = (
        [
            c
            for c in (
                load(ctx, scope, i) for i in current_ids(ctx, scope, subject, request.predicate)
            )
            if c.content.get("predicate") == request.predicate
        ]
        if stateful or declared_fact
        else []
    )
    version, root, supersedes = 1, statement_id, None
    if stateful and current:
        latest = max(current, key=lambda c: int(str(c.content["recorded_at"])))
        root, last_version = chain_of(latest)
        version, supersedes = last_version + 1, latest.id
        for old in current:
            changes += superseded_changes(ctx, scope, old, statement_id, request.valid_from)
    elif declared_fact and current:
        # Objects compare as answers show them: an entity and one merged into it agree.
        said = _shown(ctx, scope, request.object_.to_wire())
        differing = [c.id for c in current if _shown(ctx, scope, c.content.get("object")) != said]
        if differing:
            _, queued = queue_review(ctx, scope, "contradiction", [*differing, statement_id])
            changes += queued
    row = _content(
        ctx,
        scope,
        request,
        subject=subject,
        version=version,
        chain_root=root,
        supersedes=supersedes,
    )
    changes += _insert(scope, statement_id, row)
    answer = StatementCreateOk(
        statement_id=statement_id,
        lsn=ctx.lsn,
        recorded_at=ctx.record_time,
        version=version,
        chain_root=root,
        superseded=supersedes,
    )
    return changes, answer


def plan_supersede(
    ctx: PlanContext, scope: Scope, request: StatementSupersede
) -> tuple[list[Change], StatementSupersedeOk]:
    """STATEMENT_SUPERSEDE: a new version; the old one is invalidated, never edited."""
    old = get_loaded(ctx.store, ctx.txn, scope, request.old, "old")
    if not old.current:
        why = (
            "retracted"
            if old.retracted
            else ("tombstoned" if "tombstoned_at" in old.state else "already superseded")
        )
        raise Conflict(
            f"statement {request.old.hex()} is {why}; only a current one can be superseded",
            field="old",
        )
    draft = request.new
    _check_references(ctx, scope, draft, "new.")
    subject, changes = resolve_for_write(ctx, scope, draft.subject, "new.subject")
    same = _canonical_subject(ctx, scope, subject) == _canonical_subject(
        ctx, scope, old.content["subject"]
    )
    if not same:
        raise InvalidArgument("a new version must have the same subject", field="new.subject")
    statement_id = ctx.ids.new()
    root, old_version = chain_of(old)
    version = old_version + 1
    row = _content(
        ctx, scope, draft, subject=subject, version=version, chain_root=root, supersedes=old.id
    )
    changes += _insert(scope, statement_id, row)
    changes += superseded_changes(ctx, scope, old, statement_id, draft.valid_from)
    if load_schema(ctx.store, ctx.txn, scope).is_stateful(draft.predicate):
        # The new version may switch to a stateful predicate the subject already holds:
        # it becomes that predicate's one current value (spec/03-time.md §4).
        for other_id in current_ids(ctx, scope, subject, draft.predicate):
            other = load(ctx, scope, other_id)
            if other.id != old.id and other.content.get("predicate") == draft.predicate:
                changes += superseded_changes(ctx, scope, other, statement_id, draft.valid_from)
    answer = StatementSupersedeOk(
        statement_id=statement_id,
        lsn=ctx.lsn,
        recorded_at=ctx.record_time,
        version=version,
        chain_root=root,
        superseded=old.id,
    )
    return changes, answer


def plan_tombstone(
    ctx: PlanContext, scope: Scope, request: StatementTombstone
) -> tuple[list[Change], StatementTombstoned]:
    """STATEMENT_TOMBSTONE (soft): hidden by default, kept for history and ``as_of``."""
    loaded = get_loaded(ctx.store, ctx.txn, scope, request.id, "id")
    if "tombstoned_at" in loaded.state:
        raise Conflict(f"statement {request.id.hex()} is already tombstoned", field="id")
    changes = tombstone_changes(ctx, scope, loaded, "user_request")
    changes.append(
        audit_entry(ctx, scope, "statement_tombstone", [loaded.id], reason=request.reason)
    )
    return changes, StatementTombstoned(id=loaded.id, lsn=ctx.lsn, tombstoned_at=ctx.record_time)


def retract_changes(ctx: PlanContext, scope: Scope, loaded: Versioned) -> list[Change]:
    """Reduce ``loaded`` to a husk now: ids, chain links and record times only."""
    c = loaded.content
    keep = ("namespace", "space", "recorded_at", "version", "chain_root", "supersedes")
    husk = {k: c[k] for k in keep if k in c}
    state = dict(loaded.state)
    state["tombstoned_at"] = ctx.record_time
    state["tombstone_reason"] = "retracted"
    state.setdefault("record_invalidated_at", ctx.record_time)
    state.pop("closed_valid_to", None)
    subject, predicate, recorded = c["subject"], c["predicate"], c["recorded_at"]
    assert isinstance(subject, bytes) and isinstance(predicate, str) and isinstance(recorded, int)
    by_subject = scope.key(subject, predicate_hash(predicate), _u64(recorded), loaded.id)
    changes: list[Change] = [
        Put(STATEMENTS, scope.key(loaded.id), cbor.encode(husk)),
        _put_state(scope, loaded.id, state),
        _no_longer_current(scope, loaded),
        Delete(STATEMENT_BY_SUBJECT, by_subject),
        Delete(STATEMENT_BY_SUBJECT_TIME, subject_time_key(by_subject)),
    ]
    changes += [Delete(STATEMENT_BY_EVIDENCE, scope.key(m, loaded.id)) for m in _evidence_ids(c)]
    target = _object_entity(c)
    if target is not None:
        changes.append(Delete(STATEMENT_BY_OBJECT, scope.key(target, loaded.id)))
    return changes


def citing(ctx: PlanContext, scope: Scope, memory_id: bytes) -> list[Versioned]:
    """Every statement of ``scope`` that cites ``memory_id`` as evidence."""
    prefix = scope.key(memory_id)
    table = ctx.store.table(STATEMENT_BY_EVIDENCE)
    return [load(ctx, scope, key[len(prefix) :]) for key in scan_keys(ctx.txn, table, prefix)]


def evidence_of(loaded: Versioned) -> list[bytes]:
    """The memory ids a statement cites."""
    return _evidence_ids(loaded.content)


def plan_retract(
    ctx: PlanContext, scope: Scope, request: StatementRetract
) -> tuple[list[Change], StatementRetracted]:
    """STATEMENT_RETRACT: the content is gone; a husk keeps ids, chain links and times."""
    loaded = get_loaded(ctx.store, ctx.txn, scope, request.id, "id")
    if loaded.retracted:
        raise Conflict(f"statement {request.id.hex()} is already retracted", field="id")
    changes = retract_changes(ctx, scope, loaded)
    changes.append(audit_entry(ctx, scope, "statement_retract", [loaded.id]))
    return changes, StatementRetracted(id=loaded.id, lsn=ctx.lsn, tombstoned_at=ctx.record_time)
