"""Read-your-writes in the facade (:mod:`brain.sdk.consistency`): the highest LSN
seen, sent on reads only, never lowering a read's own ``min_lsn``."""

from __future__ import annotations

from brain.sdk.consistency import ReadYourWrites
from brain.wire.messages.memory_ops import EncodeOk, Forget, MemoryGet

ID = b"\x01" * 16


def _encoded(lsn: int) -> EncodeOk:
    return EncodeOk(memory_id=ID, lsn=lsn, recorded_at=1, sha256=b"\x00" * 32, deduplicated=False)


def test_remembers_the_highest_lsn() -> None:
    seen = ReadYourWrites(enabled=True)
    for lsn in (3, 9, 4):
        seen.saw(_encoded(lsn))
    seen.saw(MemoryGet(id=ID))  # no lsn: nothing to note
    assert seen.last_lsn == 9


def test_reads_carry_it_when_enabled() -> None:
    seen = ReadYourWrites(enabled=True)
    read = MemoryGet(id=ID)
    assert seen.apply(read, None) is read  # nothing seen yet
    seen.saw(_encoded(7))
    assert seen.apply(read, None).min_lsn == 7  # type: ignore[attr-defined]
    assert seen.apply(read, 2).min_lsn == 2  # type: ignore[attr-defined]
    own = MemoryGet(id=ID, min_lsn=12)
    assert seen.apply(own, None) is own


def test_writes_and_disabled_facades_unchanged() -> None:
    seen = ReadYourWrites(enabled=False)
    seen.saw(_encoded(7))
    read = MemoryGet(id=ID)
    assert seen.apply(read, None) is read
    assert seen.apply(read, 5).min_lsn == 5  # type: ignore[attr-defined]
    write = Forget(request_id=ID, memory=ID, mode="soft")
    assert ReadYourWrites(enabled=True).apply(write, None) is write
