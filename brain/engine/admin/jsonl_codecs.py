"""How the JSONL export form's fields read: a codec per kind of value, and
:class:`Fields`, which pairs a stored CBOR map with a JSON object field by field.

Both directions are strict: a stored field a :class:`Fields` does not know stops
an export (the form, and its table in the spec, must grow with the records), and
a line field it does not know, a missing required one or one that does not read
is refused, naming the field. Reading a line back gives exactly the stored map,
so its CBOR encoding is the stored bytes. The form's declarations, which fields
each line holds, are :mod:`brain.engine.admin.jsonl_fields`.

References keep their entity's name beside its id (``{"id": "…", "name":
"Dan"}``). An export looks the names up in its snapshot (:class:`ShowContext`);
an import notes every name it reads (:class:`ReadContext`) and checks them
against the file's own entity and review lines once it has read them all, so a
file whose names disagree with its records is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Protocol

from brain.engine.admin.jsonl_values import (
    FieldError,
    free_from_json,
    free_to_json,
    hex_from_json,
    iso_time,
    time_from_json,
    vector_from_json,
    vector_to_json,
)
from brain.engine.records.refs import ENTITY_TAG, MEMORY_TAG, PENDING_TAG
from brain.errors import Internal

__all__ = [
    "BOOL",
    "BYTES",
    "CLIENT_VECTOR",
    "DIGEST",
    "ENTITY_REF",
    "FREE",
    "IDS",
    "ID_BYTES",
    "INTEGER",
    "NUMBER",
    "OBJECT",
    "RECORD_AXIS",
    "RECORD_ID",
    "RECORD_TIME",
    "REVIEW_RECORDS",
    "SHA256_BYTES",
    "SUBJECT",
    "TEXT",
    "TEXTS",
    "VALID_AXIS",
    "VALID_TIME",
    "Codec",
    "Field",
    "Fields",
    "ReadContext",
    "ShowContext",
    "list_of",
    "nested",
    "places",
    "read_vector",
    "show_vector",
]

ID_BYTES: Final = 16
"""Record ids are UUIDv7, 16 bytes."""
SHA256_BYTES: Final = 32
"""A text's digest."""

RECORD_AXIS: Final = "record"
"""A time set by the server: when the database learned or stamped something."""
VALID_AXIS: Final = "valid"
"""A time set by the client: when something was true in the world."""


@dataclass
class ShowContext:
    """What an export needs to write a line: names by id, and how vectors are written."""

    entity_name: Callable[[bytes], str | None]
    """The stored name of an entity of the line's space (None: the space holds none)."""
    pending_name: Callable[[bytes], str | None]
    """The name an ambiguous-name review item waits on."""
    vectors: str
    scope: tuple[str, str]
    """The (namespace, space) of the line: scoped maps must name it."""
    review_kind: str | None = None
    """The kind of the review item being shown: its records are entities for an
    ambiguous name, statements for a contradiction."""


@dataclass
class ReadContext:
    """What reading a line notes for the checks made once the whole file is read."""

    vectors: str
    scope: tuple[str, str]
    """The (namespace, space) of the line: scoped maps get it."""
    entities: list[tuple[str, bytes, str | None]] = field(default_factory=list)
    """``(path, entity id, name)`` of every entity reference read."""
    pendings: list[tuple[str, bytes, str | None]] = field(default_factory=list)
    """``(path, review id, name)`` of every waiting name read."""
    latest: int | None = None
    """The latest record-axis time read: an import moves its clock past it."""

    def saw_time(self, nanos: int, axis: str) -> None:
        """Note a time read on ``axis``."""
        if axis == RECORD_AXIS and (self.latest is None or nanos > self.latest):
            self.latest = nanos


class Codec(Protocol):
    """How one field's stored value and its JSON form turn into each other."""

    def show(self, value: object, ctx: ShowContext) -> object:
        """The JSON form of stored ``value``."""
        ...

    def read(self, value: object, path: str, ctx: ReadContext) -> object:
        """The stored value of JSON ``value``; FieldError naming ``path`` otherwise."""
        ...


