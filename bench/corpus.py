"""A generated world loaded into a real server, indexed, and kept for the next run.

:func:`served` gives the recall and scale suites a running server on a data
directory that holds ``bench.datagen.generate(size, seed)`` with every
statement in its vector index, plus the vectors our server indexed, one row per
statement in world order, for the SQLite peer (the same MiniLM vectors, byte
for byte).

Building one runs a real ``brain serve`` (fsync on) and writes over the wire:
ENTITY_CREATE for every entity, then STATEMENT_CREATE with an ``EntityRef``
subject and a text object (so the indexed text is exactly
:meth:`~bench.datagen.StatementSpec.text`), or STATEMENT_SUPERSEDE for a
correction once the statement it corrects is acknowledged. Requests are
pipelined over a few connections with many in flight. The load ends with the
last acknowledgement; indexing ends when the server's ``brain_embed_backlog``
is 0 and ``brain_indexed_lsn`` has reached ``brain_applied_lsn``.

Embedding 100K statements with the numpy MiniLM takes from several minutes on
a quiet two-core machine to half an hour on a busy one, so a full run
keeps what it built under :data:`CACHE` (git-ignored), keyed by size, seed and
:data:`CORPUS_FORMAT`; the recall and scale suites share it. Quick runs build in
a temporary directory every time, so they exercise the loader itself.

Once the index has caught up, the vectors are read (read-only, beside the
running server) from its ``vectors`` table (``scope ‖ doc key → label ‖
float32``): these are what its HNSW index holds.
:func:`check_vectors` re-embeds a sample in this process to show they are
MiniLM's own.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import lmdb
import numpy as np
from numpy.typing import NDArray

from bench.brainload import call_obeying
from bench.brainserver import BrainServer, brain_server
from bench.datagen import World, generate
from brain.client import AsyncClient
from brain.embed import DIMENSIONS, load_embedder
from brain.engine.index.documents import STATEMENT_DOC
from brain.engine.index.vectors import VECTORS, decode_vector_row
from brain.engine.store.env import TABLES
from brain.engine.store.scope import SCOPE_PREFIX_BYTES
from brain.wire.messages.entity_ops import EntityCreate, EntityCreateOk
from brain.wire.messages.statement_ops import (
    StatementCreate,
    StatementCreateOk,
    StatementDraft,
    StatementSupersede,
    StatementSupersedeOk,
)
from brain.wire.messages.values import EntityRef, TextValue
from brain.wire.opcodes import Opcode

__all__ = [
    "CACHE",
    "CONNECTIONS",
    "CORPUS_FORMAT",
    "INDEX_TIMEOUT_S",
    "IN_FLIGHT",
    "Corpus",
    "check_vectors",
    "served",
    "wait_indexed",
]

CACHE: Final = Path(__file__).resolve().parent / ".cache"
"""Where full runs keep loaded corpora between runs (git-ignored: hundreds of MiB)."""

CORPUS_FORMAT: Final = 1
"""Bumped when what a cached corpus holds changes, so an old one is never reused."""

CONNECTIONS: Final = 4
"""Connections the loader spreads its writes over: enough to keep the server's
readers busy on two cores, few enough that each carries a deep pipeline."""

IN_FLIGHT: Final = 512
"""Writes awaiting their answer at once: large group commits, bounded memory."""

INDEX_TIMEOUT_S: Final = 3 * 3600.0
"""Longest wait for the indexer to embed a corpus: 1M statements at ~150 texts/s
on a busy two-core machine is about two hours; past three something is stuck."""

POLL_S: Final = 0.5
"""How often the indexing wait reads the server's metrics."""

CHECK_SAMPLE: Final = 32
"""Vectors :func:`check_vectors` re-embeds: enough to catch a mismatch, cheap."""

_COMPLETE: Final = "build.json"
"""Written last by a build: a corpus directory without it is an interrupted build."""

_REQUEST_TAG: Final = b"bc"
"""Request ids are this tag, a record kind byte and the record's index (16 bytes)."""


@dataclass(frozen=True)
class Corpus:
    """A loaded and indexed world: its data directory, ids, vectors and costs."""

    size: int
    seed: int
    data_dir: Path
    world: World
    statement_ids: tuple[bytes, ...]
    """The server's id of each statement, in world order."""
    vectors: NDArray[np.float32]
    """The indexed vector of each statement, in world order, shape (size, 384)."""
    build: dict[str, Any]
    """How it was built: load and index seconds, server RSS after the load, when."""
    cached: bool
    """True when a previous run built it."""

    def index_of(self) -> dict[bytes, int]:
        """Statement id → world index."""
        return {sid: i for i, sid in enumerate(self.statement_ids)}


