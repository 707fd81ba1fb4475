"""Memories: ``brain memory add|get`` and ``brain forget`` (ENCODE, MEMORY_GET, FORGET)."""

from __future__ import annotations

from brain.cli.verbs.context import Request, VerbContext
from brain.cli.verbs.options import Parents, SubParsers, add_group, add_verb, id_arg, time_arg
from brain.cli.verbs.views import memory_panel
from brain.wire.messages.memory_ops import (
    Encode,
    EncodeOk,
    Forget,
    ForgetOk,
    MemoryGet,
    MemoryGetOk,
)
from brain.wire.opcodes import Opcode

__all__ = ["register"]


def register(commands: SubParsers, parents: Parents) -> None:
    """Add ``memory add``, ``memory get`` and ``forget``."""
    memory = add_group(commands, "memory", help="store and read memories (raw text)")
    add = add_verb(
        memory,
        "add",
        _add,
        parents,
        build=_build_add,
        help="store a memory (ENCODE)",
        description="Store TEXT as a memory. The same text in the same space is stored "
        "once: the answer then names the first memory (deduplicated).",
    )
    add.add_argument("text", metavar="TEXT")
    add.add_argument("--occurred-at", type=time_arg, metavar="DATE", help="when it happened")
    add.add_argument(
        "--context",
        action="append",
        metavar="TEXT",
        help="where it came from, free text such as channel=slack; repeat to add lines",
    )
    add.add_argument(
        "--override-forgotten",
        action="store_true",
        help="store a text that was hard-forgotten (audited)",
    )
    get = add_verb(memory, "get", _get, parents, help="show one memory (MEMORY_GET)")
    get.add_argument("id", type=id_arg, metavar="ID")

    forget = add_verb(
        commands,
        "forget",
        _forget,
        parents,
        build=_build_forget,
        help="forget a memory (FORGET)",
        description="Forget a memory: softly (it stays, marked forgotten) or, with --hard, "
        "for good (its text is removed). Statements resting only on forgotten memories "
        "are tombstoned (soft) or retracted (hard).",
    )
    forget.add_argument("id", type=id_arg, metavar="ID")
    forget.add_argument("--hard", action="store_true", help="remove the text for good")


def _build_add(ctx: VerbContext) -> Request:
    args = ctx.args
    context = "\n".join(args.context) if args.context else None
    return Request(
        Opcode.ENCODE,
        Encode(
            space=ctx.space,
            request_id=ctx.request_id(),
            text=args.text,
            occurred_at=args.occurred_at,
            context=context,
            override_forgotten=True if args.override_forgotten else None,
        ),
        EncodeOk,
    )


def _add(ctx: VerbContext) -> int:
    answer = ctx.send(_build_add(ctx))
    assert isinstance(answer, EncodeOk)
    out = ctx.printer
    if out.json_output:
        out.json(answer)
    elif ctx.args.quiet:
        out.raw(answer.memory_id.hex() + "\n")
    elif answer.deduplicated:
        out.line(
            "memory ",
            (answer.memory_id.hex(), "cyan"),
            f" already holds this text (recorded {out.time(answer.recorded_at)})",
        )
    else:
        out.line(
            "memory ",
            (answer.memory_id.hex(), "cyan"),
            f" stored (recorded {out.time(answer.recorded_at)}, LSN {answer.lsn})",
        )
    return 0


def _get(ctx: VerbContext) -> int:
    answer = ctx.call(Opcode.MEMORY_GET, MemoryGet(space=ctx.space, id=ctx.args.id), MemoryGetOk)
    if ctx.printer.json_output:
        ctx.printer.json(answer)
    else:
        ctx.printer.show(memory_panel(answer.memory, ctx.printer))
    return 0


def _build_forget(ctx: VerbContext) -> Request:
    return Request(
        Opcode.FORGET,
        Forget(
            space=ctx.space,
            request_id=ctx.request_id(),
            memory=ctx.args.id,
            mode="hard" if ctx.args.hard else "soft",
        ),
        ForgetOk,
    )


def _forget(ctx: VerbContext) -> int:
    answer = ctx.send(_build_forget(ctx))
    assert isinstance(answer, ForgetOk)
    out = ctx.printer
    if out.json_output:
        out.json(answer)
    elif ctx.args.quiet:
        out.raw(answer.memory_id.hex() + "\n")
    elif answer.already_forgotten:
        out.line("memory ", (answer.memory_id.hex(), "cyan"), " was already forgotten")
    else:
        mode = "hard" if ctx.args.hard else "soft"
        cascade = answer.statements_tombstoned
        out.line(
            "memory ",
            (answer.memory_id.hex(), "cyan"),
            f" forgotten ({mode}, LSN {answer.lsn}); "
            f"{cascade} dependent statement{'s' if cascade != 1 else ''} "
            f"{'retracted' if mode == 'hard' else 'tombstoned'}",
        )
    return 0