def _bad_stored(value: object, what: str) -> Internal:
    # The database wrote the row: a value of another shape is a bug, not the user's.
    return Internal(f"a stored {what} has an unexpected value: {value!r:.80}")


@dataclass(frozen=True)
class _Text:
    def show(self, value: object, ctx: ShowContext) -> object:
        if not isinstance(value, str):
            raise _bad_stored(value, "text")
        return value

    def read(self, value: object, path: str, ctx: ReadContext) -> object:
        if not isinstance(value, str):
            raise FieldError(path, "must be text")
        return value


@dataclass(frozen=True)
class _Integer:
    def show(self, value: object, ctx: ShowContext) -> object:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _bad_stored(value, "integer")
        return value

    def read(self, value: object, path: str, ctx: ReadContext) -> object:
        if isinstance(value, bool) or not isinstance(value, int):
            raise FieldError(path, "must be a whole number")
        return value


@dataclass(frozen=True)
class _Number:
    """A float: stored floats stay floats (JSON ``1.0``); a whole number reads as one."""

    def show(self, value: object, ctx: ShowContext) -> object:
        if not isinstance(value, float):
            raise _bad_stored(value, "number")
        return value

    def read(self, value: object, path: str, ctx: ReadContext) -> object:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise FieldError(path, "must be a number")
        return float(value)


@dataclass(frozen=True)
class _Bool:
    def show(self, value: object, ctx: ShowContext) -> object:
        if not isinstance(value, bool):
            raise _bad_stored(value, "truth value")
        return value

    def read(self, value: object, path: str, ctx: ReadContext) -> object:
        if not isinstance(value, bool):
            raise FieldError(path, "must be true or false")
        return value


@dataclass(frozen=True)
class _Time:
    axis: str

    def show(self, value: object, ctx: ShowContext) -> object:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _bad_stored(value, "time")
        return iso_time(value)

    def read(self, value: object, path: str, ctx: ReadContext) -> object:
        nanos = time_from_json(value, path)
        if self.axis == RECORD_AXIS and nanos < 0:
            # The server's clock never stood before 1970, and keys hold these unsigned.
            raise FieldError(path, "a record time cannot precede 1970-01-01T00:00:00Z")
        ctx.saw_time(nanos, self.axis)
        return nanos


@dataclass(frozen=True)
class _Hex:
    size: int | None

    def show(self, value: object, ctx: ShowContext) -> object:
        if not isinstance(value, bytes) or (self.size is not None and len(value) != self.size):
            raise _bad_stored(value, "byte string")
        return value.hex()

    def read(self, value: object, path: str, ctx: ReadContext) -> object:
        return hex_from_json(value, path, self.size)


@dataclass(frozen=True)
class _Free:
    def show(self, value: object, ctx: ShowContext) -> object:
        return free_to_json(value)

    def read(self, value: object, path: str, ctx: ReadContext) -> object:
        return free_from_json(value, path)


@dataclass(frozen=True)
class _List:
    item: Codec

    def show(self, value: object, ctx: ShowContext) -> object:
        if not isinstance(value, list):
            raise _bad_stored(value, "list")
        return [self.item.show(v, ctx) for v in value]

    def read(self, value: object, path: str, ctx: ReadContext) -> object:
        if not isinstance(value, list):
            raise FieldError(path, "must be a list")
        return [self.item.read(v, f"{path}[{i}]", ctx) for i, v in enumerate(value)]


@dataclass(frozen=True)
class _Entity:
    """An entity id, shown as ``{"id", "name"}``."""

    def show(self, value: object, ctx: ShowContext) -> object:
        if not isinstance(value, bytes) or len(value) != ID_BYTES:
            raise _bad_stored(value, "entity id")
        return {"id": value.hex(), "name": ctx.entity_name(value)}

    def read(self, value: object, path: str, ctx: ReadContext) -> object:
        if not isinstance(value, dict) or set(value) != {"id", "name"}:
            raise FieldError(path, 'an entity must be {"id": hex, "name": its name}')
        entity_id = hex_from_json(value["id"], f"{path}.id", ID_BYTES)
        name = value["name"]
        if name is not None and not isinstance(name, str):
            raise FieldError(f"{path}.name", "must be text")
        ctx.entities.append((f"{path}.name", entity_id, name))
        return entity_id


