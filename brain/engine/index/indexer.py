"""The indexer: the thread that embeds new documents and keeps the HNSW indexes current.

Writes leave ``embed_queue`` entries in their own transaction
(:mod:`brain.engine.index.upkeep`), so the queue is exactly as durable as the
records. The indexer takes up to :data:`MAX_INDEX_BATCH` entries from a read
snapshot, embeds their texts in calls of at most :data:`ROUND_CHUNK_CHARS`
characters (a client's own ENCODE ``vector`` is used as given), and hands the result
to the writer as an ordinary logged write: the vectors, their labels and the removal
of the queue entries, in one transaction, after checking that each entry is still
what it read. Only then does it change the in-memory HNSW indexes. A crash at any
point leaves the queue entries that were not consumed, and recovery replays the ones
that were, so nothing is embedded twice and nothing is lost.

Each round serves the scopes with queued work in turn
(:func:`~brain.engine.index.backlog.take_in_turn`), so one tenant's thousands of
queued documents do not hold another's recalls behind them. While recalls wait on
scopes with queued entries, a round serves those scopes alone, and a round stops
between two embedding calls once a recall waits on a scope it does not serve as
waited, writing what it embedded (the rest stays queued): a recall waits for at most
one call of another tenant's documents (:data:`MAX_WAITED_ROUNDS` keeps a stream of
recalls from starving the others). Progress is kept per scope: a scope is indexed up
to LSN ``n`` once a round read at ``n`` or later either found none of its entries or
took them all and consumed them. A recall waits (a bounded time,
:meth:`Indexer.wait_for_scope`) only for its own scope's entries queued when it
began, so it sees every write of its scope acknowledged before it; with none queued
it does not wait at all. ``indexed_lsn`` is the newest LSN all of whose documents,
of every scope, are in the HNSW indexes (``Database.wait_indexed``).

A database that turned read-only after a storage fault takes no index write:
the indexer stops its rounds until the restart, and a waiting recall answers at
once, its coverage counting what it could not see (``embed_backlog``). Index
files that cannot be saved (a full disk) are left for the next start to rebuild
from LMDB.

The embedding happens off the writer thread: writes are acknowledged without
waiting for it, and the indexer catches up in batches.

A re-index entry (:data:`~brain.engine.index.upkeep.REINDEX`: an entity the
statement names was renamed, merged or unmerged) is read the same way, with
the document's current text and its stored ``lex_docs`` row. When the tokens
are unchanged and the document has a vector, the round only consumes the
entry. Otherwise its write also swaps the postings (the old ones removed, the
new ones indexed; skipped for the next round if the row it read changed) and
puts the new vector under the document's existing label, which the HNSW index
updates in place; a document without a vector yet gets a new label as for an
ADD.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Final, cast

import lmdb
import numpy as np
from numpy.typing import NDArray

from brain import cbor
from brain.embed.batching import BULK_CHUNK_TEXTS, BatchingEmbedder, Priority
from brain.engine.index import lexical
from brain.engine.index.backlog import (
    EMBED_BACKLOG_COUNTED,
    after_scope,
    count_queued,
    has_queued,
    scopes_with_work,
    take_in_turn,
)
from brain.engine.index.documents import MEMORY_DOC, document_text
from brain.engine.index.upkeep import REINDEX, REMOVE, queued_scope
from brain.engine.index.vectors import LABEL_BYTES, VectorIndexes, scope_state
from brain.engine.store.env import Store
from brain.engine.store.meta import get_progress
from brain.engine.store.scope import ID_BYTES, SCOPE_PREFIX_BYTES, Scope
from brain.engine.store.tables import (
    EMBED_QUEUE,
    MEMORIES,
    VECTOR_LABELS,
    VECTOR_SCOPES,
    VECTORS,
)
from brain.engine.write.frozen import frozen_namespaces
from brain.engine.write.plan import Change, Delete, Plan, Put
from brain.engine.write.writer import PlanContext, Writer

__all__ = [
    "IDLE_SAVE_S",
    "MAX_INDEX_BATCH",
    "MAX_WAITED_ROUNDS",
    "ROUND_CHUNK_CHARS",
    "Indexer",
]

log = logging.getLogger("brain.engine.index")

MAX_INDEX_BATCH: Final = 128
"""Queue entries one round embeds: a few hundred milliseconds of MiniLM on short
texts, so the round's logged write stays small and the indexer answers a stop soon."""

