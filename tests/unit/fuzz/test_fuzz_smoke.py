"""The wire fuzz target, briefly: its seeds, mutated inputs, and a real atheris run."""

from __future__ import annotations

import importlib.util
import random
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Final

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brain import cbor
from brain.wire.frame import FrameReader, encode_frame
from brain.wire.opcodes import Opcode

REPO: Final = Path(__file__).resolve().parents[3]
TARGET: Final = REPO / "fuzz" / "fuzz_wire.py"
CORPUS: Final = REPO / "fuzz" / "corpus" / "wire"

MUTATED_INPUTS: Final = 2000
"""Random mutations of the seeds per run: about a second of work."""

ATHERIS_RUNS: Final = 2000
"""Inputs the real fuzzer tries: enough to prove the target runs under atheris."""

ATHERIS_TIME_LIMIT_S: Final = 30
"""Cap on the atheris run, well above what 2000 runs take, so a slow host cannot hang CI."""


def _load_target() -> ModuleType:
    # fuzz/ is a script folder, not an installed package: load the file itself.
    spec = importlib.util.spec_from_file_location("fuzz_wire", TARGET)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FUZZ: Final = _load_target()
check_one: Callable[[bytes], None] = FUZZ.check_one
SEEDS: Final = {path.name: path.read_bytes() for path in sorted(CORPUS.iterdir())}


def test_corpus_has_the_wire_md_frames() -> None:
    hello = bytes.fromhex(
        "42524e30 01 0001 00 2270ff13 00000000 00001a 00 eac1bbd7 0000000000000000"
        "a266636c69656e746664656d6f2f316876657273696f6e738101"
    )
    ping = bytes.fromhex(
        "42524e30 01 0010 00 9489c625 00000001 000008 00 3e8e706f 0000000000000000 a1656e6f6e636507"
    )
    assert SEEDS["hello_frame"] == hello
    assert SEEDS["ping_frame"] == ping


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_seed_passes(name: str) -> None:
    check_one(SEEDS[name])


def _mutate(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        choice = rng.randrange(5)
        at = rng.randrange(len(out) + 1)
        if choice == 0 and out:
            out[min(at, len(out) - 1)] = rng.randrange(256)
        elif choice == 1:
            out[at:at] = bytes([rng.randrange(256)] * rng.randint(1, 4))
        elif choice == 2:
            del out[at : at + rng.randint(1, 16)]
        elif choice == 3:
            other = rng.choice(list(SEEDS.values()))
            start = rng.randrange(len(other) + 1)
            out[at:at] = other[start : start + rng.randint(1, 64)]
        else:
            out[at:at] = rng.choice((b"\xff", b"\x9f", b"\xbf", b"\x1b" + b"\xff" * 8, b"\xc2"))
    return bytes(out)


def test_random_mutations_of_the_seeds() -> None:
    rng = random.Random(8949)  # fixed: a failure must replay
    for _ in range(MUTATED_INPUTS):
        check_one(_mutate(rng.choice(list(SEEDS.values())), rng))


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=512))
def test_arbitrary_bytes(data: bytes) -> None:
    check_one(data)


@settings(max_examples=300, deadline=None)
@given(opcode=st.integers(0, 0xFFFF), stream=st.integers(0, 7), payload=st.binary(max_size=64))
def test_valid_frames_with_arbitrary_payloads(opcode: int, stream: int, payload: bytes) -> None:
    check_one(encode_frame(opcode, stream, payload))


def test_check_one_reports_foreign_exceptions(monkeypatch: pytest.MonkeyPatch) -> None:
    # The harness must not swallow what it is meant to find.
    def broken(data: bytes) -> object:
        raise ValueError("a decoder bug")

    monkeypatch.setattr(FUZZ.cbor, "decode", broken)
    with pytest.raises(ValueError, match="a decoder bug"):
        check_one(b"\x00")


def test_check_one_reports_a_server_writing_undecodable_frames(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An encoder that emits a duplicate key: the server's PONG is then unreadable.
    real_encode = cbor.encode

    def duplicating(value: object) -> bytes:
        encoded = real_encode(value)
        if isinstance(value, dict) and "server_time" in value:
            return b"\xa4" + encoded[1:] + encoded[1:]
        return encoded

    monkeypatch.setattr(FUZZ.cbor, "encode", duplicating)
    with pytest.raises(AssertionError, match="unreadable"):
        check_one(SEEDS["ping_frame"])


def test_atheris_runs_the_target(tmp_path: Path) -> None:
    if importlib.util.find_spec("atheris") is None:
        pytest.fail("atheris is a dev dependency and must be installed: pip install -e '.[dev]'")
    corpus = tmp_path / "corpus"
    shutil.copytree(CORPUS, corpus)  # libFuzzer adds inputs to it: keep the repo's clean
    result = subprocess.run(
        [
            sys.executable,
            str(TARGET),
            f"-runs={ATHERIS_RUNS}",
            f"-max_total_time={ATHERIS_TIME_LIMIT_S}",
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


def test_regression_seed_still_reaches_ping() -> None:
    # Re-framing records pick opcodes by index: the NaN-key seed must still be a PING.
    frames = FrameReader().feed(FUZZ._reframe(SEEDS["regress_nan_map_keys"]))
    assert [f.opcode for f in frames] == [Opcode.PING]


def test_readme_documents_the_make_fuzz_command() -> None:
    readme = (REPO / "fuzz" / "README.md").read_text()
    assert ".venv/bin/python fuzz/fuzz_wire.py -max_total_time=300 fuzz/corpus/wire" in readme