@dataclass(frozen=True)
class _Subject:
    """A subject key (a statement's subject, a relation's end): ``{"id", "name"}`` for
    an entity, ``{"memory"}`` for a memory, ``{"pending", "name"}`` for a waiting name."""

    def show(self, value: object, ctx: ShowContext) -> object:
        if not isinstance(value, bytes) or len(value) != 1 + ID_BYTES:
            raise _bad_stored(value, "subject key")
        tag, raw = value[:1], value[1:]
        if tag == ENTITY_TAG:
            return {"id": raw.hex(), "name": ctx.entity_name(raw)}
        if tag == MEMORY_TAG:
            return {"memory": raw.hex()}
        if tag == PENDING_TAG:
            return {"pending": raw.hex(), "name": ctx.pending_name(raw)}
        raise _bad_stored(value, "subject key")

    def read(self, value: object, path: str, ctx: ReadContext) -> object:
        if isinstance(value, dict) and set(value) == {"memory"}:
            return MEMORY_TAG + hex_from_json(value["memory"], f"{path}.memory", ID_BYTES)
        if isinstance(value, dict) and set(value) == {"pending", "name"}:
            review_id = hex_from_json(value["pending"], f"{path}.pending", ID_BYTES)
            name = value["name"]
            if name is not None and not isinstance(name, str):
                raise FieldError(f"{path}.name", "must be text")
            ctx.pendings.append((f"{path}.name", review_id, name))
            return PENDING_TAG + review_id
        if isinstance(value, dict) and set(value) == {"id", "name"}:
            entity_id = _Entity().read(value, path, ctx)
            assert isinstance(entity_id, bytes)
            return ENTITY_TAG + entity_id
        raise FieldError(
            path,
            'must be {"id", "name"} (an entity), {"memory"} or {"pending", "name"} (a name '
            "waiting for review)",
        )


_OBJECT_PLAIN: Final = {"text": str, "int": int, "float": float, "bool": bool}
"""Object kinds written as they are, with the JSON type each must have."""


@dataclass(frozen=True)
class _Object:
    """A statement's object: ``{"entity": {"id", "name"}}``, ``{"time": ISO}``,
    ``{"memory": hex}``, ``{"statement": hex}``, or ``{"text"}``, ``{"int"}``,
    ``{"float"}``, ``{"bool"}`` as they are."""

    def show(self, value: object, ctx: ShowContext) -> object:
        if not isinstance(value, dict) or len(value) != 1:
            raise _bad_stored(value, "object")
        kind, inner = next(iter(value.items()))
        if kind == "entity":
            return {"entity": _Entity().show(inner, ctx)}
        if kind == "time":
            return {"time": _Time(VALID_AXIS).show(inner, ctx)}
        if kind in ("memory", "statement"):
            return {kind: _Hex(ID_BYTES).show(inner, ctx)}
        if kind in _OBJECT_PLAIN and type(inner) is _OBJECT_PLAIN[kind]:
            return {kind: inner}
        raise _bad_stored(value, "object")

    def read(self, value: object, path: str, ctx: ReadContext) -> object:
        if not isinstance(value, dict) or len(value) != 1:
            raise FieldError(path, "an object must have exactly one kind (text, entity, int, …)")
        kind, inner = next(iter(value.items()))
        where = f"{path}.{kind}"
        if kind == "entity":
            return {"entity": _Entity().read(inner, where, ctx)}
        if kind == "time":
            return {"time": _Time(VALID_AXIS).read(inner, where, ctx)}
        if kind in ("memory", "statement"):
            return {kind: hex_from_json(inner, where, ID_BYTES)}
        if kind == "float":
            return {kind: _Number().read(inner, where, ctx)}
        if kind in _OBJECT_PLAIN:
            if type(inner) is not _OBJECT_PLAIN[kind]:
                raise FieldError(where, f"must be {_OBJECT_PLAIN[kind].__name__}")
            return {kind: inner}
        raise FieldError(path, f"{kind!r} is not a kind of object")


