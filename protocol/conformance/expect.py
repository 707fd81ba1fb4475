"""Cases and the checks their answers must pass."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from protocol.conformance.compare import compare, show
from protocol.conformance.framing import HEADER_SIZE

__all__ = ["Case", "Check", "ExpectedFrame", "expect_failure", "expect_frame_hex", "expect_frames"]

Check = Callable[[dict[str, Any]], list[str]]


@dataclass(frozen=True)
class Case:
    """One request to the adapter and what its answer must be."""

    name: str
    request: dict[str, object]
    check: Check


def expect_failure(kind: str) -> Check:
    """The input must be refused, as ``kind`` (bad_frame, frame_too_large, bad_payload)."""

    def check(answer: dict[str, Any]) -> list[str]:
        if answer["ok"]:
            return [f"expected the input to be refused as {kind}, but it was accepted"]
        if answer.get("error") != kind:
            return [
                f"expected error {kind!r}, got {answer.get('error')!r}: {answer.get('message')}"
            ]
        return []

    return check


def expect_frame_hex(frame: bytes) -> Check:
    """The answer must be exactly ``frame``."""

    def check(answer: dict[str, Any]) -> list[str]:
        if not answer["ok"]:
            return [f"refused: {answer.get('error')}: {answer.get('message')}"]
        got = str(answer.get("frame", "")).lower()
        if got == frame.hex():
            return []
        return [first_difference(frame.hex(), got)]

    return check


def first_difference(want: str, got: str) -> str:
    """Where two frames' hex first differ; the payload first, since a payload
    difference also changes the header's length and CRCs."""
    header = HEADER_SIZE * 2
    for part, start in (("payload", header), ("header", 0)):
        a = want[start:] if part == "payload" else want[:header]
        b = got[start:] if part == "payload" else got[:header]
        if a == b:
            continue
        at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
        if at is None:
            return f"{part} is {len(b) // 2} bytes, expected {len(a) // 2}"
        at &= ~1
        lo = max(0, at - 8)
        return (
            f"{part} differs at byte {at // 2}: expected …{a[lo : at + 16]}…, "
            f"got …{b[lo : at + 16]}…"
        )
    return "frames differ"


@dataclass(frozen=True)
class ExpectedFrame:
    """A frame the decode answer must hold."""

    opcode: int
    stream_id: int
    eos: bool
    payload: object
    error: dict[str, object] | None = None


def expect_frames(frames: list[ExpectedFrame], buffered: int) -> Check:
    """The answer must hold ``frames``, with ``buffered`` bytes left over in the reader."""

    def check(answer: dict[str, Any]) -> list[str]:
        if not answer["ok"]:
            return [f"refused: {answer.get('error')}: {answer.get('message')}"]
        got = answer.get("frames")
        if not isinstance(got, list) or len(got) != len(frames):
            count = len(got) if isinstance(got, list) else got
            return [f"expected {len(frames)} frame(s), got {count}"]
        problems: list[str] = []
        for want, frame in zip(frames, got, strict=True):
            if not isinstance(frame, dict):
                problems.append(f"a frame is not an object: {show(frame)}")
                continue
            for key, value in (
                ("opcode", want.opcode),
                ("stream_id", want.stream_id),
                ("eos", want.eos),
            ):
                if frame.get(key) != value or type(frame.get(key)) is not type(value):
                    problems.append(f"{key}: expected {value!r}, got {frame.get(key)!r}")
            problems.extend(compare(want.payload, frame.get("payload")))
            if want.error is not None:
                error = frame.get("error")
                if not isinstance(error, dict):
                    problems.append("ERROR frame without the typed error it maps to")
                else:
                    problems.extend(
                        f"error.{p}"
                        for p in compare(want.error, {k: error.get(k) for k in want.error})
                    )
        if answer.get("buffered") != buffered:
            problems.append(f"buffered: expected {buffered}, got {answer.get('buffered')!r}")
        return problems

    return check
