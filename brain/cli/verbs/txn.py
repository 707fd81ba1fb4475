"""``brain txn FILE``: several writes applied all or none (TXN_BEGIN, TXN_COMMIT, TXN_ABORT).

A transaction belongs to one connection (spec/02-data-model.md, spec/05-durability.md §8), so
it cannot span several ``brain`` processes; instead FILE lists the writes, one
command line per line, as they would follow ``brain``::

    # comments and blank lines are skipped
    memory add "Alice joined Globex in February."
    statement add Alice works_at Globex --valid-from 2024-02-01 --evidence $1
    relation add works_with Alice Bob

Each line may be any write verb that builds its request for a transaction
(``memory add|forget``, ``statement add|supersede|tombstone|retract``, ``entity
add``, ``relation add|supersede|tombstone``) with its own options, ``--space`` included;
connection and output options on a line are ignored. A word that is exactly
``$N`` (also after ``id:``, ``entity:``, ``memory:``, ``statement:``) becomes the
id the N-th write was given, so later lines can use records made earlier.

Every write is buffered first, and any refusal aborts the whole transaction
(exit 1, naming the line); then TXN_COMMIT applies them all in one WAL record.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Final

from brain.cli.verbs.connect import UsageProblem
from brain.cli.verbs.context import Request, VerbContext
from brain.cli.verbs.options import Parents, SubParsers, add_verb
from brain.cli.verbs.output import cell, dump_json
from brain.cli.verbs.short_ids import resolve_arguments
from brain.errors import BrainError
from brain.wire.messages.txn_ops import (
    MAX_TXN_TIMEOUT_MS,
    TxnAbort,
    TxnAborted,
    TxnBegin,
    TxnBegun,
    TxnCommit,
    TxnCommitted,
)
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message

__all__ = ["TxnLineError", "parse_txn_lines", "register", "substitute"]

MAX_TXN_LINES: Final = 1000
"""Most writes one file may hold: the server's own cap on a transaction's writes
(MAX_TXN_WRITES), checked before anything is sent."""

ANSWER_ID_KEYS: Final = ("statement_id", "memory_id", "entity_id", "relation_id", "id")
"""Where a write's answer names the record it made or changed, in order of preference."""

_REFERENCE: Final = re.compile(r"(?P<prefix>(?:id|entity|memory|statement):)?\$(?P<n>\d+)")


class TxnLineError(Exception):
    """A line of the transaction file is not a write this verb can run."""


def register(commands: SubParsers, parents: Parents) -> None:
    """Add ``txn``; ``commands`` is kept to parse the file's lines with the same verbs."""
    txn = add_verb(
        commands,
        "txn",
        _txn,
        parents,
        help="apply the writes listed in FILE all or none (TXN_BEGIN … TXN_COMMIT)",
        description="Apply the writes FILE lists, all or none. One write per line, as it "
        "would follow `brain` (memory add|forget, statement add|supersede|tombstone|retract, "
        "entity add, relation add|supersede|tombstone), with its own options; # starts a comment. "
        "A word $N (or id:$N, memory:$N, ...) is the id the N-th write was given. Any "
        "refusal aborts the whole transaction.",
    )
    txn.add_argument("file", metavar="FILE", help="the writes, one command line each (- stdin)")
    txn.add_argument(
        "--timeout-ms",
        type=int,
        metavar="MS",
        help=f"the transaction's own timeout (server default; at most {MAX_TXN_TIMEOUT_MS})",
    )
    txn.set_defaults(txn_commands=commands)


def parse_txn_lines(text: str) -> list[tuple[int, list[str]]]:
    """``(line number, words)`` for each command line of a transaction file."""
    lines: list[tuple[int, list[str]]] = []
    for number, line in enumerate(text.splitlines(), 1):
        try:
            words = shlex.split(line, comments=True)
        except ValueError as exc:
            raise TxnLineError(f"line {number}: {exc}") from None
        if words:
            lines.append((number, words))
    if len(lines) > MAX_TXN_LINES:
        raise TxnLineError(f"{len(lines)} writes; a transaction holds at most {MAX_TXN_LINES}")
    return lines


def substitute(words: list[str], ids: Mapping[int, bytes], number: int) -> list[str]:
    """``words`` with each ``$N`` word replaced by the hex id of the N-th write."""
    out: list[str] = []
    for word in words:
        match = _REFERENCE.fullmatch(word)
        if match is None:
            out.append(word)
            continue
        index = int(match["n"])
        if index not in ids:
            raise TxnLineError(f"line {number}: ${index} names no earlier write")
        out.append((match["prefix"] or "") + ids[index].hex())
    return out


