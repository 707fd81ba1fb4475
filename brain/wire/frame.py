"""Frames: the fixed 32-byte header of spec/01-wire.md §1 and an incremental reader.

No I/O here: :class:`FrameReader` takes whatever bytes arrived and hands back
the whole frames they complete. It validates a header the moment its 32 bytes
are in, so an oversize length is refused before a single payload byte is read
or buffered.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

import crc32c

from brain.errors import BadFrame, FrameTooLarge

__all__ = [
    "DEFAULT_MAX_FRAME",
    "FLAG_EOS",
    "HEADER_SIZE",
    "MAGIC",
    "MAX_FRAME_CEILING",
    "PROTOCOL_VERSION",
    "Frame",
    "FrameReader",
    "encode_frame",
    "parse_header",
]

MAGIC: Final = b"BRN0"
PROTOCOL_VERSION: Final = 1
HEADER_SIZE: Final = 32
FLAG_EOS: Final = 0x80
"""The only defined flag bit: last frame of a stream's response."""

MAX_FRAME_CEILING: Final = (1 << 24) - 1
"""The payload length field is 24 bits wide; no configuration can exceed it."""

DEFAULT_MAX_FRAME: Final = MAX_FRAME_CEILING
"""Default negotiated payload limit, 16 MiB - 1 (spec/01-wire.md §1)."""

MAX_STREAM_ID: Final = (1 << 32) - 1

# magic, version, opcode, flags | crc | stream, length(24), reserved, payload crc, reserved
_HEADER: Final = struct.Struct(">4sBHBIIIII")
_ZERO8: Final = b"\x00" * 8


@dataclass(frozen=True, slots=True)
class Frame:
    """One decoded frame: header fields and the raw (already CRC-checked) payload."""

    opcode: int
    stream_id: int
    payload: bytes
    flags: int = 0

    @property
    def eos(self) -> bool:
        """True when this is the last frame of its stream's response."""
        return bool(self.flags & FLAG_EOS)


def encode_frame(opcode: int, stream_id: int, payload: bytes, *, eos: bool = False) -> bytes:
    """Build one frame's bytes: header with both CRC32C values, then the payload."""
    if not 0 <= opcode <= 0xFFFF:
        raise ValueError(f"opcode {opcode} is not a u16")
    if not 0 <= stream_id <= MAX_STREAM_ID:
        raise ValueError(f"stream id {stream_id} is not a u32")
    if len(payload) > MAX_FRAME_CEILING:
        raise ValueError(f"payload of {len(payload)} bytes does not fit a frame")
    flags = FLAG_EOS if eos else 0
    payload_crc = crc32c.crc32c(payload) if payload else 0
    front = MAGIC + bytes((PROTOCOL_VERSION,)) + opcode.to_bytes(2, "big") + bytes((flags,))
    back = (
        stream_id.to_bytes(4, "big")
        + len(payload).to_bytes(3, "big")
        + b"\x00"
        + payload_crc.to_bytes(4, "big")
        + _ZERO8
    )
    header_crc = crc32c.crc32c(front + back)
    return front + header_crc.to_bytes(4, "big") + back + payload


@dataclass(frozen=True, slots=True)
class _Header:
    opcode: int
    flags: int
    stream_id: int
    length: int
    payload_crc: int


def parse_header(header: bytes, max_frame: int) -> _Header:
    """Validate a 32-byte header; raise :class:`BadFrame` or :class:`FrameTooLarge`."""
    if len(header) != HEADER_SIZE:
        raise BadFrame(f"a frame header is {HEADER_SIZE} bytes, got {len(header)}")
    if header[0:4] != MAGIC:
        raise BadFrame(f"bad magic {header[0:4].hex()} (expected {MAGIC.hex()})")
    if header[4] != PROTOCOL_VERSION:
        raise BadFrame(f"frame version {header[4]} is not {PROTOCOL_VERSION}")
    expected_crc = int.from_bytes(header[8:12], "big")
    actual_crc = crc32c.crc32c(header[0:8] + header[12:32])
    if expected_crc != actual_crc:
        raise BadFrame(f"header CRC {expected_crc:08x} does not match {actual_crc:08x}")
    opcode = int.from_bytes(header[5:7], "big")
    flags = header[7]
    if flags & ~FLAG_EOS:
        raise BadFrame(f"undefined flag bits set: {flags:#04x}")
    if header[19] != 0 or header[24:32] != _ZERO8:
        raise BadFrame("reserved header bytes are not zero")
    stream_id = int.from_bytes(header[12:16], "big")
    length = int.from_bytes(header[16:19], "big")
    payload_crc = int.from_bytes(header[20:24], "big")
    if length > max_frame:
        raise FrameTooLarge(f"frame payload of {length} bytes is over max_frame {max_frame}")
    if length == 0 and payload_crc != 0:
        raise BadFrame("payload CRC must be 0 for an empty payload")
    return _Header(opcode, flags, stream_id, length, payload_crc)


class FrameReader:
    """Turns a byte stream into frames, one :meth:`feed` at a time.

    After it raises, the stream is unusable: the caller closes the connection.
    """

    __slots__ = ("_buffer", "_header", "max_frame")

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        if not 0 < max_frame <= MAX_FRAME_CEILING:
            raise ValueError(f"max_frame must be in 1..{MAX_FRAME_CEILING}")
        self.max_frame = max_frame
        self._buffer = bytearray()
        self._header: _Header | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet part of a returned frame."""
        return len(self._buffer)

    @property
    def mid_frame(self) -> bool:
        """True while part of a frame has arrived and the rest has not."""
        return bool(self._buffer) or self._header is not None

    def feed(self, data: bytes) -> list[Frame]:
        """Add received bytes; return every frame they complete, in order."""
        self._buffer += data
        frames: list[Frame] = []
        while True:
            if self._header is None:
                if len(self._buffer) < HEADER_SIZE:
                    return frames
                self._header = parse_header(bytes(self._buffer[:HEADER_SIZE]), self.max_frame)
                del self._buffer[:HEADER_SIZE]
            header = self._header
            if len(self._buffer) < header.length:
                return frames
            payload = bytes(self._buffer[: header.length])
            del self._buffer[: header.length]
            self._header = None
            if header.length and crc32c.crc32c(payload) != header.payload_crc:
                raise BadFrame(
                    f"payload CRC mismatch on stream {header.stream_id} "
                    f"(opcode {header.opcode:#06x})"
                )
            frames.append(Frame(header.opcode, header.stream_id, payload, header.flags))
