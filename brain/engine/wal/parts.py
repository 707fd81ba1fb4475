"""A record too large for one message of its log, logged as several (spec/05-durability.md
§14.12).

A replicated log takes records of at most its servers' message limit (a NATS server's
``max_payload``: 1 MiB by default), far below what one write may plan (a transaction
up to its budget, §9). So a plan whose payload is larger than the log's
``max_record_payload`` is logged as ``count`` records of kind
:data:`PART_RECORD_KIND`, at consecutive LSNs. Each record's payload is a header
(:data:`PART_HEADER`: the LSN of the first part, this part's index, ``count``, and
the kind of the whole record) followed by a slice of the whole payload. The plan's
own LSN (what its answer and its rows carry) is its first part's LSN. It is applied
once its last part is read, and a store that applied it has applied up to the last
part.

The parts are appended together in one batch, but a planner deposed in the middle may
leave only the first ones in the log. The next planner appends after them, so
:func:`join_parts` drops parts that are not followed by the rest of their record,
and counts their LSNs into the next whole record it yields (:attr:`Whole.first`). No
record is ever applied from some of its parts only.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final

from brain.engine.wal.format import MAX_RECORD_KIND, MIN_RECORD_KIND, WalRecord

__all__ = [
    "MIN_PART_ROOM",
    "PART_HEADER",
    "PART_RECORD_KIND",
    "Whole",
    "join_parts",
    "record_count",
    "split_record",
]

PART_RECORD_KIND: Final = 2
"""The kind of a record that holds a slice of a larger one (the plan kind is 1)."""

PART_HEADER: Final = struct.Struct(">QIIH")
"""What starts a part's payload: the first part's LSN, this part's index from 0, the
number of parts, and the whole record's kind."""

MIN_PART_ROOM: Final = 64 * 1024
"""The smallest slice a log may ask for: a limit below it would cut a plan into
thousands of records (NATS itself takes 1 MiB messages by default)."""


@dataclass(frozen=True, slots=True)
class Whole:
    """One record as its writer planned it, read back from the log: ``lsn`` is its
    own (its first part's), ``payload`` the whole of it; it stands for the log's LSNs
    ``first`` .. ``last`` (its parts, and any torn parts dropped just before it)."""

    lsn: int
    record_time: int
    kind: int
    payload: bytes
    first: int
    last: int


def record_count(size: int, limit: int) -> int:
    """How many records a payload of ``size`` bytes takes in a log whose records hold
    at most ``limit`` bytes."""
    if size <= limit:
        return 1
    room = _room(limit)
    return -(-size // room)


def _room(limit: int) -> int:
    room = limit - PART_HEADER.size
    if room < MIN_PART_ROOM:
        raise ValueError(f"a record limit of {limit} bytes leaves parts too small")
    return room


def split_record(
    lsn: int, record_time: int, kind: int, payload: bytes, limit: int
) -> list[WalRecord]:
    """The records logging ``payload`` at ``lsn``: itself when it fits in ``limit``
    bytes, else its parts at ``lsn``, ``lsn`` + 1, …, each at most ``limit`` bytes."""
    if len(payload) <= limit:
        return [WalRecord(lsn, record_time, kind, payload)]
    room = _room(limit)
    count = record_count(len(payload), limit)
    view = memoryview(payload)
    return [
        WalRecord(
            lsn + index,
            record_time,
            PART_RECORD_KIND,
            PART_HEADER.pack(lsn, index, count, kind) + view[index * room : (index + 1) * room],
        )
        for index in range(count)
    ]


def _whole(record: WalRecord, first: int) -> Whole:
    return Whole(record.lsn, record.record_time, record.kind, record.payload, first, record.lsn)


def _header(record: WalRecord) -> tuple[int, int, int, int] | None:
    """A part's header, or None when it cannot be one (a damaged or foreign part)."""
    if len(record.payload) < PART_HEADER.size:
        return None
    first, index, count, kind = PART_HEADER.unpack_from(record.payload)
    if (
        count < 2
        or index >= count
        or first + index != record.lsn
        or kind == PART_RECORD_KIND
        or not MIN_RECORD_KIND <= kind <= MAX_RECORD_KIND
    ):
        return None
    return first, index, count, kind


def join_parts(records: Iterable[WalRecord]) -> Iterator[Whole]:
    """The whole records of ``records`` (in LSN order), each record's parts joined.
    Parts not followed by the rest of their record are dropped and counted into the
    next whole record; parts still incomplete when ``records`` ends are not yielded
    (a reader that goes on later reads them again)."""
    pending: list[bytes] = []
    expected: tuple[int, int, int] | None = None  # (first, count, kind) of the pending
    start: int | None = None  # the first LSN not yet yielded
    for record in records:
        if start is None:
            start = record.lsn
        if record.kind != PART_RECORD_KIND:
            yield _whole(record, start)
            pending, expected, start = [], None, None
            continue
        header = _header(record)
        if header is None:
            pending, expected = [], None
            continue
        first, index, count, kind = header
        if index == 0:
            pending, expected = [], (first, count, kind)
        elif expected != (first, count, kind) or index != len(pending):
            pending, expected = [], None  # a part whose earlier parts are missing
            continue
        pending.append(record.payload[PART_HEADER.size :])
        if len(pending) == count:
            payload = b"".join(pending)
            yield Whole(first, record.record_time, kind, payload, start, record.lsn)
            pending, expected, start = [], None, None