IDLE_SAVE_S: Final = 30.0
"""How long changed HNSW indexes may go unsaved while the indexer is idle; a
crash loses at most that much index work, which a restart rebuilds from LMDB."""

RETRY_DELAY_S: Final = 1.0
"""Pause after a failed round (the writer is read-only, the embedder failed)."""

ROUND_CHUNK_CHARS: Final = 1_000
"""Characters of text one embedding call of a round holds (at least one text): about
0.1 s of MiniLM on one core, whatever the texts' lengths (a long text costs as much
as many short ones; short ones batched cost no more than alone). A round stops
between two calls when a recall starts waiting on a scope it does not serve, so this
bounds how long another tenant's indexing holds that recall back."""

MAX_WAITED_ROUNDS: Final = 8
"""Rounds in a row that serve only the scopes recalls wait on, while other scopes
have work: then one round serves the others too (cut short after its first call
if recalls still wait), so a stream of recalls slows other scopes' indexing but
never stops it."""


@dataclass(slots=True)
class _Entry:
    key: bytes
    value: bytes
    vector: NDArray[np.float32] | None = None
    text: str | None = None
    scope: Scope | None = None
    lexical: list[Change] | None = None
    """A re-index whose tokens changed: the postings of the new text."""
    lex_row: bytes | None = None
    """The ``lex_docs`` row :attr:`lexical` replaces, as read."""
    unchanged: bool = False
    """A re-index whose tokens did not change, of a document already embedded."""

    @property
    def prefix(self) -> bytes:
        return self.key[:SCOPE_PREFIX_BYTES]

    @property
    def doc(self) -> bytes:
        return self.key[SCOPE_PREFIX_BYTES:]

    @property
    def needs_embedding(self) -> bool:
        return self.vector is None and self.text is not None and not self.unchanged


@dataclass(slots=True)
class _Applied:
    """What the round's write did, for the in-memory indexes (refilled on a replan)."""

    lsn: int = 0
    added: dict[bytes, list[tuple[int, NDArray[np.float32]]]] = field(default_factory=dict)
    replaced: dict[bytes, list[tuple[int, NDArray[np.float32]]]] = field(default_factory=dict)
    removed: dict[bytes, list[int]] = field(default_factory=dict)
    skipped: int = 0
    skipped_scopes: set[bytes] = field(default_factory=set)
    """The scopes of the skipped entries: not indexed up to the round's snapshot."""


@dataclass(frozen=True, slots=True)
class _Batch:
    """What one round read from its snapshot."""

    lsn: int
    """The LSN the snapshot had applied."""
    entries: list[_Entry]
    drained: frozenset[bytes]
    """Scopes every entry of which, in the snapshot, is in :attr:`entries`."""
    clear: frozenset[bytes]
    """Scopes a recall waits on that have no entry in the snapshot."""
    whole: bool
    """Every entry of the snapshot is in :attr:`entries`."""
    waited: frozenset[bytes] = frozenset()
    """The scopes with queued entries that recalls waited on when the round began."""
    mixed: bool = True
    """The round serves scopes nobody waits on too (else only :attr:`waited`)."""


