"""The data verbs of the ``brain`` command: every data opcode as a command line.

::

    brain memory add|get          brain forget        ENCODE, MEMORY_GET, FORGET
    brain statement add|get|supersede|tombstone|retract|list
    brain history                                    STATEMENT_*
    brain entity add|get|update|resolve|merge|unmerge|list|tombstone
    brain relation add|get|supersede|tombstone|list|traverse
    brain recall        brain explain                RECALL, EXPLAIN
    brain schema get|put                             SCHEMA_GET, SCHEMA_PUT
    brain review list|decide                         REVIEW_LIST, REVIEW_DECIDE
    brain follow                                     SUBSCRIBE
    brain txn FILE                                   TXN_BEGIN … TXN_COMMIT

:func:`register` adds them to the parser of :mod:`brain.cli.main`, and
:func:`run` runs the one parsed. Exit codes are those of the ``brain`` command
(spec/06-operations.md §1): 0 success; 1 the operation failed (the server refused it, or
could not be reached), with one line on standard error naming the error, the
field and the fix; 2 the command could not run as given (bad usage, no API
key, an argument no message accepts), before anything was sent.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Mapping
from typing import Final, TextIO

from brain.cli.verbs import (
    admin_ops,
    entities,
    follow,
    memories,
    recall,
    relations,
    statements,
    txn,
)
from brain.cli.verbs.connect import UsageProblem
from brain.cli.verbs.context import VerbContext
from brain.cli.verbs.options import SubParsers, make_parents
from brain.cli.verbs.output import Printer
from brain.cli.verbs.problems import describe_error, flag_for_field
from brain.cli.verbs.short_ids import resolve_arguments
from brain.errors import BrainError, InvalidArgument

__all__ = ["COMMANDS", "EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "register", "run"]

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_INTERRUPTED: Final = 130
"""Ctrl-C, as shells report a process ended by SIGINT (128 + 2)."""

COMMANDS: Final = frozenset(
    {
        "memory",
        "forget",
        "statement",
        "history",
        "entity",
        "relation",
        "recall",
        "explain",
        "schema",
        "review",
        "follow",
        "txn",
    }
)
"""The top-level commands this package adds; :mod:`brain.cli.main` dispatches them here."""


def register(commands: SubParsers) -> None:
    """Add every verb to the ``brain`` parser's sub-commands."""
    parents = make_parents()
    for module in (memories, statements, entities, relations, recall, admin_ops, follow, txn):
        module.register(commands, parents)
    added = {name for name in commands.choices if name in COMMANDS}
    assert added == COMMANDS, f"COMMANDS is stale: {sorted(added ^ COMMANDS)}"


def _flags(args: argparse.Namespace) -> set[str]:
    parser = getattr(args, "verb_parser", None)
    if not isinstance(parser, argparse.ArgumentParser):
        return set()
    return {flag for action in parser._actions for flag in action.option_strings}


def run(
    args: argparse.Namespace,
    *,
    environ: Mapping[str, str] | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Run the verb ``args`` names; return the exit code.

    ``environ``, ``stdout`` and ``stderr`` default to the process's own.
    """
    err = stderr if stderr is not None else sys.stderr
    verb = getattr(args, "verb", None)
    if verb is None:
        args.verb_parser.print_help(err)
        return EXIT_USAGE
    printer = Printer(
        json_output=args.json, utc=args.utc, full_ids=args.full_ids, stdout=stdout, stderr=err
    )
    ctx = VerbContext(args, printer, environ=environ)

    def say(line: str) -> None:
        err.write(line + "\n")
        err.flush()

    try:
        _check_output_options(args)
        resolve_arguments(ctx, args)  # short ids, before any request is built
        code: int = verb(ctx)
        return code
    except UsageProblem as exc:
        say(f"brain: {exc}")
        return EXIT_USAGE
    except InvalidArgument as exc:
        if ctx.sent:
            say(_described(ctx, exc))
            return EXIT_FAILED
        # A message class refused an argument before anything was sent.
        flag = flag_for_field(exc.field or "", _flags(args))
        where = f" ({flag or exc.field})" if flag or exc.field else ""
        say(f"brain: {exc.message}{where}")
        return EXIT_USAGE
    except BrainError as exc:
        say(_described(ctx, exc))
        return EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`brain follow --json | head`): stop quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    finally:
        # The answer is printed; a failed goodbye changes nothing.
        with contextlib.suppress(BrainError, OSError):
            ctx.close()


def _check_output_options(args: argparse.Namespace) -> None:
    if getattr(args, "quiet", False) and args.json:
        raise UsageProblem("--quiet and --json each choose the output; give one")


def _described(ctx: VerbContext, exc: BrainError) -> str:
    target = ctx.target
    return describe_error(
        exc,
        address=target.address if target is not None else None,
        flags=_flags(ctx.args),
        request_id=ctx.last_request_id,
        key_source=target.key_source if target is not None else None,
    )
