"""The fields of the JSONL export form: for each stored map a line holds, which
fields it has, how each reads (:mod:`brain.engine.admin.jsonl_codecs`), and on which
time axis a time lies. ``spec/06-operations.md`` §9.2 lists them all, and
``tests/unit/admin/test_jsonl_form.py`` holds the spec's table to these."""

from __future__ import annotations

from typing import Final

from brain.engine.admin.jsonl_codecs import (
    BYTES,
    CLIENT_VECTOR,
    DIGEST,
    ENTITY_REF,
    FREE,
    IDS,
    INTEGER,
    NUMBER,
    OBJECT,
    RECORD_ID,
    RECORD_TIME,
    REVIEW_RECORDS,
    SUBJECT,
    TEXT,
    TEXTS,
    VALID_TIME,
    Field,
    Fields,
    list_of,
    nested,
    places,
)

__all__ = [
    "AUDIT",
    "ENTITY",
    "ENTITY_VERSION",
    "EVIDENCE",
    "MEMORY",
    "MENTIONS",
    "MERGE",
    "RELATION",
    "RELATION_STATE",
    "REVIEW",
    "SCHEMA",
    "STATEMENT",
    "STATEMENT_STATE",
]

EVIDENCE: Final = Fields(
    "evidence item", (Field("memory", RECORD_ID, required=True), Field("sha256", DIGEST))
)
"""A memory a statement or relation cites."""
_CITED: Final = list_of(nested(EVIDENCE))

MEMORY: Final = Fields(
    "memory",
    (
        Field("recorded_at", RECORD_TIME, required=True),
        Field("sha256", DIGEST, required=True),
        Field("text", TEXT),
        Field("occurred_at", VALID_TIME),
        Field("context", TEXT),
        Field("client_vector", CLIENT_VECTOR, stored="vector"),
        Field("forgotten", TEXT),
        Field("forgotten_at", RECORD_TIME),
    ),
    scoped=True,
)
"""A memory row (``memories``)."""

MENTIONS: Final = Fields(
    "mention row",
    (
        Field("recorded_at", RECORD_TIME, required=True),
        Field(
            "extractors",
            list_of(
                places(
                    "extractor",
                    (Field("name", TEXT), Field("version", INTEGER)),
                    least=2,
                )
            ),
            required=True,
        ),
        Field(
            "names",
            list_of(
                places(
                    "mention",
                    (
                        Field("name", TEXT),
                        Field("found", TEXT),
                        Field("extractor", INTEGER),
                        Field("entity", ENTITY_REF),
                    ),
                    least=3,
                )
            ),
            stored="mentions",
        ),
        Field("record_invalidated_at", RECORD_TIME),
    ),
)
"""The names a memory's text mentions (``mentions``)."""

_ENTITY_FIELDS: Final = (
    Field("name", TEXT, required=True),
    Field("entity_type", TEXT, stored="type"),
    Field("aliases", TEXTS, required=True),
    Field("attributes", FREE, required=True),
    Field("created_at", RECORD_TIME, required=True),
    Field("merged_into", ENTITY_REF),
    Field("moved", TEXTS),
    Field("merge_height", INTEGER),
    Field("tombstoned_at", RECORD_TIME),
)

ENTITY: Final = Fields("entity", _ENTITY_FIELDS, scoped=True)
"""An entity row (``entities``)."""

ENTITY_VERSION: Final = Fields(
    "entity version",
    (Field("recorded_at", RECORD_TIME, required=True), *_ENTITY_FIELDS),
    scoped=True,
)
"""One version of an entity row (``entity_versions``): the row believed from
``recorded_at`` until the next version's, held in the entity line's ``versions``."""

_ENTITY_ROW: Final = nested(Fields("entity row", _ENTITY_FIELDS, scoped=True))
"""An entity row held in a merge record: its own ``namespace`` and ``space``, which
must be the line's, are left out like a line's."""

MERGE: Final = Fields(
    "merge",
    (
        Field("keep", ENTITY_REF, required=True),
        Field("merge", ENTITY_REF, required=True),
        Field("merged_at", RECORD_TIME, required=True),
        Field("unmerged_at", RECORD_TIME),
        Field("keep_index", TEXTS, required=True),
        Field("merge_index", TEXTS, required=True),
        Field("keep_before", _ENTITY_ROW, required=True),
        Field("merge_before", _ENTITY_ROW, required=True),
        Field("keep_after", _ENTITY_ROW, required=True),
        Field("merge_after", _ENTITY_ROW, required=True),
    ),
)
"""A merge record (``entity_merges``)."""