class Indexer:
    """Embeds queued documents and keeps ``indexes`` in step with the store."""

    def __init__(
        self, store: Store, writer: Writer, embedder: BatchingEmbedder, indexes: VectorIndexes
    ) -> None:
        self._store = store
        self._writer = writer
        self._embedder = embedder
        self.indexes = indexes
        self._state = threading.Condition()
        # The fields from here through _loaded change under _state.
        self._indexed_lsn = 0
        self._scope_lsn: dict[bytes, int] = {}
        """Scopes indexed further than ``_indexed_lsn``: the LSN each is indexed up to."""
        self._waited: dict[bytes, int] = {}
        """Scopes recalls are waiting on, and how many recalls wait on each."""
        self._in_flight: frozenset[bytes] = frozenset()
        """The queue keys of the round whose write may have committed before its
        HNSW changes are made."""
        self._rounds_done = 0
        """Rounds ended (consumed, failed or empty): a round's HNSW changes are made
        before it ends."""
        self._loaded = False
        self._wake = threading.Event()
        self._stopping = False
        self._next_scope = b""
        """Where the next round starts looking for scopes with work (round-robin)."""
        self._waited_rounds = 0
        """Rounds in a row that served only waited scopes (:data:`MAX_WAITED_ROUNDS`)."""
        self._read_only_noted = False
        self._queued_at: OrderedDict[bytes, float] = OrderedDict()
        """Each ``embed_queue`` key and the monotonic time it was queued, oldest first:
        the first is how far behind the vector index is (:meth:`lag_seconds`). Kept
        from the batches the writer applies (:meth:`notify`); entries queued before
        the database opened count from the open."""
        self._queued_lock = threading.Lock()
        self.recount_queue()
        self.rounds = 0
        self.embedded = 0
        self.failures = 0
        self._thread = threading.Thread(target=self._run, name="brain-indexer", daemon=True)

    # --- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Load the indexes and start following the queue."""
        self._thread.start()

    def recount_queue(self) -> None:
        """Take the ``embed_queue`` keys from the store again, each counted as queued
        now (at the open, and after a follower's store started again from its log's
        base, spec/05-durability.md §14.10)."""
        now = time.monotonic()
        with self._store.read() as txn:
            keys = [
                bytes(k)
                for k in txn.cursor(db=self._store.table(EMBED_QUEUE)).iternext(values=False)
            ]
        with self._queued_lock:
            self._queued_at = OrderedDict((key, now) for key in keys)

    def notify(self, plans: object = None) -> None:
        """Wake the indexer. The writer calls this after each batch with its plans, a
        list of ``(lsn, Plan)``, and the queue entries they put and removed are noted;
        other callers only wake it."""
        if isinstance(plans, list) and plans:
            now = time.monotonic()
            with self._queued_lock:
                queued = self._queued_at
                for _, plan in cast(list[tuple[int, Plan]], plans):
                    for change in plan.changes:
                        if change.table != EMBED_QUEUE:
                            continue
                        if isinstance(change, Delete):
                            queued.pop(change.key, None)
                        else:  # a replaced entry keeps the time it first waited from
                            queued.setdefault(change.key, now)
        self._wake.set()

    def close(self) -> None:
        """Stop after the current round and save every changed index."""
        self._stopping = True
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join()
        if self._loaded:
            self._save()

    def _save(self) -> None:
        """Save the changed indexes; a failure (a full disk) costs only a rebuild from
        LMDB at the next start, so it is logged on one line, not raised."""
        try:
            self.indexes.save_dirty()
        except (OSError, RuntimeError) as exc:  # hnswlib reports its I/O as RuntimeError
            log.warning(
                "vector indexes not saved (%s); the next start rebuilds them from LMDB", exc
            )

    # --- progress ----------------------------------------------------------------------

    @property
    def indexed_lsn(self) -> int:
        """Every document written at or before this LSN is in the HNSW indexes."""
        with self._state:
            return self._indexed_lsn

    def lag_seconds(self) -> float:
        """How long the oldest entry of ``embed_queue`` has waited (0.0 when none
        waits): the vector index's lag. An entry the indexer consumed but whose HNSW
        change is not made yet no longer counts; that takes one round."""
        with self._queued_lock:
            if not self._queued_at:
                return 0.0
            first = next(iter(self._queued_at.values()))
        return time.monotonic() - first

    def wait_loaded(self, timeout: float) -> bool:
        """Wait until the indexes are loaded (or rebuilt) from the store; False if
        ``timeout`` passed first. A follower changes them only after that."""
        with self._state:
            return self._state.wait_for(lambda: self._loaded, timeout=timeout)

    def wait_for(self, lsn: int, timeout: float) -> bool:
        """Wait until :attr:`indexed_lsn` reaches ``lsn``; False if ``timeout`` passed."""
        self._wake.set()
        with self._state:
            return self._state.wait_for(lambda: self._indexed_lsn >= lsn, timeout=timeout)

    def wait_for_scope(self, prefix: bytes, timeout: float) -> bool:
        """Wait until every document of scope ``prefix`` written so far is in the HNSW
        indexes, and no longer than ``timeout``; False when it is not (the time passed,
        or the database is read-only and the indexer cannot write). Documents of other
        scopes are not waited for: with none of its own queued, this returns at once."""
        # The snapshot comes first: a round that consumed the scope's entries before
        # it is then seen in flight below until its HNSW changes are made.
        with self._store.read() as txn:
            lsn = get_progress(self._store, txn).applied_lsn
            queued = has_queued(txn.cursor(db=self._store.table(EMBED_QUEUE)), prefix)
        with self._state:
            if not queued:
                seen = self._rounds_done
                in_flight = any(key[:SCOPE_PREFIX_BYTES] == prefix for key in self._in_flight)

                def indexed() -> bool:
                    return self._loaded and (not in_flight or self._rounds_done > seen)
            else:

                def indexed() -> bool:
                    return self._scope_indexed(prefix) >= lsn

            if indexed():
                return True
            self._waited[prefix] = self._waited.get(prefix, 0) + 1
            self._wake.set()
            try:
                self._state.wait_for(lambda: indexed() or self._cannot_index(), timeout)
                return indexed()
            finally:
                self._waited[prefix] -= 1
                if not self._waited[prefix]:
                    del self._waited[prefix]

    def embed_backlog(self, txn: lmdb.Transaction, prefix: bytes) -> int:
        """The entries of scope ``prefix`` that ``txn`` holds and the HNSW indexes may
        not yet reflect: queued in ``txn``, or consumed by a round whose HNSW changes
        are not made yet, counted up to
        :data:`~brain.engine.index.backlog.EMBED_BACKLOG_COUNTED`. Call it before
        searching the indexes: 0 then means the search saw every document of ``txn``."""
        with self._state:
            in_flight = [key for key in self._in_flight if key[:SCOPE_PREFIX_BYTES] == prefix]
        queue = self._store.table(EMBED_QUEUE)
        counted = count_queued(txn.cursor(db=queue), prefix)
        # Consumed in txn already, so not counted above (a key still queued is).
        counted += sum(1 for key in in_flight if txn.get(key, db=queue) is None)
        return min(counted, EMBED_BACKLOG_COUNTED)

    def _scope_indexed(self, prefix: bytes) -> int:
        """The LSN scope ``prefix`` is indexed up to (call with ``_state`` held)."""
        return max(self._indexed_lsn, self._scope_lsn.get(prefix, 0))

    def _cannot_index(self) -> bool:
        """Whether waiting longer is in vain: the database takes no index write."""
        return self._writer.read_only

    def _progress(self, lsn: int, scopes: frozenset[bytes], whole: bool) -> None:
        """Record that ``scopes`` (every scope, when ``whole``) are indexed up to
        ``lsn``, and wake the recalls waiting."""
        with self._state:
            if whole and lsn > self._indexed_lsn:
                self._indexed_lsn = lsn
                # A scope no further than every scope needs no entry of its own.
                self._scope_lsn = {p: n for p, n in self._scope_lsn.items() if n > lsn}
            for prefix in scopes:
                if lsn > self._scope_indexed(prefix):
                    self._scope_lsn[prefix] = lsn
            self._state.notify_all()

    def _end_round(self) -> None:
        with self._state:
            self._in_flight = frozenset()
            self._rounds_done += 1
            self._state.notify_all()

    # --- the loop ----------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self.indexes.load_all(self._store)
        except Exception:  # the indexes start empty and fill from the queue
            log.exception("loading the vector indexes failed")
        with self._state:
            self._loaded = True
            self._state.notify_all()
        last_save = time.monotonic()
        while not self._stopping:
            if self._writer.read_only:
                self._pause_read_only()
                continue
            try:
                busy = self._round()
            except Exception:
                self.failures += 1
                if not self._writer.read_only:
                    log.exception("an indexing round failed; retrying")
                self._wake.wait(RETRY_DELAY_S)
                self._wake.clear()
                continue
            if busy:
                continue
            if time.monotonic() - last_save >= IDLE_SAVE_S:
                self._save()
                last_save = time.monotonic()
            self._wake.wait(IDLE_SAVE_S)
            self._wake.clear()

    def _pause_read_only(self) -> None:
        """The database takes no write until a restart: no round can commit, so none
        is tried (each would embed its batch in vain); waiting recalls are woken to
        answer with what there is."""
        if not self._read_only_noted:
            self._read_only_noted = True
            log.warning(
                "the indexer stops until a restart: the database is read-only (%s)",
                self._writer.read_only_reason,
            )
            with self._state:
                self._state.notify_all()
        self._wake.wait(IDLE_SAVE_S)
        self._wake.clear()

    def _read_queue(self) -> _Batch:
        """The round's entries, scopes in turn. While recalls wait on scopes with
        queued entries, the round serves those scopes alone (each waiting recall
        then waits for its own scope's few entries, not for a share of another's
        thousands), up to :data:`MAX_WAITED_ROUNDS` rounds in a row; otherwise the
        waited scopes first, then the others from where the last round stopped."""
        with self._state:
            waited = list(self._waited)
        with self._store.read() as txn:
            applied = get_progress(self._store, txn).applied_lsn
            cursor = txn.cursor(db=self._store.table(EMBED_QUEUE))
            clear = frozenset(p for p in waited if not has_queued(cursor, p))
            waiting = [p for p in waited if p not in clear]
            others, complete = scopes_with_work(cursor, self._next_scope, MAX_INDEX_BATCH)
            frozen = frozen_namespaces(self._store, txn)
            if frozen:
                # A namespace moving between shards takes no vectors until its
                # cut-over (spec/05-durability.md §14.9): its entries wait, unembedded.
                held = [p for p in (*others, *waiting) if p[:ID_BYTES] in frozen]
                others = [p for p in others if p not in held]
                waiting = [p for p in waiting if p not in held]
                complete = complete and not held
            rest = not complete or any(p not in waiting for p in others)
            if waiting and (self._waited_rounds < MAX_WAITED_ROUNDS or not rest):
                self._waited_rounds += 1
                served, mixed = waiting[:MAX_INDEX_BATCH], False
            else:
                self._waited_rounds = 0
                order = list(dict.fromkeys(waiting + others))
                served, mixed = order[:MAX_INDEX_BATCH], True  # at least one entry each
                if others:
                    self._next_scope = after_scope(others[-1]) or b""
            turn = take_in_turn(cursor, served, MAX_INDEX_BATCH)
            entries = [_Entry(key, value) for key, value in turn.entries]
            for entry in entries:
                if entry.value[:1] != REMOVE:
                    self._prepare(txn, entry)
        whole = complete and set(others) <= set(served) and turn.drained == frozenset(served)
        return _Batch(applied, entries, turn.drained, clear, whole, frozenset(waiting), mixed)

    def _prepare(self, txn: lmdb.Transaction, entry: _Entry) -> None:
        """Read what an ADD or REINDEX entry needs: the client's vector or the text to
        embed and, for a re-index, whether its tokens changed (skipping the embedding
        when they did not and the document has its vector)."""
        scope = entry.scope = queued_scope(entry.value)
        store = self._store
        if entry.doc[:1] == MEMORY_DOC:
            entry.vector = _client_vector(store, txn, scope, entry.doc)
        reindex = entry.value[:1] == REINDEX
        if entry.vector is not None and not reindex:
            return
        entry.text = document_text(store, txn, scope, entry.doc)
        if not reindex:
            return
        if entry.text is None:
            entry.vector = None  # gone: its removal takes it out of the indexes
            return
        entry.lex_row = lexical.doc_row_of(store, txn, scope, entry.doc)
        if lexical.doc_row(entry.text) != entry.lex_row:
            entry.lexical = lexical.index_changes(scope, entry.doc, entry.text)
        elif txn.get(entry.key, db=store.table(VECTORS)) is not None:
            # The same words: the postings and the vector stand.
            entry.unchanged, entry.vector = True, None

    def _round(self) -> bool:
        """One round; True when there may be more to do at once."""
        try:
            batch = self._read_queue()
            if not batch.entries:
                self._progress(batch.lsn, batch.clear, whole=batch.whole)
                return False
            entries = self._embed(batch)
            outcome = self._index(entries)
        finally:
            self._end_round()
        # A scope some of whose entries the round left for later is not drained.
        left = {e.prefix for e in batch.entries if e.needs_embedding}
        done = (batch.drained - outcome.skipped_scopes - left) | batch.clear
        whole = batch.whole and not outcome.skipped and not left
        self._progress(batch.lsn, done, whole=whole)
        return True

    def _embed(self, batch: _Batch) -> list[_Entry]:
        """Embed the round's texts, call by call (:func:`_chunks`), and return the
        entries the round writes: all of them, or, when it stopped early because a
        recall waits (:meth:`_should_yield`), those it embedded and those that need
        no embedding; the others stay queued for the next round."""
        needing = [e for e in batch.entries if e.needs_embedding]
        # Like lengths together, so each call pads little; in a round that serves
        # other scopes too, the waited scopes' entries first, so one cut short
        # still serves them.
        waited = batch.waited if batch.mixed else frozenset()
        needing.sort(key=lambda e: (e.prefix not in waited, len(e.text or "")))
        served_others = False
        for number, chunk in enumerate(_chunks(needing)):
            if number and self._should_yield(batch, served_others):
                break
            # Bulk: a recall's cue is embedded apart from these (brain/embed/batching.py).
            vectors = self._embedder.embed([e.text or "" for e in chunk], priority=Priority.BULK)
            for entry, vector in zip(chunk, vectors, strict=True):
                entry.vector = vector
            served_others = served_others or any(e.prefix not in waited for e in chunk)
        return [e for e in batch.entries if not e.needs_embedding]

    def _should_yield(self, batch: _Batch, served_others: bool) -> bool:
        """Whether the round should stop embedding and write what it has: the indexer
        is stopping, or a recall waits on a scope the round does not serve as waited,
        or, in a round that serves other scopes too and has embedded some of theirs,
        on any scope."""
        if self._stopping and self._thread.is_alive():
            return True  # close() waits for this round to end
        with self._state:
            waited = set(self._waited)
        if batch.mixed:
            return bool(waited) and served_others
        return not waited <= batch.waited

    def _index(self, entries: list[_Entry]) -> _Applied:
        """Write the embedded ``entries`` through the writer, then change the HNSW
        indexes to match."""
        outcome = _Applied()
        dims = self._embedder.dimensions
        with self._state:
            self._in_flight = frozenset(e.key for e in entries)
        self._writer.submit(lambda ctx: _plan(ctx, entries, outcome, dims)).result()
        for prefix in set(outcome.added) | set(outcome.removed) | set(outcome.replaced):
            self.indexes.apply(
                prefix,
                outcome.lsn,
                outcome.added.get(prefix, []),
                outcome.removed.get(prefix, []),
                outcome.replaced.get(prefix, []),
            )
        self.rounds += 1
        self.embedded += sum(len(v) for v in outcome.added.values())
        self.embedded += sum(len(v) for v in outcome.replaced.values())
        return outcome


