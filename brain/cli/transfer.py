"""``brain export`` and ``brain import``: move a namespace through the admin port.

Both talk to a running server's admin port (``GET /v1/export``, ``POST
/v1/import``, ``spec/06-operations.md`` §9) with the admin token: ``--token``,
or ``BRAIN_ADMIN_TOKEN``, or the ``admin_token`` of the data directory's
``credentials.toml``.

An export streams into ``FILE.partial`` and takes the name ``--out`` gives only
once its trailer has arrived and counts its rows, so a failed export leaves no
file behind; a namespace the server holds nothing of is an error. It is the
exact form by default (stored rows in hex, for another Brain server), or with
``--format jsonl`` the readable one (a record a line, for jq, diff and other
tools; ``--vectors`` adds the vectors), whose trailer's checksum is verified too.

An import reads either form (``--format`` says which, or the header tells). A
JSONL file is checked and turned into the rows of its records and their rebuilt
indexes here (:func:`brain.engine.admin.jsonl_import.read_jsonl`), which then go
through the same requests as an exact file's.

An import checks the whole file first (header, every row, the trailer's count,
no row too large for one request), asks the server where an earlier run of the
same export stopped, then sends the rest in batches of at most
:data:`IMPORT_BATCH_BYTES` with a progress bar. It finishes by asking the server
to close the import and count the rows of every table in every space, and fails
loudly when a count differs from the file's. A failure says at which row the
import stopped; running the same command again continues from there.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import sys
import tomllib
from collections import defaultdict
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import IO, TYPE_CHECKING, Final
from urllib.parse import quote

if TYPE_CHECKING:  # rich loads when a transfer runs
    from rich.console import Console


__all__ = [
    "IMPORT_BATCH_BYTES",
    "ExportFile",
    "TransferError",
    "add_commands",
    "check_row_sizes",
    "import_batches",
    "read_export",
    "run",
    "run_export",
    "run_import",
]

IMPORT_BATCH_BYTES: Final = 4 * 1024 * 1024
"""The JSON of one import request's rows: one logged write of about 2 MiB (rows
travel in hex), a sixteenth of the server's ``IMPORT_MAX_BODY``. A larger row is
sent alone; one whose request would pass ``IMPORT_MAX_BODY`` is refused before
anything is sent."""

HTTP_TIMEOUT_S: Final = 300.0
"""Longest wait for one admin request: a batch of vectors on a busy server."""

SCOPE_HEX_CHARS: Final = 64
"""A row's key begins with its 32-byte scope prefix, 64 characters in hex."""

ROW_SEPARATOR: Final = ", "
"""Between two rows of a request's ``rows`` array."""

EXPORT_FORMATS: Final = ("exact", "jsonl")
"""The forms ``brain export`` writes: stored rows in hex, or readable records."""

VECTOR_CHOICES: Final = ("none", "base64", "list")
"""How a JSONL export writes vectors: not at all (an import embeds again), as base64
of their float32 bytes, or as lists of numbers."""

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2


