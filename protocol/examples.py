"""One realistic request and response payload per opcode, as decoded CBOR values.

The values are fixed (ids, hashes, times, vectors), so the payloads encode to the
same bytes every time: golden byte vectors are generated from them, and the unit
tests check that each one round-trips through its message class unchanged. The
richer shapes (statements, hits, coverage, explain) fill in their optional keys.
"""

from __future__ import annotations

import hashlib
import struct
from typing import Final

__all__ = ["Example", "examples"]

Example = dict[str, dict[str, object]]
"""``{"request": payload, "response": payload}``."""


def _id(n: int) -> bytes:
    """A fixed 16-byte id: ``n`` followed by fifteen counting bytes."""
    return bytes([n]) + bytes(range(1, 16))


REQUEST_ID: Final = bytes(range(16))
TXN_ID: Final = _id(0x70)
SESSION_ID: Final = _id(0x50)
KEY_ID: Final = _id(0x4B)
MEMORY_ID: Final = _id(0x01)
MEMORY_ID_2: Final = _id(0x02)
STATEMENT_ID: Final = _id(0x10)
STATEMENT_ID_2: Final = _id(0x11)
ENTITY_ALICE: Final = _id(0x20)
ENTITY_ACME: Final = _id(0x21)
ENTITY_GLOBEX: Final = _id(0x22)
RELATION_ID: Final = _id(0x30)
RELATION_ID_2: Final = _id(0x31)
REVIEW_ID: Final = _id(0x40)
MERGE_ID: Final = _id(0x41)
REVIEW_ID_2: Final = _id(0x42)

T_FEB: Final = 1_706_745_600_000_000_000
"""2024-02-01T00:00:00Z, in nanoseconds."""
T_MAY: Final = 1_714_521_600_000_000_000
"""2024-05-01T00:00:00Z."""
T_MAY_2: Final = T_MAY + 1_000
T_JUN: Final = 1_717_200_000_000_000_000
"""2024-06-01T00:00:00Z."""

MEMORY_TEXT: Final = "Alice told me she moved from Acme to Globex in February."
MEMORY_SHA: Final = hashlib.sha256(MEMORY_TEXT.encode()).digest()
MEMORY_SHA_2: Final = hashlib.sha256(b"Alice started at Acme in 2019.").digest()
VECTOR: Final = struct.pack("<4f", 0.25, -0.5, 0.125, 1.0)
CURSOR: Final = b"\x01cursor-after-10"


def _statement() -> dict[str, object]:
    """A current statement with most optional keys set."""
    return {
        "id": STATEMENT_ID_2,
        "space": "work",
        "kind": "fact",
        "subject": {"entity": ENTITY_ALICE},
        "predicate": "works_at",
        "object": {"entity": ENTITY_GLOBEX},
        "confidence": 0.875,
        "evidence": [{"memory": MEMORY_ID, "sha256": MEMORY_SHA}],
        "source": "agent:planner/2",
        "valid_from": T_FEB,
        "recorded_at": T_MAY,
        "version": 2,
        "chain_root": STATEMENT_ID,
        "supersedes": STATEMENT_ID,
    }


def _old_statement() -> dict[str, object]:
    """The superseded first version, closed and invalidated."""
    return {
        "id": STATEMENT_ID,
        "space": "work",
        "kind": "fact",
        "subject": {"entity": ENTITY_ALICE},
        "predicate": "works_at",
        "object": {"entity": ENTITY_ACME},
        "confidence": 1.0,
        "evidence": [{"memory": MEMORY_ID_2}],
        "valid_from": T_FEB - 5 * 365 * 86_400 * 10**9,
        "valid_to": T_FEB,
        "recorded_at": T_FEB - 86_400 * 10**9,
        "record_invalidated_at": T_MAY,
        "version": 1,
        "chain_root": STATEMENT_ID,
        "superseded_by": STATEMENT_ID_2,
    }


