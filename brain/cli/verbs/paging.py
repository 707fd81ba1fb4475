"""Lists that come in pages: ``--limit``, ``--cursor`` and ``--all``.

The list opcodes answer at most ``limit`` rows and a ``cursor`` when more
follow (spec/01-wire.md §9). A verb shows one page unless ``--all`` asks it to follow
the cursors to the end; the rows are then shown (or printed as JSON) as one
answer without a cursor.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Final, TypeVar

from brain.cli.verbs.arguments import argument
from brain.cli.verbs.output import Printer
from brain.wire.messages.values import MAX_LIST_LIMIT

__all__ = ["MAX_PAGES", "add_paging_options", "follow_pages", "page_footer"]

MAX_PAGES: Final = 10_000
"""Most pages ``--all`` reads: ten million rows at the largest page, more than a
terminal or a script wants at once; a guard against a cursor that never ends."""

A = TypeVar("A")
R = TypeVar("R")


def _limit(text: str) -> int:
    value = int(text)
    if not 1 <= value <= MAX_LIST_LIMIT:
        raise ValueError(f"a page holds 1 to {MAX_LIST_LIMIT} rows, not {value}")
    return value


def _cursor(text: str) -> bytes:
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a cursor (hex, as a page printed it)") from None
    if not raw:
        raise ValueError("a cursor is not empty")
    return raw


def add_paging_options(parser: argparse.ArgumentParser) -> None:
    """``--limit N``, ``--cursor HEX`` and ``--all``."""
    group = parser.add_argument_group("paging")
    group.add_argument(
        "--limit", type=argument(_limit), metavar="N", help="rows per page (server default 100)"
    )
    group.add_argument(
        "--cursor", type=argument(_cursor), metavar="HEX", help="continue after a previous page"
    )
    group.add_argument("--all", action="store_true", help="follow the cursors to the last row")


def follow_pages(
    fetch: Callable[[bytes | None], A],
    args: argparse.Namespace,
    rows_of: Callable[[A], Sequence[R]],
) -> tuple[list[R], bytes | None]:
    """The rows of one page (or, with ``--all``, of every page) and the cursor left."""
    rows: list[R] = []
    cursor: bytes | None = args.cursor
    for _ in range(MAX_PAGES):
        answer = fetch(cursor)
        rows.extend(rows_of(answer))
        cursor = getattr(answer, "cursor", None)
        if cursor is None or not args.all:
            break
    return rows, cursor


def page_footer(printer: Printer, count: int, nouns: tuple[str, str], cursor: bytes | None) -> None:
    """How many rows were shown (``nouns``: singular and plural) and, when more
    follow, how to get them; on standard error, so stdout stays the table."""
    plural = nouns[0] if count == 1 else nouns[1]
    if cursor is None:
        printer.note(f"{count} {plural}")
    else:
        printer.note(f"{count} {plural}; more follow: --all, or --cursor {cursor.hex()}")