class TransferError(Exception):
    """Something a user can fix: the message says what."""


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``export`` and ``import`` to the ``brain`` command."""
    export = commands.add_parser(
        "export",
        help="export a namespace as JSON Lines",
        description="Export every record of a namespace, with its whole history on both "
        "time axes, from a running server's admin port.",
    )
    _add_admin(export)
    export.add_argument("--namespace", default="default", help="namespace (default: default)")
    export.add_argument("--out", type=Path, help="file to write (default: standard output)")
    export.add_argument(
        "--format",
        choices=EXPORT_FORMATS,
        default="exact",
        help="exact: stored rows in hex, for another Brain server (default); jsonl: one "
        "readable JSON record a line (spec/06-operations.md §9.2)",
    )
    export.add_argument(
        "--vectors",
        choices=VECTOR_CHOICES,
        help="with --format jsonl: write each document's vector as base64 or as a list "
        "(default none: an import embeds the texts again)",
    )
    imported = commands.add_parser(
        "import",
        help="import an export into empty spaces",
        description="Import a file `brain export` wrote into a running server; the spaces "
        "it fills must be empty. Run it again to continue an interrupted import.",
    )
    _add_admin(imported)
    imported.add_argument("file", type=Path, metavar="FILE.jsonl", help="the export to import")
    imported.add_argument(
        "--format",
        choices=("auto", *EXPORT_FORMATS),
        default="auto",
        help="the file's form: exact or jsonl (default auto: its header says)",
    )


def _add_admin(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", help="data directory whose credentials.toml holds the token")
    parser.add_argument(
        "--admin-url",
        default=os.environ.get("BRAIN_ADMIN_URL", "http://127.0.0.1:9092"),
        help="admin port (default http://127.0.0.1:9092, env BRAIN_ADMIN_URL)",
    )
    parser.add_argument(
        "--token", help="admin token (default: env BRAIN_ADMIN_TOKEN or credentials)"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress display")


def _token(args: argparse.Namespace) -> str:
    if args.token:
        return str(args.token)
    if os.environ.get("BRAIN_ADMIN_TOKEN"):
        return os.environ["BRAIN_ADMIN_TOKEN"]
    data = Path(args.data or os.environ.get("BRAIN_DATA", "./brain-data"))
    credentials = data / "credentials.toml"
    try:
        with credentials.open("rb") as fh:
            return str(tomllib.load(fh)["admin_token"])
    except (OSError, KeyError, tomllib.TOMLDecodeError) as exc:
        raise TransferError(
            f"no admin token: pass --token, set BRAIN_ADMIN_TOKEN, or point --data at the "
            f"server's data directory ({credentials}: {exc})"
        ) from None


def _request(
    args: argparse.Namespace, method: str, path: str, data: bytes | None = None
) -> IO[bytes]:
    # The HTTP client loads when a transfer runs, not with every other command.
    import urllib.error
    import urllib.request

    request = urllib.request.Request(f"{args.admin_url.rstrip('/')}{path}", data, method=method)
    request.add_header("Authorization", f"Bearer {_token(args)}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        response: IO[bytes] = urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S)
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace")
        with contextlib.suppress(ValueError, KeyError, TypeError):
            detail = json.loads(detail)["message"]
        if exc.code == HTTPStatus.REQUEST_ENTITY_TOO_LARGE:
            size = 0 if data is None else len(data)
            raise TransferError(
                f"the server refused a request of {size} bytes as too large (413): {detail}"
            ) from None
        raise TransferError(f"the server refused ({exc.code}): {detail}") from None
    except OSError as exc:
        raise TransferError(
            f"cannot reach the admin port at {args.admin_url} ({exc}); is the server running?"
        ) from None
    return response


def _json_answer(
    args: argparse.Namespace, method: str, path: str, data: bytes | None = None
) -> dict[str, object]:
    import http.client

    try:
        with _request(args, method, path, data) as answer:
            body = json.load(answer)
    except (OSError, http.client.HTTPException, ValueError) as exc:
        raise TransferError(f"the answer to {method} {path} was cut short ({exc})") from None
    if not isinstance(body, dict):
        raise TransferError(f"the answer to {method} {path} is not a JSON object")
    return body


def run_export(args: argparse.Namespace) -> int:
    """``brain export``."""
    from rich.console import Console

    console = Console(stderr=True, quiet=args.quiet)
    path = f"/v1/export?namespace={quote(args.namespace)}"
    if args.format == "jsonl":
        path += f"&format=jsonl&vectors={args.vectors or 'none'}"
    elif args.vectors is not None:
        raise TransferError("--vectors applies to --format jsonl only")
    # A refusal (an unknown namespace is NOT_FOUND) comes before any file is made.
    response = _request(args, "GET", path)
    copy = _write_jsonl if args.format == "jsonl" else _write_export
    if args.out is None:
        rows = copy(response, sys.stdout, console)
    else:
        partial = args.out.with_name(args.out.name + ".partial")
        try:
            with partial.open("w", encoding="utf-8") as out:
                rows = copy(response, out, console)
            os.replace(partial, args.out)
        finally:
            partial.unlink(missing_ok=True)
    what = "records" if args.format == "jsonl" else "rows"
    console.print(f"exported {rows} {what} of namespace {args.namespace!r}")
    return EXIT_OK


def _write_export(response: IO[bytes], out: IO[str], console: Console) -> int:
    """Copy the export's lines to ``out``; the rows counted, once the trailer agrees."""
    import http.client

    rows = 0
    trailer: dict[str, object] | None = None
    try:
        with response, console.status("exporting…") as status:
            for raw in response:
                line = raw.decode("utf-8")
                out.write(line)
                parsed = json.loads(line)
                if parsed.get("end") is True:
                    trailer = parsed
                elif "table" in parsed:
                    rows += 1
                    if rows % 1000 == 0:
                        status.update(f"exporting… {rows} rows")
    except (OSError, http.client.HTTPException, ValueError) as exc:
        raise TransferError(f"the export stopped before its end ({exc}); run it again") from None
    if trailer is None or trailer.get("rows") != rows:
        raise TransferError("the export stopped before its end; run it again")
    return rows