def _chunks(entries: list[_Entry]) -> list[list[_Entry]]:
    """``entries`` cut, in order, into embedding calls of at most
    :data:`ROUND_CHUNK_CHARS` characters and :data:`BULK_CHUNK_TEXTS` texts (a
    longer text alone); texts of like length are kept together, so each call pads
    little."""
    chunks: list[list[_Entry]] = []
    current: list[_Entry] = []
    chars = 0
    for entry in entries:
        size = len(entry.text or "")
        if current and (chars + size > ROUND_CHUNK_CHARS or len(current) >= BULK_CHUNK_TEXTS):
            chunks.append(current)
            current, chars = [], 0
        current.append(entry)
        chars += size
    if current:
        chunks.append(current)
    return chunks


def _client_vector(
    store: Store, txn: lmdb.Transaction, scope: Scope, doc: bytes
) -> NDArray[np.float32] | None:
    """The vector a client gave with ENCODE, if it did."""
    raw = txn.get(scope.key(doc[1:]), db=store.table(MEMORIES))
    if raw is None:
        return None
    row = cbor.decode_stored(bytes(raw))
    given = row.get("vector") if isinstance(row, dict) else None
    if not isinstance(given, bytes):
        return None
    vector = np.frombuffer(given, dtype="<f4").astype(np.float32)
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


