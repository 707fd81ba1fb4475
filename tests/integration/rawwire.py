"""A minimal wire client written from spec/01-wire.md alone, sharing no code with brain/.

It frames with ``crc32c`` and encodes payloads with ``cbor2``, so the server is
checked against the contract rather than against its own codec.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from typing import Any, Final

import cbor2
import crc32c

HEADER: Final = 32
EOS: Final = 0x80


def frame(opcode: int, stream_id: int, payload: bytes, *, flags: int = 0) -> bytes:
    """One frame exactly as spec/01-wire.md §1 lays it out."""
    payload_crc = crc32c.crc32c(payload) if payload else 0
    head = b"BRN0" + bytes([1]) + struct.pack(">H", opcode) + bytes([flags])
    tail = (
        struct.pack(">I", stream_id)
        + len(payload).to_bytes(3, "big")
        + b"\x00"
        + struct.pack(">I", payload_crc)
        + bytes(8)
    )
    return head + struct.pack(">I", crc32c.crc32c(head + tail)) + tail + payload


@dataclass
class Reply:
    """One frame received from the server."""

    opcode: int
    stream_id: int
    flags: int
    body: Any

    @property
    def eos(self) -> bool:
        return bool(self.flags & EOS)

    @property
    def error_name(self) -> str | None:
        return self.body.get("name") if self.opcode == 0x00FF else None


class RawClient:
    """Blocking socket speaking raw frames."""

    def __init__(
        self,
        host: str,
        port: int,
        timeout: float = 10.0,
        *,
        rcvbuf: int | None = None,
        source: str | None = None,
    ) -> None:
        """Connect; ``rcvbuf`` shrinks the receive buffer first (a slow reader);
        ``source`` is the local address to connect from (``127.0.0.2``: another peer
        on the loopback)."""
        self.sock = socket.socket()
        if rcvbuf is not None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        if source is not None:
            self.sock.bind((source, 0))
        self.sock.settimeout(timeout)
        self.sock.connect((host, port))
        self.buffer = b""

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(
        self, opcode: int, stream_id: int, body: Any = None, *, raw: bytes | None = None
    ) -> None:
        payload = raw if raw is not None else (b"" if body is None else cbor2.dumps(body))
        self.sock.sendall(frame(opcode, stream_id, payload))

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self, count: int) -> bool:
        while len(self.buffer) < count:
            chunk = self.sock.recv(65536)
            if not chunk:
                return False
            self.buffer += chunk
        return True

    def recv(self) -> Reply:
        """The next frame; raises EOFError if the server closed first."""
        if not self._fill(HEADER):
            raise EOFError("server closed the connection")
        head = self.buffer[:HEADER]
        assert head[:4] == b"BRN0"
        assert struct.unpack(">I", head[8:12])[0] == crc32c.crc32c(head[:8] + head[12:32])
        length = int.from_bytes(head[16:19], "big")
        if not self._fill(HEADER + length):
            raise EOFError("server closed inside a frame")
        payload = self.buffer[HEADER : HEADER + length]
        self.buffer = self.buffer[HEADER + length :]
        if length:
            assert struct.unpack(">I", head[20:24])[0] == crc32c.crc32c(payload)
        opcode = struct.unpack(">H", head[5:7])[0]
        body = cbor2.loads(payload) if payload else {}
        return Reply(opcode, struct.unpack(">I", head[12:16])[0], head[7], body)

    def closed_by_server(self) -> bool:
        """True when the server has closed its side (reads return EOF)."""
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, TimeoutError):
            return True

    def handshake(self, api_key: str) -> Reply:
        self.send(0x0001, 0, {"client": "rawwire/1", "versions": [1]})
        welcome = self.recv()
        assert welcome.opcode == 0x0081, welcome
        self.send(0x0002, 0, {"api_key": api_key})
        return self.recv()