def _write_jsonl(response: IO[bytes], out: IO[str], console: Console) -> int:
    """Copy a JSONL export's lines to ``out``; the records counted, once the trailer
    agrees with them and its checksum with every byte before it."""
    import http.client

    records = 0
    trailer: dict[str, object] | None = None
    digest = hashlib.sha256()
    try:
        with response, console.status("exporting…") as status:
            for raw in response:
                line = raw.decode("utf-8")
                out.write(line)
                parsed = json.loads(line)
                if trailer is not None:
                    trailer = {}  # a line after the trailer: the answer is not an export
                elif parsed.get("type") == "trailer":
                    trailer = parsed
                    continue
                digest.update(raw)
                if parsed.get("type") != "header":
                    records += 1
                    if records % 1000 == 0:
                        status.update(f"exporting… {records} records")
    except (OSError, http.client.HTTPException, ValueError) as exc:
        raise TransferError(f"the export stopped before its end ({exc}); run it again") from None
    if trailer is None or trailer.get("lines") != records:
        raise TransferError("the export stopped before its end; run it again")
    if trailer.get("sha256") != digest.hexdigest():
        raise TransferError("the export arrived damaged (its checksum differs); run it again")
    return records


@dataclass(frozen=True, slots=True)
class ExportFile:
    """An export file, checked whole: what an import sends and verifies."""

    header: dict[str, object]
    trailer: dict[str, object]
    lines: list[str]
    """Each row's line as the file holds it (JSON), sent as it is."""
    counts: dict[str, dict[str, int]]
    """Rows per space (scope prefix in hex) and table."""

    @property
    def total(self) -> int:
        """The rows the file holds."""
        return len(self.lines)