def _retracted() -> dict[str, object]:
    """A retracted husk: ids, chain links and times only."""
    return {
        "id": STATEMENT_ID,
        "space": "work",
        "recorded_at": T_FEB,
        "record_invalidated_at": T_JUN,
        "version": 1,
        "chain_root": STATEMENT_ID,
        "tombstoned_at": T_JUN,
        "tombstone_reason": "retracted",
    }


def _memory() -> dict[str, object]:
    """A soft-forgotten memory with every optional key."""
    return {
        "id": MEMORY_ID,
        "text": MEMORY_TEXT,
        "sha256": MEMORY_SHA,
        "occurred_at": T_MAY - 3_600 * 10**9,
        "recorded_at": T_MAY,
        "context": "chat with Alice, #general",
        "forgotten": "soft",
        "forgotten_at": T_JUN,
        "mentions": [
            {"name": "Acme", "found": "proper_name", "entity": ENTITY_ACME, "extractor": "names/1"},
            {"name": "Globex", "found": "proper_name", "extractor": "names/1"},
        ],
    }


def _entity() -> dict[str, object]:
    """An entity with a type, aliases and attributes."""
    return {
        "id": ENTITY_ALICE,
        "name": "Alice Example",
        "type": "person",
        "aliases": ["Alice", "A. Example"],
        "attributes": {"role": "engineer", "team": ["search", "infra"], "since": 2019},
        "created_at": T_FEB,
        "recorded_at": T_MAY,
    }


def _relation() -> dict[str, object]:
    """A current relation."""
    return {
        "id": RELATION_ID_2,
        "type": "employed_by",
        "from": {"entity": ENTITY_ALICE},
        "to": {"entity": ENTITY_GLOBEX},
        "confidence": 0.9,
        "evidence": [{"memory": MEMORY_ID, "sha256": MEMORY_SHA}],
        "valid_from": T_FEB,
        "recorded_at": T_MAY,
        "supersedes": RELATION_ID,
    }


def _coverage() -> dict[str, object]:
    return {
        "space": "work",
        "arms": ["semantic", "lexical", "graph"],
        "corpus": 1_234,
        "candidates": {"semantic": 100, "lexical": 42, "graph": 7},
        "as_of": T_JUN,
        "valid_at": T_MAY,
        "min_confidence": 0.5,
        "relevance": 0.5,
        "relevance_floor": 0.25,
        "embed_backlog": 3,
    }


def _explain() -> dict[str, object]:
    return {
        "survivors": {
            "fused": 120,
            "type": 110,
            "temporal": 80,
            "confidence": 75,
            "tombstone": 70,
            "supersession": 60,
            "as_of": 62,
            "limit": 10,
        },
        "restored_by_as_of": 2,
        "fusion": "rrf",
        "rrf_k": 60,
        "timings_us": {
            "embed": 850,
            "semantic": 420,
            "lexical": 130,
            "graph": 95,
            "fuse": 12,
            "filter": 40,
            "total": 1_600,
        },
    }


def _recall_request() -> dict[str, object]:
    return {
        "space": "work",
        "min_lsn": 41,
        "cue": "where does Alice work?",
        "top_k": 5,
        "vector": VECTOR,
        "entity_anchor": ENTITY_ALICE,
        "arms": {"semantic": 1.0, "lexical": 0.5, "graph": 2.0},
        "fusion": "rrf",
        "rrf_k": 60,
        "context": True,
        "named_time": True,
        "min_relevance": 0.25,
        "records": ["statement", "memory"],
        "kinds": ["fact", "event"],
        "predicates": ["works_at"],
        "valid_at": T_MAY,
        "min_confidence": 0.5,
        "include_tombstoned": False,
        "include_superseded": True,
        "as_of": T_JUN,
        "explain": True,
    }


