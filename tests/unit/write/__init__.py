"""Writes: the engine's write path, idempotency, transactions, the change log, the WAL, recovery."""