REVIEW: Final = Fields(
    "review",
    (
        Field("kind", TEXT, required=True),
        Field("status", TEXT, required=True),
        Field("created_at", RECORD_TIME, required=True),
        Field("records", REVIEW_RECORDS, required=True),
        Field("name", TEXT),
        Field("entity_type", TEXT, stored="type"),
        Field("decision", TEXT),
        Field("decided_at", RECORD_TIME),
        Field("resolved_to", ENTITY_REF),
    ),
)
"""A review item (``reviews``); set :attr:`ShowContext.review_kind` to show one."""

SCHEMA: Final = Fields(
    "schema",
    (
        Field("version", INTEGER, required=True),
        Field("predicates", FREE, required=True),
        Field("relation_types", FREE, required=True),
        Field("entity_types", TEXTS, required=True),
    ),
)
"""A schema row (``schema``)."""

STATEMENT: Final = Fields(
    "statement",
    (
        Field("recorded_at", RECORD_TIME, required=True),
        Field("version", INTEGER, required=True),
        Field("chain_root", RECORD_ID, required=True),
        Field("supersedes", RECORD_ID),
        Field("kind", TEXT),
        Field("subject", SUBJECT),
        Field("predicate", TEXT),
        Field("object", OBJECT),
        Field("confidence", NUMBER),
        Field("evidence", _CITED),
        Field("source", TEXT),
        Field("valid_from", VALID_TIME),
        Field("valid_to", VALID_TIME),
        Field("event_at", VALID_TIME),
    ),
    scoped=True,
)
"""A statement's content row (``statements``): a retracted one's husk keeps only
the required fields and ``supersedes``."""

_STAMPS: Final = (
    Field("superseded_by", RECORD_ID),
    Field("record_invalidated_at", RECORD_TIME),
    Field("tombstoned_at", RECORD_TIME),
    Field("tombstone_reason", TEXT),
    Field("closed_valid_to", VALID_TIME),
    Field("closed_at", RECORD_TIME),
)

STATEMENT_STATE: Final = Fields(
    "statement's state",
    (
        *_STAMPS,
        Field("supersedes", RECORD_ID),
        Field("chain_root", RECORD_ID),
        Field("version", INTEGER),
    ),
)
"""What happened to a statement later (``statement_state``); ``supersedes``,
``chain_root`` and ``version`` the chain a decided contradiction joined it to."""

RELATION: Final = Fields(
    "relation",
    (
        Field("relation_type", TEXT, required=True, stored="type"),
        Field("from", SUBJECT, required=True),
        Field("to", SUBJECT, required=True),
        Field("confidence", NUMBER, required=True),
        Field("evidence", _CITED, required=True),
        Field("recorded_at", RECORD_TIME, required=True),
        Field("version", INTEGER, required=True),
        Field("chain_root", RECORD_ID, required=True),
        Field("supersedes", RECORD_ID),
        Field("valid_from", VALID_TIME),
        Field("valid_to", VALID_TIME),
    ),
    scoped=True,
)
"""A relation's content row (``relations``)."""

RELATION_STATE: Final = Fields("relation's state", (*_STAMPS, Field("tombstone_note", TEXT)))
"""What happened to a relation later (``relation_state``)."""

AUDIT: Final = Fields(
    "audit entry",
    (
        Field("recorded_at", RECORD_TIME, required=True),
        Field("lsn", INTEGER, required=True),
        Field("key_id", BYTES, required=True),
        Field("operation", TEXT, required=True),
        Field("records", IDS, required=True),
        Field("reason", TEXT),
        Field("cascaded", IDS),
        Field("input_sha256", DIGEST),
        Field("extractor", TEXT),
        Field("version", INTEGER),
        Field(
            "outputs",
            list_of(
                nested(
                    Fields(
                        "extraction output",
                        (
                            Field("name_sha256", DIGEST, required=True),
                            Field("found", TEXT, required=True),
                            Field("entity", ENTITY_REF),
                        ),
                    )
                )
            ),
        ),
        Field("cost_us", INTEGER),
    ),
    scoped=True,
)
"""An audit entry (``audit``); an extraction's entry also has the fields from
``input_sha256`` on."""