@dataclass(frozen=True)
class _Vector:
    """A vector a client gave with ENCODE: float32 bytes, written as the export's
    vectors are (base64 when it writes none)."""

    def show(self, value: object, ctx: ShowContext) -> object:
        if not isinstance(value, bytes):
            raise _bad_stored(value, "vector")
        return show_vector(value, ctx.vectors)

    def read(self, value: object, path: str, ctx: ReadContext) -> object:
        return read_vector(value, path, ctx.vectors)


def show_vector(raw: bytes, vectors: str) -> object:
    """A vector in the form an export of ``vectors`` writes (base64 for ``none``)."""
    return vector_to_json(raw, "list" if vectors == "list" else "base64")


def read_vector(value: object, path: str, vectors: str) -> bytes:
    """A vector of a file whose header says ``vectors``."""
    return vector_from_json(value, path, "list" if vectors == "list" else "base64")


@dataclass(frozen=True)
class Field:
    """One field: its name in the line, its name in the stored map, how it reads, and
    whether every stored map of its kind has it."""

    name: str
    codec: Codec
    required: bool = False
    stored: str = ""
    """The stored map's key ("" means the same as ``name``)."""

    @property
    def key(self) -> str:
        """The stored map's key."""
        return self.stored or self.name


@dataclass(frozen=True)
class Fields:
    """A stored map and its JSON object, field by field. ``scoped`` maps also hold
    ``namespace`` and ``space``, which the line holds once, at its top."""

    what: str
    fields: tuple[Field, ...]
    scoped: bool = False

    def show(self, row: dict[str, object], ctx: ShowContext) -> dict[str, object]:
        """The JSON object of stored map ``row``."""
        known = {f.key for f in self.fields}
        if self.scoped:
            if (row.get("namespace"), row.get("space")) != ctx.scope:
                raise Internal(f"a stored {self.what} names another space than its key")
            known |= {"namespace", "space"}
        unknown = sorted(set(row) - known)
        if unknown:
            raise Internal(
                f"a stored {self.what} has fields the JSONL form does not describe: {unknown}"
            )
        return {f.name: f.codec.show(row[f.key], ctx) for f in self.fields if f.key in row}

    def read(
        self,
        value: dict[str, object],
        path: str,
        ctx: ReadContext,
        *,
        skip: frozenset[str] = frozenset(),
    ) -> dict[str, object]:
        """The stored map of JSON object ``value`` (``skip``: names the caller reads)."""
        names = {f.name for f in self.fields}
        for name in value:
            if name not in names and name not in skip:
                raise FieldError(_join(path, name), f"is not a field of a {self.what}")
        row: dict[str, object] = {}
        if self.scoped:
            row["namespace"], row["space"] = ctx.scope
        for f in self.fields:
            if f.name in value:
                row[f.key] = f.codec.read(value[f.name], _join(path, f.name), ctx)
            elif f.required:
                raise FieldError(_join(path, f.name), f"is required in a {self.what}")
        return row


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


@dataclass(frozen=True)
class _Nested:
    """A map held inside another (a statement's state, a memory's mentions)."""

    fields: Fields

    def show(self, value: object, ctx: ShowContext) -> object:
        if not isinstance(value, dict):
            raise _bad_stored(value, self.fields.what)
        return self.fields.show({str(k): v for k, v in value.items()}, ctx)

    def read(self, value: object, path: str, ctx: ReadContext) -> object:
        if not isinstance(value, dict):
            raise FieldError(path, f"must be an object ({self.fields.what})")
        return self.fields.read(value, path, ctx)


