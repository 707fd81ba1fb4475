"""Statement reads: GET, HISTORY and LIST through the filter chain (spec/04-retrieval.md §5).

Rows are loaded and shown by :mod:`brain.engine.records.statements`; this module finds
them (by id, by chain, by subject, by record time) and pages through them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from brain.engine.records.filters import Filters, judge
from brain.engine.records.refs import SUBJECT_KEY_BYTES, keys_answering_as, resolve_for_read
from brain.engine.records.statements import (
    PREDICATE_HASH_BYTES,
    get_loaded,
    predicate_hash,
    statement_times,
    to_message,
)
from brain.engine.store.scan import scan, scan_keys
from brain.engine.store.scope import Scope
from brain.engine.store.tables import STATEMENT_BY_SUBJECT, STATEMENT_BY_TIME, STATEMENT_CHAIN
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
    root = loaded.content["chain_root"]
    assert isinstance(root, bytes)
    prefix = scope.key(root)
    versions: list[Statement] = []
    for _, value in scan(ctx.txn, ctx.store.table(STATEMENT_CHAIN), prefix):
        versions.append(
            to_message(
                get_loaded(ctx.store, ctx.txn, scope, value, "id"),
                scope,
                None,
                ctx.store,
                ctx.txn,
            )
        )
    return StatementHistoryOk(versions=tuple(versions))


def scan_ids(
    ctx: ReadContext, scope: Scope, subject: bytes | None, predicate: str | None
) -> Iterator[tuple[bytes, bytes]]:
    """(recorded_at ‖ id, id) for candidate rows, in recorded order when no subject is given."""
    if subject is None:
        prefix = scope.key()
        for key in scan_keys(ctx.txn, ctx.store.table(STATEMENT_BY_TIME), prefix):
            tail = key[len(prefix) :]
            yield tail, tail[8:]
        return
    # An entity's statements include those stored under every key that answers as it.
    subjects = keys_answering_as(ctx.store, ctx.txn, scope, subject)
    found: list[tuple[bytes, bytes]] = []
    table = ctx.store.table(STATEMENT_BY_SUBJECT)
    for each in subjects:
        prefix = (
            scope.key(each) if predicate is None else scope.key(each, predicate_hash(predicate))
        )
        for key in scan_keys(ctx.txn, table, prefix):
            tail = key[len(scope.key()) + SUBJECT_KEY_BYTES + PREDICATE_HASH_BYTES :]
            found.append((tail, tail[8:]))
    yield from sorted(found)


def read_list(ctx: ReadContext, scope: Scope, request: StatementList) -> StatementListOk:
    """STATEMENT_LIST: the filter chain of spec/04-retrieval.md §5 over rows in recorded order."""
    if request.as_of is not None and request.as_of > ctx.now:
        raise AsOfInFuture(
            f"as_of {request.as_of} is after the record clock ({ctx.now})", field="as_of"
        )
    subject: bytes | None = None
    if request.subject is not None:
        subject = resolve_for_read(ctx.store, ctx.txn, scope, request.subject)
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
    after = request.cursor or b""
    page: list[Statement] = []
    more = False
    last = b""
    for position, statement_id in scan_ids(ctx, scope, subject, request.predicate):
        if position <= after:
            continue
        loaded = get_loaded(ctx.store, ctx.txn, scope, statement_id, "id")
        if not judge(statement_times(loaded), filters).kept:
            continue
        if len(page) == limit:
            more = True
            break
        page.append(to_message(loaded, scope, request.as_of, ctx.store, ctx.txn))
        last = position
    return StatementListOk(statements=tuple(page), cursor=last if more else None)