def _plan(ctx: PlanContext, entries: list[_Entry], outcome: _Applied, dimensions: int) -> Plan:
    """The logged write of one round: vectors in (a re-indexed document's under its
    own label), re-indexed postings swapped, queue entries out."""
    outcome.added, outcome.replaced, outcome.removed, outcome.skipped = {}, {}, {}, 0
    outcome.skipped_scopes = set()
    outcome.lsn = ctx.lsn
    queue = ctx.store.table(EMBED_QUEUE)
    next_labels: dict[bytes, int] = {}
    changes: list[Change] = []
    for entry in entries:
        if not _still_as_read(ctx, queue, entry):
            outcome.skipped += 1  # the next round sees it as it is now
            outcome.skipped_scopes.add(entry.prefix)
            continue
        changes.append(Delete(EMBED_QUEUE, entry.key))
        if entry.value[:1] == REMOVE:
            label = int.from_bytes(entry.value[1 : 1 + LABEL_BYTES], "big")
            outcome.removed.setdefault(entry.prefix, []).append(label)
            continue
        if entry.lexical is not None:
            changes += _swapped_postings(ctx, entry)
        vector = _indexable_vector(entry, dimensions)
        if vector is not None:
            changes += _vector_changes(ctx, entry, vector, next_labels, outcome)
    # Once, over every entry's postings: a term several entries touch is settled once.
    changes += lexical.settle(ctx.store, ctx.txn, changes)
    changes += _scope_state_changes(ctx, next_labels, outcome)
    return Plan(tuple(changes), ())


