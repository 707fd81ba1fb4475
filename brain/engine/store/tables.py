"""Every named LMDB table, each named here once with what it holds and its key layout.

``S`` is the 32-byte scope prefix (``spec/05-durability.md`` §10); integers in
keys are big-endian, so byte order is numeric order. The record tables are
described in ``spec/02-data-model.md`` §2, the retrieval tables in
``spec/04-retrieval.md`` §2 and §3, those of the write path in
``spec/05-durability.md`` §2. :data:`TABLES`, the tables the store opens and a
plan may name, is derived from the names below, so a table exists exactly when it
is named here (``tests/unit/store/test_tables.py`` holds every other module to that).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "AUDIT",
    "CHANGE_LOG",
    "EMBED_QUEUE",
    "ENTITIES",
    "ENTITY_ABSORBED",
    "ENTITY_ABSORBED_EVENTS",
    "ENTITY_BY_NAME",
    "ENTITY_MERGES",
    "ENTITY_NAME_EVENTS",
    "ENTITY_VERSIONS",
    "FORGET_LEDGER",
    "IDEMPOTENCY",
    "IDEMPOTENCY_BY_TIME",
    "IDEMPOTENCY_MARKS",
    "IMPORTS",
    "LEX_DOCS",
    "LEX_POSTINGS",
    "LEX_STATS",
    "MEMORIES",
    "MEMORY_BY_SHA",
    "MEMORY_BY_TEXT",
    "MENTIONS",
    "MENTION_BY_NAME",
    "MENTION_STATS",
    "META",
    "PURGE_QUEUE",
    "RELATIONS",
    "RELATION_BY_FROM",
    "RELATION_BY_TIME",
    "RELATION_BY_TO",
    "RELATION_CURRENT",
    "RELATION_STATE",
    "REVIEWS",
    "REVIEWS_BY_NAME",
    "REVIEWS_OPEN",
    "SCHEMA",
    "STATEMENTS",
    "STATEMENT_BY_EVIDENCE",
    "STATEMENT_BY_OBJECT",
    "STATEMENT_BY_SUBJECT",
    "STATEMENT_BY_SUBJECT_TIME",
    "STATEMENT_BY_TIME",
    "STATEMENT_CHAIN",
    "STATEMENT_CURRENT",
    "STATEMENT_STATE",
    "TABLES",
    "VECTORS",
    "VECTOR_LABELS",
    "VECTOR_SCOPES",
]

# The order of the names below is the order of TABLES, which is the order an export
# writes its tables in: a new table goes at the end so that old exports still compare.

META: Final = b"meta"
"""The store's own rows: ``applied_lsn``, ``last_record_time``, ``format_version`` (no scope)."""

IDEMPOTENCY: Final = b"idempotency"
"""``S ‖ request_id`` -> CBOR ``{hash, answer, recorded_at}`` of an answered write."""

IDEMPOTENCY_BY_TIME: Final = b"idempotency_by_time"
"""``S ‖ u64 recorded_at ‖ request_id`` -> empty: the sweep's time order in each scope."""

MEMORIES: Final = b"memories"
"""``S ‖ memory_id`` -> memory row."""

MEMORY_BY_SHA: Final = b"memory_by_sha"
"""``S ‖ sha256`` -> id of the active memory with that text (the same text is stored once)."""

MEMORY_BY_TEXT: Final = b"memory_by_text"
"""``S ‖ sha256 ‖ memory_id`` -> empty: every memory with that text, forgotten or not."""

ENTITIES: Final = b"entities"
"""``S ‖ entity_id`` -> entity row."""

ENTITY_BY_NAME: Final = b"entity_by_name"
"""``S ‖ name key ‖ 0x00 ‖ entity_id`` -> empty: the name index, in every state."""

ENTITY_ABSORBED: Final = b"entity_absorbed"
"""``S ‖ entity_id ‖ subject key`` -> empty: a merged entity or decided name answering as it."""

