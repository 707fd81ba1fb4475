"""The Cranfield collection: 1,400 aeronautics abstracts, 225 queries, graded judgements.

Loads the three files of ``bench/data/cranfield/`` (its README.md describes
them and where they come from) into typed records for the retrieval-quality
suite:

- ``cran.all.1400``: documents. Each record opens with ``.I <id>`` and has the
  fields ``.T`` title, ``.A`` authors, ``.B`` bibliography and ``.W`` abstract.
  Only title and abstract are indexed.
- ``cran.qry``: queries, ``.I <id>`` then ``.W <text>``. The ``.I`` numbers run
  001…365 with gaps, but the judgements number queries 1…225 by their position
  in this file, so queries are renumbered by position and their ``.I`` is only
  checked to increase.
- ``cranqrel``: ``query doc code`` per line. Codes 1 (a complete answer) … 4
  (minimal interest) become the graded gain ``5 - code`` (4 … 1); code ``-1``
  carries no relevance grade and is treated as not relevant (the row is
  dropped).

Any departure from that format raises :class:`ValueError` naming the file and
line, so a damaged or different copy of the collection cannot quietly produce
different scores.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Final

__all__ = [
    "DOCUMENTS_FILE",
    "DOCUMENT_COUNT",
    "JUDGEMENTS_FILE",
    "NOT_RELEVANT_CODE",
    "QUERIES_FILE",
    "QUERY_COUNT",
    "Document",
    "Query",
    "data_dir",
    "gain_of",
    "load_documents",
    "load_judgements",
    "load_queries",
]

DOCUMENTS_FILE: Final = "cran.all.1400"
"""The documents file inside the collection directory."""

QUERIES_FILE: Final = "cran.qry"
"""The queries file inside the collection directory."""

JUDGEMENTS_FILE: Final = "cranqrel"
"""The relevance-judgements file inside the collection directory."""

DOCUMENT_COUNT: Final = 1400
"""Documents in the collection, numbered 1…1400: fewer or more means a different copy."""

QUERY_COUNT: Final = 225
"""Queries in the collection, numbered 1…225 by position: what ``cranqrel`` refers to."""

RELEVANCE_CODES: Final = (1, 2, 3, 4)
"""Cleverdon's codes, 1 = complete answer … 4 = minimal interest (5, no interest, is never
listed)."""

NOT_RELEVANT_CODE: Final = -1
"""The code of one row per query that carries no relevance grade: treated as not relevant."""

GAIN_CEILING: Final = 5
"""Graded gain is ``GAIN_CEILING - code``, so the best code (1) gains 4 and the weakest (4)
gains 1."""

_DOCUMENT_FIELDS: Final = (".T", ".A", ".B", ".W")
_QUERY_FIELDS: Final = (".W",)
_ABSTRACT: Final = ".W"


@dataclasses.dataclass(frozen=True, slots=True)
class Document:
    """One Cranfield document: its id (1…1400), its title and the text to index.

    ``text`` is the title, a blank line, then the abstract, each with its runs
    of whitespace collapsed to single spaces. Two records of the collection
    (471 and 995) are empty; their title and text are empty strings."""

    doc_id: int
    title: str
    text: str


@dataclasses.dataclass(frozen=True, slots=True)
class Query:
    """One Cranfield query: its id by position in ``cran.qry`` (1…225) and its text."""

    query_id: int
    text: str


def data_dir(override: Path | str | None = None) -> Path:
    """The collection directory: ``override`` if given, else ``bench/data/cranfield``.

    The default is found from this file: the copy kept in the repository beside
    it. Raises :class:`FileNotFoundError` when the directory is missing."""
    if override is not None:
        found = Path(override)
    else:
        found = Path(__file__).resolve().parent / "data" / "cranfield"
    if not found.is_dir():
        raise FileNotFoundError(f"the Cranfield collection is not at {found}")
    return found


def gain_of(code: int) -> int:
    """The graded gain of a relevance code 1…4: ``5 - code``."""
    if code not in RELEVANCE_CODES:
        raise ValueError(f"relevance code {code} is not one of {RELEVANCE_CODES}")
    return GAIN_CEILING - code


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc.reason})") from exc


def _tidy(lines: list[str]) -> str:
    """Collapse every run of whitespace, line breaks included, to one space."""
    return " ".join(" ".join(lines).split())


@dataclasses.dataclass(slots=True)
class _Record:
    line: int
    marker: str
    fields: dict[str, list[str]]


def _record_marker(path: Path, number: int, line: str) -> str:
    """The ``<number>`` of the record-opening line ``line``, which must read exactly
    ``.I <number>``; ``number`` is its line number, for the error."""
    parts = line.split()
    if len(parts) != 2 or not (parts[1].isascii() and parts[1].isdigit()):
        raise ValueError(f"{path}: line {number}: expected '.I <number>', got {line!r}")
    return parts[1]


def _records(path: Path, allowed: tuple[str, ...]) -> Iterator[_Record]:
    """Split a ``.I``-delimited file into records of field name → lines.

    The abstract runs from its ``.W`` to the next ``.I``: three records of the
    documents file (240, 576, 578) repeat field markers inside their abstracts,
    and those marker lines are dropped while the text around them is kept."""
    current: _Record | None = None
    field: str | None = None
    for number, raw in enumerate(_read_lines(path), start=1):
        line = raw.rstrip()
        if line == ".I" or line.startswith(".I "):
            marker = _record_marker(path, number, line)
            if current is not None:
                yield current
            current = _Record(number, marker, {})
            field = None
        elif current is None:
            if line:
                raise ValueError(f"{path}: line {number}: text before the first .I record")
        elif field == _ABSTRACT:
            if line not in allowed:
                current.fields[field].append(line)
        elif line in allowed:
            if line in current.fields:
                raise ValueError(f"{path}: line {number}: field {line} repeated in one record")
            field = line
            current.fields[line] = []
        elif field is not None:
            current.fields[field].append(line)
        elif line:
            raise ValueError(f"{path}: line {number}: text outside any field: {line[:60]!r}")
    if current is not None:
        yield current


def load_documents(directory: Path | str | None = None) -> list[Document]:
    """The 1,400 documents in id order; title and abstract indexed, authors dropped."""
    path = data_dir(directory) / DOCUMENTS_FILE
    documents: list[Document] = []
    for record in _records(path, _DOCUMENT_FIELDS):
        expected = len(documents) + 1
        if int(record.marker) != expected:
            raise ValueError(
                f"{path}: line {record.line}: document .I {record.marker}, expected {expected}"
            )
        missing = [name for name in _DOCUMENT_FIELDS if name not in record.fields]
        if missing:
            raise ValueError(
                f"{path}: line {record.line}: document {expected} lacks {', '.join(missing)}"
            )
        title = _tidy(record.fields[".T"])
        abstract = _tidy(record.fields[".W"])
        text = "\n\n".join(part for part in (title, abstract) if part)
        documents.append(Document(doc_id=expected, title=title, text=text))
    if len(documents) != DOCUMENT_COUNT:
        raise ValueError(f"{path}: {len(documents)} documents, expected {DOCUMENT_COUNT}")
    return documents


def load_queries(directory: Path | str | None = None) -> list[Query]:
    """The 225 queries, numbered 1…225 by their position in ``cran.qry``."""
    path = data_dir(directory) / QUERIES_FILE
    queries: list[Query] = []
    previous = 0
    for record in _records(path, _QUERY_FIELDS):
        marker = int(record.marker)
        if marker <= previous:
            raise ValueError(
                f"{path}: line {record.line}: query .I {record.marker} does not increase"
            )
        previous = marker
        text = _tidy(record.fields.get(".W", []))
        if not text:
            raise ValueError(f"{path}: line {record.line}: query .I {record.marker} has no text")
        queries.append(Query(query_id=len(queries) + 1, text=text))
    if len(queries) != QUERY_COUNT:
        raise ValueError(f"{path}: {len(queries)} queries, expected {QUERY_COUNT}")
    return queries


def load_judgements(directory: Path | str | None = None) -> dict[int, dict[int, int]]:
    """Query id → document id → graded gain (1…4) from ``cranqrel``.

    Code ``-1`` rows are treated as not relevant and left out, as are blank
    lines; a query whose rows are all ``-1`` would be absent from the result.
    A (query, document) pair listed twice is an error: its grade would be
    ambiguous."""
    path = data_dir(directory) / JUDGEMENTS_FILE
    judgements: dict[int, dict[int, int]] = {}
    seen: set[tuple[int, int]] = set()
    for number, line in enumerate(_read_lines(path), start=1):
        parts = line.split()
        if not parts:
            continue
        try:
            query, doc, code = (int(part) for part in parts)
        except ValueError as exc:
            raise ValueError(
                f"{path}: line {number}: expected 'query doc code', got {line!r}"
            ) from exc
        if not 1 <= query <= QUERY_COUNT:
            raise ValueError(f"{path}: line {number}: query {query} is not in 1…{QUERY_COUNT}")
        if not 1 <= doc <= DOCUMENT_COUNT:
            raise ValueError(f"{path}: line {number}: document {doc} is not in 1…{DOCUMENT_COUNT}")
        if (query, doc) in seen:
            raise ValueError(f"{path}: line {number}: query {query}, document {doc} listed twice")
        seen.add((query, doc))
        if code == NOT_RELEVANT_CODE:
            continue
        if code not in RELEVANCE_CODES:
            raise ValueError(f"{path}: line {number}: relevance code {code} is not 1…4 or -1")
        judgements.setdefault(query, {})[doc] = gain_of(code)
    return judgements
