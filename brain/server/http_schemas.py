"""The JSON Schemas of the HTTP ports' bodies, as their OpenAPI documents give them.

Each names the keys an answer always has (``required``) and what they hold, as
spec/06-operations.md §4 describes them; an answer may carry more keys than a
schema names, so a later key is no break. Ids and hashes are lowercase hex,
times nanoseconds since the epoch.
"""

from __future__ import annotations

from typing import Final

from brain.engine.records.audit import MAX_AUDIT_LIMIT
from brain.engine.replication.status import ROLES, STATES
from brain.server.openapi import Schema
from brain.wire.opcodes import Permission

__all__ = [
    "AUDIT",
    "CLUSTER",
    "CONFIG",
    "EXPLAIN_ANSWER",
    "EXPLAIN_REQUEST",
    "HEALTHZ",
    "IMPORT_BATCH",
    "IMPORT_BATCH_ANSWER",
    "IMPORT_FINISH",
    "IMPORT_FINISH_ANSWER",
    "IMPORT_STATUS",
    "KEY",
    "KEYS",
    "KEY_REQUEST",
    "LIMIT",
    "NAMESPACE",
    "NEW_KEY",
    "NOT_READY",
    "PURGE",
    "READY",
    "REPLICATION",
    "SNAPSHOT",
    "SNAPSHOTS",
    "STATS",
    "TEXT",
    "WAL",
]


def _object(required: dict[str, Schema], optional: dict[str, Schema] | None = None) -> Schema:
    """An object with the keys ``required`` (always there) and ``optional``."""
    return {
        "type": "object",
        "required": list(required),
        "properties": {**required, **(optional or {})},
    }


def _list_of(schema: Schema) -> Schema:
    return {"type": "array", "items": schema}


COUNT: Final[Schema] = {"type": "integer", "minimum": 0}
LSN: Final[Schema] = {"type": "integer", "minimum": 0, "description": "A WAL log sequence number."}
TIME: Final[Schema] = {"type": "integer", "description": "Nanoseconds since the Unix epoch."}
HEX: Final[Schema] = {"type": "string", "pattern": "^[0-9a-f]*$"}
TEXT: Final[Schema] = {"type": "string"}
NAMESPACE: Final[Schema] = {"type": "string", "minLength": 1}
LIMIT: Final[Schema] = {"type": "integer", "minimum": 1, "maximum": MAX_AUDIT_LIMIT}

HEALTHZ: Final[Schema] = {"type": "string", "const": "ok"}
READY: Final[Schema] = _object({"ready": {"const": True}, "applied_lsn": LSN})
NOT_READY: Final[Schema] = _object(
    {
        "ready": {"const": False},
        "reason": {
            "type": "string",
            "description": "'recovering: replaying the write-ahead log', or "
            "'read-only: <cause>' after a storage fault.",
        },
    }
)

_PERMISSIONS: Final[Schema] = _list_of({"enum": [p.value for p in Permission]})
KEY_REQUEST: Final[Schema] = {
    **_object(
        {"namespace": NAMESPACE},
        {"permissions": {**_PERMISSIONS, "description": "Default: read and write."}},
    ),
    "additionalProperties": False,
}
KEY: Final[Schema] = _object(
    {"key_id": HEX, "namespace": NAMESPACE, "permissions": _PERMISSIONS, "created_at": TIME}
)
NEW_KEY: Final[Schema] = {
    "allOf": [KEY, _object({"api_key": {"type": "string", "pattern": "^brn_"}})],
    "description": "The key itself is shown this once and never again.",
}
KEYS: Final[Schema] = _object({"keys": _list_of(KEY)})

CONFIG: Final[Schema] = {
    **_object({s: {"type": "object"} for s in ("server", "admin", "entities", "retrieval", "log")}),
    "description": "The effective configuration, secrets as '<redacted>'.",
}

_SNAPSHOT_LOG: Final[Schema] = {
    **_object(
        {"kind": {"enum": ["wal", "jetstream"]}},
        {"stream": TEXT, "shard": TEXT, "node": {"type": ["string", "null"]}},
    ),
    "description": "The log the bundle continues: the local WAL, or a shard's JetStream "
    "stream, whose records after the bundle's LSN a restored node replays.",
}
SNAPSHOT: Final[Schema] = _object(
    {"id": TEXT, "lsn": LSN, "created_at": TIME, "path": TEXT}, {"log": _SNAPSHOT_LOG}
)
SNAPSHOTS: Final[Schema] = _object({"snapshots": _list_of(SNAPSHOT)})

AUDIT: Final[Schema] = _object(
    {
        "entries": _list_of(
            _object(
                {"namespace": NAMESPACE, "operation": TEXT, "recorded_at": TIME},
                {"space": TEXT, "key_id": HEX, "records": _list_of(HEX), "lsn": LSN, "via": TEXT},
            )
        )
    }
)

EXPLAIN_REQUEST: Final[Schema] = {
    **_object(
        {"namespace": NAMESPACE},
        {
            "space": TEXT,
            "cue": TEXT,
            "vector": {**_list_of({"type": "number"}), "description": "Instead of a cue."},
            "entity_anchor": HEX,
        },
    ),
    "description": "RECALL's fields (spec/01-wire.md §9.7), with the namespace.",
}
EXPLAIN_ANSWER: Final[Schema] = _object(
    {
        "survivors": {"type": "object"},
        "restored_by_as_of": COUNT,
        "fusion": TEXT,
        "timings_us": {"type": "object"},
        "coverage": {"type": "object"},
        "hits": _list_of({"type": "object"}),
    },
    {"rrf_k": COUNT},
)