ENTITY_MERGES: Final = b"entity_merges"
"""``S ‖ merge_id`` -> both entities' rows and index names, before and after a merge."""

STATEMENTS: Final = b"statements"
"""``S ‖ statement_id`` -> content row (a husk once retracted)."""

STATEMENT_STATE: Final = b"statement_state"
"""``S ‖ statement_id`` -> later stamps (superseded, tombstoned, closed)."""

STATEMENT_BY_SUBJECT: Final = b"statement_by_subject"
"""``S ‖ subject key ‖ predicate hash ‖ u64 recorded_at ‖ id`` -> empty."""

STATEMENT_BY_TIME: Final = b"statement_by_time"
"""``S ‖ u64 recorded_at ‖ id`` -> empty: every statement in record order."""

STATEMENT_CURRENT: Final = b"statement_current"
"""``S ‖ subject key ‖ predicate hash ‖ id`` -> empty, while the statement is current."""

STATEMENT_CHAIN: Final = b"statement_chain"
"""``S ‖ chain_root ‖ u64 version`` -> statement id: a supersession chain, oldest first."""

STATEMENT_BY_OBJECT: Final = b"statement_by_object"
"""``S ‖ object entity_id ‖ statement_id`` -> empty: the graph arm's incoming edges."""

STATEMENT_BY_EVIDENCE: Final = b"statement_by_evidence"
"""``S ‖ memory_id ‖ statement_id`` -> empty: the statements citing a memory."""

FORGET_LEDGER: Final = b"forget_ledger"
"""``S ‖ sha256`` of a hard-forgotten text -> u64 forgotten_at (the hash only, never the text)."""

RELATIONS: Final = b"relations"
"""``S ‖ relation_id`` -> content row (written once)."""

RELATION_STATE: Final = b"relation_state"
"""``S ‖ relation_id`` -> later stamps (superseded, tombstoned, closed)."""

RELATION_BY_FROM: Final = b"relation_by_from"
"""``S ‖ from end key ‖ type hash ‖ u64 recorded_at ‖ id`` -> empty."""

RELATION_BY_TO: Final = b"relation_by_to"
"""``S ‖ to end key ‖ type hash ‖ u64 recorded_at ‖ id`` -> empty."""

RELATION_BY_TIME: Final = b"relation_by_time"
"""``S ‖ u64 recorded_at ‖ id`` -> empty: every relation in record order."""

RELATION_CURRENT: Final = b"relation_current"
"""``S ‖ f or t ‖ end key ‖ type hash ‖ id`` -> empty, once per end, while current."""

SCHEMA: Final = b"schema"
"""``S`` -> the declarations of the space."""

REVIEWS: Final = b"reviews"
"""``S ‖ review_id`` -> review item."""

REVIEWS_OPEN: Final = b"reviews_open"
"""``S ‖ u64 created_at ‖ review_id`` -> empty: the open items, oldest first."""

REVIEWS_BY_NAME: Final = b"reviews_by_name"
"""``S ‖ hash of (normalised name, type)`` -> the open ``ambiguous_entity`` review_id."""

AUDIT: Final = b"audit"
"""``S ‖ u64 recorded_at ‖ u64 lsn ‖ entry_id`` -> audit entry."""

LEX_POSTINGS: Final = b"lex_postings"
"""``S ‖ term hash ‖ doc key`` -> ``u32 tf ‖ u32 doc length``."""

LEX_DOCS: Final = b"lex_docs"
"""``S ‖ doc key`` -> CBOR ``[length, [[term hash, tf]…]]`` (a removal needs no text)."""

LEX_STATS: Final = b"lex_stats"
"""``S ‖ "docs"``, ``S ‖ "tokens"``, ``S ‖ "v:" ‖ term hash`` (while a posting of the term
exists), ``S ‖ "floor"`` -> signed 64-bit counters."""

