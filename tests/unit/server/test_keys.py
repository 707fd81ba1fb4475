"""The key store: format, hashing, lookup, revocation, namespaces."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest

from brain.errors import InvalidArgument, NotFound
from brain.server.credentials import bootstrap_credentials
from brain.server.keys import KeyStore, generate_api_key, parse_permissions
from brain.wire.opcodes import Permission


def test_key_format() -> None:
    key = generate_api_key()
    assert key.startswith("brn_") and len(key) == 47
    assert len(base64.urlsafe_b64decode(key[4:] + "=")) == 32
    assert generate_api_key() != key


def test_only_hashes_are_stored(tmp_path: Path) -> None:
    store = KeyStore(tmp_path)
    key, record = store.create_key("ns", frozenset({Permission.READ}), via="cli")
    store.close()
    blob = b"".join(p.read_bytes() for p in (tmp_path / "keys").iterdir())
    assert key.encode() not in blob
    assert hashlib.sha256(key.encode()).digest() in blob
    store = KeyStore(tmp_path)
    try:
        assert store.authenticate(key) == record
        assert store.authenticate(key + "x") is None
        assert store.authenticate("nope") is None
    finally:
        store.close()


def test_delete_and_list(tmp_path: Path) -> None:
    store = KeyStore(tmp_path)
    try:
        a, ra = store.create_key("ns", frozenset({Permission.READ}), via="cli")
        _, rb = store.create_key("other", frozenset(Permission), via="cli")
        assert [r.key_id for r in store.list_keys()] == [ra.key_id, rb.key_id]
        assert store.namespaces() == ["ns", "other"]
        store.delete_key(ra.key_id, via="admin")
        assert store.authenticate(a) is None
        with pytest.raises(NotFound):
            store.delete_key(ra.key_id, via="admin")
    finally:
        store.close()


def test_a_revocation_is_remembered_and_announced(tmp_path: Path) -> None:
    store = KeyStore(tmp_path)
    try:
        _, gone = store.create_key("ns", frozenset({Permission.READ}), via="cli")
        _, kept = store.create_key("ns", frozenset({Permission.READ}), via="cli")
        heard: list[bytes] = []
        store.on_revoked(heard.append)
        assert not store.is_revoked(gone.key_id)
        store.delete_key(gone.key_id, via="admin")
        assert store.is_revoked(gone.key_id) and not store.is_revoked(kept.key_id)
        assert heard == [gone.key_id]
        with pytest.raises(NotFound):
            store.delete_key(gone.key_id, via="admin")
        assert heard == [gone.key_id]
    finally:
        store.close()


def test_bad_namespace_and_permissions(tmp_path: Path) -> None:
    store = KeyStore(tmp_path)
    try:
        with pytest.raises(InvalidArgument) as info:
            store.create_key("Has Space", frozenset({Permission.READ}), via="cli")
        assert info.value.field == "namespace"
    finally:
        store.close()
    with pytest.raises(InvalidArgument):
        parse_permissions(["read", "sudo"])
    with pytest.raises(InvalidArgument):
        parse_permissions([])


def test_bootstrap_once(tmp_path: Path) -> None:
    store = KeyStore(tmp_path)
    try:
        path = bootstrap_credentials(tmp_path, store)
        assert path is not None and path.stat().st_mode & 0o777 == 0o600
        assert bootstrap_credentials(tmp_path, store) is None
        text = path.read_text()
        key = text.split('api_key = "')[1].split('"')[0]
        token = text.split('admin_token = "')[1].split('"')[0]
        record = store.authenticate(key)
        assert record is not None and record.namespace == "default"
        assert record.permissions == frozenset(Permission)
        assert store.check_admin_token(token)
        assert not store.check_admin_token(token + "x")
    finally:
        store.close()


def test_key_changes_are_audited(tmp_path: Path) -> None:
    store = KeyStore(tmp_path)
    try:
        bootstrap_credentials(tmp_path, store)
        _, first = store.create_key("ns", frozenset({Permission.READ}), via="cli")
        _, other = store.create_key("other", frozenset({Permission.READ}), via="admin")
        store.delete_key(first.key_id, via="admin")
        entries = store.key_audit("ns", 10)
        assert [(e["operation"], e["via"], e["records"]) for e in entries] == [
            ("key_delete", "admin", [first.key_id]),
            ("key_create", "cli", [first.key_id]),
        ]
        assert entries[0]["recorded_at"] >= entries[1]["recorded_at"]  # type: ignore[operator]
        assert [e["records"] for e in store.key_audit("other", 10)] == [[other.key_id]]
        assert [e["via"] for e in store.key_audit("default", 10)] == ["bootstrap"]
        assert len(store.key_audit("ns", 1)) == 1
        assert store.key_audit("nobody", 10) == []
        with pytest.raises(ValueError):
            store.create_key("ns", frozenset({Permission.READ}), via="someone")
    finally:
        store.close()
