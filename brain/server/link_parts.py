"""Forwarded requests and answers larger than one NATS message, sent in parts
(spec/05-durability.md §14.7).

A NATS server takes messages of at most its ``max_payload`` (1 MiB by default); a
wire frame may be up to 16 MiB, so a request or an answer the cluster link relays can
be larger than one message. Such a message goes as **parts**: a small CBOR control
message announcing ``count`` parts of ``size`` bytes in all, then the parts, raw, in
order, on one subject from one connection (NATS keeps the order of one publisher's
messages to one subscriber).

- A request: the forwarder sends the offer ``{"upload": count, "bytes": size}`` to the
  shard's subject; the node that takes it answers ``{"send_to": inbox}``, an inbox of
  its own, and the forwarder publishes the parts there.
- An answer: the answering node sends ``{"parts": count, "bytes": size}`` to the
  request's reply subject, then the parts.

While a request runs, the answering node sends ``{"working": true}`` to its reply
subject now and then (:func:`working`): a forwarder that hears nothing for a while
takes the node for gone rather than waiting out the whole forward timeout.

This module holds the framing only; :mod:`brain.server.cluster_link` does the I/O.
"""

from __future__ import annotations

from typing import Final

from brain import cbor
from brain.errors import BrainError
from brain.wire.frame import MAX_FRAME_CEILING

__all__ = [
    "LINK_OVERHEAD_BYTES",
    "MAX_LINK_BYTES",
    "answer_parts",
    "is_working",
    "read_answer_parts",
    "read_send_to",
    "read_upload",
    "room",
    "send_to",
    "split",
    "upload",
    "working",
]

LINK_OVERHEAD_BYTES: Final = 4096
"""Room kept in a message beside its payload: the subject and reply subject and the
protocol line, with a margin."""

MAX_LINK_BYTES: Final = MAX_FRAME_CEILING + 64 * 1024
"""The largest request or answer the link carries: a wire frame's payload (the
largest request a client can send, or answer it can take) and the forwarded request's
own fields (namespace, key, permissions), with a margin. Larger is refused before
anything is sent or held."""


def room(max_payload: int) -> int:
    """The bytes of a request or answer one message carries on servers whose
    ``max_payload`` is this."""
    return max(1, max_payload - LINK_OVERHEAD_BYTES)


def split(data: bytes, max_payload: int) -> list[bytes]:
    """``data`` in parts, each fitting in one message."""
    size = room(max_payload)
    return [data[i : i + size] for i in range(0, len(data), size)]


def upload(count: int, size: int) -> bytes:
    """The offer of a request of ``size`` bytes in ``count`` parts."""
    return cbor.encode({"upload": count, "bytes": size})


def send_to(inbox: str) -> bytes:
    """The answer to an offer: where to send the parts."""
    return cbor.encode({"send_to": inbox})


def answer_parts(count: int, size: int) -> bytes:
    """What starts an answer of ``size`` bytes in ``count`` parts."""
    return cbor.encode({"parts": count, "bytes": size})


_WORKING: Final = cbor.encode({"working": True})


def working() -> bytes:
    """What an answering node sends while it still works on a request."""
    return _WORKING


def is_working(data: bytes) -> bool:
    """Whether ``data`` is :func:`working`'s message (no answer is)."""
    return data == _WORKING


def _map(data: bytes) -> dict[object, object] | None:
    if len(data) > LINK_OVERHEAD_BYTES:  # a control message is a few bytes
        return None
    try:
        row = cbor.decode(data)
    except BrainError:
        return None
    return row if isinstance(row, dict) else None


def _counted(row: dict[object, object], key: str) -> tuple[int, int] | None:
    count, size = row.get(key), row.get("bytes")
    if set(row) != {key, "bytes"} or not isinstance(count, int) or not isinstance(size, int):
        return None
    if not 2 <= count <= size <= MAX_LINK_BYTES:
        raise ValueError(f"{count} parts of {size} bytes in all is not a message the link takes")
    return count, size


def read_upload(data: bytes) -> tuple[int, int] | None:
    """The (count, size) of an offer, or None when ``data`` is not one; ValueError
    for an offer out of bounds."""
    row = _map(data)
    return None if row is None else _counted(row, "upload")


def read_answer_parts(data: bytes) -> tuple[int, int] | None:
    """The (count, size) that starts an answer in parts, or None when ``data`` is not
    one; ValueError when out of bounds."""
    row = _map(data)
    return None if row is None else _counted(row, "parts")


def read_send_to(data: bytes) -> str | None:
    """The inbox an offer's answer names, or None when ``data`` is not one."""
    row = _map(data)
    if row is None or set(row) != {"send_to"} or not isinstance(row["send_to"], str):
        return None
    return row["send_to"]