def _request_id(kind: int, index: int) -> bytes:
    return _REQUEST_TAG + bytes([kind]) + index.to_bytes(13, "big")


async def _load(server: BrainServer, world: World) -> tuple[list[bytes], list[bytes]]:
    """Write the world; return entity ids and statement ids, in world order."""
    clients = [
        await AsyncClient.connect(server.host, server.port, api_key=server.api_key)
        for _ in range(CONNECTIONS)
    ]
    gate = asyncio.Semaphore(IN_FLIGHT)
    try:

        async def create_entity(index: int) -> bytes:
            entity = world.entities[index]
            async with gate:
                answer = await clients[index % CONNECTIONS].call(
                    Opcode.ENTITY_CREATE,
                    EntityCreate(
                        request_id=_request_id(0, index), name=entity.name, type_=entity.type_
                    ),
                )
            assert isinstance(answer, EntityCreateOk)
            return answer.entity_id

        entity_ids = list(
            await asyncio.gather(*(create_entity(i) for i in range(len(world.entities))))
        )
        loop = asyncio.get_running_loop()
        written: list[asyncio.Future[bytes]] = [loop.create_future() for _ in world.statements]
        queue: asyncio.Queue[int] = asyncio.Queue()
        for index in range(len(world.statements)):
            queue.put_nowait(index)

        async def write(index: int) -> bytes:
            spec = world.statements[index]
            client = clients[index % CONNECTIONS]
            subject = EntityRef(entity=entity_ids[spec.subject])
            if spec.supersedes is None:
                answer = await call_obeying(
                    client,
                    Opcode.STATEMENT_CREATE,
                    StatementCreate(
                        request_id=_request_id(1, index),
                        kind=spec.kind,
                        subject=subject,
                        predicate=spec.predicate,
                        object_=TextValue(text=spec.object_),
                        valid_from=spec.valid_from,
                        event_at=spec.event_at,
                    ),
                )
                assert isinstance(answer, StatementCreateOk)
                return answer.statement_id
            # A correction needs the id of what it corrects, so it waits for that answer;
            # a worker only ever waits on an earlier statement, already being written.
            old = await written[spec.supersedes]
            answer = await call_obeying(
                client,
                Opcode.STATEMENT_SUPERSEDE,
                StatementSupersede(
                    request_id=_request_id(2, index),
                    old=old,
                    new=StatementDraft(
                        kind=spec.kind,
                        subject=subject,
                        predicate=spec.predicate,
                        object_=TextValue(text=spec.object_),
                        valid_from=spec.valid_from,
                        event_at=spec.event_at,
                    ),
                ),
            )
            assert isinstance(answer, StatementSupersedeOk)
            return answer.statement_id

        async def worker() -> None:
            while not queue.empty():
                index = queue.get_nowait()
                try:
                    written[index].set_result(await write(index))
                except BaseException as exc:
                    written[index].set_exception(exc)
                    raise

        await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
        statement_ids = [future.result() for future in written]
    finally:
        for client in clients:
            await client.close()
    return entity_ids, statement_ids


