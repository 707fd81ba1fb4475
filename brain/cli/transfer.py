"""``brain export`` and ``brain import``: move a namespace through the admin port.

Both talk to a running server's admin port (``GET /v1/export``, ``POST
/v1/import``, ``spec/06-operations.md``) with the admin token: ``--token``, or
``BRAIN_ADMIN_TOKEN``, or the ``admin_token`` of the data directory's
``credentials.toml``. An export is written as it streams; an import checks the
whole file first (header, every row, the trailer's count), then sends it in
batches with a progress bar. Running an interrupted import again resumes it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tomllib
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Final

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

__all__ = ["IMPORT_BATCH_ROWS", "TransferError", "add_commands", "run", "run_export", "run_import"]

IMPORT_BATCH_ROWS: Final = 1000
"""Rows per import request: one logged write of a few hundred kilobytes, well under
the server's limit of 10,000 rows a request."""

HTTP_TIMEOUT_S: Final = 300.0
"""Longest wait for one admin request: a batch of vectors on a busy server."""

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
    imported = commands.add_parser(
        "import",
        help="import an export into empty spaces",
        description="Import a file `brain export` wrote into a running server; the spaces "
        "it fills must be empty. Run it again to resume an interrupted import.",
    )
    _add_admin(imported)
    imported.add_argument("file", type=Path, metavar="FILE.jsonl", help="the export to import")


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


def _request(args: argparse.Namespace, method: str, path: str, body: object = None) -> IO[bytes]:
    data = None if body is None else json.dumps(body).encode()
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
        raise TransferError(f"the server refused ({exc.code}): {detail}") from None
    except OSError as exc:
        raise TransferError(
            f"cannot reach the admin port at {args.admin_url} ({exc}); is the server running?"
        ) from None
    return response


def run_export(args: argparse.Namespace) -> int:
    """``brain export``."""
    from urllib.parse import quote

    console = Console(stderr=True, quiet=args.quiet)
    response = _request(args, "GET", f"/v1/export?namespace={quote(args.namespace)}")
    out: IO[str] = sys.stdout if args.out is None else args.out.open("w", encoding="utf-8")
    rows = 0
    trailer: dict[str, object] | None = None
    try:
        with console.status("exporting…") as status:
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
    finally:
        if out is not sys.stdout:
            out.close()
    if trailer is None or trailer.get("rows") != rows:
        raise TransferError("the export stopped before its end; run it again")
    console.print(f"exported {rows} rows of namespace {args.namespace!r}")
    return EXIT_OK


def _read_export(path: Path) -> tuple[dict[str, object], list[dict[str, object]]]:
    """The header and the rows of an export file, checked whole before anything is sent."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise TransferError(f"cannot read {path}: {exc}") from None
    try:
        parsed = [json.loads(line) for line in lines if line.strip()]
    except json.JSONDecodeError as exc:
        raise TransferError(f"{path} is not JSON Lines (line {exc.lineno}): {exc.msg}") from None
    if len(parsed) < 2 or not str(parsed[0].get("format", "")).startswith("brain-export/"):
        raise TransferError(f"{path} is not a file `brain export` wrote")
    header, rows, trailer = parsed[0], parsed[1:-1], parsed[-1]
    if trailer.get("end") is not True or trailer.get("rows") != len(rows):
        raise TransferError(f"{path} is cut short: its trailer does not count its rows")
    return header, rows


def _batches(rows: list[dict[str, object]]) -> Iterator[list[dict[str, object]]]:
    for start in range(0, len(rows), IMPORT_BATCH_ROWS):
        yield rows[start : start + IMPORT_BATCH_ROWS]


def run_import(args: argparse.Namespace) -> int:
    """``brain import FILE.jsonl``."""
    header, rows = _read_export(args.file)
    console = Console(stderr=True, quiet=args.quiet)
    columns = (
        TextColumn("importing"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    )
    done = 0
    with Progress(*columns, console=console, disable=args.quiet) as progress:
        task = progress.add_task("rows", total=len(rows))
        for batch in _batches(rows):
            with _request(args, "POST", "/v1/import", {"header": header, "rows": batch}) as answer:
                done += int(json.load(answer)["imported"])
            progress.update(task, completed=done)
    console.print(f"imported {done} rows into namespace {header.get('namespace')!r}")
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    """Run ``export`` or ``import``; a problem the user can fix is one line and exit 1."""
    try:
        return run_export(args) if args.command == "export" else run_import(args)
    except TransferError as exc:
        print(f"brain {args.command}: {exc}", file=sys.stderr)
        return EXIT_FAILED
