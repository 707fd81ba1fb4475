"""CRC32C and frame building for the conformance runner, written out from spec/01-wire.md §1.

Standard library only, sharing no code with any implementation under test, so
that every frame the runner sends or expects is the contract's, not a codec's.
Every header field can be set, so that a case can break exactly one rule and
still carry the right header CRC.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["FLAG_EOS", "HEADER_SIZE", "MAGIC", "Header", "build_frame", "crc32c", "header_of"]

HEADER_SIZE: Final = 32
MAGIC: Final = b"BRN0"
FLAG_EOS: Final = 0x80
CASTAGNOLI: Final = 0x82F63B78
"""The CRC32C polynomial, bit-reversed (not zlib's CRC32 polynomial)."""


def _crc_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ CASTAGNOLI if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE: Final = _crc_table()


def crc32c(data: bytes, crc: int = 0) -> int:
    """CRC32C (Castagnoli) of ``data``, continuing from ``crc``."""
    c = crc ^ 0xFFFFFFFF
    for byte in data:
        c = _CRC_TABLE[(c ^ byte) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


@dataclass(frozen=True)
class Header:
    """Every header field, so a case can break exactly one rule and keep the CRC right."""

    opcode: int
    stream_id: int
    length: int
    payload_crc: int
    flags: int = 0
    magic: bytes = MAGIC
    version: int = 1
    reserved19: int = 0
    reserved_tail: bytes = bytes(8)

    def pack(self, *, header_crc: int | None = None) -> bytes:
        """The 32 header bytes; the header CRC is computed unless given."""
        front = self.magic + bytes((self.version,)) + self.opcode.to_bytes(2, "big")
        front += bytes((self.flags,))
        back = (
            self.stream_id.to_bytes(4, "big")
            + self.length.to_bytes(3, "big")
            + bytes((self.reserved19,))
            + self.payload_crc.to_bytes(4, "big")
            + self.reserved_tail
        )
        crc = crc32c(back, crc32c(front)) if header_crc is None else header_crc
        return front + crc.to_bytes(4, "big") + back


def header_of(opcode: int, stream_id: int, payload: bytes, *, eos: bool) -> Header:
    """The valid header of a frame carrying ``payload``."""
    return Header(
        opcode=opcode,
        stream_id=stream_id,
        length=len(payload),
        payload_crc=crc32c(payload) if payload else 0,
        flags=FLAG_EOS if eos else 0,
    )


def build_frame(opcode: int, stream_id: int, payload: bytes, *, eos: bool = False) -> bytes:
    """A whole valid frame."""
    return header_of(opcode, stream_id, payload, eos=eos).pack() + payload