def read_export(path: Path, form: str = "auto") -> ExportFile:
    """The export at ``path`` in either form (``auto``: as its first line says),
    checked whole before anything is sent."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TransferError(f"cannot read {path}: {exc}") from None
    found = "jsonl" if _first_line_is_jsonl(data) else "exact"
    if form not in ("auto", found):
        raise TransferError(f"{path} is a {found} export, not {form} (see --format)")
    if found == "jsonl":
        return _read_jsonl(path, data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TransferError(f"{path} is not UTF-8 text: {exc}") from None
    lines = [line.strip() for line in text.splitlines()]
    lines = [line for line in lines if line]
    try:
        parsed = [json.loads(line) for line in lines]
    except json.JSONDecodeError as exc:
        raise TransferError(f"{path} is not JSON Lines (line {exc.lineno}): {exc.msg}") from None
    if (
        len(parsed) < 2
        or not all(isinstance(line, dict) for line in parsed)
        or not str(parsed[0].get("format", "")).startswith("brain-export/")
    ):
        raise TransferError(f"{path} is not a file `brain export` wrote")
    header, rows, trailer = parsed[0], parsed[1:-1], parsed[-1]
    if trailer.get("end") is not True or trailer.get("rows") != len(rows):
        raise TransferError(f"{path} is cut short: its trailer does not count its rows")
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for number, row in enumerate(rows, start=2):
        table, key = row.get("table"), row.get("key")
        if not isinstance(table, str) or not isinstance(key, str) or len(key) < SCOPE_HEX_CHARS:
            raise TransferError(f"{path} line {number} is not a row of an export")
        counts[key[:SCOPE_HEX_CHARS]][table] += 1
    return ExportFile(header, trailer, lines[1:-1], {scope: dict(n) for scope, n in counts.items()})


def _first_line_is_jsonl(data: bytes) -> bool:
    from brain.engine.admin.jsonl_import import is_jsonl_header

    try:
        return is_jsonl_header(json.loads(data.split(b"\n", 1)[0]))
    except ValueError:
        return False


def _read_jsonl(path: Path, data: bytes) -> ExportFile:
    """A JSONL export as the rows an import sends: its records' and their indexes'."""
    from brain.engine.admin.jsonl_import import read_jsonl
    from brain.engine.admin.transfer import EXPORT_FORMAT
    from brain.errors import InvalidArgument

    try:
        read = read_jsonl(data)
    except InvalidArgument as exc:
        raise TransferError(f"{path}: {exc}") from None
    head = read.header
    header: dict[str, object] = {
        "format": EXPORT_FORMAT,
        "namespace": head.namespace,
        "export_id": head.export_id.hex(),
        "clock": head.clock,
    }
    lines = [
        json.dumps({"table": row.table.decode(), "key": row.key.hex(), "value": row.value.hex()})
        for row in read.rows
    ]
    scopes = [prefix.hex() for prefix in read.scopes]
    trailer: dict[str, object] = {"end": True, "rows": len(lines), "scopes": scopes}
    return ExportFile(header, trailer, lines, read.counts())


def _envelope(header: dict[str, object], start: int) -> tuple[bytes, bytes]:
    """The bytes of an import request before and after its rows."""
    head = f'{{"header": {json.dumps(header)}, "start": {start}, "rows": ['
    return head.encode(), b"]}"


def check_row_sizes(sizes: list[int], *, envelope: int, max_body: int) -> None:
    """TransferError for the first row whose request, the row alone, would pass
    ``max_body`` bytes (``envelope`` being the request's bytes around its rows)."""
    for index, size in enumerate(sizes):
        if envelope + size > max_body:
            raise TransferError(
                f"row {index} is {size} bytes, more than one import request may carry "
                f"({max_body} bytes with its envelope): this export cannot be imported"
            )


def import_batches(
    sizes: list[int], first: int, *, envelope: int, batch_bytes: int, max_rows: int
) -> list[tuple[int, int]]:
    """``(start, end)`` of each request sending rows ``first`` on, given each row's
    size in bytes: as many rows as keep the request within ``batch_bytes`` (and at
    most ``max_rows``), a larger row alone."""
    batches: list[tuple[int, int]] = []
    start = first
    while start < len(sizes):
        end, used = start, envelope
        while end < len(sizes) and end - start < max_rows:
            grown = used + sizes[end] + (len(ROW_SEPARATOR) if end > start else 0)
            if end > start and grown > batch_bytes:
                break
            end, used = end + 1, grown
        batches.append((start, end))
        start = end
    return batches


def _partial(path: Path, done: int, total: int) -> str:
    """What a failed import leaves, and how to go on."""
    again = f"the same `brain import {path}` command again"
    if done == 0:
        return "nothing of this export was imported."
    if done == total:
        return (
            f"every row is in, but the import was not closed and counted: run {again} to close it."
        )
    return (
        f"the import stopped at row {done} of {total}: the namespace holds a partial "
        "import, and its spaces answer reads and recalls without the rows not yet sent "
        f"(their records, vectors and lexical index). Run {again} to continue from row "
        f"{done}."
    )


def run_import(args: argparse.Namespace) -> int:
    """``brain import FILE.jsonl``."""
    from brain.engine.admin.import_marks import count_mismatches
    from brain.server.http import IMPORT_MAX_BODY, IMPORT_MAX_ROWS

    export = read_export(args.file, args.format)
    header, total = export.header, export.total
    head, tail = _envelope(header, total)  # the widest start: the largest envelope
    sizes = [len(line.encode()) for line in export.lines]
    check_row_sizes(sizes, envelope=len(head) + len(tail), max_body=IMPORT_MAX_BODY)
    namespace, export_id = str(header.get("namespace")), str(header.get("export_id"))
    status = _json_answer(
        args, "GET", f"/v1/import?namespace={quote(namespace)}&export_id={quote(export_id)}"
    )
    first = int(str(status.get("next", 0)))
    if first > total:
        raise TransferError(
            f"the server has imported {first} rows of this export, more than the file holds"
        )
    from rich.console import Console

    console = Console(stderr=True, quiet=args.quiet)
    if 0 < first < total:
        console.print(f"continuing an interrupted import at row {first} of {total}")
    from rich.progress import (  # only an import draws it: loaded then
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    columns = (TextColumn("importing"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    batches = import_batches(
        sizes,
        first,
        envelope=len(head) + len(tail),
        batch_bytes=IMPORT_BATCH_BYTES,
        max_rows=IMPORT_MAX_ROWS,
    )
    done = first
    try:
        with Progress(*columns, console=console, disable=args.quiet) as progress:
            task = progress.add_task("rows", total=total, completed=done)
            for start, end in batches:
                head, tail = _envelope(header, start)
                body = head + ROW_SEPARATOR.join(export.lines[start:end]).encode() + tail
                answer = _json_answer(args, "POST", "/v1/import", body)
                done = int(str(answer["next"]))
                progress.update(task, completed=done)
        finish = json.dumps({"header": header, "trailer": export.trailer}).encode()
        closed = _json_answer(args, "POST", "/v1/import/finish", finish)
    except TransferError as exc:
        raise TransferError(f"{exc}\n{_partial(args.file, done, total)}") from None
    counts = closed.get("counts")
    if not isinstance(counts, dict):
        raise TransferError("the server did not count the rows it holds")
    mismatches = count_mismatches(export.counts, counts)
    if mismatches:
        raise TransferError(
            "the import finished, but the rows the server holds differ from the file's:\n  "
            + "\n  ".join(mismatches)
        )
    spaces = len(export.counts)
    console.print(
        f"imported {total} rows into namespace {namespace!r}; the rows of every table in "
        f"its {spaces} space{'' if spaces == 1 else 's'} match the file"
    )
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    """Run ``export`` or ``import``; a problem the user can fix is one line and exit 1."""
    try:
        return run_export(args) if args.command == "export" else run_import(args)
    except TransferError as exc:
        print(f"brain {args.command}: {exc}", file=sys.stderr)
        return EXIT_FAILED
