"""Drive any client implementation through the protocol's conformance cases.

Usage::

    python3 protocol/conformance/run.py [--json REPORT] [--verbose] -- COMMAND [ARG ...]

``COMMAND`` starts the implementation's *adapter*: a process that reads one
JSON request per line on stdin and writes one JSON answer per line on stdout
(the line protocol is in ``README.md`` beside this file). The runner sends
every case in ``protocol/vectors/golden.json`` (decoded whole, one byte at a
time and followed by part of a next frame; encoded from its mirror; round
tripped through the implementation's own values), frames mutated so that one
header rule is broken each, the extra values and bad payloads of
``cases.json``, and reports every mismatch.

Exit status: 0 when every check passed, 1 when some did not, 2 when the
adapter could not be run to the end (it crashed, hung or broke the line
protocol).

Standard library only, so that any machine with a Python 3.11 can check any
implementation; it shares no code with the server.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

if not __package__:
    # Run as a script: make the repository root importable, for the sibling modules.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from protocol.conformance import adapter as adapters
from protocol.conformance.expect import (
    Case,
    ExpectedFrame,
    expect_failure,
    expect_frame_hex,
    expect_frames,
)
from protocol.conformance.framing import Header, build_frame, header_of

HERE: Final = Path(__file__).resolve().parent
PROTOCOL_DIR: Final = HERE.parent
GOLDEN_PATH: Final = PROTOCOL_DIR / "vectors" / "golden.json"
PROTOCOL_PATH: Final = PROTOCOL_DIR / "protocol.json"
CASES_PATH: Final = HERE / "cases.json"

ERROR_OPCODE: Final = 0x00FF
PING_OPCODE: Final = 0x0010

DATA_STREAM: Final = 1
"""Stream of the frames the runner builds (a data request's first odd id)."""

FOLLOWER_PREFIX: Final = 17
"""Bytes of a next frame sent after a vector: a partial header the reader must keep."""

MAX_TEXT_BYTES: Final = 1024 * 1024
"""The text limit of spec/01-wire.md §2, exceeded by one generated bad payload."""

MAX_ARRAY_LENGTH: Final = 100_000
"""The array limit of spec/01-wire.md §2, exceeded by one generated bad payload."""


def _decode(chunks: list[bytes], max_frame: int | None = None) -> dict[str, object]:
    request: dict[str, object] = {"op": "decode", "chunks": [c.hex() for c in chunks]}
    if max_frame is not None:
        request["max_frame"] = max_frame
    return request


def _follower() -> bytes:
    return build_frame(PING_OPCODE, 3, bytes.fromhex("a1656e6f6e636501"))


def golden_cases(
    vectors: list[dict[str, Any]], errors: dict[str, dict[str, Any]]
) -> Iterator[Case]:
    """Five positive and eight negative checks per golden vector."""
    follower = _follower()
    for vector in vectors:
        name = str(vector["name"])
        frame = bytes.fromhex(vector["frame_hex"])
        payload = bytes.fromhex(vector["payload_hex"])
        opcode = int(vector["opcode"], 16)
        stream_id = int(vector["stream_id"])
        eos = bool(vector["eos"])
        error: dict[str, object] | None = None
        if opcode == ERROR_OPCODE:
            wire_name = name.removeprefix("ERROR.")
            body = vector["payload"]
            error = {
                "name": wire_name,
                "code": int(errors[wire_name]["code"], 16),
                "retryable": bool(errors[wire_name]["retryable"]),
                "field": body.get("field"),
                "retry_after_ms": body.get("retry_after_ms"),
            }
        want = ExpectedFrame(opcode, stream_id, eos, vector["payload"], error)
        yield Case(f"{name} decode whole", _decode([frame]), expect_frames([want], 0))
        yield Case(
            f"{name} decode one byte at a time",
            _decode([frame[i : i + 1] for i in range(len(frame))]),
            expect_frames([want], 0),
        )
        yield Case(
            f"{name} decode with part of a next frame",
            _decode([frame + follower[:FOLLOWER_PREFIX]]),
            expect_frames([want], FOLLOWER_PREFIX),
        )
        yield Case(
            f"{name} encode",
            {
                "op": "encode",
                "opcode": opcode,
                "stream_id": stream_id,
                "eos": eos,
                "payload": vector["payload"],
            },
            expect_frame_hex(frame),
        )
        yield Case(
            f"{name} round trip",
            {"op": "roundtrip", "frame": frame.hex()},
            expect_frame_hex(frame),
        )
        yield from _broken_frames(name, opcode, stream_id, payload, eos)


def _broken_frames(
    name: str, opcode: int, stream_id: int, payload: bytes, eos: bool
) -> Iterator[Case]:
    """The frame with one header rule broken at a time (spec/01-wire.md §1)."""
    good = header_of(opcode, stream_id, payload, eos=eos)
    packed = good.pack()
    bad_crc = int.from_bytes(packed[8:12], "big") ^ 0x00000001
    flipped = bytearray(payload)
    flipped[-1] ^= 0x01
    broken: list[tuple[str, bytes]] = [
        ("header CRC", good.pack(header_crc=bad_crc) + payload),
        ("payload CRC", packed + bytes(flipped)),
        ("magic", replace(good, magic=b"BRN1").pack() + payload),
        ("version", replace(good, version=2).pack() + payload),
        ("flag bits", replace(good, flags=good.flags | 0x01).pack() + payload),
        ("reserved byte 19", replace(good, reserved19=1).pack() + payload),
        (
            "reserved bytes 24-31",
            replace(good, reserved_tail=bytes(7) + b"\x01").pack() + payload,
        ),
    ]
    for rule, frame in broken:
        yield Case(f"{name} refuse bad {rule}", _decode([frame]), expect_failure("bad_frame"))
    if len(payload) < 2:
        return  # no max_frame (at least 1) lies below this length
    # Over max_frame: refused from the header alone, before any payload byte arrives.
    yield Case(
        f"{name} refuse length over max_frame",
        _decode([packed], max_frame=max(1, len(payload) - 1)),
        expect_failure("frame_too_large"),
    )


def _ping(payload: bytes) -> bytes:
    return build_frame(PING_OPCODE, DATA_STREAM, payload)


def extra_cases(cases: dict[str, Any]) -> Iterator[Case]:
    """PING frames carrying each extra nonce value, and bad payloads and frames."""
    for value in cases["nonce_values"]:
        payload = bytes.fromhex("a1656e6f6e6365" + value["item_hex"])
        frame = _ping(payload)
        mirror = {"nonce": value["nonce"]}
        name = f"nonce {value['name']}"
        want = ExpectedFrame(PING_OPCODE, DATA_STREAM, False, mirror)
        yield Case(f"{name} decode", _decode([frame]), expect_frames([want], 0))
        yield Case(
            f"{name} encode",
            {
                "op": "encode",
                "opcode": PING_OPCODE,
                "stream_id": DATA_STREAM,
                "eos": False,
                "payload": mirror,
            },
            expect_frame_hex(frame),
        )
        yield Case(
            f"{name} round trip",
            {"op": "roundtrip", "frame": frame.hex()},
            expect_frame_hex(frame),
        )
    bad = [(b["name"], bytes.fromhex(b["payload_hex"])) for b in cases["bad_payloads"]]
    # Generated, being too big to store: one past each size limit.
    over_text = MAX_TEXT_BYTES + 1
    bad.append(
        (
            "text over the 1 MiB limit",
            bytes.fromhex("a1656e6f6e63657a") + over_text.to_bytes(4, "big") + b"a" * over_text,
        )
    )
    over_array = MAX_ARRAY_LENGTH + 1
    bad.append(
        (
            "array over the 100,000 item limit",
            bytes.fromhex("a1656e6f6e63659a") + over_array.to_bytes(4, "big") + bytes(over_array),
        )
    )
    for name, payload in bad:
        yield Case(
            f"refuse payload: {name}", _decode([_ping(payload)]), expect_failure("bad_payload")
        )
    empty = ExpectedFrame(PING_OPCODE, DATA_STREAM, False, {})
    yield Case("empty payload is the empty map", _decode([_ping(b"")]), expect_frames([empty], 0))
    nonzero_crc = Header(PING_OPCODE, DATA_STREAM, 0, payload_crc=0x12345678).pack()
    yield Case(
        "refuse empty payload with a non-zero payload CRC",
        _decode([nonzero_crc]),
        expect_failure("bad_frame"),
    )
    first = _ping(bytes.fromhex("a1656e6f6e636501"))
    pong = {"server_time": 1}
    second = build_frame(
        PING_OPCODE | 0x80, DATA_STREAM, bytes.fromhex("a16b7365727665725f74696d6501"), eos=True
    )
    yield Case(
        "two frames in one chunk, split across a third",
        _decode([first + second[:5], second[5:]]),
        expect_frames(
            [
                ExpectedFrame(PING_OPCODE, DATA_STREAM, False, {"nonce": 1}),
                ExpectedFrame(PING_OPCODE | 0x80, DATA_STREAM, True, pong),
            ],
            0,
        ),
    )


# --- running -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mismatch:
    """A case whose answer was not the expected one."""

    case: str
    problems: list[str]


@dataclass
class Report:
    """What a run found."""

    implementation: str = ""
    checks: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)
    failure: str | None = None

    @property
    def ok(self) -> bool:
        """True when every check ran and passed."""
        return self.failure is None and not self.mismatches

    def as_json(self) -> dict[str, object]:
        """The report as a JSON document."""
        return {
            "implementation": self.implementation,
            "checks": self.checks,
            "mismatches": [{"case": m.case, "problems": m.problems} for m in self.mismatches],
            "failure": self.failure,
            "ok": self.ok,
        }