def wait_indexed(server: BrainServer, timeout: float = INDEX_TIMEOUT_S) -> None:
    """Block until the server's indexer has embedded every write it has applied."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        backlog = server.metric("brain_embed_backlog")
        indexed = server.metric("brain_indexed_lsn")
        applied = server.metric("brain_applied_lsn")
        if backlog == 0 and indexed >= applied:
            return
        time.sleep(POLL_S)
    raise RuntimeError(f"the server did not index the corpus within {timeout} s")


def _read_vectors(data_dir: Path, statement_ids: Sequence[bytes]) -> NDArray[np.float32]:
    """Each statement's stored vector, in world order, from the server's store."""
    position = {STATEMENT_DOC + sid: i for i, sid in enumerate(statement_ids)}
    vectors = np.zeros((len(statement_ids), DIMENSIONS), dtype=np.float32)
    found = np.zeros(len(statement_ids), dtype=bool)
    # Read-only, beside the running server: LMDB readers never block its writer.
    env = lmdb.open(str(data_dir / "lmdb"), readonly=True, max_dbs=len(TABLES) + 4)
    try:
        table = env.open_db(VECTORS, create=False)
        with env.begin() as txn:
            for key, raw in txn.cursor(db=table):
                index = position.get(bytes(key)[SCOPE_PREFIX_BYTES:])
                if index is not None:
                    vectors[index] = decode_vector_row(bytes(raw))[1]
                    found[index] = True
    finally:
        env.close()
    if not found.all():
        raise RuntimeError(f"{int((~found).sum())} statements have no stored vector")
    return vectors


def check_vectors(corpus: Corpus) -> dict[str, object]:
    """Re-embed a sample of statements here: the largest difference from the stored rows."""
    step = max(1, corpus.size // CHECK_SAMPLE)
    sample = list(range(0, corpus.size, step))[:CHECK_SAMPLE]
    texts = [corpus.world.statements[i].text(corpus.world) for i in sample]
    fresh = load_embedder("minilm").embed(texts)
    diff = float(np.abs(fresh - corpus.vectors[sample]).max())
    cosine = float((fresh * corpus.vectors[sample]).sum(axis=1).min())
    return {"sample": len(sample), "max_abs_diff": diff, "min_cosine": round(cosine, 6)}


def _build(
    size: int, seed: int, directory: Path, server: BrainServer
) -> tuple[list[bytes], dict[str, Any]]:
    """Load the world into ``server`` (whose data is ``directory/data``), wait for the
    index, and write the ids and vectors; ``build.json`` last, marking it complete."""
    world = generate(size, seed)
    started = time.perf_counter()
    entity_ids, statement_ids = asyncio.run(_load(server, world))
    load_s = time.perf_counter() - started
    wait_indexed(server)
    index_s = time.perf_counter() - started - load_s
    rss = server.rss_mb()
    np.save(directory / "vectors.npy", _read_vectors(directory / "data", statement_ids))
    (directory / "ids.json").write_text(
        json.dumps({"statements": [sid.hex() for sid in statement_ids]}), encoding="utf-8"
    )
    build = {
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "statements": size,
        "entities": len(entity_ids),
        "superseded": sum(1 for s in world.statements if s.supersedes is not None),
        "load_s": round(load_s, 3),
        "load_statements_per_s": round(size / load_s, 1),
        "index_wait_after_load_s": round(index_s, 3),
        "load_and_index_s": round(load_s + index_s, 3),
        "server_rss_after_load_mb": rss,
        "loader": {"connections": CONNECTIONS, "in_flight": IN_FLIGHT},
    }
    (directory / _COMPLETE).write_text(json.dumps(build, indent=2), encoding="utf-8")
    return statement_ids, build


def _open(size: int, seed: int, directory: Path, *, cached: bool) -> Corpus:
    ids = json.loads((directory / "ids.json").read_text(encoding="utf-8"))
    vectors = np.load(directory / "vectors.npy")
    return Corpus(
        size=size,
        seed=seed,
        data_dir=directory / "data",
        world=generate(size, seed),
        statement_ids=tuple(bytes.fromhex(h) for h in ids["statements"]),
        vectors=np.asarray(vectors, dtype=np.float32),
        build=json.loads((directory / _COMPLETE).read_text(encoding="utf-8")),
        cached=cached,
    )


@contextmanager
def served(
    size: int,
    seed: int,
    root: Path = CACHE,
    *,
    fresh: bool = False,
    env: Mapping[str, str] | None = None,
    embedder: str = "minilm",
) -> Iterator[tuple[Corpus, BrainServer]]:
    """The corpus of ``(size, seed)`` under ``root`` and a server running on it.

    A corpus a previous run completed is reused (unless ``fresh``) and a server
    started on it; otherwise it is built now and the server that loaded it stays
    up for the caller (no second start). A directory without ``build.json`` is
    an interrupted build and is built again from nothing. ``embedder`` is the
    server's (``retrieval.embedder``)."""
    # Another embedder's corpus holds other vectors: it is kept apart.
    suffix = "" if embedder == "minilm" else f"-{embedder}"
    directory = root / f"world-v{CORPUS_FORMAT}-{size}-seed{seed}{suffix}"
    env = {**(env or {}), "BRAIN_RETRIEVAL__EMBEDDER": embedder}
    complete = (directory / _COMPLETE).is_file()
    if fresh or not complete:
        shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True, exist_ok=True)
    with brain_server(env=env, data_dir=directory / "data") as server:
        if complete and not fresh:
            wait_indexed(server)
            yield _open(size, seed, directory, cached=True), server
        else:
            _build(size, seed, directory, server)
            yield _open(size, seed, directory, cached=False), server
