"""``brain follow``: the space's change feed, as it happens (SUBSCRIBE).

Prints one line per change (``--json``: one JSON object per line) until Ctrl-C,
or until ``--max-events`` changes were printed. ``--from-lsn`` replays from that
LSN first, then goes live, with no gaps and no duplicates (WIRE.md §8). On the
way out it names the LSN to resume from.
"""

from __future__ import annotations

from collections.abc import Sequence

from brain.cli.verbs.arguments import argument, parse_choices
from brain.cli.verbs.context import VerbContext
from brain.cli.verbs.options import Parents, SubParsers, add_verb
from brain.client import Client
from brain.errors import BrainError
from brain.wire.messages.subscribe_ops import (
    RECORD_KINDS,
    ChangeEvent,
    Subscribe,
    SubscriptionEnded,
    Unsubscribe,
)
from brain.wire.opcodes import Opcode

__all__ = ["register", "resume_point"]


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


def resume_point(last_shown: int, unshown: Sequence[int], next_lsn: int | None) -> int:
    """The LSN to resume from after showing changes up to ``last_shown``.

    ``unshown`` are the LSNs of the changes that arrived after the last one shown,
    in order, and ``next_lsn`` the ending frame's "every change before it was sent"
    (None when the subscription did not end with one, as after Ctrl-C). The first
    unshown change is where to resume: its LSN is ``last_shown`` itself when that
    LSN was cut short. When none arrived before the ending frame, ``last_shown`` was
    whole (the server sends each LSN's changes together, before it can end), so
    the next LSN follows it. Without an ending frame nothing says it was whole.
    """
    if unshown:
        return unshown[0]
    if next_lsn is None:
        return last_shown
    return max(next_lsn, last_shown + 1)


def _subscription_stream(client: Client) -> int | None:
    """The stream id of the connection's one open SUBSCRIBE, or None."""
    found = [sid for sid, op in client.open_streams().items() if op is Opcode.SUBSCRIBE]
    return found[0] if len(found) == 1 else None


def _follow(ctx: VerbContext) -> int:
    args = ctx.args
    out = ctx.printer
    request = Subscribe(space=ctx.space, from_lsn=args.from_lsn, records=args.records)
    client = ctx.client()
    ctx.sent = True
    shown = 0
    last_lsn: int | None = None
    at_last = 0  # changes shown of LSN last_lsn
    unshown: list[int] = []  # LSNs of changes that came after --max-events was reached
    ended: int | None = None
    stopping = False
    # No per-frame timeout: a quiet space may send nothing for hours.
    stream = client.stream(Opcode.SUBSCRIBE, request, timeout=None)
    try:
        for frame in stream:
            if isinstance(frame, SubscriptionEnded):
                ended = frame.next_lsn
                break
            assert isinstance(frame, ChangeEvent)
            if stopping:
                unshown.append(frame.lsn)
                continue
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
            at_last = at_last + 1 if frame.lsn == last_lsn else 1
            last_lsn = frame.lsn
            if args.max_events is not None and shown >= args.max_events:
                # UNSUBSCRIBE, unlike leaving the stream, ends it with the LSN it
                # reached, and the changes sent meanwhile say whether this LSN was whole.
                sid = _subscription_stream(client)
                if sid is None:
                    break
                stopping = True
                client.call(Opcode.UNSUBSCRIBE, Unsubscribe(space=ctx.space, stream=sid))
    except KeyboardInterrupt:
        pass  # Ctrl-C is how a person stops following
    except BrainError:
        if not stopping:
            raise
        ended = None  # the changes were shown; only the exact resume point is lost
    finally:
        stream.close()  # tells the server to stop (CANCEL_STREAM) unless it has ended
    if last_lsn is None:
        if ended is not None:
            out.note(f"{shown} changes; resume with --from-lsn {ended}")
        return 0
    resume = resume_point(last_lsn, unshown, ended)
    hint = f"{shown} changes; resume with --from-lsn {resume}"
    if resume == last_lsn:
        if at_last == 1:
            hint += f" (LSN {resume}: its change shown above repeats)"
        else:
            hint += f" (LSN {resume}: its {at_last} changes shown above repeat)"
    out.note(hint)
    return 0