def _still_as_read(ctx: PlanContext, queue: lmdb._Database, entry: _Entry) -> bool:
    """Whether the queue entry, and the ``lex_docs`` row a re-index with new tokens
    replaces, are still what the round read (else the next round takes it up)."""
    current = ctx.txn.get(entry.key, db=queue)
    if current is None or bytes(current) != entry.value:
        return False
    if entry.lexical is None:
        return True
    assert entry.scope is not None
    return lexical.doc_row_of(ctx.store, ctx.txn, entry.scope, entry.doc) == entry.lex_row


def _swapped_postings(ctx: PlanContext, entry: _Entry) -> list[Change]:
    """A re-index's postings: the old text's taken out, the new text's put in."""
    assert entry.scope is not None and entry.lexical is not None
    # Remove first: a term of both texts is deleted, then put with its new
    # frequency and length; the counters net out and each term's version rises.
    return lexical.remove_changes(ctx.store, ctx.txn, entry.scope, entry.doc) + entry.lexical


def _indexable_vector(entry: _Entry, dimensions: int) -> NDArray[np.float32] | None:
    """The vector an ADD or REINDEX entry puts in the index, or None if it has none."""
    vector = entry.vector
    if vector is None:
        return None  # gone (retracted, forgotten), or re-indexed to the same tokens
    if vector.shape != (dimensions,):
        # ENCODE refuses such vectors; one logged before that rule must not stop
        # the indexer for good.
        log.error("document %s has a vector of the wrong length; not indexed", entry.key.hex())
        return None
    return vector


