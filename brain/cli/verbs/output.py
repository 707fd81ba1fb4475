"""What a verb prints: rich tables and panels for people, exact JSON for scripts.

``--json`` prints the server's answer as one JSON document: the message's wire
map (spec/01-wire.md §2) with byte strings (ids, hashes, cursors) as lowercase hex and
integers (times in nanoseconds, LSNs) as JSON numbers, never rounded. Nothing is
added or left out, so a script sees exactly what the wire carried.

Without it, answers become tables and panels. Ids are shortened in tables to
``…`` and their last hex digits, as few as keep every id of the table distinct
(at least :data:`SHORT_ID_HEX`); the tail is used because a UUIDv7's head is its
creation time, shared by ids made in the same millisecond. A shortened id can
be typed back where a statement, entity or review id is asked for
(:mod:`brain.cli.verbs.short_ids`); memory and relation ids, whose short forms
could not be resolved, are shown whole by the views. Detail views and write
confirmations print full ids, as does ``--full-ids`` everywhere. Stored
text is never read as rich markup, and rich strips terminal control codes.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, TextIO

from brain.cli.verbs.dates import format_time
from brain.wire.schema import Message

# rich loads when something is printed, not for --help or a usage error (it is a
# fifth of the command's start-up).
if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.table import Table
    from rich.text import Text

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
"""A record id's length on the wire (spec/01-wire.md §2); any 16-byte value in an answer is one."""

SHORT_ID_HEX: Final = 8
"""Fewest hex digits a shortened id shows: 32 random bits, so a table of thousands of
ids rarely needs more, and when it does the shortener takes more."""

FULL_ID_HEX: Final = 2 * ID_BYTES

LONGEST_SHORT_ID_HEX: Final = 16
"""Past this many hex digits a shortened id saves little: it is shown whole."""

PIPE_WIDTH: Final = 200
"""Columns a table may use when standard output is not a terminal (a pager, a file):
rich's 80 would fold every time and id; ``COLUMNS`` still overrides it."""


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
    for digits in range(SHORT_ID_HEX, LONGEST_SHORT_ID_HEX + 1):
        if len({raw.hex()[-digits:] for raw in unique}) == len(unique):
            width = digits
            break
    return {
        raw: raw.hex() if width >= len(raw.hex()) else "…" + raw.hex()[-width:] for raw in unique
    }


@dataclass
class Labels:
    """How a view names ids: shortened (or full) hex, and entities by name where known.

    An entity whose name is shared by another entity on the same screen keeps its
    id beside the name, so two Alices stay apart."""

    short: dict[bytes, str]
    names: dict[bytes, str] = field(default_factory=dict)
    detail: bool = False
    """A detail view: an entity's id is always shown beside its name."""

    def id(self, raw: bytes) -> str:
        """The id's label (full hex for an id this view did not collect)."""
        return self.short.get(raw, raw.hex())

    def entity(self, raw: bytes) -> str:
        """The entity's name when known (with its id when the name is not unique here)."""
        name = self.names.get(raw)
        if name is None:
            return f"entity {self.id(raw)}"
        if self.detail or list(self.names.values()).count(name) > 1:
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
        width = None
        if not _is_terminal(self._stdout) and not os.environ.get("COLUMNS"):
            width = PIPE_WIDTH
        from rich.console import Console

        self.console: Console = Console(
            file=self._stdout, highlight=False, soft_wrap=False, width=width
        )
        self.err: Console = Console(file=self._stderr, highlight=False, soft_wrap=True)

    # --- values ----------------------------------------------------------------------

    def time(self, nanos: int | None, *, compact: bool = False) -> str:
        """A time as ISO 8601, local with offset (``--utc``: UTC); ``—`` when absent.

        ``compact`` (tables): to the second, ``2026-12-04 20:31:05Z``, so that a row
        does not wrap; detail views and ``--json`` keep every nanosecond."""
        return "—" if nanos is None else format_time(nanos, utc=self.utc, compact=compact)

    def labels(
        self, value: object, names: Mapping[bytes, str] | None = None, *, detail: bool = False
    ) -> Labels:
        """Labels for every id in ``value``, shortened together so none is ambiguous
        (in full for a ``detail`` view or with ``--full-ids``)."""
        short = shorten_ids(collect_ids(value), full=self.full_ids or detail)
        return Labels(short, dict(names or {}), detail=detail)

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
        from rich.text import Text

        safe = [
            printable(part) if isinstance(part, str) else (printable(part[0]), part[1])
            for part in parts
        ]
        self.console.print(Text.assemble(*safe), overflow="fold")

    def is_terminal(self) -> bool:
        """True when standard output is a terminal (not a pipe or a file)."""
        return _is_terminal(self._stdout)

    def note(self, message: str) -> None:
        """A remark for a person, on standard error (so that stdout stays parseable)."""
        from rich.text import Text

        self.err.print(Text(message, style="dim"))

    def table(self, *columns: str, title: str | None = None) -> Table:
        """A table with these column headers; ids and times fold rather than vanish."""
        from rich.table import Table

        table = Table(title=title, title_justify="left", header_style="bold", expand=False)
        for name in columns:
            table.add_column(name, overflow="fold")
        return table


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


_CONTROL: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""Control characters other than tab and newline: ESC and friends can move the cursor,
recolour or clear a terminal, so stored text never sends them (rich strips only some)."""


def printable(text: str) -> str:
    """``text`` with control characters shown as ``\\xNN`` instead of sent to the terminal."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def cell(value: object, style: str = "") -> Text:
    """A table cell holding ``value`` as literal text: stored text is never markup, and
    its control characters are shown, not obeyed."""
    from rich.text import Text

    return Text("" if value is None else printable(str(value)), style=style)
