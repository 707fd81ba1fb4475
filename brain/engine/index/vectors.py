"""The semantic arm's data: stored vectors and one HNSW index per scope.

LMDB holds the truth, every key scope-prefixed (``S``):

- ``vectors``: ``S ‖ doc key`` → ``u64 label ‖ float32 values`` (little-endian);
- ``vector_labels``: ``S ‖ u64 label`` → doc key;
- ``vector_scopes``: ``S`` → ``{namespace, space, next_label, lsn}``: the next
  free label and the LSN of the last index write that added, replaced or
  removed a vector of the scope;
- ``embed_queue``: ``S ‖ doc key`` → ``"+" ‖ CBOR [namespace, space]`` for a
  document waiting to be embedded, ``"~" ‖ u64 LSN ‖ CBOR [namespace, space]``
  for one whose text changed (re-indexed under the same label), or ``"-" ‖
  u64 label`` for a vector whose HNSW entry must be marked deleted. Writes put
  these in the same transaction as the records (:mod:`brain.engine.index.upkeep`);
  the indexer thread (:mod:`brain.engine.index.indexer`) takes them out.

An hnswlib index per scope lives in memory, built from ``vectors``, and is
saved under ``DATA/index`` as ``<S hex>.hnsw`` with ``<S hex>.json`` naming
the ``lsn`` it reflects and the SHA-256 of the index file. At open, a scope's
file is used when its LSN equals the scope's ``lsn`` and its hash verifies;
when it is missing, stale or damaged the index is rebuilt from ``vectors``
(no text is embedded again). A label the index returns is looked up in the
reader's own LMDB snapshot, so an index a little ahead or behind a read never
shows a document the read cannot see.

Parameters: cosine space, ``M`` = :data:`HNSW_M`, ``ef_construction`` =
:data:`HNSW_EF_CONSTRUCTION`, search ``ef`` = max(k, :data:`HNSW_EF_SEARCH`).
A search hnswlib cannot fill is widened, then asks for fewer (:func:`_knn`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Final

import hnswlib  # type: ignore[import-untyped]
import lmdb
import numpy as np
from numpy.typing import NDArray

from brain import cbor
from brain.engine.index.labels import LabelSet
from brain.engine.store.env import Store
from brain.engine.store.scan import scan
from brain.engine.store.scope import SCOPE_PREFIX_BYTES
from brain.engine.store.tables import EMBED_QUEUE, VECTOR_LABELS, VECTOR_SCOPES, VECTORS
from brain.engine.write.plan import Change, Delete, Put

# The names of the tables this module keeps stay importable from it (tables.py names them).
__all__ = [
    "EMBED_QUEUE",
    "HNSW_EF_CONSTRUCTION",
    "HNSW_EF_SEARCH",
    "HNSW_M",
    "LABEL_BYTES",
    "VECTORS",
    "VECTOR_LABELS",
    "VECTOR_SCOPES",
    "VectorIndexes",
    "decode_vector_row",
    "scope_state",
]

log = logging.getLogger("brain.engine.index")

LABEL_BYTES: Final = 8

HNSW_M: Final = 16
"""Links per node: hnswlib's recommended default, good recall at 384 dimensions."""
HNSW_EF_CONSTRUCTION: Final = 200
"""Candidate list while inserting: hnswlib's recommendation for high recall."""
HNSW_EF_SEARCH: Final = 128
"""Least candidate list while searching; raised to k when k is larger."""
INITIAL_CAPACITY: Final = 1024
"""Elements an index is created for; it doubles when full."""


def decode_vector_row(raw: bytes) -> tuple[int, NDArray[np.float32]]:
    """The label and the vector of a ``vectors`` row."""
    label = int.from_bytes(raw[:LABEL_BYTES], "big")
    return label, np.frombuffer(raw[LABEL_BYTES:], dtype="<f4").astype(np.float32)


def scope_state(store: Store, txn: lmdb.Transaction, prefix: bytes) -> dict[str, object]:
    """The ``vector_scopes`` row of a scope (empty when it has no vectors yet)."""
    raw = txn.get(prefix, db=store.table(VECTOR_SCOPES))
    if raw is None:
        return {}
    row = cbor.decode_stored(bytes(raw))
    assert isinstance(row, dict)
    return {str(k): v for k, v in row.items()}


