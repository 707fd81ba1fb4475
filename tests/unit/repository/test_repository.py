"""The repository stands alone: no file points outside it, and every document cited exists.

Both checks read the files git knows (tracked, plus new files not ignored), skipping binary
files and the fuzz corpus, and report every offending ``file:line``.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Final

import pytest

ROOT: Final = Path(__file__).resolve().parents[3]

SKIPPED_PREFIXES: Final = ("fuzz/corpus/",)
"""Folders of generated inputs, not text anyone reads."""

SIBLING: Final = "sha" + "red"
"""The folder beside a development checkout that a fresh clone lacks. Spelled in
two parts so that this file, which looks for the paths, does not contain one."""

OUTSIDE: Final = re.compile(rf"\.\./{SIBLING}\b|\b{SIBLING}/(?:data|design)\b")
"""A path into the folder beside the checkout, which a fresh clone does not have."""

URL: Final = re.compile(r"\w+://\S+")
"""Web addresses: what they cite lives elsewhere, so they are blanked before matching."""

CITATION: Final = re.compile(r"(?<![\w./-])((?:\.{1,2}/)*(?:[\w.-]+/)*[\w.-]*\w\.md)(?!\w)")
"""A cited Markdown document: a bare name (``README.md``) or a path
(``spec/03-time.md``, ``../tests/data/README.md``)."""


@functools.cache
def text_files() -> dict[str, list[str]]:
    """Every file git knows, as lines, by its path from the root; binary files left out."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    listing = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.decode("utf-8")
    files: dict[str, list[str]] = {}
    for name in sorted(set(filter(None, listing.split("\0")))):
        path = ROOT / name
        if name.startswith(SKIPPED_PREFIXES) or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue
        try:
            files[name] = data.decode("utf-8").splitlines()
        except UnicodeDecodeError:
            continue
    return files


def test_no_file_refers_to_a_path_outside_the_repository() -> None:
    found = [
        f"{name}:{number}: {line.strip()}"
        for name, lines in text_files().items()
        for number, line in enumerate(lines, 1)
        if SIBLING in line and OUTSIDE.search(line)
    ]
    assert not found, "paths outside the repository:\n" + "\n".join(found)


def _exists(cited: str, citing: str, basenames: set[str]) -> bool:
    """Whether ``cited`` names a document: from the root, from the citing file's folder, or
    by the name of some document in the repository."""
    if os.path.basename(cited) in basenames:
        return True
    folder = os.path.dirname(citing)
    return any(
        (ROOT / os.path.normpath(os.path.join(base, cited))).is_file() for base in ("", folder)
    )


def test_every_cited_document_exists() -> None:
    files = text_files()
    basenames = {os.path.basename(name) for name in files if name.endswith(".md")}
    missing = [
        f"{name}:{number}: {cited}"
        for name, lines in files.items()
        for number, line in enumerate(lines, 1)
        if ".md" in line
        for cited in CITATION.findall(URL.sub(" ", line))
        if not _exists(cited, name, basenames)
    ]
    assert not missing, f"{len(missing)} citations of missing documents:\n" + "\n".join(missing)
