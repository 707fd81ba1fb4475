"""Back-pressure from the semantic index (spec/04-retrieval.md §3).

Writes are acknowledged before their documents are embedded; the indexer catches
up in batches. Unchecked, a namespace that writes faster than its documents can be
embedded would leave the vector index ever further behind: its recalls would
wait their whole ``index_wait_s`` and then miss its newest writes. So a namespace
whose ``embed_queue`` holds :data:`MAX_EMBED_BACKLOG` entries or more has its
writes that add documents refused with OVERLOADED until the indexer has caught up
below the limit. Other namespaces are not touched: the limit is counted per
namespace, and the indexer serves scopes in turn
(:func:`~brain.engine.index.backlog.take_in_turn`).

The check runs before the write is queued, on the caller's thread (the event loop,
for the server), so it never waits: it reads the queue's entry count, which LMDB
keeps, and only when the whole queue holds as many entries as the limit does it
count the namespace's own, up to the limit, reusing that count for
:data:`RECOUNT_S`. A repeat of a write already done is never refused: it adds
nothing, and its client must get the first answer back (spec/01-wire.md §4).
"""

from __future__ import annotations

import threading
import time
from typing import Final

from brain.engine.index.backlog import count_queued
from brain.engine.store.env import Store
from brain.engine.store.scope import namespace_id
from brain.engine.store.tables import EMBED_QUEUE, IDEMPOTENCY
from brain.engine.write.tuning import MAX_EMBED_BACKLOG
from brain.errors import Overloaded
from brain.wire.opcodes import Opcode

__all__ = [
    "DOCUMENT_WRITES",
    "EMBED_BACKLOG_RETRY_MS",
    "MAX_EMBED_BACKLOG",
    "RECOUNT_S",
    "EmbedPressure",
]

EMBED_BACKLOG_RETRY_MS: Final = 1_000
"""The ``retry_after_ms`` of the refusal: long enough for the indexer to embed a few
hundred documents, short enough that a client obeying it loses little time."""

RECOUNT_S: Final = 0.1
"""How long a namespace's counted backlog is reused: a client writing as fast as it
can then costs one count of at most the limit's entries per 0.1 s, not one per
write."""

DOCUMENT_WRITES: Final = frozenset(
    {Opcode.ENCODE, Opcode.STATEMENT_CREATE, Opcode.STATEMENT_SUPERSEDE, Opcode.TXN_COMMIT}
)
"""The writes that add documents to embed. Removals (FORGET, retractions), tombstones
and entity changes are never refused for the backlog: they cost the indexer little
or nothing, and a request to forget must not wait on embedding."""


class EmbedPressure:
    """Refuses a namespace's document writes while its embedding backlog is full."""

    def __init__(self, store: Store, limit: int = MAX_EMBED_BACKLOG) -> None:
        """``limit`` is the namespace's backlog at which refusals start (at least 1)."""
        if limit < 1:
            raise ValueError("the embedding backlog limit must be at least 1")
        self._store = store
        self.limit = limit
        self._lock = threading.Lock()
        self._counted: dict[str, tuple[float, int]] = {}
        """Namespace -> (monotonic time of the count, entries counted up to the limit)."""
        self.refused = 0
        """Writes refused for the backlog since the database was opened."""

    def check(self, namespace: str, opcode: Opcode, answer_key: bytes | None = None) -> None:
        """Raise Overloaded when ``opcode`` adds documents and ``namespace``'s backlog
        is at the limit, unless the idempotency table holds an answer at
        ``answer_key`` (the write is a repeat); never waits for the store (a resize
        in progress skips it)."""
        if opcode not in DOCUMENT_WRITES:
            return
        backlog = self.backlog(namespace)
        if backlog is None or backlog < self.limit:
            return
        if answer_key is not None and self._answered(answer_key):
            return
        with self._lock:
            self.refused += 1
        raise Overloaded(
            f"the semantic index of namespace {namespace!r} is {backlog} or more documents"
            f" behind (retrieval.max_embed_backlog = {self.limit}); retry once it catches up",
            retry_after_ms=EMBED_BACKLOG_RETRY_MS,
        )

    def _answered(self, answer_key: bytes) -> bool:
        """True when the write whose answer is kept at ``answer_key`` was done (or the
        store is held for a resize: the planner then decides, as below the limit)."""
        with self._store.try_read() as txn:
            if txn is None:
                return True
            return txn.get(answer_key, db=self._store.table(IDEMPOTENCY)) is not None

    def backlog(self, namespace: str) -> int | None:
        """The namespace's queued entries, counted up to the limit (0 when the whole
        queue is below it); None when the store is held for a resize."""
        now = time.monotonic()
        with self._lock:
            seen = self._counted.get(namespace)
        if seen is not None and now - seen[0] < RECOUNT_S:
            return seen[1]
        with self._store.try_read() as txn:
            if txn is None:
                return None
            queue = self._store.table(EMBED_QUEUE)
            if int(txn.stat(queue)["entries"]) < self.limit:
                count = 0
            else:
                count = count_queued(txn.cursor(db=queue), namespace_id(namespace), self.limit)
        with self._lock:
            if count:
                self._counted[namespace] = (now, count)
            else:
                self._counted.pop(namespace, None)
        return count