def _file_sha256(path: Path) -> str:
    """The file's SHA-256, read in chunks: an index of a million vectors is 1.7 GB,
    which reading whole would add to the process's memory at every save and load."""
    with path.open("rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


class _ScopeIndex:
    """One scope's HNSW index and what is known about it."""

    def __init__(
        self, dimensions: int, capacity: int = INITIAL_CAPACITY, saved: Path | None = None
    ) -> None:
        self.index = hnswlib.Index(space="cosine", dim=dimensions)
        if saved is None:
            self.index.init_index(
                max_elements=capacity, ef_construction=HNSW_EF_CONSTRUCTION, M=HNSW_M
            )
        else:
            self.index.load_index(str(saved), max_elements=capacity)
        self.lock = threading.Lock()
        self.labels = LabelSet()
        self.lsn = 0
        self.dirty = False
        self.deleted = 0
        """Entries marked deleted: hnswlib keeps their bytes until a rebuild."""

    def add(self, labels: list[int], vectors: NDArray[np.float32]) -> None:
        fresh = [i for i, label in enumerate(labels) if label not in self.labels]
        if not fresh:
            return
        needed = self.index.get_current_count() + len(fresh)
        capacity = self.index.get_max_elements()
        if needed > capacity:
            while capacity < needed:
                capacity *= 2
            self.index.resize_index(capacity)
        chosen = np.asarray([labels[i] for i in fresh], dtype=np.uint64)
        self.index.add_items(vectors[fresh], chosen)
        self.labels.update(chosen)

    def replace(self, labels: list[int], vectors: NDArray[np.float32]) -> None:
        """Give labels new vectors: in place for a label the index holds (hnswlib's
        ``add_items`` with an existing label updates it; the count is unchanged),
        as a new entry for one it lacks."""
        held = [i for i, label in enumerate(labels) if label in self.labels]
        if held:
            chosen = np.asarray([labels[i] for i in held], dtype=np.uint64)
            self.index.add_items(vectors[held], chosen)
        missing = [i for i, label in enumerate(labels) if label not in self.labels]
        if missing:
            self.add([labels[i] for i in missing], vectors[missing])

    def remove(self, labels: list[int]) -> None:
        for label in labels:
            if label in self.labels:
                self.index.mark_deleted(label)
                self.labels.discard(label)
                self.deleted += 1


def _knn(index: hnswlib.Index, query: NDArray[np.float32], k: int) -> list[tuple[int, float]]:
    """The ``k`` nearest, or as many as the graph yields.

    hnswlib raises instead of answering short when its search reaches fewer than
    ``k`` live entries (entries marked deleted, or a graph that degenerate vectors
    left poorly linked). The nearest ones are still worth answering: the search is
    widened to every element once, then ``k`` is bisected down to the most the
    graph gives, rather than the arm going silent.
    """
    ef = max(k, HNSW_EF_SEARCH)
    widest = max(ef, index.get_current_count())
    best: list[tuple[int, float]] = []
    low, high = 0, k  # best holds `low` results; asking for more than `high` failed
    ask = k
    while low < high:
        index.set_ef(ef)
        try:
            labels, distances = index.knn_query(query, k=ask)
        except RuntimeError:
            if ef < widest:
                ef = widest  # the same k once more, searching every element
                continue
            high = ask - 1
            ask = (low + high + 1) // 2
            continue
        best = [(int(label), float(d)) for label, d in zip(labels[0], distances[0], strict=True)]
        low = ask
        ask = (low + high + 1) // 2
    if len(best) < k:
        log.warning("the vector index yielded %d of the %d nearest asked for", len(best), k)
    return best


class VectorIndexes:
    """Every scope's HNSW index, kept under ``directory``."""

    def __init__(self, directory: Path, dimensions: int) -> None:
        self.directory = directory
        self.dimensions = dimensions
        self._scopes: dict[bytes, _ScopeIndex] = {}
        self._lock = threading.Lock()

    # --- loading -----------------------------------------------------------------------

    def load_all(self, store: Store) -> None:
        """Load or rebuild the index of every scope that has vectors."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with store.read() as txn:
            prefixes = [bytes(k) for k, _ in txn.cursor(db=store.table(VECTOR_SCOPES))]
            for prefix in prefixes:
                lsn = scope_state(store, txn, prefix).get("lsn", 0)
                assert isinstance(lsn, int)
                loaded = self._load_file(prefix, lsn)
                if loaded is None:
                    loaded = self._rebuild(store, txn, prefix, lsn)
                with self._lock:
                    self._scopes[prefix] = loaded

    def reset(self, store: Store) -> None:
        """Drop every index, in memory and on disk, and build them again from the
        store's ``vectors`` (a follower's store started again from its log's base,
        spec/05-durability.md §14.10); save them."""
        with self._lock:
            self._scopes.clear()
        if self.directory.is_dir():
            for path in self.directory.iterdir():
                if path.is_file():
                    path.unlink()
        self.load_all(store)
        self.save_dirty()

    def _paths(self, prefix: bytes) -> tuple[Path, Path]:
        name = prefix.hex()
        return self.directory / f"{name}.hnsw", self.directory / f"{name}.json"

    def _load_file(self, prefix: bytes, lsn: int) -> _ScopeIndex | None:
        data, meta_path = self._paths(prefix)
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            if meta.get("lsn") != lsn or meta.get("dimensions") != self.dimensions:
                log.info("index of scope %s is stale; rebuilding it", prefix.hex()[:16])
                return None
            if _file_sha256(data) != meta.get("sha256"):
                log.warning("index file %s is damaged; rebuilding it", data)
                return None
            loaded = _ScopeIndex(self.dimensions, int(meta["capacity"]), saved=data)
            # Descriptions written before the packed form list the labels.
            held = meta.get("label_bits")
            loaded.labels = (
                LabelSet.from_text(held) if isinstance(held, str) else LabelSet(meta["labels"])
            )
            loaded.lsn = lsn
            return loaded
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, RuntimeError) as exc:
            log.warning("index file %s cannot be read (%s); rebuilding it", data, exc)
            return None

    def _rebuild(self, store: Store, txn: lmdb.Transaction, prefix: bytes, lsn: int) -> _ScopeIndex:
        labels: list[int] = []
        rows: list[NDArray[np.float32]] = []
        for _, value in scan(txn, store.table(VECTORS), prefix):
            label, vector = decode_vector_row(value)
            labels.append(label)
            rows.append(vector)
        capacity = INITIAL_CAPACITY
        while capacity < len(labels):
            capacity *= 2
        rebuilt = _ScopeIndex(self.dimensions, capacity)
        if labels:
            rebuilt.add(labels, np.vstack(rows))
        rebuilt.lsn = lsn
        rebuilt.dirty = True
        return rebuilt

    # --- changes -----------------------------------------------------------------------

    def _scope(self, prefix: bytes) -> _ScopeIndex:
        with self._lock:
            found = self._scopes.get(prefix)
            if found is None:
                found = self._scopes[prefix] = _ScopeIndex(self.dimensions)
            return found

    def apply(
        self,
        prefix: bytes,
        lsn: int,
        added: list[tuple[int, NDArray[np.float32]]],
        removed: list[int],
        replaced: list[tuple[int, NDArray[np.float32]]] | None = None,
    ) -> None:
        """Bring the index of ``prefix`` to the index write at ``lsn``: ``added`` new
        labels, ``removed`` ones, and ``replaced`` labels whose document's text changed
        (a re-index keeps the label and changes its vector)."""
        scope = self._scope(prefix)
        with scope.lock:
            if added:
                scope.add([label for label, _ in added], np.vstack([v for _, v in added]))
            if replaced:
                scope.replace([label for label, _ in replaced], np.vstack([v for _, v in replaced]))
            scope.remove(removed)
            scope.lsn = lsn
            scope.dirty = True

    def follow(self, lsn: int, changes: Iterable[Change]) -> None:
        """Bring the indexes to the logged ``changes`` of record ``lsn`` that another
        node planned (a follower of a replicated log, spec/05-durability.md §14.4):
        a ``vectors`` row put adds its label, or replaces the vector of a label the
        index holds; a ``vector_labels`` row deleted removes its label."""
        added: dict[bytes, list[tuple[int, NDArray[np.float32]]]] = {}
        removed: dict[bytes, list[int]] = {}
        for change in changes:
            if isinstance(change, Put) and change.table == VECTORS:
                prefix = change.key[:SCOPE_PREFIX_BYTES]
                added.setdefault(prefix, []).append(decode_vector_row(change.value))
            elif isinstance(change, Delete) and change.table == VECTOR_LABELS:
                prefix = change.key[:SCOPE_PREFIX_BYTES]
                label = int.from_bytes(change.key[SCOPE_PREFIX_BYTES:], "big")
                removed.setdefault(prefix, []).append(label)
        for prefix in set(added) | set(removed):
            scope = self._scope(prefix)
            puts = added.get(prefix, [])
            with scope.lock:
                known = {label for label, _ in puts if label in scope.labels}
            held = [(label, v) for label, v in puts if label in known]
            new = [(label, v) for label, v in puts if label not in known]
            self.apply(prefix, lsn, new, removed.get(prefix, []), held)

    # --- search ------------------------------------------------------------------------

    def search(self, prefix: bytes, vector: NDArray[np.float32], k: int) -> list[tuple[int, float]]:
        """Up to ``k`` ``(label, cosine distance)`` nearest to ``vector``, nearest first."""
        with self._lock:
            scope = self._scopes.get(prefix)
        if scope is None:
            return []
        with scope.lock:
            count = len(scope.labels)
            if count == 0:
                return []
            return _knn(scope.index, vector.reshape(1, -1), min(k, count))

    def total(self) -> int:
        """Vectors every index holds (deleted ones left out)."""
        with self._lock:
            scopes = list(self._scopes.values())
        return sum(len(scope.labels) for scope in scopes)

    def size(self, prefix: bytes) -> int:
        """Vectors the index of ``prefix`` holds (deleted ones left out)."""
        with self._lock:
            scope = self._scopes.get(prefix)
        return 0 if scope is None else len(scope.labels)

    def rebuild_deleted(self, store: Store) -> int:
        """Rebuild from LMDB every index holding deleted entries, and save it, so no
        forgotten vector's bytes stay in memory or on disk; return how many."""
        with self._lock:
            prefixes = [p for p, s in self._scopes.items() if s.deleted]
        self.rebuild(store, prefixes)
        return len(prefixes)

    def rebuild(self, store: Store, prefixes: Iterable[bytes]) -> None:
        """Rebuild the indexes of ``prefixes`` from LMDB's ``vectors`` and save them
        (after a purge, or an import that wrote vectors directly)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        for prefix in prefixes:
            scope = self._scope(prefix)
            with scope.lock, store.read() as txn:
                lsn = scope_state(store, txn, prefix).get("lsn", 0)
                assert isinstance(lsn, int)
                fresh = self._rebuild(store, txn, prefix, lsn)
                scope.index, scope.labels, scope.deleted = fresh.index, fresh.labels, 0
                scope.lsn = lsn
                self._save(prefix, scope)
                scope.dirty = False

    # --- saving ------------------------------------------------------------------------

    def save_dirty(self) -> int:
        """Save every index changed since its last save; return how many were saved."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with self._lock:
            scopes = list(self._scopes.items())
        saved = 0
        for prefix, scope in scopes:
            with scope.lock:
                if not scope.dirty:
                    continue
                self._save(prefix, scope)
                scope.dirty = False
                saved += 1
        return saved

    def _save(self, prefix: bytes, scope: _ScopeIndex) -> None:
        assert len(prefix) == SCOPE_PREFIX_BYTES
        data, meta_path = self._paths(prefix)
        tmp = data.with_suffix(".hnsw.tmp")
        scope.index.save_index(str(tmp))
        meta = {
            "lsn": scope.lsn,
            "dimensions": self.dimensions,
            "capacity": scope.index.get_max_elements(),
            "label_bits": scope.labels.to_text(),
            "sha256": _file_sha256(tmp),
        }
        meta_tmp = meta_path.with_suffix(".json.tmp")
        meta_tmp.write_text(json.dumps(meta), encoding="utf-8")
        # The index first, then its description: a crash between the two leaves a
        # description whose hash does not match, and the index is rebuilt.
        os.replace(tmp, data)
        os.replace(meta_tmp, meta_path)