_SCOPE_COUNTS: Final[Schema] = _object(
    {
        "namespace": NAMESPACE,
        "space": TEXT,
        **dict.fromkeys(("memories", "entities", "statements", "relations"), COUNT),
    }
)
_NAME_OR_NULL: Final[Schema] = {"type": ["string", "null"]}
REPLICATION: Final[Schema] = {
    **_object(
        {
            "cluster": {"type": "boolean", "description": "False: the local WAL."},
            "role": {"enum": list(ROLES)},
            "node": _NAME_OR_NULL,
            "shard": _NAME_OR_NULL,
            "stream": _NAME_OR_NULL,
            "log_generation": COUNT,
            "planner": {**_NAME_OR_NULL, "description": "The planner lease's holder."},
            "applied_lsn": LSN,
            "last_lsn": LSN,
            "lag_records": COUNT,
            "lag_seconds": {"type": "number", "minimum": 0},
            "read_only_reason": _NAME_OR_NULL,
            "lease_renewals": COUNT,
            "takeovers": COUNT,
            "promotions": COUNT,
        }
    ),
    "description": "Where a node stands in its shard's replication (spec/05-durability.md §14.6).",
}
_NODE_ENTRY: Final[Schema] = _object(
    {
        "node": TEXT,
        "state": {"enum": list(STATES)},
        "revision": COUNT,
        "stored_at": TIME,
        "age_s": {"type": "number", "minimum": 0},
    },
    {
        "shard": TEXT,
        "role": {"enum": list(ROLES)},
        "applied_lsn": LSN,
        "last_lsn": LSN,
        "lag_records": COUNT,
        "lag_seconds": {"type": "number", "minimum": 0},
        "wire": TEXT,
        "public": TEXT,
        "admin": TEXT,
        "version": TEXT,
        "heartbeat_at": TIME,
    },
)
CLUSTER: Final[Schema] = _object(
    {
        "cluster": {"type": "boolean"},
        "node": REPLICATION,
        "planner": _NAME_OR_NULL,
        "nodes": _list_of(_NODE_ENTRY),
    },
    {"stale_after_s": {"type": "number"}, "heartbeat_s": {"type": "number"}},
)

MOVE_REQUEST: Final[Schema] = {
    **_object({"namespace": NAMESPACE, "to_shard": TEXT}),
    "additionalProperties": False,
}
MOVE: Final[Schema] = _object(
    {
        "namespace": NAMESPACE,
        "from_shard": TEXT,
        "to_shard": TEXT,
        "copied_changes": COUNT,
        "source_lsn": LSN,
        "passes": COUNT,
        "frozen_ms": COUNT,
        "dropped_keys": {
            "anyOf": [COUNT, {"type": "null"}],
            "description": "Null: the source shard did not drop its rows (nothing serves them).",
        },
        "epoch": COUNT,
    }
)

STATS: Final[Schema] = _object(
    {
        "applied_lsn": LSN,
        "durable_lsn": LSN,
        "indexed_lsn": LSN,
        "read_only": {"type": ["string", "null"], "description": "The cause, while read-only."},
        "scopes": _list_of(_SCOPE_COUNTS),
        "sizes": _object(
            dict.fromkeys(("lmdb_used_bytes", "lmdb_map_bytes", "wal_bytes", "index_bytes"), COUNT)
        ),
        "embed_backlog": COUNT,
        "index_lag_seconds": {"type": "number", "minimum": 0},
        "purge_pending": COUNT,
        "replication": REPLICATION,
    }
)
WAL: Final[Schema] = _object(
    {
        "first_lsn": LSN,
        "last_lsn": LSN,
        "applied_lsn": LSN,
        "durable_lsn": LSN,
        "segments": _list_of(_object({"name": TEXT, "bytes": COUNT})),
    }
)
PURGE: Final[Schema] = _object({"purged": COUNT})

_HEADER: Final[Schema] = {
    **_object({"format": TEXT, "namespace": NAMESPACE, "export_id": HEX, "clock": TIME}),
    "description": "The export's header line.",
}
IMPORT_BATCH: Final[Schema] = _object(
    {
        "header": _HEADER,
        "rows": _list_of(_object({"table": TEXT, "key": HEX, "value": HEX})),
    },
    {"start": {**COUNT, "description": "The index in the export of the first row."}},
)
IMPORT_BATCH_ANSWER: Final[Schema] = _object(
    {"imported": COUNT, "next": COUNT, "complete": {"const": False}}
)
IMPORT_STATUS: Final[Schema] = _object(
    {"next": COUNT, "complete": {"type": "boolean"}, "scopes": _list_of(HEX)}
)
IMPORT_FINISH: Final[Schema] = _object(
    {
        "header": _HEADER,
        "trailer": {
            **_object({"end": {"const": True}, "rows": COUNT}, {"scopes": _list_of(HEX)}),
            "description": "The export's last line.",
        },
    }
)
IMPORT_FINISH_ANSWER: Final[Schema] = _object(
    {
        "complete": {"const": True},
        "rows": COUNT,
        "counts": {
            "type": "object",
            "description": "Rows per table, by scope prefix in hex.",
            "additionalProperties": {"type": "object", "additionalProperties": COUNT},
        },
    }
)
