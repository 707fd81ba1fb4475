"""Frames: spec/01-wire.md §1 golden bytes, incremental reading, every header corruption."""

from __future__ import annotations

import itertools
from typing import Final

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brain import cbor
from brain.errors import BadFrame, FrameTooLarge
from brain.wire.frame import (
    FLAG_EOS,
    HEADER_SIZE,
    MAX_FRAME_CEILING,
    Frame,
    FrameReader,
    encode_frame,
    parse_header,
)

PING_HEADER: Final = bytes.fromhex(
    "42524e30 01 0010 00 9489c625 00000001 000008 00 3e8e706f 0000000000000000"
)
PING_PAYLOAD: Final = bytes.fromhex("a1656e6f6e636507")
HELLO_HEADER: Final = bytes.fromhex(
    "42524e30 01 0001 00 2270ff13 00000000 00001a 00 eac1bbd7 0000000000000000"
)
HELLO_PAYLOAD: Final = bytes.fromhex("a266636c69656e746664656d6f2f316876657273696f6e738101")
PING: Final = PING_HEADER + PING_PAYLOAD
HELLO: Final = HELLO_HEADER + HELLO_PAYLOAD


def reseal(frame: bytes) -> bytes:
    """Recompute the header CRC, so a corruption meets the check aimed at it."""
    crc = crc32c.crc32c(frame[0:8] + frame[12:32])
    return frame[:8] + crc.to_bytes(4, "big") + frame[12:]


def patched(frame: bytes, offset: int, value: int) -> bytes:
    """``frame`` with byte ``offset`` set to ``value`` and the header CRC made valid again."""
    out = bytearray(frame)
    out[offset] = value
    return reseal(bytes(out))


# --- golden vectors ------------------------------------------------------------------


def test_wire_md_ping_frame_is_encoded_byte_exact() -> None:
    assert cbor.encode({"nonce": 7}) == PING_PAYLOAD
    assert encode_frame(0x0010, 1, PING_PAYLOAD) == PING


def test_wire_md_hello_frame_is_encoded_byte_exact() -> None:
    assert cbor.encode({"client": "demo/1", "versions": [1]}) == HELLO_PAYLOAD
    assert encode_frame(0x0001, 0, HELLO_PAYLOAD) == HELLO


def test_wire_md_frames_decode_to_their_fields() -> None:
    frames = FrameReader().feed(PING + HELLO)
    assert frames == [Frame(0x0010, 1, PING_PAYLOAD, 0), Frame(0x0001, 0, HELLO_PAYLOAD, 0)]
    assert cbor.decode(frames[0].payload) == {"nonce": 7}
    assert cbor.decode(frames[1].payload) == {"client": "demo/1", "versions": [1]}


def test_header_fields_parse() -> None:
    header = parse_header(PING_HEADER, MAX_FRAME_CEILING)
    assert (header.opcode, header.flags, header.stream_id, header.length) == (0x10, 0, 1, 8)
    assert header.payload_crc == 0x3E8E706F


def test_eos_flag_is_bit_0x80_of_byte_7() -> None:
    frame = encode_frame(0x0090, 3, b"", eos=True)
    assert frame[7] == FLAG_EOS == 0x80
    (decoded,) = FrameReader().feed(frame)
    assert decoded.eos
    assert not FrameReader().feed(PING)[0].eos


def test_empty_payload_has_zero_payload_crc() -> None:
    frame = encode_frame(0x0010, 1, b"")
    assert len(frame) == HEADER_SIZE
    assert frame[20:24] == bytes(4)
    assert FrameReader().feed(frame) == [Frame(0x0010, 1, b"", 0)]


# --- incremental reading -------------------------------------------------------------


def test_reader_fed_whole() -> None:
    reader = FrameReader()
    assert len(reader.feed(PING + HELLO + PING)) == 3
    assert reader.buffered == 0


def test_reader_fed_one_byte_at_a_time() -> None:
    reader = FrameReader()
    frames: list[Frame] = []
    stream = PING + HELLO
    for i in range(len(stream)):
        got = reader.feed(stream[i : i + 1])
        # A frame appears exactly when its last byte arrives.
        assert len(got) == (1 if i in (len(PING) - 1, len(stream) - 1) else 0)
        frames += got
    assert [f.opcode for f in frames] == [0x0010, 0x0001]


def test_reader_keeps_trailing_partial_bytes() -> None:
    reader = FrameReader()
    frames = reader.feed(PING + HELLO[:40])  # a whole header and 8 payload bytes
    assert frames == [Frame(0x0010, 1, PING_PAYLOAD, 0)]
    assert reader.buffered == 8
    assert reader.feed(HELLO[40:]) == [Frame(0x0001, 0, HELLO_PAYLOAD, 0)]
    assert reader.buffered == 0


def test_reader_keeps_a_partial_header() -> None:
    reader = FrameReader()
    assert reader.feed(PING + HELLO[:10]) == [Frame(0x0010, 1, PING_PAYLOAD, 0)]
    assert reader.buffered == 10
    assert len(reader.feed(HELLO[10:])) == 1


def test_reader_with_nothing_fed_returns_nothing() -> None:
    assert FrameReader().feed(b"") == []


# --- corruptions ---------------------------------------------------------------------


