"""API keys and the admin token, stored only as hashes.

Identity and permissions: spec/01-wire.md §4; `brain keys create`: spec/06-operations.md §1.

A key is ``brn_`` followed by the unpadded base64url of 32 random bytes. The
server keeps its SHA-256, never the key: with 256 bits of entropy a plain hash
cannot be reversed or guessed, so no slow password hash is needed, and AUTH
stays a single lookup.

Keys live in their own small LMDB environment, ``DATA/keys``, apart from the
record store. LMDB's own inter-process locking lets ``brain keys create`` add a
key while a server runs on the same directory; the server sees it on the next
AUTH because every check reads the table afresh, and a deleted key fails from
its next AUTH on.

A key revoked through this store (the admin port's ``DELETE /v1/keys/{id}``)
also stops working on the connections already using it: the store remembers
the ids it revoked, which every request's check consults (a set lookup), and
tells its revocation listeners, which end those connections' subscriptions
(spec/01-wire.md §4).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

import lmdb

from brain import cbor
from brain.engine.store.env import STORE_FILE_MODE, check_data_file
from brain.engine.store.scope import namespace_id
from brain.errors import InvalidArgument, NotFound
from brain.ids import new_id
from brain.wire.opcodes import Permission

__all__ = [
    "API_KEY_PREFIX",
    "NAMESPACE_PATTERN",
    "KeyChanges",
    "KeyRecord",
    "KeyStore",
    "generate_admin_token",
    "generate_api_key",
    "key_digest",
    "mint_key",
    "parse_permissions",
]

API_KEY_PREFIX: Final = "brn_"
API_KEY_RANDOM_BYTES: Final = 32
"""256 bits: unguessable, and long enough that a plain SHA-256 is a safe store."""

ADMIN_TOKEN_RANDOM_BYTES: Final = 32

KEYS_MAP_SIZE: Final = 64 * 1024 * 1024
"""Address space for the key store; a key record is ~100 bytes, so this holds
hundreds of thousands of keys and costs nothing until used (LMDB maps lazily)."""

NAMESPACE_PATTERN: Final = re.compile(r"[a-z0-9_.\-]{1,64}")
"""Namespaces follow the rule for spaces (spec/01-wire.md §4)."""

KEY_CHANGE_SOURCES: Final = ("bootstrap", "admin", "cli", "cluster")
"""Who may change keys, as a key-audit entry names it (``cluster``: a change made on
another node of the cluster and applied here, spec/05-durability.md §14.11)."""

_DEFAULT_NAMESPACE: Final = "default"
_META_BOOTSTRAPPED: Final = b"bootstrapped"
_META_ADMIN_TOKEN: Final = b"admin_token_sha256"


def generate_api_key() -> str:
    """A new random API key."""
    raw = os.urandom(API_KEY_RANDOM_BYTES)
    return API_KEY_PREFIX + base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def generate_admin_token() -> str:
    """A new random admin bearer token."""
    return base64.urlsafe_b64encode(os.urandom(ADMIN_TOKEN_RANDOM_BYTES)).rstrip(b"=").decode()


def key_digest(secret: str) -> bytes:
    """What the store keeps of a key or token: its SHA-256."""
    return hashlib.sha256(secret.encode("utf-8")).digest()


def mint_key(namespace: str, permissions: frozenset[Permission]) -> tuple[str, KeyRecord]:
    """A new key for ``namespace`` and its record, stored nowhere yet."""
    check_namespace(namespace)
    if not permissions:
        raise InvalidArgument("at least one permission is needed", field="permissions")
    return generate_api_key(), KeyRecord(new_id(), namespace, permissions, time.time_ns())


def parse_permissions(values: Iterable[str]) -> frozenset[Permission]:
    """Permissions from their names; InvalidArgument names a bad one."""
    result: set[Permission] = set()
    for value in values:
        try:
            result.add(Permission(value.strip()))
        except ValueError:
            allowed = ", ".join(p.value for p in Permission)
            raise InvalidArgument(
                f"unknown permission {value!r} (allowed: {allowed})", field="permissions"
            ) from None
    if not result:
        raise InvalidArgument("at least one permission is needed", field="permissions")
    return frozenset(result)


def check_namespace(name: str) -> str:
    """Return ``name`` if it is a valid namespace name, else raise InvalidArgument."""
    if not NAMESPACE_PATTERN.fullmatch(name):
        raise InvalidArgument(
            f"namespace {name!r} must be 1-64 characters of [a-z0-9_.-]", field="namespace"
        )
    return name


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """What the server knows about a key: everything but the secret."""

    key_id: bytes
    namespace: str
    permissions: frozenset[Permission]
    created_at: int

    def to_json(self) -> dict[str, object]:
        """The record as the admin port shows it."""
        return {
            "key_id": self.key_id.hex(),
            "namespace": self.namespace,
            "permissions": [p.value for p in Permission if p in self.permissions],
            "created_at": self.created_at,
        }

    def _encode(self) -> bytes:
        return cbor.encode(
            {
                "key_id": self.key_id,
                "namespace": self.namespace,
                "permissions": sorted(p.value for p in self.permissions),
                "created_at": self.created_at,
            }
        )

    @classmethod
    def _decode(cls, raw: bytes) -> KeyRecord:
        value = cbor.decode_stored(raw)
        assert isinstance(value, dict)
        key_id, namespace = value["key_id"], value["namespace"]
        perms, created_at = value["permissions"], value["created_at"]
        assert isinstance(key_id, bytes) and isinstance(namespace, str)
        assert isinstance(perms, list) and isinstance(created_at, int)
        return cls(key_id, namespace, frozenset(Permission(str(p)) for p in perms), created_at)


class KeyChanges(Protocol):
    """What creates and deletes keys: a :class:`KeyStore`, or on a cluster node the
    cluster's key table (:class:`~brain.server.key_sync.KeySync`)."""

    def create_key(
        self, namespace: str, permissions: frozenset[Permission], *, via: str
    ) -> tuple[str, KeyRecord]:
        """Mint a key for ``namespace``; the secret and its record."""
        ...

    def delete_key(self, key_id: bytes, *, via: str) -> KeyRecord:
        """Revoke a key; NotFound when there is none."""
        ...


