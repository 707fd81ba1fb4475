"""The payload and WAL fuzz targets, briefly: their corpora, regressions and a real atheris run."""

from __future__ import annotations

import dataclasses
import importlib.util
import shutil
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Final

import crc32c
import pytest

from brain import cbor
from brain.engine.wal.format import (
    MAX_LSN,
    RECORD_HEADER_SIZE,
    SEGMENT_HEADER_SIZE,
    SEGMENT_MAGIC,
    V1_RECORD_HEADER_SIZE,
    SegmentScan,
    encode_segment_header,
    scan_segment,
)
from brain.errors import WalCorruption
from brain.wire.messages.control import ErrorMessage, Ping
from brain.wire.opcodes import ERROR_OPCODE, Opcode
from brain.wire.registry import MESSAGES, STREAM_ENDS

REPO: Final = Path(__file__).resolve().parents[3]
FUZZ_DIR: Final = REPO / "fuzz"

ATHERIS_RUNS: Final = 2000
"""Inputs the real fuzzer tries per target: enough to prove it runs under atheris
(and the WAL target reaches the MAX_LSN case of REGRESSIONS within it)."""

ATHERIS_TIME_LIMIT_S: Final = 5
"""Cap on each atheris run, so both stay well under 15 s on a slow host."""

ATHERIS_SEED: Final = 8949
"""libFuzzer's random seed, fixed so that a failure replays."""


def _load(name: str) -> ModuleType:
    # fuzz/ is a script folder, not an installed package: load the file itself.
    spec = importlib.util.spec_from_file_location(name, FUZZ_DIR / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PAYLOADS: Final = _load("fuzz_payloads")
WAL: Final = _load("fuzz_wal")
check_payload: Callable[[bytes], None] = PAYLOADS.check_one
check_wal: Callable[[bytes], None] = WAL.check_one


def _corpus(name: str) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted((FUZZ_DIR / "corpus" / name).iterdir())}


PAYLOAD_CORPUS: Final = _corpus("payloads")
WAL_CORPUS: Final = _corpus("wal")


@pytest.mark.parametrize("name", sorted(PAYLOAD_CORPUS))
def test_payload_corpus_file_passes(name: str) -> None:
    check_payload(PAYLOAD_CORPUS[name])


@pytest.mark.parametrize("name", sorted(WAL_CORPUS))
def test_wal_corpus_file_passes(name: str) -> None:
    check_wal(WAL_CORPUS[name])


def test_payload_seeds_match_the_golden_vectors() -> None:
    seed_payloads = _load("seed_payloads")
    seeds: dict[str, bytes] = seed_payloads.seeds()
    assert seeds, "golden.json holds no vectors"
    for name, data in seeds.items():
        assert PAYLOAD_CORPUS.get(name) == data, f"run fuzz/seed_payloads.py: {name} is stale"


def test_every_golden_seed_decodes_to_its_class() -> None:
    # A seed that is refused never reaches the round-trip check: it would be dead weight.
    for name, data in PAYLOAD_CORPUS.items():
        if not name.startswith("golden_"):
            continue
        cls = PAYLOADS.message_class(data[: PAYLOADS.SELECTOR_SIZE])
        assert cls is not None, name
        cls.from_wire(cbor.decode(data[PAYLOADS.SELECTOR_SIZE :]))


def test_selectors_reach_every_message_class() -> None:
    reached = {PAYLOADS.message_class(bytes([a, b])) for a in range(256) for b in range(4)}
    wanted = {cls for pair in MESSAGES.values() for cls in pair}
    assert wanted | set(STREAM_ENDS.values()) | {ErrorMessage} <= reached


def test_selector_round_trips() -> None:
    selector = PAYLOADS.selector_for(ERROR_OPCODE, response=True)
    assert PAYLOADS.message_class(selector) is ErrorMessage
    assert PAYLOADS.message_class(PAYLOADS.selector_for(Opcode.PING, response=False)) is Ping


def test_wal_seeds_are_real_segments_of_the_current_format() -> None:
    seed_wal = _load("seed_wal")
    seeds: dict[str, bytes] = seed_wal.seeds()
    for name, data in seeds.items():
        assert WAL_CORPUS.get(name) == data, f"run fuzz/seed_wal.py: {name} is stale"
    # The whole segments must scan sound, or the seeds teach the fuzzer nothing past the header.
    WAL._check_segment(seeds["segment_0"], is_last=False)
    WAL._check_segment(seeds["segment_1"], is_last=True)
    damaged = seeds["segment_damaged_header"]
    with pytest.raises(WalCorruption, match="record header CRC mismatch"):
        scan_segment(
            damaged,
            path="<seed>",
            name_lsn=WAL._name_lsn(damaged),
            expected_first_lsn=None,
            is_last=True,
        )


