"""The JSONL export: a namespace's records as readable JSON lines, from one snapshot.

Where :mod:`brain.engine.admin.transfer` copies stored rows in hex, this writes
each record as one JSON object (``spec/06-operations.md`` §9.2): its type, its
namespace and space, its id, and its fields as
:mod:`brain.engine.admin.jsonl_fields` declares them, times in ISO 8601 with
nanoseconds, entities named beside their ids. It holds the whole history
(every version of every chain, tombstoned, superseded and retracted ones, every
stamp of the record axis, the forget ledger's hashes); a hard-forgotten text is
gone from its record, so it is not here either. The indexes are left out: an
import rebuilds them (:mod:`brain.engine.admin.jsonl_rebuild`). Vectors are
written only when asked for.

The snapshot is read twice: once to count the records for the header, once to
write them. The trailer counts the lines and carries the SHA-256 of every byte
before it, so a cut or changed file is refused.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Iterator
from typing import Final

import lmdb

from brain.engine.admin.import_marks import EXPORTED
from brain.engine.admin.jsonl_codecs import Fields, ShowContext, show_vector
from brain.engine.admin.jsonl_fields import (
    AUDIT,
    ENTITY,
    ENTITY_VERSION,
    MEMORY,
    MENTIONS,
    MERGE,
    RELATION,
    RELATION_STATE,
    REVIEW,
    SCHEMA,
    STATEMENT,
    STATEMENT_STATE,
)
from brain.engine.admin.jsonl_format import (
    HEADER,
    JSONL_FORMAT,
    NAMESPACE_SCHEMA,
    TRAILER,
    TYPE_TABLES,
    dump_line,
)
from brain.engine.admin.jsonl_values import VECTOR_ENCODINGS, iso_time
from brain.engine.index.documents import MEMORY_DOC, STATEMENT_DOC
from brain.engine.index.vectors import LABEL_BYTES
from brain.engine.records.entity_history import versions
from brain.engine.records.schema import schema_scope
from brain.engine.store import tables
from brain.engine.store.env import Store
from brain.engine.store.rows import decode_row
from brain.engine.store.scan import scan, scan_keys
from brain.engine.store.scope import ID_BYTES, SCOPE_PREFIX_BYTES, namespace_id
from brain.errors import Internal, InvalidArgument, NotFound

__all__ = ["jsonl_lines"]

_U64: Final = 8
"""A big-endian time or LSN in a key."""

_NAMED_TABLES: Final = (
    tables.MEMORIES,
    tables.ENTITIES,
    tables.STATEMENTS,
    tables.RELATIONS,
    tables.AUDIT,
)
"""Tables whose rows carry their space's name: where an export learns it (a key holds
only a hash of it)."""


def jsonl_lines(store: Store, namespace: str, *, vectors: str = "none") -> Iterator[str]:
    """The JSONL export of ``namespace``, line by line (each without its newline).

    ``vectors`` is ``none``, ``base64`` or ``list``. NOT_FOUND (raised by the first
    line) when the database holds no row of the namespace."""
    if vectors not in VECTOR_ENCODINGS:
        raise InvalidArgument(
            f"vectors must be one of {', '.join(VECTOR_ENCODINGS)}, not {vectors!r}",
            field="vectors",
        )
    prefix = namespace_id(namespace)
    with store.read() as txn:
        if not any(
            next(scan_keys(txn, store.table(t), prefix), None) is not None for t in EXPORTED
        ):
            raise NotFound(
                f"namespace {namespace!r} holds no records in this database: nothing to export",
                field="namespace",
            )
        counts = {
            kind: sum(1 for _ in scan_keys(txn, store.table(table), prefix))
            for kind, table in TYPE_TABLES.items()
        }
        header: dict[str, object] = {
            "type": HEADER,
            "format": JSONL_FORMAT,
            "namespace": namespace,
            "vectors": vectors,
            "counts": counts,
        }
        digest = hashlib.sha256()
        lines = 0
        for line in itertools.chain([header], _records(store, txn, namespace, vectors)):
            text = dump_line(line)
            digest.update(text.encode("utf-8") + b"\n")
            lines += 1
            yield text
        yield dump_line({"type": TRAILER, "lines": lines - 1, "sha256": digest.hexdigest()})


class _Snapshot:
    """Reads of one export's snapshot: space names, entity and pending names, a row's
    companion rows."""

    def __init__(self, store: Store, txn: lmdb.Transaction, namespace: str) -> None:
        self.store, self.txn, self.namespace = store, txn, namespace
        self._spaces: dict[bytes, str | None] = {
            schema_scope(namespace, None).prefix: NAMESPACE_SCHEMA
        }
        self._names: dict[bytes, str | None] = {}

    def space(self, prefix: bytes) -> str | None:
        """The name of the space whose scope prefix is ``prefix``; None when no row of
        it records the name (a space that holds only a schema of its own)."""
        if prefix not in self._spaces:
            self._spaces[prefix] = self._find_space(prefix)
        return self._spaces[prefix]

    def _find_space(self, prefix: bytes) -> str | None:
        for table in _NAMED_TABLES:
            for _, value in scan(self.txn, self.store.table(table), prefix):
                row = decode_row(value)
                if row.get("namespace") == self.namespace and isinstance(row.get("space"), str):
                    return str(row["space"])
                break
        return None

    def row(self, table: bytes, key: bytes) -> dict[str, object] | None:
        """The stored map under ``key`` in ``table``, or None."""
        raw = self.txn.get(key, db=self.store.table(table))
        return None if raw is None else decode_row(bytes(raw))

    def raw(self, table: bytes, key: bytes) -> bytes | None:
        """The stored bytes under ``key`` in ``table``, or None."""
        raw = self.txn.get(key, db=self.store.table(table))
        return None if raw is None else bytes(raw)

    def name(self, table: bytes, key: bytes) -> str | None:
        """The ``name`` of the row under ``key`` in ``table`` (an entity, a review item)."""
        if key not in self._names:
            row = self.row(table, key)
            found = None if row is None else row.get("name")
            self._names[key] = found if isinstance(found, str) else None
        return self._names[key]

    def context(self, prefix: bytes, vectors: str, scope: tuple[str, str]) -> ShowContext:
        """What the fields of a line of space ``prefix`` are shown with."""

        def entity(entity_id: bytes) -> str | None:
            return self.name(tables.ENTITIES, prefix + entity_id)

        def pending(review_id: bytes) -> str | None:
            return self.name(tables.REVIEWS, prefix + review_id)

        return ShowContext(entity, pending, vectors, scope)


def _records(
    store: Store, txn: lmdb.Transaction, namespace: str, vectors: str
) -> Iterator[dict[str, object]]:
    snapshot = _Snapshot(store, txn, namespace)
    ns = namespace_id(namespace)
    for kind, table in TYPE_TABLES.items():
        for key, value in scan(txn, store.table(table), ns):
            prefix = key[:SCOPE_PREFIX_BYTES]
            space = snapshot.space(prefix)
            line: dict[str, object] = {"type": kind, "namespace": namespace, "space": space}
            if space is None:
                line["space_id"] = prefix[ID_BYTES:].hex()
            ctx = snapshot.context(prefix, vectors, (namespace, space or ""))
            line.update(_BODIES[kind](snapshot, ctx, key, value))
            yield line


Body = Callable[[_Snapshot, ShowContext, bytes, bytes], dict[str, object]]


def _id_of(key: bytes) -> bytes:
    record_id = key[SCOPE_PREFIX_BYTES:]
    if len(record_id) != ID_BYTES:
        raise Internal(f"a record key of unexpected length: {key.hex()}")
    return record_id


def _map(value: bytes) -> dict[str, object]:
    return decode_row(value)


def _schema(snap: _Snapshot, ctx: ShowContext, key: bytes, value: bytes) -> dict[str, object]:
    if len(key) != SCOPE_PREFIX_BYTES:
        raise Internal(f"a schema key of unexpected length: {key.hex()}")
    return SCHEMA.show(_map(value), ctx)


def _simple(shape: Fields) -> Body:
    """The body of a line holding one map keyed by the record's id."""

    def body(snap: _Snapshot, ctx: ShowContext, key: bytes, value: bytes) -> dict[str, object]:
        return {"id": _id_of(key).hex(), **shape.show(_map(value), ctx)}

    return body