CORRUPTIONS: Final = {
    "magic": reseal(b"BRN1" + PING[4:]),
    "magic-lowercase": reseal(b"brn0" + PING[4:]),
    "version-0": patched(PING, 4, 0),
    "version-2": patched(PING, 4, 2),
    **{f"flag-bit-{bit:#04x}": patched(PING, 7, bit) for bit in (1, 2, 4, 8, 16, 32, 64)},
    "flags-eos-plus-other": patched(PING, 7, 0x81),
    "reserved-byte-19": patched(PING, 19, 1),
    **{f"reserved-byte-{i}": patched(PING, i, 0x01) for i in range(24, 32)},
    "header-crc": PING[:8] + bytes(4) + PING[12:],
    "header-crc-off-by-one-bit": PING[:11] + bytes([PING[11] ^ 1]) + PING[12:],
    "header-byte-changed-without-reseal": PING[:13] + b"\x07" + PING[14:],
    "payload-crc": patched(PING, 23, PING[23] ^ 0xFF),
    "payload-byte": PING[:-1] + bytes([PING[-1] ^ 1]),
    "nonzero-payload-crc-on-empty-payload": reseal(
        encode_frame(0x0010, 1, b"")[:20] + b"\x00\x00\x00\x01" + bytes(8)
    ),
}


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_corruption_is_bad_frame(name: str) -> None:
    with pytest.raises(BadFrame):
        FrameReader().feed(CORRUPTIONS[name])


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_corruption_is_bad_frame_when_fed_byte_by_byte(name: str) -> None:
    reader = FrameReader()
    data = CORRUPTIONS[name]
    with pytest.raises(BadFrame):
        for i in range(len(data)):
            reader.feed(data[i : i + 1])


def test_corruptions_are_each_caught_by_their_own_check() -> None:
    messages = {}
    for name in ("magic", "version-2", "flag-bit-0x01", "reserved-byte-19", "reserved-byte-30"):
        with pytest.raises(BadFrame) as caught:
            FrameReader().feed(CORRUPTIONS[name])
        messages[name] = caught.value.message
    assert "magic" in messages["magic"]
    assert "version" in messages["version-2"]
    assert "flag" in messages["flag-bit-0x01"]
    assert "reserved" in messages["reserved-byte-19"]
    assert "reserved" in messages["reserved-byte-30"]


def test_bad_header_is_refused_before_its_payload_arrives() -> None:
    reader = FrameReader()
    with pytest.raises(BadFrame):
        reader.feed(CORRUPTIONS["version-2"][:HEADER_SIZE])


def test_parse_header_wants_exactly_32_bytes() -> None:
    with pytest.raises(BadFrame, match="32 bytes"):
        parse_header(PING_HEADER[:31], MAX_FRAME_CEILING)


# --- size ----------------------------------------------------------------------------


def header_claiming(length: int) -> bytes:
    """A valid header for a PING whose payload is ``length`` bytes (with some CRC)."""
    header = bytearray(PING_HEADER)
    header[16:19] = length.to_bytes(3, "big")
    return reseal(bytes(header))


def test_oversize_length_raises_as_soon_as_the_header_is_complete() -> None:
    reader = FrameReader(max_frame=1000)
    header = header_claiming(1001)
    assert reader.feed(header[:31]) == []
    with pytest.raises(FrameTooLarge, match="1001"):
        reader.feed(header[31:])  # the 32nd byte: no payload byte has been sent


def test_length_at_max_frame_is_accepted() -> None:
    payload = bytes(1000)
    assert FrameReader(max_frame=1000).feed(encode_frame(0x10, 1, payload))[0].payload == payload


def test_default_max_frame_takes_the_largest_u24() -> None:
    reader = FrameReader()
    assert reader.feed(header_claiming(MAX_FRAME_CEILING)) == []  # waits for the payload
    assert reader.buffered == 0  # the header is consumed; nothing was allocated for the payload


def test_reader_refuses_a_max_frame_the_header_cannot_express() -> None:
    with pytest.raises(ValueError):
        FrameReader(max_frame=MAX_FRAME_CEILING + 1)
    with pytest.raises(ValueError):
        FrameReader(max_frame=0)


@pytest.mark.parametrize(
    ("opcode", "stream", "payload"),
    [(0x10000, 1, b""), (-1, 1, b""), (1, 1 << 32, b""), (1, -1, b"")],
)
def test_encode_refuses_fields_that_do_not_fit(opcode: int, stream: int, payload: bytes) -> None:
    with pytest.raises(ValueError):
        encode_frame(opcode, stream, payload)


def test_encode_refuses_a_payload_over_the_u24_ceiling() -> None:
    with pytest.raises(ValueError):
        encode_frame(1, 1, bytes(MAX_FRAME_CEILING + 1))


# --- round trip ----------------------------------------------------------------------

frames = st.lists(
    st.tuples(
        st.integers(0, 0xFFFF),
        st.integers(0, 0xFFFFFFFF),
        st.binary(max_size=300),
        st.booleans(),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=200, deadline=None)
@given(frames, st.lists(st.integers(0, 2000), max_size=8))
def test_encode_then_read_round_trips_at_any_split(
    specs: list[tuple[int, int, bytes, bool]], cuts: list[int]
) -> None:
    stream = b"".join(encode_frame(op, sid, payload, eos=eos) for op, sid, payload, eos in specs)
    points = sorted({min(c, len(stream)) for c in cuts} | {0, len(stream)})
    reader = FrameReader()
    got: list[Frame] = []
    for start, end in itertools.pairwise(points):
        got += reader.feed(stream[start:end])
    assert [(f.opcode, f.stream_id, f.payload, f.eos) for f in got] == specs
    assert reader.buffered == 0