def _ranked(record: str, ident: bytes, score: float, ranks: dict[str, object]) -> dict[str, object]:
    # Each arm's own score beside its rank: a cosine, a BM25 score, a graph score.
    own = {"semantic": 0.625, "lexical": 7.5, "graph": 0.5}
    arm_scores: dict[str, object] = {arm: own[arm] for arm in ranks}
    if record == "memory":
        arm_scores["context"] = 0.125
        arm_scores["named_time"] = 0.25
    return {"record": record, "id": ident, "score": score, "ranks": ranks, "arm_scores": arm_scores}


def _control() -> dict[str, Example]:
    return {
        "HELLO": {
            "request": {"client": "demo/1", "versions": [1]},
            "response": {
                "server": "brain/0.1.0",
                "version": 1,
                "session_id": SESSION_ID,
                "max_frame": 16 * 1024 * 1024 - 1,
                "max_streams": 128,
                "server_time": T_JUN,
            },
        },
        "AUTH": {
            "request": {"api_key": "brn_" + "A" * 43},
            "response": {
                "namespace": "default",
                "key_id": KEY_ID,
                "permissions": ["read", "write", "admin"],
            },
        },
        "PING": {"request": {"nonce": 7}, "response": {"nonce": 7, "server_time": T_JUN}},
        "BYE": {"request": {}, "response": {}},
        "CANCEL_STREAM": {"request": {"stream": 9}, "response": {"cancelled": True}},
    }


def _memories() -> dict[str, Example]:
    return {
        "ENCODE": {
            "request": {
                "space": "work",
                "request_id": REQUEST_ID,
                "txn_id": TXN_ID,
                "text": MEMORY_TEXT,
                "occurred_at": T_MAY - 3_600 * 10**9,
                "context": "chat with Alice, #general",
                "vector": VECTOR,
                "override_forgotten": False,
            },
            "response": {
                "memory_id": MEMORY_ID,
                "lsn": 41,
                "recorded_at": T_MAY,
                "sha256": MEMORY_SHA,
                "deduplicated": False,
            },
        },
        "MEMORY_GET": {
            "request": {"space": "work", "id": MEMORY_ID, "min_lsn": 41},
            "response": {"memory": _memory()},
        },
        "FORGET": {
            "request": {
                "space": "work",
                "request_id": REQUEST_ID,
                "memory": MEMORY_ID,
                "mode": "hard",
            },
            "response": {
                "memory_id": MEMORY_ID,
                "lsn": 57,
                "already_forgotten": False,
                "statements_tombstoned": 2,
            },
        },
    }


