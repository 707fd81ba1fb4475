"""Statement reads: GET, HISTORY and LIST through the filter chain (spec/04-retrieval.md §5).

Rows are loaded and shown by :mod:`brain.engine.records.statements`; this module finds
them (by id, by chain, by subject, by record time) and pages through them.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from typing import Final

from brain.engine.records.filters import Filters, judge
from brain.engine.records.refs import AnswersAs, keys_answering_as, resolve_for_read
from brain.engine.records.statements import (
    chain_of,
    get_loaded,
    predicate_hash,
    statement_times,
    to_message,
)
from brain.engine.store.scan import scan, scan_keys
from brain.engine.store.scope import Scope
from brain.engine.store.statement_keys import RECORD_TIME_BYTES, position_time
from brain.engine.store.tables import (
    STATEMENT_BY_SUBJECT,
    STATEMENT_BY_SUBJECT_TIME,
    STATEMENT_BY_TIME,
    STATEMENT_CHAIN,
)
from brain.engine.write.reads import ReadContext
from brain.errors import AsOfInFuture
from brain.wire.messages.records import Statement
from brain.wire.messages.statement_ops import (
    StatementGet,
    StatementGetOk,
    StatementHistory,
    StatementHistoryOk,
    StatementList,
    StatementListOk,
)

__all__ = ["DEFAULT_LIST_LIMIT", "read_get", "read_history", "read_list", "scan_ids"]

DEFAULT_LIST_LIMIT: Final = 100
"""Page size when STATEMENT_LIST names none (spec/02-data-model.md §5)."""


def read_get(ctx: ReadContext, scope: Scope, request: StatementGet) -> StatementGetOk:
    """STATEMENT_GET: the statement as believed now."""
    loaded = get_loaded(ctx.store, ctx.txn, scope, request.id, "id")
    return StatementGetOk(statement=to_message(loaded, scope, None, ctx.store, ctx.txn))


def read_history(ctx: ReadContext, scope: Scope, request: StatementHistory) -> StatementHistoryOk:
    """STATEMENT_HISTORY: every version of the chain holding ``id``, oldest first."""
    loaded = get_loaded(ctx.store, ctx.txn, scope, request.id, "id")
    root, _ = chain_of(loaded)
    prefix = scope.key(root)
    answers = AnswersAs(ctx.store, ctx.txn, scope)
    versions: list[Statement] = []
    for _, value in scan(ctx.txn, ctx.store.table(STATEMENT_CHAIN), prefix):
        loaded = get_loaded(ctx.store, ctx.txn, scope, value, "id")
        versions.append(to_message(loaded, scope, None, answers=answers))
    return StatementHistoryOk(versions=tuple(versions))


def _positions(
    ctx: ReadContext, table: bytes, prefix: bytes, after: bytes, as_of: int | None
) -> Iterator[tuple[bytes, bytes]]:
    """(position, id) of every key ``prefix ‖ position`` of ``table``, in key order (which
    is record order): from the first position after ``after`` to the last recorded at
    or before ``as_of``. The walk stops at the first key recorded later, reading
    nothing past it."""
    size = len(prefix)
    start = prefix + after if after else None
    for key in scan_keys(ctx.txn, ctx.store.table(table), prefix, start=start):
        position = key[size:]
        if position <= after:
            continue  # the cursor's own row: the walk starts at or after it
        if as_of is not None and position_time(position) > as_of:
            return
        yield position, position[RECORD_TIME_BYTES:]


def scan_ids(
    ctx: ReadContext,
    scope: Scope,
    subject: bytes | None,
    predicate: str | None,
    *,
    after: bytes = b"",
    as_of: int | None = None,
) -> Iterator[tuple[bytes, bytes]]:
    """(position, id) of the candidate rows, position being ``u64 recorded_at ‖ id``, in
    position order: those of ``subject`` (every key answering as it) and ``predicate``
    when given, positioned after ``after`` and, with ``as_of``, recorded at or before it.
    Each index walked holds its keys in record order, so no row recorded after ``as_of``
    is read, and a caller that stops early reads nothing further."""
    if subject is None:
        yield from _positions(ctx, STATEMENT_BY_TIME, scope.key(), after, as_of)
        return
    # An entity's statements include those stored under every key that answers as it.
    subjects = keys_answering_as(ctx.store, ctx.txn, scope, subject, as_of=as_of)
    if predicate is None:
        walks = [
            _positions(ctx, STATEMENT_BY_SUBJECT_TIME, scope.key(each), after, as_of)
            for each in subjects
        ]
    else:
        ph = predicate_hash(predicate)
        walks = [
            _positions(ctx, STATEMENT_BY_SUBJECT, scope.key(each, ph), after, as_of)
            for each in subjects
        ]
    # A statement is stored under one subject key, so the walks never share a position.
    yield from walks[0] if len(walks) == 1 else heapq.merge(*walks)


def read_list(ctx: ReadContext, scope: Scope, request: StatementList) -> StatementListOk:
    """STATEMENT_LIST: the filter chain of spec/04-retrieval.md §5 over rows in recorded order."""
    if request.as_of is not None and request.as_of > ctx.now:
        raise AsOfInFuture(
            f"as_of {request.as_of} is after the record clock ({ctx.now})", field="as_of"
        )
    subject: bytes | None = None
    if request.subject is not None:
        # Names and merges as they were believed at as_of (spec/03-time.md §5).
        subject = resolve_for_read(ctx.store, ctx.txn, scope, request.subject, as_of=request.as_of)
        if subject is None:
            return StatementListOk(statements=())
    limit = DEFAULT_LIST_LIMIT if request.limit is None else request.limit
    filters = Filters(
        kinds=None if request.kind is None else (request.kind,),
        predicates=None if request.predicate is None else (request.predicate,),
        valid_at=request.valid_at,
        include_tombstoned=bool(request.include_tombstoned),
        include_superseded=bool(request.include_superseded),
        as_of=request.as_of,
    )
    answers = AnswersAs(ctx.store, ctx.txn, scope, as_of=request.as_of)
    page: list[Statement] = []
    more = False
    last = b""
    candidates = scan_ids(
        ctx, scope, subject, request.predicate, after=request.cursor or b"", as_of=request.as_of
    )
    for position, statement_id in candidates:
        loaded = get_loaded(ctx.store, ctx.txn, scope, statement_id, "id")
        if not judge(statement_times(loaded), filters).kept:
            continue
        if len(page) == limit:
            more = True
            break
        page.append(to_message(loaded, scope, request.as_of, answers=answers))
        last = position
    return StatementListOk(statements=tuple(page), cursor=last if more else None)
