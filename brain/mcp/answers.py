"""What each tool answers: a text block for the model and the same facts as
structured content (``structuredContent``, checked against the tool's output schema).

Ids are 32 hex digits and times ISO 8601 UTC with as many fraction digits as
they need, exact to the nanosecond, so a ``recorded_at`` passed back as
``as_of`` asks about exactly the instant of that write.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Literal

from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel

from brain.sdk import results
from brain.sdk.times import Instant

__all__ = [
    "Citation",
    "Decided",
    "Forgot",
    "History",
    "Recalled",
    "Remembered",
    "Review",
    "Reviews",
    "StatementVersion",
    "StatementWritten",
    "answer",
    "citations_of",
    "iso",
    "object_text",
    "subject_text",
    "version_line",
    "version_of",
]

NameOf = Callable[[bytes], str]
"""An entity's name by its id (the id itself when it has none to show)."""


class Remembered(BaseModel):
    """remember's answer."""

    memory_id: str
    recorded_at: str
    deduplicated: bool


class Citation(BaseModel):
    """A record a recall answer rests on: a hit, or a memory a statement hit cites."""

    record: Literal["memory", "statement"]
    id: str
    sha256: str | None = None


class Recalled(BaseModel):
    """recall's answer: the rendered hits and what they cite."""

    text: str
    citations: list[Citation]
    abstained: bool


class StatementWritten(BaseModel):
    """state_fact's and supersede's answer."""

    statement_id: str
    version: int
    chain_root: str
    superseded: str | None
    recorded_at: str


class Forgot(BaseModel):
    """forget's answer."""

    memory_id: str
    already_forgotten: bool
    statements_tombstoned: int


class StatementVersion(BaseModel):
    """One version of a statement chain."""

    statement_id: str
    version: int
    subject: str
    predicate: str | None
    object: str
    valid_from: str | None
    valid_to: str | None
    recorded_at: str
    superseded_by: str | None
    tombstoned_at: str | None


class History(BaseModel):
    """history's answer: every version, oldest first."""

    versions: list[StatementVersion]


class Review(BaseModel):
    """One item waiting for review."""

    review_id: str
    kind: str
    records: list[str]
    created_at: str
    name: str | None


class Reviews(BaseModel):
    """review_list's answer."""

    items: list[Review]


class Decided(BaseModel):
    """review_decide's answer."""

    review_id: str
    decision: str
    lsn: int


def answer(text: str, content: BaseModel) -> CallToolResult:
    """A tool result of ``text`` for the model and ``content`` as structured content."""
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=content.model_dump(mode="json"),
    )


def iso(moment: Instant | None) -> str | None:
    """``moment`` as exact ISO 8601 UTC, or None."""
    return None if moment is None else moment.iso()


def citations_of(hits: Iterable[results.Hit]) -> list[Citation]:
    """The records ``hits`` cite, each once, in the order they are first cited."""
    cited: dict[tuple[str, bytes], Citation] = {}
    for hit in hits:
        if hit.memory is not None:
            key = ("memory", bytes(hit.id))
            cited.setdefault(
                key, Citation(record="memory", id=hit.id.hex(), sha256=hit.memory.sha256.hex())
            )
        elif hit.statement is not None:
            cited.setdefault(
                ("statement", bytes(hit.id)), Citation(record="statement", id=hit.id.hex())
            )
        for entry in hit.evidence or ():
            sha = None if entry.sha256 is None else entry.sha256.hex()
            cited.setdefault(
                ("memory", bytes(entry.memory)),
                Citation(record="memory", id=entry.memory.hex(), sha256=sha),
            )
    return list(cited.values())


def subject_text(subject: results.Ref | results.Name | None, name_of: NameOf) -> str:
    """A statement's subject as a reader names it."""
    if subject is None:
        return "(none)"
    if isinstance(subject, results.Name):
        return subject.name
    if subject.kind == "entity":
        return name_of(bytes(subject.id))
    return f"{subject.kind}:{subject.id.hex()}"


def object_text(value: results.ObjectValue | None, name_of: NameOf) -> str:
    """A statement's object as text: JSON-like for numbers and booleans, ISO for times."""
    if value is None:
        return "(none)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Instant):
        return value.iso()
    if isinstance(value, results.Ref):
        if value.kind == "entity":
            return name_of(bytes(value.id))
        return f"{value.kind}:{value.id.hex()}"
    return str(value)


def version_of(statement: results.Statement, name_of: NameOf) -> StatementVersion:
    """One history entry for ``statement``."""
    return StatementVersion(
        statement_id=statement.id.hex(),
        version=statement.version,
        subject=subject_text(statement.subject, name_of),
        predicate=statement.predicate,
        object=object_text(statement.object_, name_of),
        valid_from=iso(statement.valid_from),
        valid_to=iso(statement.valid_to),
        recorded_at=statement.recorded_at.iso(),
        superseded_by=None if statement.superseded_by is None else statement.superseded_by.hex(),
        tombstoned_at=iso(statement.tombstoned_at),
    )


def version_line(version: StatementVersion) -> str:
    """One line of history text."""
    valid = f"valid [{version.valid_from or '-∞'}, {version.valid_to or '∞'})"
    state = "current"
    if version.tombstoned_at is not None:
        state = f"tombstoned at {version.tombstoned_at}"
    elif version.superseded_by is not None:
        state = f"superseded by {version.superseded_by}"
    return (
        f"v{version.version} {version.statement_id}: {version.subject} {version.predicate} "
        f"{version.object}; {valid}; recorded_at {version.recorded_at}; {state}"
    )
