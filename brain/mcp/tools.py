"""The tools and the MCP server that lists them, each a call of the :class:`brain.Brain`
facade (spec/06-operations.md §12).

The scope of every call is the API key's namespace; the space is the server's
option, fixed for its life, so that a model cannot wander into another space.
"""

# No ``from __future__ import annotations`` here: the SDK reads each tool's
# signature at registration to build its input and output schemas, and resolves
# the annotations then, which needs them as objects rather than text.

import contextlib
from typing import Annotated, Final

from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from brain.errors import NotFound
from brain.mcp import answers
from brain.mcp.arguments import (
    ID_FORMAT,
    Confidence,
    Decision,
    EvidenceIds,
    Hard,
    Object,
    OptionalText,
    Predicate,
    RecallLimit,
    ReviewLimit,
    Subject,
    SubjectType,
    Time,
    evidence_ids,
)
from brain.mcp.connection import Connection
from brain.mcp.descriptions import INSTRUCTIONS, TOOLS
from brain.mcp.refusals import refusals
from brain.sdk import Brain, requests, results
from brain.sdk.times import Instant
from brain.version import __version__
from brain.wire.messages.review_ops import ReviewDecide, ReviewList

__all__ = ["RENDER_MAX_CHARS", "SERVER_NAME", "build_server"]

SERVER_NAME: Final = "brain"
"""The name the server gives in the MCP handshake."""

RENDER_MAX_CHARS: Final = 32_000
"""Longest recall text handed to a model, about 8,000 tokens: enough for the top hits
in full, while leaving most of a model's context to the conversation."""

READ: Final = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITE: Final = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
ERASE: Final = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)


class _Names:
    """Entity names for one answer, each looked up once (ENTITY_GET)."""

    def __init__(self, brain: Brain) -> None:
        self._brain = brain
        self._names: dict[bytes, str] = {}

    def __call__(self, entity: bytes) -> str:
        if entity not in self._names:
            name = f"entity:{entity.hex()}"
            # An entity gone since the answer was made is shown by its id.
            with contextlib.suppress(NotFound):
                name = self._brain.get_entity(entity).name
            self._names[entity] = name
        return self._names[entity]