class KeyStore:
    """The key table of one data directory."""

    def __init__(self, data_dir: Path) -> None:
        path = data_dir / "keys"
        path.mkdir(parents=True, exist_ok=True)
        # Key changes are not in the WAL: a damaged key store comes back from a snapshot.
        check_data_file(
            path,
            remedy=f"copy keys/data.mdb from a snapshot bundle into {path}, or move {path} "
            "aside and start again, which writes new first-start credentials (every "
            "earlier key is then gone)",
        )
        self._env = lmdb.open(
            str(path), map_size=KEYS_MAP_SIZE, max_dbs=5, subdir=True, mode=STORE_FILE_MODE
        )
        self._by_hash = self._env.open_db(b"key_by_hash")
        self._hash_by_id = self._env.open_db(b"hash_by_key_id")
        self._namespaces = self._env.open_db(b"namespaces")
        self._meta = self._env.open_db(b"meta")
        self._audit = self._env.open_db(b"key_audit")
        self._revoked: set[bytes] = set()
        self._revocation_listeners: list[Callable[[bytes], object]] = []

    @property
    def env(self) -> lmdb.Environment:
        """The LMDB environment (snapshots copy it)."""
        return self._env

    def close(self) -> None:
        """Release the environment."""
        self._env.close()

    # --- namespaces and bootstrap ------------------------------------------------------

    def namespaces(self) -> list[str]:
        """Every namespace, sorted."""
        with self._env.begin() as txn:
            return [bytes(k).decode() for k, _ in txn.cursor(db=self._namespaces)]

    def is_bootstrapped(self) -> bool:
        """True once first-start credentials were made for this directory."""
        with self._env.begin() as txn:
            return txn.get(_META_BOOTSTRAPPED, db=self._meta) is not None

    def bootstrap(self, api_key: str, admin_token: str) -> KeyRecord:
        """Store the first-start key (read, write, admin on ``default``) and admin token."""
        record = KeyRecord(new_id(), _DEFAULT_NAMESPACE, frozenset(Permission), time.time_ns())
        with self._env.begin(write=True) as txn:
            txn.put(
                _DEFAULT_NAMESPACE.encode(),
                str(record.created_at).encode(),
                db=self._namespaces,
                overwrite=False,
            )
            self._put_key(txn, key_digest(api_key), record)
            self._audit_change(txn, "key_create", record, "bootstrap")
            txn.put(_META_ADMIN_TOKEN, key_digest(admin_token), db=self._meta)
            txn.put(_META_BOOTSTRAPPED, b"1", db=self._meta)
        return record

    def check_admin_token(self, token: str) -> bool:
        """True if ``token`` is the stored admin token (constant-time comparison)."""
        with self._env.begin() as txn:
            stored = txn.get(_META_ADMIN_TOKEN, db=self._meta)
        return stored is not None and hmac.compare_digest(bytes(stored), key_digest(token))

    # --- keys ---------------------------------------------------------------------------

    def create_key(
        self, namespace: str, permissions: frozenset[Permission], *, via: str
    ) -> tuple[str, KeyRecord]:
        """Mint a key for ``namespace`` (created if new); return the secret and record.
        ``via`` (one of :data:`KEY_CHANGE_SOURCES`) goes into the key-audit entry."""
        api_key, record = mint_key(namespace, permissions)
        self.adopt([(key_digest(api_key), record)], via=via)
        return api_key, record

    def adopt(self, keys: Iterable[tuple[bytes, KeyRecord]], *, via: str) -> int:
        """Store keys known by their SHA-256 (made elsewhere: the cluster's key table,
        spec/05-durability.md §14.11), their namespaces created if new, in one
        transaction; a key already here is left as it is. How many were new."""
        added = 0
        with self._env.begin(write=True) as txn:
            for digest, record in keys:
                if txn.get(record.key_id, db=self._hash_by_id) is not None:
                    continue
                check_namespace(record.namespace)
                txn.put(
                    record.namespace.encode(),
                    str(record.created_at).encode(),
                    db=self._namespaces,
                    overwrite=False,
                )
                self._put_key(txn, digest, record)
                self._audit_change(txn, "key_create", record, via)
                added += 1
        return added

    def _put_key(self, txn: lmdb.Transaction, digest: bytes, record: KeyRecord) -> None:
        txn.put(digest, record._encode(), db=self._by_hash)
        txn.put(record.key_id, digest, db=self._hash_by_id)

    def authenticate(self, api_key: str) -> KeyRecord | None:
        """The record of ``api_key``, or None when it is unknown or deleted."""
        if not api_key.startswith(API_KEY_PREFIX):
            return None
        with self._env.begin() as txn:
            raw = txn.get(key_digest(api_key), db=self._by_hash)
            return None if raw is None else KeyRecord._decode(bytes(raw))

    def find(self, key_id: bytes) -> KeyRecord | None:
        """The record of key ``key_id``, or None when there is none."""
        with self._env.begin() as txn:
            digest = txn.get(key_id, db=self._hash_by_id)
            raw = None if digest is None else txn.get(bytes(digest), db=self._by_hash)
            return None if raw is None else KeyRecord._decode(bytes(raw))

    def list_keys(self) -> list[KeyRecord]:
        """Every key, oldest first (key ids are time-ordered)."""
        return [record for _, record in self.entries()]

    def entries(self) -> list[tuple[bytes, KeyRecord]]:
        """Every key as its SHA-256 and record, oldest first."""
        with self._env.begin() as txn:
            found = []
            for _, digest in txn.cursor(db=self._hash_by_id):
                raw = txn.get(bytes(digest), db=self._by_hash)
                if raw is not None:
                    found.append((bytes(digest), KeyRecord._decode(bytes(raw))))
            return found

    def last_change(self) -> int:
        """The id of the key store's last write transaction, from any process (``brain
        keys create`` included): a change of it means the keys may have changed."""
        return int(self._env.info()["last_txnid"])

    def on_revoked(self, listener: Callable[[bytes], object]) -> None:
        """Call ``listener(key_id)`` after each revocation through this store, on the
        revoking thread (it must not block)."""
        self._revocation_listeners.append(listener)

    def is_revoked(self, key_id: bytes) -> bool:
        """True once key ``key_id`` was revoked through this store: the connections
        that authenticated with it before are refused from then on."""
        return key_id in self._revoked

    def delete_key(self, key_id: bytes, *, via: str) -> KeyRecord:
        """Revoke a key; raise NotFound if there is no such key. ``via`` as for
        :meth:`create_key`. Open connections using it stop working
        (:meth:`is_revoked`, :meth:`on_revoked`)."""
        with self._env.begin(write=True) as txn:
            digest = txn.get(key_id, db=self._hash_by_id)
            if digest is None:
                raise NotFound(f"no key with id {key_id.hex()}")
            raw = txn.get(bytes(digest), db=self._by_hash)
            assert raw is not None
            record = KeyRecord._decode(bytes(raw))
            txn.delete(bytes(digest), db=self._by_hash)
            txn.delete(key_id, db=self._hash_by_id)
            self._audit_change(txn, "key_delete", record, via)
        self._revoked.add(record.key_id)
        for listener in list(self._revocation_listeners):
            listener(record.key_id)
        return record

    # --- the key audit ------------------------------------------------------------------

    def _audit_change(
        self, txn: lmdb.Transaction, operation: str, record: KeyRecord, via: str
    ) -> None:
        if via not in KEY_CHANGE_SOURCES:
            raise ValueError(f"unknown key-change source {via!r}")
        at = time.time_ns()
        entry = {
            "namespace": record.namespace,
            "operation": operation,
            "records": [record.key_id],
            "recorded_at": at,
            "via": via,
        }
        key = namespace_id(record.namespace) + at.to_bytes(8, "big") + new_id()
        txn.put(key, cbor.encode(entry), db=self._audit)

    def key_audit(self, namespace: str, limit: int) -> list[dict[str, object]]:
        """The newest ``limit`` key changes of ``namespace``, newest first."""
        prefix = namespace_id(namespace)
        # Key changes are rare (a handful per namespace), so a forward walk that
        # keeps the newest ``limit`` is enough.
        newest: deque[bytes] = deque(maxlen=limit)
        with self._env.begin() as txn:
            cursor = txn.cursor(db=self._audit)
            if cursor.set_range(prefix):
                for key, value in cursor:
                    if not bytes(key).startswith(prefix):
                        break
                    newest.append(bytes(value))
        entries: list[dict[str, object]] = []
        for raw in reversed(newest):
            entry = cbor.decode_stored(raw)
            assert isinstance(entry, dict)
            entries.append({str(k): v for k, v in entry.items()})
        return entries
