"""The generations of a shard's stream: which JetStream stream holds its log now
(spec/05-durability.md §14.10).

A shard's log starts in the stream ``BRAIN_LOG_<shard>`` (generation 0, subject
``brain.log.<shard>``). A compaction (a hard forget's purge on the planner) copies
the log into the next generation, ``BRAIN_LOG_<shard>~<g>`` (subject
``brain.log.<shard>.g<g>``): the store's rows as base records ending at the LSN
compacted to, then the later records with their LSNs; then deletes the older one. ``~``
is in no shard name, so a generation's name is never another shard's.

The copy is the commit: a generation is **complete** once it holds every base
record (its description says how many, :class:`Compaction`).
The current generation is the newest complete one; an incomplete newer one is a
copy under way, or cut short by a crash, which only a compaction deletes.
Generations older than the current one are deleted by whoever finds them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Final

import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import StreamInfo

__all__ = [
    "GENERATION_MARK",
    "Compaction",
    "Generation",
    "current_of",
    "generation_of",
    "list_generations",
    "stream_name",
    "stream_subject",
]

GENERATION_MARK: Final = "~"
"""Between the shard's stream name and a generation's number: a character no shard
name holds, so that ``BRAIN_LOG_a~1`` can only be shard ``a``'s first compaction."""

_NAMES_API: Final = "$JS.API.STREAM.NAMES"

_NAMES_PAGE_TIMEOUT_S: Final = 2.0
"""One page of stream names, asked of the meta leader (milliseconds when it has one)."""


def stream_name(shard: str, generation: int) -> str:
    """The stream of ``shard``'s log in ``generation``."""
    base = f"BRAIN_LOG_{shard}"
    return base if generation == 0 else f"{base}{GENERATION_MARK}{generation}"


def stream_subject(shard: str, generation: int) -> str:
    """The subject the records of ``generation`` are published on."""
    base = f"brain.log.{shard}"
    return base if generation == 0 else f"{base}.g{generation}"


def generation_of(shard: str, name: str) -> int | None:
    """The generation a stream named ``name`` is of ``shard``'s log (None: not one)."""
    match = re.fullmatch(
        re.escape(f"BRAIN_LOG_{shard}") + rf"(?:{re.escape(GENERATION_MARK)}([0-9]+))?", name
    )
    if match is None:
        return None
    return 0 if match.group(1) is None else int(match.group(1))


@dataclass(frozen=True, slots=True)
class Compaction:
    """What a generation made by a compaction says of itself (its stream's
    description, JSON): the LSN it was compacted to, and how many base records it
    begins with (the store's rows at that LSN, carrying the LSNs up to it, so the
    stream's sequence 1 is LSN ``compacted_to - base + 1``). It is complete once it
    holds every base record."""

    compacted_to: int
    base: int

    def describe(self) -> str:
        """The stream description holding this."""
        return json.dumps({"compacted_to": self.compacted_to, "base": self.base})

    @classmethod
    def read(cls, info: StreamInfo) -> Compaction | None:
        """What the stream ``info`` describes (None: generation 0, or no compaction's)."""
        text = info.config.description
        if not text:
            return None
        try:
            body = json.loads(text)
            return cls(int(body["compacted_to"]), int(body["base"]))
        except (ValueError, KeyError, TypeError):
            return None


@dataclass(frozen=True, slots=True)
class Generation:
    """One generation of a shard's stream, as found."""

    number: int
    name: str
    info: StreamInfo

    @property
    def compaction(self) -> Compaction | None:
        """How this generation was made (None: it is the first)."""
        return Compaction.read(self.info)

    @property
    def complete(self) -> bool:
        """Whether it holds its whole base (the first generation always does)."""
        made = self.compaction
        return made is None or self.info.state.last_seq >= made.base


async def list_generations(client: Client, js: JetStreamContext, shard: str) -> list[Generation]:
    """Every generation of ``shard``'s stream the cluster holds, oldest first."""
    names: list[str] = []
    offset = 0
    while True:
        answer = await client.request(
            _NAMES_API, json.dumps({"offset": offset}).encode(), timeout=_NAMES_PAGE_TIMEOUT_S
        )
        body = json.loads(answer.data)
        if "error" in body:
            raise nats.js.errors.APIError.from_error(body["error"])
        page = body.get("streams") or []
        names.extend(str(name) for name in page)
        offset += len(page)
        if not page or offset >= int(body.get("total", 0)):
            break
    found: list[Generation] = []
    for name in names:
        number = generation_of(shard, name)
        if number is None:
            continue
        try:
            found.append(Generation(number, name, await js.stream_info(name)))
        except nats.js.errors.NotFoundError:
            continue  # deleted since it was listed
    return sorted(found, key=lambda g: g.number)


def current_of(found: list[Generation]) -> Generation | None:
    """The current generation among ``found``, oldest first: the newest complete one
    (None when there is none)."""
    complete = [g for g in found if g.complete]
    return complete[-1] if complete else None
