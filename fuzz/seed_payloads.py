"""Regenerate fuzz/corpus/payloads/ from the golden vectors.

Run it from the repository root::

    .venv/bin/python fuzz/seed_payloads.py

Each golden vector of ``protocol/vectors/golden.json`` becomes one seed file
named after the vector: the two selector bytes of fuzz_payloads.py naming the
vector's message class, then the vector's payload bytes. Seeds are
rewritten; other files in the directory (fuzzer finds, regressions) are kept.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Final

REPO: Final = Path(__file__).resolve().parents[1]
VECTORS: Final = REPO / "protocol" / "vectors" / "golden.json"
CORPUS: Final = REPO / "fuzz" / "corpus" / "payloads"

_RESPONSE_BIT: Final = 0x0080
_ERROR_OPCODE: Final = 0x00FF


def _load_target() -> object:
    # fuzz/ is a script folder, not a package: load the target's file itself.
    spec = importlib.util.spec_from_file_location(
        "fuzz_payloads", REPO / "fuzz" / "fuzz_payloads.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def seeds() -> dict[str, bytes]:
    """Every golden vector as ``{file name: selector + payload}``."""
    target = _load_target()
    selector_for = target.selector_for  # type: ignore[attr-defined]
    document = json.loads(VECTORS.read_text())
    out: dict[str, bytes] = {}
    for vector in document["vectors"]:
        opcode = int(vector["opcode"], 16)
        if opcode == _ERROR_OPCODE:
            selector = selector_for(opcode, response=True)
        else:
            selector = selector_for(
                opcode & ~_RESPONSE_BIT,
                response=bool(opcode & _RESPONSE_BIT),
                stream_end=bool(vector["eos"]),
            )
        out[f"golden_{vector['name']}"] = bytes(selector) + bytes.fromhex(vector["payload_hex"])
    return out


def main() -> None:
    """Write every seed into the corpus directory."""
    CORPUS.mkdir(parents=True, exist_ok=True)
    written = seeds()
    for name, data in written.items():
        (CORPUS / name).write_bytes(data)
    print(f"wrote {len(written)} seeds to {CORPUS.relative_to(REPO)}", file=sys.stderr)


if __name__ == "__main__":
    main()
