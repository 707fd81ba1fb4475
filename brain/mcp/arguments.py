"""The tools' arguments: their types, with the description a model reads for each,
and the conversions into the facade's arguments.

Pydantic checks each argument against its type before a tool runs (a wrong type
is a tool error naming it); what only Brain can judge (a time's form, an id's
length, a name's rules) is the facade's or the server's to refuse.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field

from brain.wire.messages.values import MAX_LIST_LIMIT

__all__ = [
    "ID_FORMAT",
    "MAX_REVIEW_ITEMS",
    "MAX_TOP_K",
    "Confidence",
    "Decision",
    "EvidenceIds",
    "Hard",
    "Object",
    "OptionalText",
    "Predicate",
    "RecallLimit",
    "ReviewLimit",
    "Subject",
    "SubjectType",
    "Time",
    "evidence_ids",
]

MAX_TOP_K: Final = 100
"""Most hits one recall returns to a model, below RECALL's own ceiling (1000): each hit
is a fenced block of stored text, and a hundred of them already fill a prompt."""

MAX_REVIEW_ITEMS: Final = MAX_LIST_LIMIT
"""Most review items one review_list shows: REVIEW_LIST's own ceiling on ``limit``."""

TIME_FORMAT: Final = (
    "ISO 8601: a date (2024-05-01, midnight UTC) or a date and time with an offset "
    "(2024-05-01T10:00:00Z, 2024-05-01T12:00:00+02:00), up to nine fraction digits"
)
"""How every time argument is written; a time without an offset is refused, its zone a guess."""

ID_FORMAT: Final = "32 hex digits, as earlier tool results give them"

Time = Annotated[str | None, Field(description=f"A time, {TIME_FORMAT}.")]
OptionalText = Annotated[str | None, Field(description="Free text, or leave out.")]
Subject = Annotated[
    str,
    Field(
        description="Who or what the fact is about, by name (e.g. 'Alice Smith'): the entity "
        "of that name is found, or created when there is none."
    ),
]
SubjectType = Annotated[
    str | None,
    Field(
        description="The subject's entity type (e.g. 'person', 'company'), to tell apart "
        "entities sharing a name; leave out when unknown."
    ),
]
Predicate = Annotated[
    str,
    Field(
        description="The relation of subject to object, lower snake case (e.g. 'works_at', "
        "'lives_in', 'birth_date'). Reuse the predicates already stored for the same idea."
    ),
]
Object = Annotated[
    str | int | float | bool,
    Field(description="The value: text (e.g. 'Acme Corp'), a number or a boolean."),
]
Confidence = Annotated[
    float | None,
    Field(ge=0.0, le=1.0, description="How sure the source is, 0 to 1; leave out for 1."),
]
EvidenceIds = Annotated[
    list[str] | None,
    Field(
        description="Ids of the memories this fact rests on (from remember or recall). "
        "Cite them: a fact whose only evidence is forgotten is withdrawn with it."
    ),
]
Hard = Annotated[
    bool,
    Field(
        description="False (default): recall stops finding the memory, which stays stored. "
        "True: its text is erased for good and cannot be brought back."
    ),
]
RecallLimit = Annotated[
    int | None,
    Field(ge=1, le=MAX_TOP_K, description="Most hits to return; leave out for the default (10)."),
]
ReviewLimit = Annotated[
    int | None,
    Field(ge=1, le=MAX_REVIEW_ITEMS, description="Most items to list; leave out for 100."),
]
Decision = Annotated[
    Literal["keep_both", "supersede", "reject_new", "merge", "distinct"],
    Field(
        description="For a contradiction: keep_both, supersede or reject_new. For an "
        "ambiguous name: merge (with into) or distinct."
    ),
]
"""REVIEW_DECIDE's choices: the first three settle a contradiction, the last two an
ambiguous name (spec/02-data-model.md §7)."""


def evidence_ids(ids: list[str] | None) -> list[str] | None:
    """The evidence list as the facade takes it: ids, each once, in the order given."""
    return None if ids is None else list(dict.fromkeys(ids))