def build_server(connection: Connection, *, address: str | None = None) -> MCPServer:
    """The MCP server whose tools call Brain through ``connection``; ``address``
    (``host:port``) is named when the server cannot be reached."""
    server: MCPServer = MCPServer(
        SERVER_NAME, instructions=INSTRUCTIONS, version=__version__, log_level="WARNING"
    )

    def remember(
        text: Annotated[str, Field(description="The text to keep, word for word.")],
        occurred_at: Time = None,
        context: OptionalText = None,
    ) -> Annotated[CallToolResult, answers.Remembered]:
        with refusals(address=address):
            made = connection.brain().remember(text, occurred_at=occurred_at, context=context)
        content = answers.Remembered(
            memory_id=made.id.hex(),
            recorded_at=made.recorded_at.iso(),
            deduplicated=made.deduplicated,
        )
        seen = " (this text was stored already)" if made.deduplicated else ""
        return answers.answer(
            f"memory {content.memory_id} recorded_at {content.recorded_at}{seen}", content
        )

    def recall(
        query: Annotated[
            str, Field(description="What to look for, in plain words (a question works).")
        ],
        as_of: Time = None,
        valid_at: Time = None,
        top_k: RecallLimit = None,
    ) -> Annotated[CallToolResult, answers.Recalled]:
        with refusals(address=address):
            brain = connection.brain()
            found = brain.recall(query, as_of=as_of, valid_at=valid_at, top_k=top_k)
            text = brain.render(found, max_chars=RENDER_MAX_CHARS) if found.hits else ""
        content = answers.Recalled(
            text=text, citations=answers.citations_of(found.hits), abstained=found.abstained
        )
        shown = text or "Nothing stored matches this query."
        return answers.answer(shown, content)

    def state_fact(
        *,
        subject: Subject,
        predicate: Predicate,
        object: Object,
        subject_type: SubjectType = None,
        valid_from: Time = None,
        valid_to: Time = None,
        confidence: Confidence = None,
        evidence: EvidenceIds = None,
        source: OptionalText = None,
    ) -> Annotated[CallToolResult, answers.StatementWritten]:
        with refusals(address=address):
            made = connection.brain().create_statement(
                subject,
                predicate,
                object,
                subject_type=subject_type,
                valid_from=valid_from,
                valid_to=valid_to,
                confidence=confidence,
                evidence=evidence_ids(evidence),
                source=source,
            )
        return _written(made, "statement")

    def supersede(
        *,
        statement_id: Annotated[
            str, Field(description=f"The statement to replace, the current version: {ID_FORMAT}.")
        ],
        subject: Subject,
        predicate: Predicate,
        object: Object,
        subject_type: SubjectType = None,
        valid_from: Time = None,
        valid_to: Time = None,
        confidence: Confidence = None,
        evidence: EvidenceIds = None,
        source: OptionalText = None,
    ) -> Annotated[CallToolResult, answers.StatementWritten]:
        with refusals(address=address):
            made = connection.brain().supersede_statement(
                statement_id,
                subject,
                predicate,
                object,
                subject_type=subject_type,
                valid_from=valid_from,
                valid_to=valid_to,
                confidence=confidence,
                evidence=evidence_ids(evidence),
                source=source,
            )
        return _written(made, "new version")

    def forget(
        memory_id: Annotated[str, Field(description=f"The memory to forget: {ID_FORMAT}.")],
        hard: Hard = False,
    ) -> Annotated[CallToolResult, answers.Forgot]:
        with refusals(address=address):
            done = connection.brain().forget(memory_id, hard=hard)
        content = answers.Forgot(
            memory_id=done.id.hex(),
            already_forgotten=done.already_forgotten,
            statements_tombstoned=done.statements_tombstoned,
        )
        how = "forgotten already" if done.already_forgotten else "forgotten"
        return answers.answer(
            f"memory {content.memory_id} {how}; {done.statements_tombstoned} statement(s) "
            "resting on it alone withdrawn",
            content,
        )

    def history(
        statement_id: Annotated[
            str, Field(description=f"Any version of the statement: {ID_FORMAT}.")
        ],
    ) -> Annotated[CallToolResult, answers.History]:
        with refusals(address=address):
            brain = connection.brain()
            names = _Names(brain)
            versions = [answers.version_of(s, names) for s in brain.statement_history(statement_id)]
        content = answers.History(versions=versions)
        return answers.answer("\n".join(answers.version_line(v) for v in versions), content)

    def review_list(limit: ReviewLimit = None) -> Annotated[CallToolResult, answers.Reviews]:
        with refusals(address=address):
            listed = connection.brain().call(ReviewList(limit=limit))
        items = [
            answers.Review(
                review_id=item.review_id.hex(),
                kind=item.kind,
                records=[record.hex() for record in item.records],
                created_at=Instant(item.created_at).iso(),
                name=item.name,
            )
            for item in listed.items
        ]
        lines = [
            f"{i.review_id} {i.kind}{' ' + repr(i.name) if i.name else ''}: "
            f"records {', '.join(i.records)}; created_at {i.created_at}"
            for i in items
        ]
        return answers.answer(
            "\n".join(lines) or "Nothing waits for review.", answers.Reviews(items=items)
        )

    def review_decide(
        review_id: Annotated[
            str, Field(description=f"The item's review_id from review_list: {ID_FORMAT}.")
        ],
        decision: Decision,
        into: Annotated[
            str | None,
            Field(
                description="For merge only, and required by it: the candidate entity the "
                f"name means, one of the item's records: {ID_FORMAT}."
            ),
        ] = None,
    ) -> Annotated[CallToolResult, answers.Decided]:
        with refusals(address=address):
            request = ReviewDecide(
                request_id=requests.new_request_id(),
                review_id=requests.record_id(review_id, argument="review_id"),
                decision=decision,
                into=None if into is None else requests.record_id(into, argument="into"),
            )
            done = connection.brain().call(request)
        content = answers.Decided(review_id=review_id, decision=decision, lsn=done.lsn)
        return answers.answer(f"review {review_id} decided: {decision}", content)

    for tool, hints in (
        (remember, WRITE),
        (recall, READ),
        (state_fact, WRITE),
        (supersede, WRITE),
        (forget, ERASE),
        (history, READ),
        (review_list, READ),
        (review_decide, WRITE),
    ):
        server.add_tool(tool, description=TOOLS[tool.__name__], annotations=hints)
    return server


def _written(made: results.StatementWritten, what: str) -> CallToolResult:
    content = answers.StatementWritten(
        statement_id=made.id.hex(),
        version=made.version,
        chain_root=made.chain_root.hex(),
        superseded=None if made.superseded is None else made.superseded.hex(),
        recorded_at=made.recorded_at.iso(),
    )
    replaced = f", replacing {content.superseded}" if content.superseded else ""
    return answers.answer(
        f"{what} {content.statement_id} (version {content.version}{replaced}) "
        f"recorded_at {content.recorded_at}",
        content,
    )