def all_cases(
    golden_path: Path = GOLDEN_PATH,
    cases_path: Path = CASES_PATH,
    protocol_path: Path = PROTOCOL_PATH,
) -> list[Case]:
    """Every case, in the order they are sent."""
    vectors = json.loads(golden_path.read_text(encoding="utf-8"))["vectors"]
    table = json.loads(protocol_path.read_text(encoding="utf-8"))
    errors = {row["name"]: row for row in table["errors"]}
    extra = json.loads(cases_path.read_text(encoding="utf-8"))
    return [*golden_cases(vectors, errors), *extra_cases(extra)]


def run(
    command: Sequence[str],
    cases: list[Case] | None = None,
    *,
    log: Callable[[str], None] | None = None,
) -> Report:
    """Run every case against the adapter started by ``command``."""
    report = Report()
    todo = all_cases() if cases is None else cases
    say = log or (lambda _: None)
    try:
        adapter = adapters.Adapter(command)
    except adapters.AdapterFailure as exc:
        report.failure = str(exc)
        return report
    problem: adapters.AdapterFailure | None = None
    finished = False
    try:
        hello = adapter.ask({"op": "hello", "protocol_version": 1})
        report.implementation = str(hello.get("implementation", "?"))
        for case in todo:
            answer = adapter.ask(case.request)
            report.checks += 1
            problems = case.check(answer)
            if problems:
                report.mismatches.append(Mismatch(case.name, problems))
                say(f"MISMATCH {case.name}: " + "; ".join(problems))
        finished = True
    except adapters.AdapterFailure as exc:
        problem = exc
    finally:
        # A broken or interrupted adapter is killed; a finished one may exit by itself.
        adapter.stop(kill=not finished)
    if problem is not None:
        tail = adapter.stderr_tail()
        report.failure = f"after {report.checks} checks: {problem}" + (
            f"\nadapter stderr:\n{tail}" if tail else ""
        )
    return report


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point; see the module docstring."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "--" not in args:
        print(__doc__, file=sys.stderr)
        return 2
    split = args.index("--")
    parser = argparse.ArgumentParser(description="Brain wire protocol conformance runner")
    parser.add_argument("--json", type=Path, help="also write the report as JSON here")
    parser.add_argument("--verbose", action="store_true", help="print every mismatch as found")
    options = parser.parse_args(args[:split])
    command = args[split + 1 :]
    if not command:
        parser.error("give the adapter command after --")
    started = time.monotonic()
    report = run(command, log=print if options.verbose else None)
    elapsed = time.monotonic() - started
    if not options.verbose:
        for mismatch in report.mismatches:
            print(f"MISMATCH {mismatch.case}: " + "; ".join(mismatch.problems))
    if options.json is not None:
        options.json.write_text(json.dumps(report.as_json(), indent=2) + "\n", encoding="utf-8")
    name = report.implementation or " ".join(command)
    if report.failure is not None:
        print(f"conformance: {name}: FAILED TO RUN {report.failure}")
        return 2
    print(
        f"conformance: {name}: {report.checks} checks, "
        f"{len(report.mismatches)} mismatching, {elapsed:.1f} s"
    )
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
