"""``brain follow``: the space's change feed, as it happens (SUBSCRIBE).

Prints one line per change (``--json``: one JSON object per line) until Ctrl-C,
or until ``--max-events`` changes were printed. ``--from-lsn`` replays from that
LSN first, then goes live, with no gaps and no duplicates (WIRE.md §8). On the
way out it names the LSN to resume from.
"""

from __future__ import annotations

from brain.cli.verbs.arguments import argument, parse_choices
from brain.cli.verbs.context import VerbContext
from brain.cli.verbs.options import Parents, SubParsers, add_verb
from brain.wire.messages.subscribe_ops import (
    RECORD_KINDS,
    ChangeEvent,
    Subscribe,
    SubscriptionEnded,
)
from brain.wire.opcodes import Opcode

__all__ = ["register"]


def _count(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(f"a count is 1 or more, not {value}")
    return value


def _lsn(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(f"an LSN is 0 or more, not {value}")
    return value


def register(commands: SubParsers, parents: Parents) -> None:
    """Add ``follow``."""
    follow = add_verb(
        commands,
        "follow",
        _follow,
        parents,
        help="print the space's changes as they happen (SUBSCRIBE)",
        description="Print each change of the space (LSN, operation, record kind, id, "
        "record time) until Ctrl-C. --from-lsn replays history first; --json prints one "
        "JSON object per line.",
    )
    follow.add_argument(
        "--from-lsn", type=argument(_lsn), metavar="N", help="replay from LSN N (default: now)"
    )
    follow.add_argument(
        "--records",
        type=argument(lambda t: parse_choices(t, RECORD_KINDS)),
        metavar=",".join(RECORD_KINDS),
        help="only these record kinds",
    )
    follow.add_argument(
        "--max-events", type=argument(_count), metavar="N", help="stop after N changes"
    )


def _follow(ctx: VerbContext) -> int:
    args = ctx.args
    out = ctx.printer
    request = Subscribe(space=ctx.space, from_lsn=args.from_lsn, records=args.records)
    client = ctx.client()
    ctx.sent = True
    shown = 0
    last_lsn: int | None = None
    resume: int | None = None
    # No per-frame timeout: a quiet space may send nothing for hours.
    stream = client.stream(Opcode.SUBSCRIBE, request, timeout=None)
    try:
        for frame in stream:
            if isinstance(frame, SubscriptionEnded):
                resume = frame.next_lsn
                break
            assert isinstance(frame, ChangeEvent)
            if out.json_output:
                out.json(frame, one_line=True)
            else:
                out.line(
                    (f"LSN {frame.lsn:<6}", "bold"),
                    f"  {frame.op:<9} {frame.record:<9} ",
                    (frame.id.hex(), "cyan"),
                    f"  {out.time(frame.recorded_at)}",
                )
            shown += 1
            last_lsn = frame.lsn
            if args.max_events is not None and shown >= args.max_events:
                break
    except KeyboardInterrupt:
        pass  # Ctrl-C is how a person stops following
    finally:
        stream.close()  # tells the server to stop (CANCEL_STREAM)
    if resume is None and last_lsn is not None:
        # The events of one LSN may have been cut short: resume at it, not after it.
        out.note(f"{shown} changes; resume with --from-lsn {last_lsn} (LSN {last_lsn} repeats)")
    elif resume is not None:
        out.note(f"{shown} changes; resume with --from-lsn {resume}")
    return 0
