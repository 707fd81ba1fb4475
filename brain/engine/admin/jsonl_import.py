"""Reading a JSONL export back into the rows an import writes.

:func:`read_jsonl` checks the whole file before anything is written: the
header, every line strictly (a line that does not read is refused with its
number and the field), the trailer's count and checksum (so a cut or changed
file is refused), the header's counts, and that the file agrees with itself
(every entity or waiting name a line names is a line of the file, under that
name; a vector only where there is a text to index). It then encodes each
record's rows exactly as stored, rebuilds the indexes
(:mod:`brain.engine.admin.jsonl_rebuild`) and returns every row in the order of
an exact export, with the header the import path needs. The rows then go through
that path unchanged (:func:`brain.engine.admin.transfer.import_batch`): the same
scope and emptiness checks, the same resumption, the same admin permission.

The import's id is the head of the file's checksum, so importing the same file
again resumes or changes nothing, and its clock is the file's latest record-axis
time, so every later write is recorded after everything imported.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from brain import cbor
from brain.engine.admin.import_marks import EXPORTED
from brain.engine.admin.jsonl_codecs import (
    ID_BYTES,
    RECORD_TIME,
    SHA256_BYTES,
    Fields,
    ReadContext,
    read_vector,
)
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
    LINE_TYPES,
    NAMESPACE_SCHEMA,
    TRAILER,
    checksum_of,
    export_id_of,
)
from brain.engine.admin.jsonl_rebuild import SpaceRecords, rebuilt_rows
from brain.engine.admin.jsonl_values import VECTOR_ENCODINGS, FieldError, hex_from_json
from brain.engine.admin.transfer import Header, Row
from brain.engine.index.documents import MEMORY_DOC, STATEMENT_DOC
from brain.engine.records.schema import schema_scope
from brain.engine.store import tables
from brain.engine.store.scope import SCOPE_PREFIX_BYTES, Scope, namespace_id
from brain.errors import InvalidArgument

__all__ = ["JsonlImport", "is_jsonl_header", "read_jsonl"]

_SPACE_NAME: Final = re.compile(r"[a-z0-9_.\-]{1,64}")
"""What a request may name a space (``Space`` in brain/wire/messages/values.py)."""

_HEADER_FIELDS: Final = ("type", "format", "namespace", "vectors", "counts")
_TRAILER_FIELDS: Final = ("type", "lines", "sha256")
_LINE_FIELDS: Final = frozenset({"type", "namespace", "space", "space_id"})
"""The fields every record line has (``space_id`` only for a space of unknown name)."""

_U64: Final = 8
_TABLE_ORDER: Final = {table: i for i, table in enumerate(EXPORTED)}


@dataclass(frozen=True, slots=True)
class JsonlImport:
    """A JSONL export read whole: what the import path writes."""

    header: Header
    """The namespace, the import's id (the head of the file's checksum) and its clock."""
    rows: list[Row]
    """Every row, records and rebuilt indexes, in an exact export's order."""

    @property
    def scopes(self) -> list[bytes]:
        """The spaces (scope prefixes) the rows belong to."""
        return sorted({row.key[:SCOPE_PREFIX_BYTES] for row in self.rows})

    def counts(self) -> dict[str, dict[str, int]]:
        """Rows per space (scope prefix in hex) and table, as an import's finish counts."""
        found: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for row in self.rows:
            found[row.key[:SCOPE_PREFIX_BYTES].hex()][row.table.decode()] += 1
        return {scope: dict(n) for scope, n in found.items()}


def is_jsonl_header(line: object) -> bool:
    """Whether a file's parsed first line is the header of a JSONL export (of any version)."""
    return (
        isinstance(line, dict)
        and line.get("type") == HEADER
        and str(line.get("format", "")).startswith("brain-jsonl/")
    )


def _refuse(number: int, message: str, field: str | None = None) -> InvalidArgument:
    return InvalidArgument(f"line {number}: {message}", field=field)


class _RepeatedKey(ValueError):
    """A JSON object naming one key twice: which value a reader takes is anyone's guess."""


def _no_repeats(pairs: list[tuple[str, object]]) -> dict[str, object]:
    found: dict[str, object] = {}
    for key, value in pairs:
        if key in found:
            raise _RepeatedKey(key)
        found[key] = value
    return found