def _parse_line(commands: SubParsers, words: list[str], number: int) -> argparse.Namespace:
    parser = commands.choices.get(words[0])
    if parser is None:
        raise TxnLineError(f"line {number}: {words[0]!r} is not a brain verb")
    try:
        args: argparse.Namespace = parser.parse_args(words[1:])
    except SystemExit:
        # argparse has printed what was wrong with the line.
        raise TxnLineError(f"line {number}: cannot read {shlex.join(words)!r}") from None
    if getattr(args, "build", None) is None:
        raise TxnLineError(f"line {number}: {shlex.join(words[:2])} cannot join a transaction")
    return args


def _answer_id(answer: Message) -> bytes | None:
    for key in ANSWER_ID_KEYS:
        value = getattr(answer, key, None)
        if isinstance(value, bytes):
            return value
    return None


def _result_id(result: object) -> str:
    """The record a commit result names, in hex (else the result as JSON)."""
    if isinstance(result, dict):
        for key in ANSWER_ID_KEYS:
            value = result.get(key)
            if isinstance(value, bytes):
                return value.hex()
    return dump_json(result, one_line=True)


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageProblem(f"cannot read {path}: {exc.strerror}") from None


def _requests(
    commands: SubParsers, lines: list[tuple[int, list[str]]], ids: Mapping[int, bytes]
) -> None:
    """Check every line reads as a write before anything is sent (``$N`` taken as a
    placeholder id), so that a typo on line 9 never leaves eight writes buffered."""
    placeholder = bytes(16)
    for index, (number, words) in enumerate(lines, 1):
        earlier = {n: ids.get(n, placeholder) for n in range(1, index)}
        _parse_line(commands, substitute(words, earlier, number), number)


def _txn(ctx: VerbContext) -> int:
    args = ctx.args
    commands: SubParsers = args.txn_commands
    try:
        lines = parse_txn_lines(_read(args.file))
        _requests(commands, lines, {})
    except TxnLineError as exc:
        raise UsageProblem(str(exc)) from None
    if not lines:
        raise UsageProblem(f"{args.file} lists no writes")
    begun = ctx.call(
        Opcode.TXN_BEGIN, TxnBegin(space=ctx.space, timeout_ms=args.timeout_ms), TxnBegun
    )
    ids: dict[int, bytes] = {}
    done: list[tuple[int, str]] = []
    try:
        for index, (number, words) in enumerate(lines, 1):
            try:
                line_args = _parse_line(commands, substitute(words, ids, number), number)
            except TxnLineError as exc:
                raise UsageProblem(str(exc)) from None
            resolve_arguments(ctx, line_args)  # short ids, in the line's own --space
            request: Request = line_args.build(VerbContext(line_args, ctx.printer))
            message = replace(request.message, txn_id=begun.txn_id)  # type: ignore[type-var]
            try:
                answer = ctx.call(request.opcode, message, request.answer)
            except BrainError:
                ctx.printer.note(f"line {number} was refused: {shlex.join(words)}")
                raise
            made = _answer_id(answer)
            if made is not None:
                ids[index] = made
            done.append((number, shlex.join(words[:2])))
    except BaseException:
        _abort(ctx, begun.txn_id)
        raise
    committed = ctx.call(
        Opcode.TXN_COMMIT, TxnCommit(space=ctx.space, txn_id=begun.txn_id), TxnCommitted
    )
    out = ctx.printer
    if out.json_output:
        out.json(committed)
        return 0
    table = out.table("line", "write", "record")
    for (number, verb), result in zip(done, committed.results, strict=False):
        table.add_row(cell(number), cell(verb), cell(_result_id(result)))
    out.show(table)
    out.line(f"committed {len(done)} writes at LSN {committed.lsn}")
    return 0


def _abort(ctx: VerbContext, txn_id: bytes) -> None:
    """Drop the buffered writes; a failure here must not hide the error that led to it."""
    try:
        ctx.call(Opcode.TXN_ABORT, TxnAbort(space=ctx.space, txn_id=txn_id), TxnAborted)
    except BrainError:
        ctx.printer.note("the transaction could not be aborted; it expires on its own")
