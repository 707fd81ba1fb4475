"""The framing of forwarded requests and answers in parts (spec/05-durability.md §14.7):
control messages read back, anything else is not taken for one, and counts out of
bounds are refused; parts join to the whole, each fitting in one message."""

from __future__ import annotations

from typing import Final

import pytest

from brain import cbor
from brain.server import link_parts

MAX_PAYLOAD: Final = 1024 * 1024
MIB: Final = 1024 * 1024


def test_the_parts_framing_reads_back_and_refuses_what_is_out_of_bounds() -> None:
    assert link_parts.read_upload(link_parts.upload(3, 10)) == (3, 10)
    assert link_parts.read_answer_parts(link_parts.answer_parts(2, MIB)) == (2, MIB)
    assert link_parts.read_send_to(link_parts.send_to("_INBOX.x")) == "_INBOX.x"
    answer = cbor.encode({"ok": b"payload"})
    assert link_parts.read_upload(answer) is None
    assert link_parts.read_answer_parts(answer) is None
    assert link_parts.read_send_to(answer) is None
    assert link_parts.read_upload(b"\xff") is None
    for count, size in ((1, 10), (11, 10), (2, link_parts.MAX_LINK_BYTES + 1)):
        with pytest.raises(ValueError, match="not a message the link takes"):
            link_parts.read_upload(link_parts.upload(count, size))
    data = bytes(range(256)) * 20_000
    parts = link_parts.split(data, MAX_PAYLOAD)
    assert b"".join(parts) == data
    assert all(len(p) <= link_parts.room(MAX_PAYLOAD) for p in parts)


def test_a_keepalive_is_no_answer_and_no_answer_is_a_keepalive() -> None:
    assert link_parts.is_working(link_parts.working())
    for other in (
        link_parts.upload(2, 10),
        link_parts.send_to("inbox"),
        link_parts.answer_parts(2, 10),
        cbor.encode({"working": False}),
        b"",
    ):
        assert not link_parts.is_working(other)
