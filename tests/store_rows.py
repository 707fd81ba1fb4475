"""What a store holds of one namespace, read byte by byte (for the tests of dropping,
copying and moving namespaces)."""

from __future__ import annotations

from brain.engine.database import Database
from brain.engine.store.scope import namespace_id
from brain.engine.store.tables import META, TABLES


def namespace_rows(db: Database, namespace: str) -> list[tuple[bytes, bytes, bytes]]:
    """Every (table, key, value) of ``namespace`` in ``db``'s store, table by table in
    key order (every table but ``meta`` keys its rows by the namespace id first)."""
    prefix = namespace_id(namespace)
    store = db._store  # the tests check the bytes the store holds
    found: list[tuple[bytes, bytes, bytes]] = []
    with store.read() as txn:
        for table in TABLES:
            if table == META:
                continue
            cursor = txn.cursor(db=store.table(table))
            if cursor.set_range(prefix):
                for key, value in cursor:
                    if not bytes(key).startswith(prefix):
                        break
                    found.append((table, bytes(key), bytes(value)))
    return found
