"""What a verb prints: rich tables and panels for people, exact JSON for scripts.

``--json`` prints the server's answer as one JSON document: the message's wire
map (WIRE.md §2) with byte strings (ids, hashes, cursors) as lowercase hex and
integers (times in nanoseconds, LSNs) as JSON numbers, never rounded. Nothing is
added or left out, so a script sees exactly what the wire carried.

Without it, answers become tables and panels. Ids are shortened in tables to
``…`` and their last hex digits, as few as keep every id of the table distinct
(at least :data:`SHORT_ID_HEX`); the tail is used because a UUIDv7's head is its
creation time, shared by ids made in the same millisecond. Detail views and
write confirmations print full ids, as does ``--full-ids`` everywhere. Stored
text is never read as rich markup, and rich strips terminal control codes.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, TextIO

from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from brain.cli.verbs.dates import format_time
from brain.wire.schema import Message

__all__ = [
    "ID_BYTES",
    "SHORT_ID_HEX",
    "Labels",
    "Printer",
    "collect_ids",
    "dump_json",
    "shorten_ids",
    "to_json",
]

ID_BYTES: Final = 16
"""A record id's length on the wire (WIRE.md §2); any 16-byte value in an answer is one."""

SHORT_ID_HEX: Final = 8
"""Fewest hex digits a shortened id shows: 32 random bits, so a table of thousands of
ids rarely needs more, and when it does the shortener takes more."""

FULL_ID_HEX: Final = 2 * ID_BYTES


def to_json(value: object) -> object:
    """``value`` (a message, or what ``to_wire`` returns) as plain JSON values:
    bytes become hex, tuples lists; integers stay integers."""
    if isinstance(value, Message):
        value = value.to_wire()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    return value


def dump_json(value: object, *, one_line: bool = False) -> str:
    """``value`` as a JSON document (see :func:`to_json`), indented unless ``one_line``."""
    if one_line:
        return json.dumps(to_json(value), ensure_ascii=False, separators=(",", ":"))
    return json.dumps(to_json(value), ensure_ascii=False, indent=2)


def collect_ids(value: object) -> list[bytes]:
    """Every record id (16-byte value) in ``value``, in order of appearance, once each."""
    found: dict[bytes, None] = {}

    def walk(item: object) -> None:
        if isinstance(item, Message):
            item = item.to_wire()
        if isinstance(item, bytes) and len(item) == ID_BYTES:
            found[item] = None
        elif isinstance(item, Mapping):
            for sub in item.values():
                walk(sub)
        elif isinstance(item, list | tuple):
            for sub in item:
                walk(sub)

    walk(value)
    return list(found)


def shorten_ids(ids: Iterable[bytes], *, full: bool = False) -> dict[bytes, str]:
    """A label per id: ``…`` and the shortest hex tail (at least :data:`SHORT_ID_HEX`
    digits) that tells all of ``ids`` apart; the full hex when ``full``."""
    unique = list(dict.fromkeys(ids))
    if full:
        return {raw: raw.hex() for raw in unique}
    width = FULL_ID_HEX
    for digits in range(SHORT_ID_HEX, FULL_ID_HEX):
        if len({raw.hex()[-digits:] for raw in unique}) == len(unique):
            width = digits
            break
    return {raw: raw.hex() if width >= len(raw.hex()) else "…" + raw.hex()[-width:] for raw in unique}


@dataclass
class Labels:
    """How a view names ids: shortened (or full) hex, and entities by name where known.

    An entity whose name is shared by another entity on the same screen keeps its
    id beside the name, so two Alices stay apart."""

    short: dict[bytes, str]
    names: dict[bytes, str] = field(default_factory=dict)

    def id(self, raw: bytes) -> str:
        """The id's label (full hex for an id this view did not collect)."""
        return self.short.get(raw, raw.hex())

    def entity(self, raw: bytes) -> str:
        """The entity's name when known (with its id when the name is not unique here)."""
        name = self.names.get(raw)
        if name is None:
            return f"entity {self.id(raw)}"
        if list(self.names.values()).count(name) > 1:
            return f"{name} ({self.id(raw)})"
        return name


class Printer:
    """Writes a verb's output: JSON documents, or rich renderables to the terminal."""

    def __init__(
        self,
        *,
        json_output: bool = False,
        utc: bool = False,
        full_ids: bool = False,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
    ) -> None:
        """``stdout``/``stderr`` default to the process's own (tests pass buffers)."""
        self.json_output = json_output
        self.utc = utc
        self.full_ids = full_ids
        self._stdout = stdout if stdout is not None else sys.stdout
        self._stderr = stderr if stderr is not None else sys.stderr
        self.console = Console(file=self._stdout, highlight=False, soft_wrap=False)
        self.err = Console(file=self._stderr, highlight=False, soft_wrap=True)

    # --- values ----------------------------------------------------------------------

    def time(self, nanos: int | None) -> str:
        """A time as ISO 8601, local with offset (``--utc``: UTC); ``—`` when absent."""
        return "—" if nanos is None else format_time(nanos, utc=self.utc)

    def labels(self, value: object, names: Mapping[bytes, str] | None = None) -> Labels:
        """Labels for every id in ``value``, shortened together so none is ambiguous."""
        return Labels(shorten_ids(collect_ids(value), full=self.full_ids), dict(names or {}))

    # --- output ----------------------------------------------------------------------

    def json(self, value: object, *, one_line: bool = False) -> None:
        """Print ``value`` as one JSON document (one line when ``one_line``)."""
        self._stdout.write(dump_json(value, one_line=one_line) + "\n")
        self._stdout.flush()

    def raw(self, text: str) -> None:
        """Print ``text`` exactly as it is (no markup, no wrapping)."""
        self._stdout.write(text)
        self._stdout.flush()

    def show(self, *renderables: RenderableType) -> None:
        """Print rich renderables to standard output."""
        self.console.print(*renderables)

    def line(self, *parts: str | tuple[str, str]) -> None:
        """Print one line from plain parts and ``(text, style)`` parts; never markup."""
        self.console.print(Text.assemble(*parts), overflow="fold")

    def note(self, message: str) -> None:
        """A remark for a person, on standard error (so that stdout stays parseable)."""
        self.err.print(Text(message, style="dim"))

    def table(self, *columns: str, title: str | None = None) -> Table:
        """A table with these column headers; ids and times fold rather than vanish."""
        table = Table(title=title, title_justify="left", header_style="bold", expand=False)
        for name in columns:
            table.add_column(name, overflow="fold")
        return table


def cell(value: object, style: str = "") -> Text:
    """A table cell holding ``value`` as literal text: stored text is never markup."""
    return Text("" if value is None else str(value), style=style)