def _object(raw: bytes, number: int) -> dict[str, object]:
    try:
        value = json.loads(raw.decode("utf-8"), object_pairs_hook=_no_repeats)
    except UnicodeDecodeError as exc:
        raise _refuse(number, f"is not UTF-8 ({exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise _refuse(number, f"is not JSON ({exc.msg} at column {exc.colno})") from None
    except _RepeatedKey as exc:
        raise _refuse(number, f"{exc}: the field is given twice", str(exc)) from None
    if not isinstance(value, dict):
        raise _refuse(number, "is not a JSON object")
    return value


def _exact_fields(line: dict[str, object], names: tuple[str, ...], number: int, what: str) -> None:
    for name in line:
        if name not in names:
            raise _refuse(number, f"{name}: is not a field of the {what}", name)
    for name in names:
        if name not in line:
            raise _refuse(number, f"{name}: is required in the {what}", name)


@dataclass(frozen=True, slots=True)
class _Head:
    namespace: str
    vectors: str
    counts: dict[str, int]


def _header(line: dict[str, object]) -> _Head:
    if line.get("type") != HEADER:
        raise _refuse(1, "is not the header of a JSONL export (its type must be header)", "type")
    if line.get("format") != JSONL_FORMAT:
        raise _refuse(
            1, f"format: {line.get('format')!r} is not {JSONL_FORMAT}, which this server reads"
        )
    _exact_fields(line, _HEADER_FIELDS, 1, "header")
    namespace, vectors, counts = line["namespace"], line["vectors"], line["counts"]
    if not isinstance(namespace, str) or not namespace:
        raise _refuse(1, "namespace: must be a namespace's name", "namespace")
    if vectors not in VECTOR_ENCODINGS:
        raise _refuse(1, f"vectors: must be one of {', '.join(VECTOR_ENCODINGS)}", "vectors")
    if (
        not isinstance(counts, dict)
        or set(counts) != set(LINE_TYPES)
        or not all(type(n) is int and n >= 0 for n in counts.values())
    ):
        raise _refuse(1, f"counts: must count each line type ({', '.join(LINE_TYPES)})", "counts")
    assert isinstance(vectors, str)
    return _Head(namespace, vectors, {str(k): int(v) for k, v in counts.items()})


def _trailer(raw: list[bytes]) -> dict[str, object]:
    number = len(raw)
    try:
        line = _object(raw[-1], number) if number >= 2 else None
    except InvalidArgument:
        line = None
    if line is None or line.get("type") != TRAILER:
        raise InvalidArgument(
            f"the file is cut short: its last line ({number}) is not the trailer, so records "
            "may be missing; export it again"
        )
    _exact_fields(line, _TRAILER_FIELDS, number, "trailer")
    return line


def read_jsonl(data: bytes) -> JsonlImport:
    """The rows of the JSONL export ``data`` (the whole file), checked whole."""
    raw = data.split(b"\n")
    if raw and raw[-1] == b"":
        raw.pop()  # the newline that ends the last line
    if not raw:
        raise InvalidArgument("the file is empty")
    head = _header(_object(raw[0], 1))
    trailer = _trailer(raw)
    reader = _Reader(head)
    for number, line in enumerate(raw[1:-1], start=2):
        reader.line(number, _object(line, number))
    reader.check_references()
    if trailer["lines"] != len(raw) - 2:
        raise InvalidArgument(
            f"the trailer counts {trailer['lines']} record lines and the file holds "
            f"{len(raw) - 2}: it is cut short or lines were added"
        )
    for kind in LINE_TYPES:
        if reader.seen[kind] != head.counts[kind]:
            raise InvalidArgument(
                f"the header counts {head.counts[kind]} {kind} lines and the file holds "
                f"{reader.seen[kind]}"
            )
    checksum = checksum_of(data[: len(data) - len(raw[-1]) - (1 if data.endswith(b"\n") else 0)])
    if trailer["sha256"] != checksum:
        raise InvalidArgument(
            f"line {len(raw)}: sha256: the file's checksum is {checksum}, not the trailer's: "
            "the file was changed or damaged after it was exported",
            field="sha256",
        )
    rows = reader.rows()
    header = Header(head.namespace, export_id_of(checksum), reader.latest)
    return JsonlImport(header, rows)


LineReader = Callable[["_Reader", int, dict[str, object], ReadContext], None]


class _Reader:
    """The records of a file, line by line, and the rows they make."""

    def __init__(self, head: _Head) -> None:
        self.head = head
        self.spaces: dict[bytes, SpaceRecords] = {}
        self.records: dict[tuple[bytes, bytes], tuple[bytes, int]] = {}
        """(table, key) -> (stored value, the line that holds it)."""
        self.seen: dict[str, int] = dict.fromkeys(LINE_TYPES, 0)
        self.latest = 0
        self.notes: list[tuple[int, bytes, ReadContext]] = []
        self.prefix = b""
        """The scope prefix of the line being read."""

    @property
    def space(self) -> SpaceRecords:
        """The records of the space of the line being read."""
        return self.spaces[self.prefix]

    def line(self, number: int, line: dict[str, object]) -> None:
        """Read line ``number`` of the file."""
        kind = line.get("type")
        if not isinstance(kind, str) or kind not in _LINE_READERS:
            raise _refuse(number, f"type: {kind!r} is not a record line type", "type")
        if line.get("namespace") != self.head.namespace:
            raise _refuse(
                number,
                f"namespace: the header exports {self.head.namespace!r}, this line names "
                f"{line.get('namespace')!r}",
                "namespace",
            )
        self.prefix, space = self._scope(number, kind, line)
        if space is not None and self.prefix not in self.spaces:
            self.spaces[self.prefix] = SpaceRecords(Scope(self.head.namespace, space))
        ctx = ReadContext(self.head.vectors, (self.head.namespace, space or ""))
        try:
            _LINE_READERS[kind](self, number, line, ctx)
        except FieldError as exc:
            raise _refuse(number, f"{kind} {exc.path}: {exc.reason}", exc.path) from None
        self.seen[kind] += 1
        self.latest = max(self.latest, ctx.latest or 0)
        self.notes.append((number, self.prefix, ctx))

    def _scope(self, number: int, kind: str, line: dict[str, object]) -> tuple[bytes, str | None]:
        """The line's scope prefix, and its space's name (None: a space of unknown name)."""
        space = line.get("space")
        if space is None and kind == "schema":
            try:
                space_id = hex_from_json(line.get("space_id"), "space_id", ID_BYTES)
            except FieldError as exc:
                raise _refuse(number, f"{exc.path}: {exc.reason}", exc.path) from None
            return namespace_id(self.head.namespace) + space_id, None
        if "space_id" in line:
            raise _refuse(
                number, "space_id: only the schema line of a space of unknown name has one"
            )
        if kind == "schema" and space == NAMESPACE_SCHEMA:
            return schema_scope(self.head.namespace, None).prefix, NAMESPACE_SCHEMA
        if not isinstance(space, str) or _SPACE_NAME.fullmatch(space) is None:
            raise _refuse(number, "space: must be a space's name (1-64 of [a-z0-9_.-])", "space")
        return Scope(self.head.namespace, space).prefix, space

    def put(self, number: int, table: bytes, key: bytes, value: bytes) -> None:
        """A record row that line ``number`` holds."""
        earlier = self.records.get((table, key))
        if earlier is not None:
            raise _refuse(number, f"holds the same record as line {earlier[1]}")
        self.records[(table, key)] = (value, number)

    def check_references(self) -> None:
        """Every entity and waiting name a line names is a line of the file, so named."""
        for number, prefix, ctx in self.notes:
            space = self.spaces.get(prefix)
            for path, entity_id, name in ctx.entities:
                entity = None if space is None else space.entities.get(entity_id)
                if entity is None:
                    raise _refuse(
                        number,
                        f"{path}: names entity {entity_id.hex()}, which the file does not "
                        "hold in this space",
                        path,
                    )
                if name != entity.get("name"):
                    raise _refuse(
                        number,
                        f"{path}: {name!r} is not the name of entity {entity_id.hex()} "
                        f"({entity.get('name')!r} in its line)",
                        path,
                    )
            for path, review_id, name in ctx.pendings:
                review = None if space is None else space.reviews.get(review_id)
                if review is None or name != review.get("name"):
                    raise _refuse(
                        number,
                        f"{path}: no review item {review_id.hex()} of this space waits on {name!r}",
                        path,
                    )

    def rows(self) -> list[Row]:
        """Every row: the records' and the rebuilt ones, in an exact export's order."""
        found = {at: value for at, (value, _) in self.records.items()}
        for space in self.spaces.values():
            found.update(rebuilt_rows(space))
        ordered = sorted(found, key=lambda at: (_TABLE_ORDER[at[0]], at[1]))
        return [Row(table, key, found[(table, key)]) for table, key in ordered]


# --- each line type ------------------------------------------------------------------------


def _record_id(line: dict[str, object]) -> bytes:
    return hex_from_json(line.get("id"), "id", ID_BYTES)


def _body(
    shape: Fields, line: dict[str, object], ctx: ReadContext, *extra: str
) -> dict[str, object]:
    """The stored map of ``line``'s fields of ``shape`` (``extra``: fields read besides)."""
    return shape.read(line, "", ctx, skip=_LINE_FIELDS | {"id", *extra})


def _nested(
    shape: Fields, line: dict[str, object], name: str, ctx: ReadContext
) -> dict[str, object] | None:
    value = line.get(name)
    if value is None:
        if name in line:
            raise FieldError(name, f"must be an object ({shape.what}) when present")
        return None
    if not isinstance(value, dict):
        raise FieldError(name, f"must be an object ({shape.what})")
    return shape.read(value, name, ctx)


def _vector(reader: _Reader, line: dict[str, object], doc: bytes, indexed: bool) -> None:
    """The vector of a document, when the line holds one."""
    if "vector" not in line:
        return
    if reader.head.vectors == "none":
        raise FieldError("vector", "the header says vectors: none")
    if not indexed:
        raise FieldError("vector", "a record without a text to index has no vector")
    reader.space.vectors[doc] = read_vector(line["vector"], "vector", reader.head.vectors)


def _schema(reader: _Reader, number: int, line: dict[str, object], ctx: ReadContext) -> None:
    if "id" in line:
        raise FieldError("id", "is not a field of a schema")
    row = SCHEMA.read(line, "", ctx, skip=_LINE_FIELDS)
    reader.put(number, tables.SCHEMA, reader.prefix, cbor.encode(row))


def _entity(reader: _Reader, number: int, line: dict[str, object], ctx: ReadContext) -> None:
    entity_id = _record_id(line)
    row = _body(ENTITY, line, ctx, "versions")
    key = reader.prefix + entity_id
    reader.put(number, tables.ENTITIES, key, cbor.encode(row))
    reader.space.entities[entity_id] = row
    found = _versions(line, row, ctx)
    for at, version in found:
        reader.put(
            number, tables.ENTITY_VERSIONS, key + at.to_bytes(_U64, "big"), cbor.encode(version)
        )
    reader.space.entity_versions[entity_id] = found


def _versions(
    line: dict[str, object], row: dict[str, object], ctx: ReadContext
) -> list[tuple[int, dict[str, object]]]:
    """An entity line's versions, oldest first: its ``versions``, whose last must be the
    line's row; without them (a file written before entities had a record axis), the
    row alone, believed since the entity's creation."""
    if "versions" not in line:
        created = row["created_at"]
        assert isinstance(created, int)
        return [(created, row)]
    items = line["versions"]
    if not isinstance(items, list) or not items:
        raise FieldError("versions", "must be a non-empty array of entity versions")
    found: list[tuple[int, dict[str, object]]] = []
    for index, item in enumerate(items):
        path = f"versions[{index}]"
        if not isinstance(item, dict):
            raise FieldError(path, "must be an object (entity version)")
        version = ENTITY_VERSION.read(item, path, ctx)
        at = version.pop("recorded_at")
        assert isinstance(at, int)
        if found and at <= found[-1][0]:
            raise FieldError(f"{path}.recorded_at", "must be after the version before it")
        found.append((at, version))
    if cbor.encode(found[-1][1]) != cbor.encode(row):
        raise FieldError("versions", "the last version must be the entity as the line holds it")
    return found


def _merge(reader: _Reader, number: int, line: dict[str, object], ctx: ReadContext) -> None:
    merge_id = _record_id(line)
    row = _body(MERGE, line, ctx)
    reader.put(number, tables.ENTITY_MERGES, reader.prefix + merge_id, cbor.encode(row))


def _review(reader: _Reader, number: int, line: dict[str, object], ctx: ReadContext) -> None:
    review_id = _record_id(line)
    row = _body(REVIEW, line, ctx)
    if row.get("kind") == "ambiguous_entity" and not isinstance(row.get("name"), str):
        raise FieldError("name", "an ambiguous_entity item names what waits")
    reader.put(number, tables.REVIEWS, reader.prefix + review_id, cbor.encode(row))
    reader.space.reviews[review_id] = row


def _memory(reader: _Reader, number: int, line: dict[str, object], ctx: ReadContext) -> None:
    memory_id = _record_id(line)
    row = _body(MEMORY, line, ctx, "mentions", "vector")
    text = row.get("text")
    if isinstance(text, str) and hashlib.sha256(text.encode("utf-8")).digest() != row["sha256"]:
        raise FieldError("sha256", "is not the SHA-256 of the memory's text")
    key = reader.prefix + memory_id
    reader.put(number, tables.MEMORIES, key, cbor.encode(row))
    reader.space.memories[memory_id] = row
    mentions = _nested(MENTIONS, line, "mentions", ctx)
    if mentions is not None:
        reader.put(number, tables.MENTIONS, key, cbor.encode(mentions))
        reader.space.mentions[memory_id] = mentions
    _vector(reader, line, MEMORY_DOC + memory_id, "text" in row)


_FORGOTTEN_FIELDS: Final = frozenset({"sha256", "forgotten_at"})


def _forgotten(reader: _Reader, number: int, line: dict[str, object], ctx: ReadContext) -> None:
    for name in line:
        if name not in _LINE_FIELDS | _FORGOTTEN_FIELDS:
            raise FieldError(name, "is not a field of a forgotten text")
    for name in sorted(_FORGOTTEN_FIELDS):
        if name not in line:
            raise FieldError(name, "is required in a forgotten text")
    digest = hex_from_json(line["sha256"], "sha256", SHA256_BYTES)
    at = RECORD_TIME.read(line["forgotten_at"], "forgotten_at", ctx)
    assert isinstance(at, int)
    reader.put(number, tables.FORGET_LEDGER, reader.prefix + digest, at.to_bytes(_U64, "big"))


_CLAIM: Final = ("kind", "subject", "predicate", "object", "confidence", "evidence")
"""The content fields of a statement that a retraction's husk drops, all together."""


def _statement(reader: _Reader, number: int, line: dict[str, object], ctx: ReadContext) -> None:
    statement_id = _record_id(line)
    row = _body(STATEMENT, line, ctx, "state", "vector")
    held = [name in row for name in _CLAIM]
    if any(held) and not all(held):
        missing = _CLAIM[held.index(False)]
        raise FieldError(missing, "is required in a statement that is not a retracted husk")
    key = reader.prefix + statement_id
    reader.put(number, tables.STATEMENTS, key, cbor.encode(row))
    state = _nested(STATEMENT_STATE, line, "state", ctx)
    if state is not None:
        reader.put(number, tables.STATEMENT_STATE, key, cbor.encode(state))
    reader.space.statements[statement_id] = (row, state or {})
    _vector(reader, line, STATEMENT_DOC + statement_id, "subject" in row)


def _relation(reader: _Reader, number: int, line: dict[str, object], ctx: ReadContext) -> None:
    relation_id = _record_id(line)
    row = _body(RELATION, line, ctx, "state")
    key = reader.prefix + relation_id
    reader.put(number, tables.RELATIONS, key, cbor.encode(row))
    state = _nested(RELATION_STATE, line, "state", ctx)
    if state is not None:
        reader.put(number, tables.RELATION_STATE, key, cbor.encode(state))
    reader.space.relations[relation_id] = (row, state or {})


_U64_MAX: Final = (1 << 64) - 1


def _audit(reader: _Reader, number: int, line: dict[str, object], ctx: ReadContext) -> None:
    entry_id = _record_id(line)
    row = _body(AUDIT, line, ctx)
    recorded, lsn = row["recorded_at"], row["lsn"]
    assert isinstance(recorded, int) and isinstance(lsn, int)
    if not 0 <= lsn <= _U64_MAX:
        raise FieldError("lsn", "must be an unsigned 64-bit number")
    key = reader.prefix + recorded.to_bytes(_U64, "big") + lsn.to_bytes(_U64, "big") + entry_id
    reader.put(number, tables.AUDIT, key, cbor.encode(row))


_LINE_READERS: Final[dict[str, LineReader]] = {
    "schema": _schema,
    "entity": _entity,
    "merge": _merge,
    "review": _review,
    "memory": _memory,
    "forgotten": _forgotten,
    "statement": _statement,
    "relation": _relation,
    "audit": _audit,
}
"""How each record line type is read (the types of :data:`LINE_TYPES`)."""