def _review(snap: _Snapshot, ctx: ShowContext, key: bytes, value: bytes) -> dict[str, object]:
    row = _map(value)
    kind = row.get("kind")
    ctx.review_kind = kind if isinstance(kind, str) else None
    return {"id": _id_of(key).hex(), **REVIEW.show(row, ctx)}


def _vector_of(snap: _Snapshot, ctx: ShowContext, prefix: bytes, doc: bytes) -> object | None:
    if ctx.vectors == "none":
        return None
    raw = snap.raw(tables.VECTORS, prefix + doc)
    return None if raw is None else show_vector(raw[LABEL_BYTES:], ctx.vectors)


def _memory(snap: _Snapshot, ctx: ShowContext, key: bytes, value: bytes) -> dict[str, object]:
    memory_id = _id_of(key)
    body: dict[str, object] = {"id": memory_id.hex(), **MEMORY.show(_map(value), ctx)}
    mentions = snap.row(tables.MENTIONS, key)
    if mentions is not None:
        body["mentions"] = MENTIONS.show(mentions, ctx)
    vector = _vector_of(snap, ctx, key[:SCOPE_PREFIX_BYTES], MEMORY_DOC + memory_id)
    if vector is not None:
        body["vector"] = vector
    return body


def _forgotten(snap: _Snapshot, ctx: ShowContext, key: bytes, value: bytes) -> dict[str, object]:
    digest = key[SCOPE_PREFIX_BYTES:]
    if len(value) != _U64:
        raise Internal(f"a forget ledger row of unexpected length: {value.hex()}")
    return {"sha256": digest.hex(), "forgotten_at": iso_time(int.from_bytes(value, "big"))}