def test_version_1_seeds_are_sound_version_1_segments() -> None:
    # Kept from the layout before the record header had its own CRC, which the log still reads.
    for name in ("v1_segment_0", "v1_segment_1"):
        data = WAL_CORPUS[name]
        assert data[8:10] == b"\x00\x01", name
        WAL._check_segment(data, is_last=False)
    torn = WAL_CORPUS["v1_segment_torn_tail"]
    scan = scan_segment(
        torn, path="<seed>", name_lsn=WAL._name_lsn(torn), expected_first_lsn=None, is_last=True
    )
    assert scan.torn is not None and scan.version == 1


def test_payload_target_reports_foreign_exceptions(monkeypatch: pytest.MonkeyPatch) -> None:
    # The harness must not swallow what it is meant to find.
    def broken(data: bytes) -> object:
        raise ValueError("a decoder bug")

    monkeypatch.setattr(PAYLOADS.cbor, "decode", broken)
    with pytest.raises(ValueError, match="a decoder bug"):
        check_payload(PAYLOAD_CORPUS["golden_PING.request"])


def test_payload_target_reports_an_unstable_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    # An encoder that drops every field: the re-encoded PING loses its nonce.
    monkeypatch.setattr(PAYLOADS.cbor, "encode", lambda value: b"\xa0")
    with pytest.raises(AssertionError, match="changed across a round trip"):
        check_payload(PAYLOAD_CORPUS["golden_PING.request"])