def _statements() -> dict[str, Example]:
    draft: dict[str, object] = {
        "kind": "fact",
        "subject": {"name": "Alice", "type": "person"},
        "predicate": "works_at",
        "object": {"entity": ENTITY_GLOBEX},
        "confidence": 0.875,
        "evidence": [{"memory": MEMORY_ID, "sha256": MEMORY_SHA}, {"memory": MEMORY_ID_2}],
        "source": "agent:planner/2",
        "valid_from": T_FEB,
    }
    written = {
        "statement_id": STATEMENT_ID_2,
        "lsn": 42,
        "recorded_at": T_MAY,
        "version": 2,
        "chain_root": STATEMENT_ID,
        "superseded": STATEMENT_ID,
    }
    return {
        "STATEMENT_CREATE": {
            "request": {
                "space": "work",
                "request_id": REQUEST_ID,
                "txn_id": TXN_ID,
                "kind": "event",
                "subject": {"entity": ENTITY_ALICE},
                "predicate": "changed_job",
                "object": {"text": "moved from Acme to Globex"},
                "evidence": [{"memory": MEMORY_ID}],
                "source": "agent:planner/2",
                "event_at": T_FEB,
            },
            "response": {
                "statement_id": STATEMENT_ID,
                "lsn": 42,
                "recorded_at": T_MAY,
                "version": 1,
                "chain_root": STATEMENT_ID,
            },
        },
        "STATEMENT_GET": {
            "request": {"space": "work", "id": STATEMENT_ID_2},
            "response": {"statement": _statement()},
        },
        "STATEMENT_SUPERSEDE": {
            "request": {
                "space": "work",
                "request_id": REQUEST_ID,
                "old": STATEMENT_ID,
                "new": draft,
            },
            "response": written,
        },
        "STATEMENT_TOMBSTONE": {
            "request": {
                "space": "work",
                "request_id": REQUEST_ID,
                "id": STATEMENT_ID_2,
                "reason": "user asked to remove it",
            },
            "response": {"id": STATEMENT_ID_2, "lsn": 60, "tombstoned_at": T_JUN},
        },
        "STATEMENT_RETRACT": {
            "request": {"request_id": REQUEST_ID, "txn_id": TXN_ID, "id": STATEMENT_ID},
            "response": {"id": STATEMENT_ID, "lsn": 61, "tombstoned_at": T_JUN},
        },
        "STATEMENT_HISTORY": {
            "request": {"space": "work", "id": STATEMENT_ID_2},
            "response": {"versions": [_old_statement(), _statement()]},
        },
        "STATEMENT_LIST": {
            "request": {
                "space": "work",
                "min_lsn": 41,
                "subject": {"entity": ENTITY_ALICE},
                "predicate": "works_at",
                "kind": "fact",
                "valid_at": T_MAY,
                "as_of": T_JUN,
                "include_superseded": True,
                "include_tombstoned": True,
                "limit": 2,
                "cursor": CURSOR,
            },
            "response": {"statements": [_statement(), _retracted()], "cursor": CURSOR},
        },
    }


def _entities() -> dict[str, Example]:
    return {
        "ENTITY_CREATE": {
            "request": {
                "space": "work",
                "request_id": REQUEST_ID,
                "txn_id": TXN_ID,
                "name": "Alice Example",
                "type": "person",
                "aliases": ["Alice", "A. Example"],
                "attributes": {"role": "engineer", "team": ["search", "infra"], "since": 2019},
            },
            "response": {"entity_id": ENTITY_ALICE, "lsn": 10},
        },
        "ENTITY_GET": {
            "request": {"space": "work", "id": ENTITY_ALICE, "as_of": T_JUN},
            "response": {"entity": _entity()},
        },
        "ENTITY_HISTORY": {
            "request": {"space": "work", "id": ENTITY_ALICE},
            "response": {
                "versions": [
                    {
                        "id": ENTITY_ALICE,
                        "name": "Alice",
                        "type": "person",
                        "aliases": [],
                        "attributes": {},
                        "created_at": T_FEB,
                        "recorded_at": T_FEB,
                        "record_invalidated_at": T_MAY,
                    },
                    _entity(),
                ]
            },
        },
        "ENTITY_UPDATE": {
            "request": {
                "space": "work",
                "request_id": REQUEST_ID,
                "id": ENTITY_ALICE,
                "name": "Alice Example",
                "add_aliases": ["A. Example"],
                "remove_aliases": ["Ally"],
                "attributes": {"role": "engineer", "team": ["search", "infra"], "since": 2019},
            },
            "response": {"entity": _entity()},
        },
        "ENTITY_MERGE": {
            "request": {
                "space": "work",
                "request_id": REQUEST_ID,
                "keep": ENTITY_ALICE,
                "merge": ENTITY_ACME,
            },
            "response": {"merge_id": MERGE_ID, "lsn": 70},
        },
        "ENTITY_UNMERGE": {
            "request": {"space": "work", "request_id": REQUEST_ID, "merge_id": MERGE_ID},
            "response": {"lsn": 71},
        },
        "ENTITY_RESOLVE": {
            "request": {
                "space": "work",
                "name": "Alise",
                "type": "person",
                "limit": 5,
                "as_of": T_JUN,
            },
            "response": {
                "matches": [
                    {"entity_id": ENTITY_ALICE, "name": "Alice", "score": 0.9, "tier": "fuzzy"},
                ],
                "resolved": ENTITY_ALICE,
                "ambiguous": False,
            },
        },
        "ENTITY_LIST": {
            "request": {
                "space": "work",
                "type": "person",
                "prefix": "A",
                "limit": 2,
                "cursor": CURSOR,
                "as_of": T_JUN,
            },
            "response": {
                "entities": [
                    _entity(),
                    {
                        "id": ENTITY_ACME,
                        "name": "Acme",
                        "aliases": [],
                        "attributes": {},
                        "created_at": T_FEB,
                        "merged_into": ENTITY_ALICE,
                        "tombstoned_at": T_JUN,
                        "recorded_at": T_JUN,
                    },
                ],
                "cursor": CURSOR,
            },
        },
        "ENTITY_TOMBSTONE": {
            "request": {"space": "work", "request_id": REQUEST_ID, "id": ENTITY_ACME},
            "response": {"id": ENTITY_ACME, "lsn": 72},
        },
    }