def _statement(snap: _Snapshot, ctx: ShowContext, key: bytes, value: bytes) -> dict[str, object]:
    statement_id = _id_of(key)
    body = {"id": statement_id.hex(), **STATEMENT.show(_map(value), ctx)}
    state = snap.row(tables.STATEMENT_STATE, key)
    if state is not None:
        body["state"] = STATEMENT_STATE.show(state, ctx)
    vector = _vector_of(snap, ctx, key[:SCOPE_PREFIX_BYTES], STATEMENT_DOC + statement_id)
    if vector is not None:
        body["vector"] = vector
    return body


def _relation(snap: _Snapshot, ctx: ShowContext, key: bytes, value: bytes) -> dict[str, object]:
    body = {"id": _id_of(key).hex(), **RELATION.show(_map(value), ctx)}
    state = snap.row(tables.RELATION_STATE, key)
    if state is not None:
        body["state"] = RELATION_STATE.show(state, ctx)
    return body


def _audit(snap: _Snapshot, ctx: ShowContext, key: bytes, value: bytes) -> dict[str, object]:
    row = _map(value)
    rest = key[SCOPE_PREFIX_BYTES:]
    if len(rest) != 2 * _U64 + ID_BYTES or (
        int.from_bytes(rest[:_U64], "big"),
        int.from_bytes(rest[_U64 : 2 * _U64], "big"),
    ) != (row.get("recorded_at"), row.get("lsn")):
        raise Internal(f"an audit key that does not match its entry: {key.hex()}")
    return {"id": rest[2 * _U64 :].hex(), **AUDIT.show(row, ctx)}


def _entity(snap: _Snapshot, ctx: ShowContext, key: bytes, value: bytes) -> dict[str, object]:
    body: dict[str, object] = {"id": _id_of(key).hex(), **ENTITY.show(_map(value), ctx)}
    body["versions"] = [
        ENTITY_VERSION.show({**decode_row(raw), "recorded_at": at}, ctx)
        for at, raw in versions(snap.store, snap.txn, key)
    ]
    return body


_BODIES: Final[dict[str, Body]] = {
    "schema": _schema,
    "entity": _entity,
    "merge": _simple(MERGE),
    "review": _review,
    "memory": _memory,
    "forgotten": _forgotten,
    "statement": _statement,
    "relation": _relation,
    "audit": _audit,
}
"""How each record line type is written from its row (keyed as :data:`TYPE_TABLES`)."""