VECTORS: Final = b"vectors"
"""``S ‖ doc key`` -> ``u64 label ‖ float32 values``."""

VECTOR_LABELS: Final = b"vector_labels"
"""``S ‖ u64 label`` -> doc key."""

VECTOR_SCOPES: Final = b"vector_scopes"
"""``S`` -> ``{namespace, space, next_label, lsn}``, ``lsn`` the last write to its vectors."""

CHANGE_LOG: Final = b"change_log"
"""``S ‖ u64 lsn ‖ record tag ‖ record id`` -> ``[op, record, recorded_at]``."""

PURGE_QUEUE: Final = b"purge_queue"
"""``S ‖ doc key`` -> empty: a document whose text left the store since the last purge (its
old bytes may linger in the WAL, LMDB's free pages and the HNSW indexes until the purge)."""

IMPORTS: Final = b"imports"
"""``S`` -> the id of the export an import filled the space from."""

EMBED_QUEUE: Final = b"embed_queue"
"""``S ‖ doc key`` -> ``"+" ‖ CBOR [namespace, space]`` (embed), ``"~" ‖ u64 lsn ‖ CBOR
[namespace, space]`` (re-index) or ``"-" ‖ label`` (drop from HNSW)."""

MENTIONS: Final = b"mentions"
"""``S ‖ memory_id`` -> the names the memory's text mentions, as its extractors found them:
CBOR ``{recorded_at, extractors, mentions?, record_invalidated_at?}`` (no ``mentions`` once
hard-forgotten)."""

MENTION_BY_NAME: Final = b"mention_by_name"
"""``S ‖ name hash ‖ memory_id`` -> empty: the memories mentioning a name (the hash of the
normalised name, never its text), while their text is stored."""

MENTION_STATS: Final = b"mention_stats"
"""``S ‖ "mentioned"`` (memories with a mention), ``S ‖ "df" ‖ name hash`` (memories
mentioning the name, while some do) -> signed 64-bit counters."""

STATEMENT_BY_SUBJECT_TIME: Final = b"statement_by_subject_time"
"""``S ‖ subject key ‖ u64 recorded_at ‖ id`` -> empty: a subject's statements in record
order, whatever their predicate (``statement_by_subject`` without the predicate hash),
written and deleted with the ``statement_by_subject`` key; an export leaves it out and
an import writes it from those keys (:mod:`brain.engine.store.statement_keys`)."""

IDEMPOTENCY_MARKS: Final = b"idempotency_marks"
"""``S ‖ u64 recorded_at ‖ request_id`` -> empty: the time order of requests whose answer
the retention sweep dropped, leaving only a mark in :data:`IDEMPOTENCY` that refuses a
late retry; the marks themselves go after the mark span (``spec/05-durability.md`` §7)."""

ENTITY_VERSIONS: Final = b"entity_versions"
"""``S ‖ entity_id ‖ u64 recorded_at`` -> the entity row as believed from ``recorded_at``
until the next version's (:mod:`brain.engine.records.entity_history`)."""

ENTITY_NAME_EVENTS: Final = b"entity_name_events"
"""``S ‖ name key ‖ 0x00 ‖ entity_id ‖ u64 recorded_at`` -> ``01`` (the name index
held the key from then) or ``00`` (it dropped it): :data:`ENTITY_BY_NAME` on the
record axis."""

ENTITY_ABSORBED_EVENTS: Final = b"entity_absorbed_events"
"""``S ‖ entity_id ‖ subject key ‖ u64 recorded_at`` -> ``01`` or ``00``:
:data:`ENTITY_ABSORBED` on the record axis."""

TABLES: Final[tuple[bytes, ...]] = tuple(
    value for name, value in list(globals().items()) if name.isupper() and isinstance(value, bytes)
)
"""Every named table, in the order above: each upper-case bytes constant of this module.
Every key of every table but :data:`META` begins with a scope prefix."""