def _relations() -> dict[str, Example]:
    draft: dict[str, object] = {
        "type": "employed_by",
        "from": {"entity": ENTITY_ALICE},
        "to": {"name": "Globex", "type": "company"},
        "confidence": 0.9,
        "evidence": [{"memory": MEMORY_ID, "sha256": MEMORY_SHA}],
        "valid_from": T_FEB,
    }
    return {
        "RELATION_CREATE": {
            "request": {
                "space": "work",
                "request_id": REQUEST_ID,
                "txn_id": TXN_ID,
                **draft,
                "valid_to": T_JUN,
            },
            "response": {
                "relation_id": RELATION_ID_2,
                "lsn": 80,
                "recorded_at": T_MAY,
                "superseded": RELATION_ID,
            },
        },
        "RELATION_GET": {
            "request": {"space": "work", "id": RELATION_ID_2},
            "response": {"relation": _relation()},
        },
        "RELATION_SUPERSEDE": {
            "request": {
                "space": "work",
                "request_id": REQUEST_ID,
                "old": RELATION_ID,
                "new": draft,
            },
            "response": {
                "relation_id": RELATION_ID_2,
                "lsn": 81,
                "recorded_at": T_MAY,
                "superseded": RELATION_ID,
            },
        },
        "RELATION_TOMBSTONE": {
            "request": {
                "space": "work",
                "request_id": REQUEST_ID,
                "id": RELATION_ID_2,
                "reason": "duplicate edge",
            },
            "response": {"id": RELATION_ID_2, "lsn": 82, "tombstoned_at": T_JUN},
        },
        "RELATION_LIST": {
            "request": {
                "space": "work",
                "entity": ENTITY_ALICE,
                "direction": "out",
                "type": "employed_by",
                "valid_at": T_MAY,
                "as_of": T_JUN,
                "limit": 10,
                "cursor": CURSOR,
            },
            "response": {"relations": [_relation()], "cursor": CURSOR},
        },
        "RELATION_TRAVERSE": {
            "request": {
                "space": "work",
                "from": ENTITY_ALICE,
                "types": ["employed_by", "knows"],
                "direction": "both",
                "depth": 2,
                "valid_at": T_MAY,
                "as_of": T_JUN,
                "limit": 100,
            },
            "response": {
                "nodes": [
                    {"entity_id": ENTITY_ALICE, "hop": 0},
                    {"entity_id": ENTITY_GLOBEX, "hop": 1},
                ],
                "edges": [_relation()],
            },
        },
    }


