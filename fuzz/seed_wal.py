"""Regenerate fuzz/corpus/wal/ with real segments written by the WAL.

Run it from the repository root::

    .venv/bin/python fuzz/seed_wal.py

A handful of plans (puts, deletes, counter adds, answers) are appended through
:class:`brain.engine.wal.WriteAheadLog` with a small segment size, so the log
rotates; every segment it wrote becomes a seed, plus a torn copy of the last
one (as a crash mid-append leaves it), a zero-filled tail, a copy whose last
record has a flipped length bit (a damaged header, which must read as
corruption), and one bare plan payload. Clocks and record times are fixed, so
the seeds are the same bytes on every run. Seeds are rewritten; other files in
the directory are kept, among them ``v1_segment_*``, the same log as format
version 1 wrote it (the layout the log still reads).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Final

from brain.engine.wal import WalRecord, WriteAheadLog, encode_record
from brain.engine.write.plan import PLAN_RECORD_KIND, Add, Delete, Plan, Put, encode_plan

REPO: Final = Path(__file__).resolve().parents[1]
CORPUS: Final = REPO / "fuzz" / "corpus" / "wal"

SEGMENT_BYTES: Final = 512
"""Small, so that the seed plans fill more than one segment."""

_CREATED_NS: Final = 1_717_200_000_000_000_000
"""A fixed creation and record time, so seeds do not change between runs."""

_TORN_CUT: Final = 7
"""Bytes cut from the last segment's end for the torn-tail seed."""

_ZERO_TAIL: Final = 64
"""Zero bytes appended for the grown-but-unwritten seed."""

_LENGTH_BYTE: Final = 5
"""The byte of a record header's length field (bytes 4-7) the damaged-header seed
flips a bit of: its low bit adds 65,536, past the end of the file."""


def plans() -> list[Plan]:
    """The plans the seed log holds: every change kind, with and without answers."""
    return [
        Plan((Put(b"statements", b"s-0001", b"\xa1\x61v\x01"),), (b"\xa1\x62id\x01",)),
        Plan(
            (
                Put(b"entities", b"e-0001", b"alice"),
                Add(b"counters", b"entities", 1),
                Put(b"entities", b"e-0002", b"bob"),
                Add(b"counters", b"entities", 1),
            ),
            (b"\xa0", b"\xa0"),
        ),
        Plan((Delete(b"statements", b"s-0001"), Add(b"counters", b"statements", -1)), ()),
        Plan((Put(b"relations", b"r" * 40, bytes(range(64))),), (b"\xa1\x62ok\xf5",)),
        Plan((), (b"\xa0",)),
        Plan(
            tuple(Put(b"statements", f"s-{n:04d}".encode(), b"x" * n) for n in range(8)),
            (b"\xa1\x61n\x08",),
        ),
    ]


def seeds() -> dict[str, bytes]:
    """Every seed as ``{file name: bytes}``, written through a real log in a temporary dir."""
    out: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "wal"
        with WriteAheadLog.open(
            directory, segment_bytes=SEGMENT_BYTES, fsync=lambda fd: None, clock=lambda: _CREATED_NS
        ) as log:
            for plan in plans():
                lsn = log.next_lsn
                log.append([WalRecord(lsn, _CREATED_NS + lsn, PLAN_RECORD_KIND, encode_plan(plan))])
                log.sync()
            segments = [path.read_bytes() for path in log.segments]
            last_record = list(log.read_from(log.last_lsn))[-1]
    for index, data in enumerate(segments):
        out[f"segment_{index}"] = data
    last = segments[-1]
    out["segment_torn_tail"] = last[:-_TORN_CUT]
    out["segment_zero_tail"] = last + bytes(_ZERO_TAIL)
    damaged = bytearray(last)
    damaged[len(last) - len(encode_record(last_record)) + _LENGTH_BYTE] ^= 0x01
    out["segment_damaged_header"] = bytes(damaged)
    out["plan_payload"] = encode_plan(plans()[1])
    return out


def main() -> None:
    """Write every seed into the corpus directory."""
    CORPUS.mkdir(parents=True, exist_ok=True)
    written = seeds()
    for name, data in written.items():
        (CORPUS / name).write_bytes(data)
    print(f"wrote {len(written)} seeds to {CORPUS.relative_to(REPO)}", file=sys.stderr)


if __name__ == "__main__":
    main()
