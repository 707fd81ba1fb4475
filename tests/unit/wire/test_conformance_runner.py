"""The conformance runner (protocol/conformance/run.py) against the server's own codec.

The Python adapter must pass every case; adapters broken on purpose must be
caught, each by the cases meant for its fault; and the runner's own frame
builder and extra cases must agree with the server's codec and with cbor2, so
that a mismatch it reports is the implementation's fault, not the runner's.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import cbor2
import crc32c
import pytest

from brain import cbor
from brain.errors import InvalidArgument
from brain.wire.frame import DEFAULT_MAX_FRAME, FrameReader
from brain.wire.messages.control import Ping
from protocol.conformance import adapter as adapters
from protocol.conformance import run as runner
from protocol.conformance.compare import compare
from protocol.conformance.expect import Case
from protocol.conformance.framing import build_frame
from protocol.conformance.framing import crc32c as runner_crc32c
from protocol.conformance.python_adapter import from_mirror

ROOT = Path(__file__).resolve().parents[3]
ADAPTER = ROOT / "protocol" / "conformance" / "python_adapter.py"
VECTORS: list[dict[str, Any]] = json.loads(runner.GOLDEN_PATH.read_text(encoding="utf-8"))[
    "vectors"
]
CASES: dict[str, Any] = json.loads(runner.CASES_PATH.read_text(encoding="utf-8"))

# A broken adapter: the Python adapter with one fault put into its answers.
BROKEN_TEMPLATE = """
import sys
sys.path.insert(0, {root!r})
from protocol.conformance import python_adapter

def handler(request):
{body}

sys.exit(python_adapter.main(handler))
"""


def _broken_adapter(tmp_path: Path, body: str) -> list[str]:
    script = tmp_path / "broken_adapter.py"
    script.write_text(BROKEN_TEMPLATE.format(root=str(ROOT), body=body), encoding="utf-8")
    return [sys.executable, str(script)]


@pytest.fixture(scope="module")
def all_cases() -> list[Case]:
    return runner.all_cases()


def test_the_python_adapter_passes_every_case(all_cases: list[Case]) -> None:
    report = runner.run([sys.executable, str(ADAPTER)], all_cases)
    assert report.failure is None
    assert report.mismatches == []
    assert report.checks == len(all_cases) > 1500
    assert report.implementation.startswith("brain-python/")


def test_main_exits_0_and_writes_a_json_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report.json"
    status = runner.main(["--json", str(out), "--", sys.executable, str(ADAPTER)])
    assert status == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["ok"] is True and report["mismatches"] == []
    assert " 0 mismatching" in capsys.readouterr().out


def test_a_flipped_byte_in_every_encoding_is_reported(
    tmp_path: Path, all_cases: list[Case], capsys: pytest.CaptureFixture[str]
) -> None:
    body = """
    answer = python_adapter.handle(request)
    if request["op"] == "encode" and answer.get("ok"):
        frame = bytearray.fromhex(answer["frame"])
        frame[-1] ^= 0x01
        answer["frame"] = frame.hex()
    return answer"""
    command = _broken_adapter(tmp_path, body)
    report = runner.run(command, all_cases)
    encodes = [c.name for c in all_cases if c.request["op"] == "encode"]
    assert report.failure is None
    assert sorted(m.case for m in report.mismatches) == sorted(encodes)
    assert all("payload differs" in m.problems[0] for m in report.mismatches)
    assert runner.main(["--", *command]) == 1
    assert f"{len(encodes)} mismatching" in capsys.readouterr().out


def test_integral_floats_sent_as_integers_are_caught(tmp_path: Path, all_cases: list[Case]) -> None:
    # What a client does that turns 1.0 into 1 through JSON and ignores the schema.
    body = """
    if request["op"] == "encode":
        def degrade(value):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            if isinstance(value, dict) and set(value) == {"$float"}:
                number = float(value["$float"])
                return int(number) if number.is_integer() else value
            if isinstance(value, dict):
                return {k: degrade(v) for k, v in value.items()}
            if isinstance(value, list):
                return [degrade(v) for v in value]
            return value
        payload = python_adapter.from_mirror(degrade(request["payload"]))
        from brain import cbor
        from brain.wire.frame import encode_frame
        data = cbor.encode(payload)
        return {"ok": True, "frame": encode_frame(
            request["opcode"], request["stream_id"], data, eos=request["eos"]).hex()}
    return python_adapter.handle(request)"""
    report = runner.run(_broken_adapter(tmp_path, body), all_cases)
    caught = {m.case for m in report.mismatches}
    assert {"RECALL.request encode", "EXPLAIN.request encode"} <= caught
    assert "STATEMENT_HISTORY.response encode" in caught  # confidence 1.0
    assert "nonce float 1.0 (integral, untyped) encode" in caught
    assert "nonce float 1.5 encode" not in caught


def test_a_reader_that_skips_crc_checks_is_caught(tmp_path: Path, all_cases: list[Case]) -> None:
    body = """
    answer = python_adapter.answer(request)
    if answer.get("error") == "bad_frame" and "CRC" in answer.get("message", ""):
        return {"ok": True, "frames": [], "buffered": 0}
    return answer"""
    report = runner.run(_broken_adapter(tmp_path, body), all_cases)
    caught = {m.case for m in report.mismatches}
    assert "PING.request refuse bad header CRC" in caught
    assert "PING.request refuse bad payload CRC" in caught
    assert "refuse empty payload with a non-zero payload CRC" in caught
    assert "PING.request refuse bad magic" not in caught


def test_an_adapter_that_exits_is_a_failure_to_run(tmp_path: Path) -> None:
    report = runner.run([sys.executable, "-c", "import sys; sys.exit(3)"])
    assert report.failure is not None and not report.ok
    assert runner.main(["--", sys.executable, "-c", "import sys; sys.exit(3)"]) == 2


def test_an_adapter_that_hangs_is_a_failure_to_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(adapters, "STARTUP_TIMEOUT_S", 0.5)
    monkeypatch.setattr(adapters, "ANSWER_TIMEOUT_S", 0.5)
    report = runner.run([sys.executable, "-c", "import time; time.sleep(60)"])
    assert report.failure is not None and "no answer within" in report.failure


def test_an_adapter_that_answers_garbage_is_a_failure_to_run() -> None:
    report = runner.run([sys.executable, "-c", "import sys\nfor line in sys.stdin: print('hi')"])
    assert report.failure is not None and "not JSON" in report.failure


def test_the_runner_builds_every_golden_frame_from_its_payload() -> None:
    for vector in VECTORS:
        payload = bytes.fromhex(vector["payload_hex"])
        frame = build_frame(
            int(vector["opcode"], 16), vector["stream_id"], payload, eos=vector["eos"]
        )
        assert frame.hex() == vector["frame_hex"], vector["name"]
    for data in (b"", b"123456789", bytes(range(256)) * 3):
        assert runner_crc32c(data) == crc32c.crc32c(data)


def test_every_broken_frame_breaks_only_its_rule() -> None:
    """Each mutated frame is refused by the server's reader, and for the right reason."""
    vector = next(v for v in VECTORS if v["name"] == "ENCODE.request")
    payload = bytes.fromhex(vector["payload_hex"])
    cases = list(runner._broken_frames("ENCODE.request", 0x0020, 1, payload, False))
    reasons = {
        "header CRC": "header CRC",
        "payload CRC": "payload CRC",
        "magic": "bad magic",
        "version": "frame version",
        "flag bits": "undefined flag bits",
        "reserved byte 19": "reserved header bytes",
        "reserved bytes 24-31": "reserved header bytes",
        "length over max_frame": "over max_frame",
    }
    assert len(cases) == len(reasons)
    for case in cases:
        rule = case.name.removeprefix("ENCODE.request refuse ").removeprefix("bad ")
        request = case.request
        reader = FrameReader(int(str(request.get("max_frame", DEFAULT_MAX_FRAME))))
        chunks = request["chunks"]
        assert isinstance(chunks, list)
        with pytest.raises(Exception, match=reasons[rule]):
            for chunk in chunks:
                reader.feed(bytes.fromhex(chunk))


