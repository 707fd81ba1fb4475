"""The tests' own layout: every folder of tests is a package, and every test file a
document cites is where it says.

Test modules are imported by their dotted path (``tests.unit.records.test_forget_cascades``),
so two files of one name in two folders stay apart only while each folder has its
``__init__.py``; and the specification cites test files as its evidence, so a moved
test must take its citations with it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[3]

TESTS: Final = ROOT / "tests"

SKIPPED: Final = ("data",)
"""Folders under ``tests`` that hold inputs, not test code."""

CITED_TEST: Final = re.compile(r"(?<![\w./-])tests/(?:[\w*-]+/)*[\w*-]+\.py\b")
"""A test file cited by its path from the root (``tests/unit/wire/test_cbor.py``), or a
pattern of them (``tests/integration/test_bench_*.py``)."""


def _documents() -> list[Path]:
    """The Markdown documents of the repository, outside hidden folders (the virtual
    environment, git's own) and installed packages."""
    found = []
    for folder, subfolders, names in os.walk(ROOT):
        subfolders[:] = [s for s in subfolders if not s.startswith(".") and s != "node_modules"]
        found += [Path(folder) / name for name in names if name.endswith(".md")]
    return found


def test_every_folder_of_tests_is_a_package() -> None:
    folders = {
        path.parent
        for path in TESTS.rglob("*.py")
        if path.relative_to(TESTS).parts[0] not in SKIPPED
    }
    missing = sorted(str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").is_file())
    assert not missing, f"folders of tests without __init__.py: {missing}"


def test_every_cited_test_file_exists() -> None:
    cited = [
        (document, number, path)
        for document in _documents()
        for number, line in enumerate(document.read_text(encoding="utf-8").splitlines(), 1)
        for path in CITED_TEST.findall(line)
    ]
    assert cited, "the check found no citation to test"
    missing = [
        f"{document.relative_to(ROOT)}:{number}: {path}"
        for document, number, path in cited
        if not any(ROOT.glob(path))
    ]
    assert not missing, "cited test files that do not exist:\n" + "\n".join(missing)