@dataclass(frozen=True)
class _Tuple:
    """A stored array of fixed places (the last ones optional) shown as an object."""

    what: str
    places: tuple[Field, ...]
    least: int
    """Places every stored array has."""

    def show(self, value: object, ctx: ShowContext) -> object:
        if not isinstance(value, list) or not self.least <= len(value) <= len(self.places):
            raise _bad_stored(value, self.what)
        return {f.name: f.codec.show(v, ctx) for f, v in zip(self.places, value, strict=False)}

    def read(self, value: object, path: str, ctx: ReadContext) -> object:
        if not isinstance(value, dict):
            raise FieldError(path, f"must be an object ({self.what})")
        names = [f.name for f in self.places]
        for name in value:
            if name not in names:
                raise FieldError(_join(path, name), f"is not a field of a {self.what}")
        present = [name in value for name in names]
        count = sum(present)
        if count < self.least or present != [True] * count + [False] * (len(names) - count):
            missing = names[present.index(False)] if False in present else names[0]
            raise FieldError(_join(path, missing), f"is required in a {self.what}")
        return [f.codec.read(value[f.name], _join(path, f.name), ctx) for f in self.places[:count]]


@dataclass(frozen=True)
class _ReviewRecords:
    """A review item's records: candidate entities (``{"id", "name"}``) for an ambiguous
    name, statement ids (hex) for a contradiction."""

    def show(self, value: object, ctx: ShowContext) -> object:
        if not isinstance(value, list):
            raise _bad_stored(value, "review's records")
        item: Codec = _Entity() if ctx.review_kind == "ambiguous_entity" else _Hex(ID_BYTES)
        return [item.show(v, ctx) for v in value]

    def read(self, value: object, path: str, ctx: ReadContext) -> object:
        if not isinstance(value, list):
            raise FieldError(path, "must be a list")
        found: list[object] = []
        for i, item in enumerate(value):
            where = f"{path}[{i}]"
            found.append(
                _Entity().read(item, where, ctx)
                if isinstance(item, dict)
                else hex_from_json(item, where, ID_BYTES)
            )
        return found


TEXT: Final = _Text()
"""Text as it is."""
INTEGER: Final = _Integer()
"""A whole number (never a truth value)."""
NUMBER: Final = _Number()
"""A float; a whole number in a line reads as one."""
BOOL: Final = _Bool()
"""true or false."""
RECORD_TIME: Final = _Time(RECORD_AXIS)
"""A time set by the server, ISO 8601 with nanoseconds, never before 1970."""
VALID_TIME: Final = _Time(VALID_AXIS)
"""A time set by the client, ISO 8601 with nanoseconds."""
RECORD_ID: Final = _Hex(ID_BYTES)
"""A record id in hex."""
DIGEST: Final = _Hex(SHA256_BYTES)
"""A SHA-256 in hex."""
BYTES: Final = _Hex(None)
"""Bytes of any length in hex (a key id)."""
FREE: Final = _Free()
"""A free value (attributes, schema declarations)."""
ENTITY_REF: Final = _Entity()
"""An entity id, shown as ``{"id", "name"}``."""
SUBJECT: Final = _Subject()
"""A subject key: an entity, a memory or a waiting name."""
OBJECT: Final = _Object()
"""A statement's object."""
TEXTS: Final = _List(TEXT)
"""A list of texts."""
IDS: Final = _List(BYTES)
"""Record ids, or a digest where an operation names a text (``override_forgotten``)."""


def list_of(item: Codec) -> Codec:
    """A list of values that each read as ``item``."""
    return _List(item)


def nested(fields: Fields) -> Codec:
    """A map held inside another (a statement's state, an evidence item)."""
    return _Nested(fields)


def places(what: str, fields: tuple[Field, ...], *, least: int) -> Codec:
    """A stored array of fixed places shown as an object of ``fields`` (the first
    ``least`` present in every array, the rest optional at its end)."""
    return _Tuple(what, fields, least)


REVIEW_RECORDS: Final = _ReviewRecords()
"""A review item's records: entity references or statement ids, by its kind."""
CLIENT_VECTOR: Final = _Vector()
"""A vector a client gave with ENCODE."""