def test_extra_values_agree_with_the_server_codec_and_cbor2() -> None:
    for case in CASES["nonce_values"]:
        value = from_mirror(case["nonce"])
        item = bytes.fromhex(case["item_hex"])
        assert cbor.encode(value) == item, case["name"]
        assert cbor.encode(cbor2.loads(item)) == item, case["name"]
        back = cbor.decode(item)
        if isinstance(value, float) and math.isnan(value):
            assert isinstance(back, float) and math.isnan(back)
        else:
            assert back == value and type(back) is type(value), case["name"]


def test_every_bad_payload_is_refused_by_the_server() -> None:
    for case in CASES["bad_payloads"]:
        with pytest.raises(InvalidArgument):
            Ping.from_wire(cbor.decode(bytes.fromhex(case["payload_hex"])))


@pytest.mark.parametrize(
    ("expected", "actual", "ok"),
    [
        (1.0, 1, True),  # JSON cannot tell; the encode checks can
        (1.0, {"$float": "1"}, True),
        (1.5, 1, False),
        (-0.0, 0, False),
        ({"$float": "NaN"}, {"$float": "nan"}, True),
        ({"$float": "-0.0"}, -0.0, True),
        ({"$float": "-0.0"}, 0.0, False),
        (1, 1.0, False),
        (1, True, False),
        (True, 1, False),
        (None, False, False),
        ({"$bytes": "ABCD"}, {"$bytes": "abcd"}, True),
        ({"$int": "9007199254740993"}, 9007199254740993, False),
        ({"a": 1}, {"a": 1, "b": 2}, False),
        ([1, 2], [1], False),
    ],
)
def test_compare_is_strict_about_types(expected: object, actual: object, ok: bool) -> None:
    assert (compare(expected, actual) == []) is ok


# --- protocol/conformance/schema_check.py as a third-language client runs it ----------

SCHEMA_CHECK = ROOT / "protocol" / "conformance" / "schema_check.py"


def _schema_check(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    # -I -S: no site-packages and no project on the path, as on a machine with
    # only Python 3.11 and this repository's protocol/ directory.
    return subprocess.run(
        [sys.executable, "-I", "-S", str(SCHEMA_CHECK), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_schema_check_runs_on_the_standard_library_alone() -> None:
    done = _schema_check("--golden")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_schema_check_command_line_answers() -> None:
    good = json.dumps({"cue": "who", "top_k": 5, "vector": {"$bytes": "0000803e"}})
    assert _schema_check("RECALL", "request", stdin=good).stdout == "ok\n"
    assert _schema_check("0x0021", "request", stdin=good).returncode == 0
    bad = json.dumps({"cue": "who", "records": ["statement", "gossip"]})
    done = _schema_check("RECALL", "request", stdin=bad)
    assert done.returncode == 1
    assert done.stdout.startswith("MISMATCH records[1]: ")
    end = json.dumps({"next_lsn": 7})
    assert _schema_check("SUBSCRIBE", "stream_end", stdin=end).returncode == 0
    assert _schema_check("SUBSCRIBE", "response", stdin=end).returncode == 1
    assert _schema_check("NO_SUCH_OPCODE", "request", stdin=good).returncode == 2
    assert _schema_check("RECALL", "request", stdin="{not json").returncode == 2