def _recall() -> dict[str, Example]:
    statement_hit = {
        **_ranked("statement", STATEMENT_ID_2, 0.0489, {"semantic": 1, "lexical": 2, "graph": 1}),
        "statement": _statement(),
        "evidence": [{"memory": MEMORY_ID, "sha256": MEMORY_SHA}],
    }
    memory_hit = {
        **_ranked("memory", MEMORY_ID, 0.0161, {"semantic": 2}),
        "memory": _memory(),
    }
    return {
        "RECALL": {
            "request": _recall_request(),
            "response": {
                "hits": [statement_hit, memory_hit],
                "abstained": False,
                "coverage": _coverage(),
                "explain": _explain(),
            },
        },
        "EXPLAIN": {
            "request": _recall_request(),
            "response": {
                "explain": _explain(),
                "coverage": _coverage(),
                "hits": [
                    _ranked("statement", STATEMENT_ID_2, 0.0489, {"semantic": 1, "lexical": 2}),
                    _ranked("memory", MEMORY_ID, 0.0161, {"graph": 3}),
                ],
            },
        },
    }


def _others() -> dict[str, Example]:
    return {
        "SUBSCRIBE": {
            "request": {"space": "work", "from_lsn": 40, "records": ["statement", "memory"]},
            "response": {
                "lsn": 42,
                "op": "create",
                "record": "statement",
                "id": STATEMENT_ID,
                "recorded_at": T_MAY,
            },
            "end": {"next_lsn": 43},
        },
        "UNSUBSCRIBE": {"request": {"stream": 11}, "response": {"cancelled": True}},
        "TXN_BEGIN": {"request": {"timeout_ms": 30_000}, "response": {"txn_id": TXN_ID}},
        "TXN_COMMIT": {
            "request": {"txn_id": TXN_ID},
            "response": {
                "lsn": 90,
                "results": [
                    {"entity_id": ENTITY_ALICE, "lsn": 90},
                    {
                        "statement_id": STATEMENT_ID,
                        "lsn": 90,
                        "recorded_at": T_MAY,
                        "version": 1,
                        "chain_root": STATEMENT_ID,
                    },
                ],
            },
        },
        "TXN_ABORT": {"request": {"txn_id": TXN_ID}, "response": {}},
        "SCHEMA_PUT": {
            "request": {
                "space": "work",
                "predicates": [
                    {"name": "works_at", "kind": "fact", "stateful": True},
                    {"name": "likes", "stateful": False},
                ],
                "relation_types": [
                    {"name": "employed_by", "cardinality": "many_to_one"},
                    {"name": "knows", "cardinality": "many_to_many", "symmetric": True},
                ],
                "entity_types": ["person", "company"],
            },
            "response": {"version": 3},
        },
        "SCHEMA_GET": {
            "request": {"space": "work"},
            "response": {
                "predicates": [{"name": "works_at", "kind": "fact", "stateful": True}],
                "relation_types": [
                    {"name": "knows", "cardinality": "many_to_many", "symmetric": True}
                ],
                "entity_types": ["person", "company"],
                "version": 3,
                "scope": "space",
            },
        },
        "REVIEW_LIST": {
            "request": {"space": "work", "limit": 20},
            "response": {
                "items": [
                    {
                        "review_id": REVIEW_ID,
                        "kind": "contradiction",
                        "records": [STATEMENT_ID, STATEMENT_ID_2],
                        "created_at": T_MAY,
                    },
                    {
                        "review_id": REVIEW_ID_2,
                        "kind": "ambiguous_entity",
                        "records": [ENTITY_ACME, ENTITY_GLOBEX, STATEMENT_ID_2],
                        "created_at": T_MAY,
                        "name": "Acme",
                        "type": "company",
                    },
                ]
            },
        },
        "REVIEW_DECIDE": {
            "request": {
                "space": "work",
                "request_id": REQUEST_ID,
                "review_id": REVIEW_ID_2,
                "decision": "merge",
                "into": ENTITY_GLOBEX,
            },
            "response": {"lsn": 95},
        },
    }


def examples() -> dict[str, Example]:
    """A fresh ``{opcode name: {"request": …, "response": …}}`` for every opcode."""
    out: dict[str, Example] = {}
    for part in (
        _control(),
        _memories(),
        _statements(),
        _entities(),
        _relations(),
        _recall(),
        _others(),
    ):
        out.update(part)
    return out
