"""The options verbs share, and helpers that add verbs and verb groups to the parser.

Every verb takes the connection options (:mod:`brain.cli.verbs.connect`),
``--space`` and the output options ``--json``, ``--utc``, ``--full-ids``. Every
write also takes ``--request-id`` and ``-q/--quiet``. Options follow the verb:
``brain statement list --json``.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import TypeAlias

from brain.cli.verbs.arguments import argument, parse_id
from brain.cli.verbs.connect import ENV_SPACE, add_connection_options
from brain.cli.verbs.context import Verb, WriteBuilder
from brain.cli.verbs.dates import parse_time

__all__ = [
    "Parents",
    "SubParsers",
    "add_group",
    "add_verb",
    "id_arg",
    "make_parents",
    "time_arg",
]

SubParsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""What ``add_subparsers`` returns; argparse gives it no public name."""

time_arg = argument(parse_time)
"""``type=`` for a date option: ISO 8601 or nanoseconds (:mod:`brain.cli.verbs.dates`)."""

id_arg = argument(parse_id)
"""``type=`` for a record id: 32 hex digits (or a hyphenated UUID)."""


@dataclass(frozen=True, slots=True)
class Parents:
    """Parent parsers holding the shared options: ``read`` for every verb, ``write``
    for the verbs that write."""

    read: argparse.ArgumentParser
    write: argparse.ArgumentParser


def make_parents() -> Parents:
    """Build the shared option sets once; verbs list them as ``parents``."""
    read = argparse.ArgumentParser(add_help=False)
    add_connection_options(read)
    read.add_argument(
        "--space",
        default=os.environ.get(ENV_SPACE) or None,
        help=f"space within the key's namespace (env {ENV_SPACE}, default: default)",
    )
    output = read.add_argument_group("output")
    output.add_argument(
        "--json", action="store_true", help="print the exact answer as JSON (ids in hex)"
    )
    output.add_argument("--utc", action="store_true", help="show times in UTC, not local time")
    output.add_argument("--full-ids", action="store_true", help="show ids in full in tables")
    write = argparse.ArgumentParser(add_help=False)
    options = write.add_argument_group("write")
    options.add_argument(
        "--request-id",
        type=id_arg,
        metavar="HEX",
        help="idempotency key (32 hex digits); repeat a write safely with the same one "
        "(default: fresh and random)",
    )
    options.add_argument(
        "-q", "--quiet", action="store_true", help="print only the id of the record written"
    )
    return Parents(read, write)


def add_group(commands: SubParsers, name: str, *, help: str) -> SubParsers:
    """A verb group (``brain statement …``); run alone it prints its help (exit 2)."""
    group: argparse.ArgumentParser = commands.add_parser(name, help=help, description=help)
    group.set_defaults(verb=None, verb_parser=group)
    actions: SubParsers = group.add_subparsers(dest=f"{name}_action", metavar="ACTION")
    return actions


def add_verb(
    commands: SubParsers,
    name: str,
    verb: Verb,
    parents: Parents,
    *,
    help: str,
    description: str | None = None,
    write: bool = False,
    build: WriteBuilder | None = None,
) -> argparse.ArgumentParser:
    """Add one verb. A ``write`` takes the write options; ``build`` (for writes that
    may join a transaction) makes its request, so that ``brain txn`` can run the
    same command line inside one."""
    chosen = [parents.read, parents.write] if write or build is not None else [parents.read]
    parser: argparse.ArgumentParser = commands.add_parser(
        name, help=help, description=description or help, parents=chosen
    )
    parser.set_defaults(verb=verb, verb_parser=parser, build=build)
    return parser