def test_wal_target_reports_foreign_exceptions(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(payload: bytes) -> object:
        raise IndexError("a plan decoder bug")

    monkeypatch.setattr(WAL, "decode_plan", broken)
    with pytest.raises(IndexError, match="a plan decoder bug"):
        check_wal(WAL_CORPUS["plan_payload"])


@pytest.mark.parametrize("name", ["segment_0", "v1_segment_0"])
def test_reseal_makes_a_damaged_crc_whole_again(name: str) -> None:
    segment = WAL_CORPUS[name]
    damaged = bytearray(segment)
    damaged[SEGMENT_HEADER_SIZE - 1] ^= 0xFF  # the header CRC no longer holds
    damaged[-1] ^= 0xFF  # last payload byte: the last record's CRC no longer holds
    resealed = WAL.reseal(bytes(damaged))
    assert resealed[:SEGMENT_HEADER_SIZE] == segment[:SEGMENT_HEADER_SIZE]
    assert resealed[-1] == damaged[-1]  # the payload is kept; only its record's CRCs changed
    WAL._check_segment(resealed, is_last=False)  # every CRC holds again: it scans sound


def test_reseal_seals_the_header_of_a_record_cut_short() -> None:
    # So the fuzzer reaches the torn-tail rules behind a version-2 header's own CRC.
    segment = WAL_CORPUS["segment_torn_tail"]
    lsn = WAL._name_lsn(segment)
    tail = scan_segment(segment, path="<seed>", name_lsn=lsn, expected_first_lsn=None, is_last=True)
    assert tail.torn is not None and len(segment) - tail.end >= RECORD_HEADER_SIZE
    damaged = bytearray(segment)
    damaged[tail.end + 24] ^= 0x80  # the torn record's kind: its header CRC no longer holds
    with pytest.raises(WalCorruption, match="header CRC mismatch"):
        scan_segment(
            bytes(damaged), path="<seed>", name_lsn=lsn, expected_first_lsn=None, is_last=True
        )
    resealed = WAL.reseal(bytes(damaged))
    with pytest.raises(WalCorruption, match="unknown record kind"):
        scan_segment(resealed, path="<seed>", name_lsn=lsn, expected_first_lsn=None, is_last=True)


def test_wal_target_reports_a_damaged_header_taken_for_a_torn_tail(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A scan that forgot the header CRC would call this segment torn at its last record.
    segment = WAL_CORPUS["segment_damaged_header"]
    real = scan_segment

    def lenient(
        data: bytes,
        *,
        path: Path | str,
        name_lsn: int,
        expected_first_lsn: int | None,
        is_last: bool,
    ) -> SegmentScan:
        def scan(part: bytes) -> SegmentScan:
            return real(
                part,
                path=path,
                name_lsn=name_lsn,
                expected_first_lsn=expected_first_lsn,
                is_last=is_last,
            )

        try:
            return scan(data)
        except WalCorruption as exc:
            if data != segment or "header CRC" not in exc.reason:
                raise
            return dataclasses.replace(scan(data[: exc.offset]), size=len(data), torn="torn")

    monkeypatch.setattr(WAL, "scan_segment", lenient)
    with pytest.raises(AssertionError, match="damaged record header passed as a torn tail"):
        check_wal(segment)


# Inputs the campaigns found: each was a bug, and stays here so it cannot come back.
# They were found in the version-1 layout and are kept in it, and also given in version 2.
def _v1_segment_header(first_lsn: int) -> bytes:
    body = struct.pack(">8sHHQQ", SEGMENT_MAGIC, 1, 0, first_lsn, 0)
    return body + crc32c.crc32c(body).to_bytes(4, "big")


_MAX_LSN_HEADER: Final = _v1_segment_header(MAX_LSN)
_TORN_RECORD_AT_MAX_LSN: Final = _MAX_LSN_HEADER + (
    bytes(4) + (10).to_bytes(4, "big") + MAX_LSN.to_bytes(8, "big") + bytes(8) + b"\x00\x01\x00\x00"
)
"""A last segment whose only record, LSN 2**64 - 1, is torn: recovery must call it a torn tail."""
_DAMAGED_RECORD_AT_MAX_LSN: Final = _MAX_LSN_HEADER + b"\x01" * V1_RECORD_HEADER_SIZE
"""A segment at LSN 2**64 - 1 with a damaged record: ``count_records`` must count it."""
_V2_MAX_LSN_HEADER: Final = encode_segment_header(MAX_LSN, 0)
_V2_TORN_RECORD_AT_MAX_LSN: Final = WAL.reseal(
    _V2_MAX_LSN_HEADER
    + bytes(4)
    + (10).to_bytes(4, "big")
    + MAX_LSN.to_bytes(8, "big")
    + bytes(8)
    + b"\x00\x01\x00\x00"
    + bytes(4)
)
"""The same in version 2: a sealed header whose payload runs past the end."""
_CAMPAIGN_FIND: Final = bytes.fromhex(
    "42524e57414c0001000100" + "ff" * 61 + "00010000000000425279797900007979796900"
)
"""The first WAL campaign's input, as found (not minimised)."""

REGRESSIONS: Final = {
    "wal_torn_record_at_max_lsn": _TORN_RECORD_AT_MAX_LSN,
    "wal_damaged_record_at_max_lsn": _DAMAGED_RECORD_AT_MAX_LSN,
    "wal_campaign_find_max_lsn": _CAMPAIGN_FIND,
    "wal_v2_torn_record_at_max_lsn": _V2_TORN_RECORD_AT_MAX_LSN,
    "wal_v2_damaged_record_at_max_lsn": _V2_MAX_LSN_HEADER + b"\x01" * RECORD_HEADER_SIZE,
}


def test_the_torn_record_at_max_lsn_is_a_torn_tail_in_both_layouts() -> None:
    for data in (_TORN_RECORD_AT_MAX_LSN, _V2_TORN_RECORD_AT_MAX_LSN):
        scan = scan_segment(
            data, path="<regression>", name_lsn=MAX_LSN, expected_first_lsn=None, is_last=True
        )
        assert scan.torn is not None and scan.end == SEGMENT_HEADER_SIZE


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_regression_input(name: str) -> None:
    check_wal(REGRESSIONS[name])


@pytest.mark.parametrize("target", ["fuzz_payloads", "fuzz_wal"])
def test_atheris_runs_the_target(target: str, tmp_path: Path) -> None:
    if importlib.util.find_spec("atheris") is None:
        pytest.fail("atheris is a dev dependency and must be installed: pip install -e '.[dev]'")
    corpus = tmp_path / "corpus"
    # libFuzzer adds inputs to it: keep the repo's clean.
    shutil.copytree(FUZZ_DIR / "corpus" / target.removeprefix("fuzz_"), corpus)
    result = subprocess.run(
        [
            sys.executable,
            str(FUZZ_DIR / f"{target}.py"),
            f"-runs={ATHERIS_RUNS}",
            f"-max_total_time={ATHERIS_TIME_LIMIT_S}",
            f"-seed={ATHERIS_SEED}",
            f"-artifact_prefix={tmp_path}/",
            str(corpus),
        ],
        capture_output=True,
        text=True,
        timeout=ATHERIS_TIME_LIMIT_S + 60,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert "Done" in result.stderr
    assert not list(tmp_path.glob("crash-*"))