def _vector_changes(
    ctx: PlanContext,
    entry: _Entry,
    vector: NDArray[np.float32],
    next_labels: dict[bytes, int],
    outcome: _Applied,
) -> list[Change]:
    """Store a document's vector: under its own label when it has one (a re-index),
    else under the scope's next free label; ``outcome`` notes which."""
    prefix = entry.prefix
    values = vector.astype("<f4").tobytes()
    stored = ctx.txn.get(entry.key, db=ctx.store.table(VECTORS))
    if stored is not None:
        # A re-index: the same label, a new vector (hnswlib updates it in place).
        raw_label = bytes(stored)[:LABEL_BYTES]
        replaced = (int.from_bytes(raw_label, "big"), vector)
        outcome.replaced.setdefault(prefix, []).append(replaced)
        return [Put(VECTORS, entry.key, raw_label + values)]
    label = _take_label(ctx, prefix, next_labels)
    raw_label = label.to_bytes(LABEL_BYTES, "big")
    outcome.added.setdefault(prefix, []).append((label, vector))
    return [
        Put(VECTORS, entry.key, raw_label + values),
        Put(VECTOR_LABELS, prefix + raw_label, entry.doc),
    ]


def _take_label(ctx: PlanContext, prefix: bytes, next_labels: dict[bytes, int]) -> int:
    """The scope's next free label, counted on in ``next_labels`` (which starts from
    the scope's stored state the first time the round meets the scope)."""
    if prefix not in next_labels:
        start = scope_state(ctx.store, ctx.txn, prefix).get("next_label", 0)
        assert isinstance(start, int)
        next_labels[prefix] = start
    label = next_labels[prefix]
    next_labels[prefix] = label + 1
    return label


def _scope_state_changes(
    ctx: PlanContext, next_labels: dict[bytes, int], outcome: _Applied
) -> list[Change]:
    """The stored state of every scope the round changed: its next free label and the
    LSN its index now reflects."""
    changes: list[Change] = []
    for prefix in set(outcome.added) | set(outcome.removed) | set(outcome.replaced):
        state = scope_state(ctx.store, ctx.txn, prefix)
        state["next_label"] = next_labels.get(prefix, state.get("next_label", 0))
        state["lsn"] = ctx.lsn
        changes.append(Put(VECTOR_SCOPES, prefix, cbor.encode(state)))
    return changes
