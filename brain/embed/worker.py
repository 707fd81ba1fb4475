"""The embedding child process: ``python -m brain.embed.worker KIND [--model-dir DIR]``.

:class:`brain.embed.process.ProcessEmbedder` starts it. It lowers its own
priority first thing (:data:`BULK_EMBED_NICE`), loads the embedder, reports
ready, then answers requests until its stdin ends, and exits 0.

Both directions carry frames: a 4-byte big-endian length, then that many
bytes of body, at most :data:`MAX_FRAME_BYTES`. A request's body is the CBOR
array of its texts, each as its UTF-8 bytes (a byte string has no length
bound in :mod:`brain.cbor`, a text string has the wire's 1 MiB, which a stored
text may pass). An answer's body starts with one byte saying what follows:

``READY`` (:data:`READY`)
    sent once, after loading: the CBOR array ``[name, dimensions]``.
``ROWS`` (:data:`ROWS`)
    the rows, float32 little-endian, ``len(texts) * dimensions`` of them.
``ERROR`` (:data:`ERROR`)
    the CBOR array ``[kind, message]`` of the exception the embedder raised; for
    a load that failed it is the last frame, and the child exits 1.

Its stdout carries only frames: stray output of a library goes to stderr,
which is the server's. Its lifetime is the server's: it ignores the terminal's
SIGINT (the server decides when to stop) and ends on EOF, which also comes
when the server is killed, since only the server holds the other end of stdin.
"""

from __future__ import annotations

import argparse
import os
import signal
import struct
import sys
from pathlib import Path
from typing import IO, Final

from brain import cbor
from brain.embed import ModelMissing, load_embedder

__all__ = [
    "BULK_EMBED_NICE",
    "ERROR",
    "MAX_FRAME_BYTES",
    "READY",
    "ROWS",
    "decode_texts",
    "encode_texts",
    "main",
    "read_frame",
    "write_frame",
]

BULK_EMBED_NICE: Final = 10
"""How many steps the child lowers its OS priority (``os.nice``) before anything else.

The OS scheduler then gives every thread of the server, which answers clients,
the CPU ahead of the background embedding (at nice 10 a busy thread gets about a
tenth of a core's share beside one at nice 0), while the embedding still uses
every idle cycle, so the indexer loses nothing on a quiet machine."""

MAX_FRAME_BYTES: Final = 256 * 1024 * 1024
"""Largest frame either side sends or reads. The largest request the server makes is
one bulk chunk of 32 texts (``BULK_CHUNK_TEXTS``) of the longest memory text (1 Mi
characters of at most 4 UTF-8 bytes: 4 MiB), 128 MiB; this is twice that. A length
past it can only be a stream out of step, and must not make the reader allocate
gigabytes."""

READY: Final = 0x52
"""First byte of the frame the child sends once its embedder is loaded."""

ROWS: Final = 0x00
"""First byte of an answer holding rows."""

ERROR: Final = 0x01
"""First byte of an answer holding an exception's kind and message."""

_LENGTH: Final = struct.Struct(">I")


def write_frame(stream: IO[bytes], body: bytes) -> None:
    """Send ``body`` as one frame and flush it; ValueError past :data:`MAX_FRAME_BYTES`."""
    if len(body) > MAX_FRAME_BYTES:
        raise ValueError(f"a frame of {len(body)} bytes is over {MAX_FRAME_BYTES}")
    stream.write(_LENGTH.pack(len(body)))
    stream.write(body)
    stream.flush()


def read_frame(stream: IO[bytes]) -> bytes | None:
    """The next frame's body; None at EOF before a frame. EOFError when the stream
    ends inside a frame, ValueError for a length past :data:`MAX_FRAME_BYTES`."""
    head = stream.read(_LENGTH.size)
    if not head:
        return None
    if len(head) < _LENGTH.size:
        raise EOFError("the stream ended inside a frame's length")
    (length,) = _LENGTH.unpack(head)
    if length > MAX_FRAME_BYTES:
        raise ValueError(f"a frame of {length} bytes is over {MAX_FRAME_BYTES}")
    body = stream.read(length)
    if len(body) < length:
        raise EOFError(f"the stream ended {length - len(body)} bytes short of a frame")
    return body


def encode_texts(texts: list[str] | tuple[str, ...]) -> bytes:
    """A request's body: the CBOR array of the texts' UTF-8 bytes.

    ``surrogatepass`` carries a lone surrogate (a Python str may hold one) through
    unchanged, so the child embeds exactly the caller's text."""
    return cbor.encode([text.encode("utf-8", "surrogatepass") for text in texts])


def decode_texts(body: bytes) -> list[str]:
    """The texts of a request's body; ValueError when it is not one."""
    items = cbor.decode_stored(body)
    if not isinstance(items, list) or not all(isinstance(item, bytes) for item in items):
        raise ValueError("a request is not an array of byte strings")
    return [item.decode("utf-8", "surrogatepass") for item in items]


def _error(exc: BaseException) -> bytes:
    """An ERROR answer for ``exc`` (for ModelMissing, its reason alone: the parent
    raises a ModelMissing again, which adds the install command)."""
    message = exc.reason if isinstance(exc, ModelMissing) else str(exc)
    return bytes((ERROR,)) + cbor.encode([type(exc).__name__, message])


def main(argv: list[str] | None = None) -> int:
    """Serve embed requests on stdin and stdout until EOF; the exit status."""
    os.nice(BULK_EMBED_NICE)  # before the model load, which takes CPU too
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Frames go to a private copy of stdout; anything printed goes to stderr instead.
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    parser = argparse.ArgumentParser(prog="python -m brain.embed.worker")
    parser.add_argument("kind")
    parser.add_argument("--model-dir", type=Path, default=None)
    args = parser.parse_args(argv)

    try:
        embedder = load_embedder(args.kind, model_dir=args.model_dir)
    except Exception as exc:
        write_frame(out, _error(exc))
        return 1
    try:
        write_frame(out, bytes((READY,)) + cbor.encode([embedder.name, embedder.dimensions]))
        stdin = sys.stdin.buffer
        while (request := read_frame(stdin)) is not None:
            texts = decode_texts(request)
            try:
                rows = embedder.embed(texts)
            except Exception as exc:
                answer = _error(exc)
            else:
                answer = bytes((ROWS,)) + rows.astype("<f4", copy=False).tobytes()
            write_frame(out, answer)
    except BrokenPipeError:  # the server is gone: nobody is left to answer
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
