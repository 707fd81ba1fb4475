"""``brain follow``: the space's change feed, as it happens (SUBSCRIBE).

Prints one line per change (``--json``: one JSON object per line) until Ctrl-C,
or until ``--max-events`` changes were printed. ``--from-lsn`` replays from that
LSN first, then goes live, with no gaps and no duplicates (spec/01-wire.md §9). On the
way out it names the LSN to resume from.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from brain.cli.verbs.arguments import argument, parse_choices
from brain.cli.verbs.context import VerbContext
from brain.cli.verbs.options import Parents, SubParsers, add_verb
from brain.cli.verbs.output import Printer
from brain.errors import BrainError
from brain.wire.messages.subscribe_ops import (
    RECORD_KINDS,
    ChangeEvent,
    Subscribe,
    SubscriptionEnded,
    Unsubscribe,
)
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message

if TYPE_CHECKING:
    from brain.client.sync import Client

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


@dataclass
class _Progress:
    """What following has shown so far, and what naming the resume point needs."""

    shown: int = 0
    last_lsn: int | None = None
    at_last: int = 0
    """Changes shown of LSN ``last_lsn``."""
    unshown: list[int] = field(default_factory=list)
    """LSNs of the changes that came after ``--max-events`` was reached."""
    ended: int | None = None
    """The ending frame's ``next_lsn``; None while none came."""
    stopping: bool = False
    """True once UNSUBSCRIBE was sent after ``--max-events`` changes."""

    def saw(self, lsn: int) -> None:
        """Count one change of ``lsn`` as shown."""
        self.shown += 1
        self.at_last = self.at_last + 1 if lsn == self.last_lsn else 1
        self.last_lsn = lsn


def _follow(ctx: VerbContext) -> int:
    request = Subscribe(space=ctx.space, from_lsn=ctx.args.from_lsn, records=ctx.args.records)
    client = ctx.client()
    ctx.sent = True
    progress = _Progress()
    # No per-frame timeout: a quiet space may send nothing for hours.
    stream = client.stream(Opcode.SUBSCRIBE, request, timeout=None)
    try:
        _show_changes(ctx, client, stream, progress)
    except KeyboardInterrupt:
        pass  # Ctrl-C is how a person stops following
    except BrainError:
        if not progress.stopping:
            raise
        progress.ended = None  # the changes were shown; only the exact resume point is lost
    finally:
        stream.close()  # tells the server to stop (CANCEL_STREAM) unless it has ended
    note = _resume_note(progress)
    if note is not None:
        ctx.printer.note(note)
    return 0


def _show_changes(
    ctx: VerbContext, client: Client, stream: Iterable[Message], progress: _Progress
) -> None:
    """Print each change of ``stream`` until it ends, or until ``--max-events`` were
    shown and UNSUBSCRIBE's ending frame came."""
    max_events = ctx.args.max_events
    for frame in stream:
        if isinstance(frame, SubscriptionEnded):
            progress.ended = frame.next_lsn
            return
        assert isinstance(frame, ChangeEvent)
        if progress.stopping:
            progress.unshown.append(frame.lsn)
            continue
        _print_change(ctx.printer, frame)
        progress.saw(frame.lsn)
        if max_events is not None and progress.shown >= max_events:
            # UNSUBSCRIBE, unlike leaving the stream, ends it with the LSN it
            # reached, and the changes sent meanwhile say whether this LSN was whole.
            sid = _subscription_stream(client)
            if sid is None:
                return
            progress.stopping = True
            client.call(Opcode.UNSUBSCRIBE, Unsubscribe(space=ctx.space, stream=sid))


def _print_change(out: Printer, frame: ChangeEvent) -> None:
    """One change: a JSON object, or a line of LSN, operation, record kind, id, time."""
    if out.json_output:
        out.json(frame, one_line=True)
    else:
        out.line(
            (f"LSN {frame.lsn:<6}", "bold"),
            f"  {frame.op:<9} {frame.record:<9} ",
            (frame.id.hex(), "cyan"),
            f"  {out.time(frame.recorded_at, compact=True)}",
        )


def _resume_note(progress: _Progress) -> str | None:
    """How many changes were shown and the ``--from-lsn`` that resumes after them;
    None when nothing was shown and nothing names a resume point."""
    if progress.last_lsn is None:
        if progress.ended is None:
            return None
        return f"{progress.shown} changes; resume with --from-lsn {progress.ended}"
    resume = resume_point(progress.last_lsn, progress.unshown, progress.ended)
    hint = f"{progress.shown} changes; resume with --from-lsn {resume}"
    if resume == progress.last_lsn:
        if progress.at_last == 1:
            hint += f" (LSN {resume}: its change shown above repeats)"
        else:
            hint += f" (LSN {resume}: its {progress.at_last} changes shown above repeat)"
    return hint
