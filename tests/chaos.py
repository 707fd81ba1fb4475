"""The chaos runner: a real server under mixed load from several client processes,
killed with SIGKILL at random moments, checked after every restart.

    python -m tests.chaos --rounds 1000 [--seed N] [--save]

Each round starts the server on the same data directory, runs
:data:`CLIENTS` client processes that write (ENCODE, STATEMENT_CREATE,
ENTITY_UPDATE renaming a subject, which re-indexes its statements) and read
(RECALL, ENTITY_RESOLVE) and log every acknowledged write to a file, kills the
server at a random moment, restarts it and checks:

- every acknowledged write is there, with the content it was acknowledged
  with, and retrying it with its request id returns its first answer byte
  for byte (so it was applied exactly once);
- no statement subject holds more versions than were acknowledged for it
  (nothing duplicated);
- a renamed entity bears its last acknowledged name, or one it was being given
  when the server died;
- every few rounds, with the server stopped, the indexes agree with LMDB: the
  lexical index holds exactly the documents that have text, each indexed as
  its current text (renamed subjects included), every document is embedded or
  waiting in the queue, and each scope's HNSW index holds exactly the stored
  vectors' labels.

``--save`` writes the figures to ``bench/results/chaos.json`` after every round,
so a long run stopped early still leaves what it found. The test suite
runs three rounds (``tests/integration/test_chaos.py``).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from brain.client import Client
from brain.errors import BrainError
from brain.wire.messages.entity_ops import (
    EntityGet,
    EntityGetOk,
    EntityResolve,
    EntityResolveOk,
    EntityUpdate,
    EntityUpdateOk,
)
from brain.wire.messages.memory_ops import Encode, EncodeOk, MemoryGet, MemoryGetOk
from brain.wire.messages.recall_ops import Recall
from brain.wire.messages.statement_ops import (
    StatementCreate,
    StatementCreateOk,
    StatementGet,
    StatementGetOk,
    StatementList,
    StatementListOk,
)
from brain.wire.messages.values import EntityRef, NameRef, TextValue
from brain.wire.opcodes import Opcode
from tests.integration.conftest import ServerProcess, start_server

__all__ = ["CLIENTS", "check_indexes", "main", "run_rounds"]

CLIENTS: Final = 3
"""Client processes per round: enough to fill group commits on two cores."""

INDEX_CHECK_EVERY: Final = 5
"""Rounds between the offline index checks (each opens the database in-process)."""

KILL_AFTER_S: Final = (0.02, 0.6)
"""The random moment of the kill, after the first acknowledged write of the round."""

LOAD_START_S: Final = 15.0
"""Longest wait for the client processes to start writing (they import the client)."""

SUBJECTS: Final = 20
"""Statement subjects per client and round: several statements land on each."""

RENAME_SHARE: Final = 0.05
"""Share of a client's operations that rename one of its subjects: each re-indexes
every statement naming it, through the indexer's queue."""

EARLIER_SAMPLE: Final = 50
"""Memories of earlier rounds checked again each round (all of this round's are)."""

RESULTS: Final = Path(__file__).resolve().parents[1] / "bench" / "results" / "chaos.json"


@dataclass(frozen=True)
class _Job:
    """What one client process is told."""

    host: str
    port: int
    api_key: str
    log_path: str
    round_no: int
    index: int
    seed: int


def _client(job: _Job) -> None:
    """One client process: writes and reads until the server dies; logs what was acked."""
    host, port, api_key, log_path = job.host, job.port, job.api_key, job.log_path
    round_no, index = job.round_no, job.index
    rng = random.Random(job.seed)
    # Subjects far apart as names, so the fuzzy tier never ties two of them.
    subjects = [f"{rng.getrandbits(64):016x}" for _ in range(SUBJECTS)]
    try:
        client = Client.connect(host, port, api_key=api_key, timeout=10)
    except (BrainError, OSError):
        return
    with open(log_path, "a", encoding="utf-8") as log:
        seq = 0
        try:
            while True:
                seq += 1
                request_id = (round_no << 48 | index << 32 | seq).to_bytes(16, "big")
                roll = rng.random()
                if roll < 0.5:
                    text = f"note {request_id.hex()}"
                    made = client.call(Opcode.ENCODE, Encode(request_id=request_id, text=text))
                    assert isinstance(made, EncodeOk)
                    entry = {
                        "op": "encode",
                        "rid": request_id.hex(),
                        "text": text,
                        "id": made.memory_id.hex(),
                    }
                elif roll < 0.8:
                    subject = rng.choice(subjects)
                    value = f"fact {request_id.hex()}"
                    made_s = client.call(
                        Opcode.STATEMENT_CREATE,
                        StatementCreate(
                            request_id=request_id,
                            kind="fact",
                            subject=NameRef(name=subject),
                            predicate="said",
                            object_=TextValue(text=value),
                        ),
                    )
                    assert isinstance(made_s, StatementCreateOk)
                    entry = {
                        "op": "statement",
                        "rid": request_id.hex(),
                        "subject": subject,
                        "value": value,
                        "id": made_s.statement_id.hex(),
                    }
                elif roll < 0.8 + RENAME_SHARE:
                    slot = rng.randrange(SUBJECTS)
                    found = client.call(Opcode.ENTITY_RESOLVE, EntityResolve(name=subjects[slot]))
                    assert isinstance(found, EntityResolveOk)
                    if found.resolved is None:
                        continue  # no statement has named it yet
                    new_name = f"{rng.getrandbits(64):016x}"
                    entity = found.resolved.hex()
                    # The attempt is logged first: if the server dies before answering,
                    # the rename may or may not have been applied.
                    log.write(json.dumps({"op": "rename-try", "entity": entity, "to": new_name}))
                    log.write("\n")
                    log.flush()
                    update = EntityUpdate(request_id=request_id, id=found.resolved, name=new_name)
                    renamed = client.call(Opcode.ENTITY_UPDATE, update)
                    assert isinstance(renamed, EntityUpdateOk)
                    entry = {
                        "op": "rename",
                        "rid": request_id.hex(),
                        "entity": entity,
                        "to": new_name,
                    }
                    subjects[slot] = new_name
                else:
                    client.call(
                        Opcode.RECALL, Recall(cue=f"note fact {rng.randrange(100)}", top_k=5)
                    )
                    continue
                log.write(json.dumps(entry) + "\n")
                log.flush()
        except (BrainError, OSError, AssertionError):
            return


def _acked(log_dir: Path, pattern: str = "*.log") -> list[dict[str, str]]:
    entries: list[dict[str, str]] = []
    for path in sorted(log_dir.glob(pattern)):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.endswith("}"):
                entries.append(json.loads(line))
    return entries


def _verify(server: ServerProcess, acked: list[dict[str, str]]) -> tuple[int, int]:
    """Check every acknowledged write; return (lost, duplicated)."""
    lost = duplicated = 0
    per_subject: dict[bytes, set[str]] = {}
    with Client.connect(server.host, server.wire_port, api_key=server.credentials["api_key"]) as c:
        for entry in acked:
            if entry["op"] in ("rename", "rename-try"):
                continue  # judged per entity below
            rid = bytes.fromhex(entry["rid"])
            if entry["op"] == "encode":
                try:
                    got = c.call(Opcode.MEMORY_GET, MemoryGet(id=bytes.fromhex(entry["id"])))
                except BrainError:
                    lost += 1
                    continue
                if not isinstance(got, MemoryGetOk) or got.memory.text != entry["text"]:
                    lost += 1
                again = c.call(Opcode.ENCODE, Encode(request_id=rid, text=entry["text"]))
                if not isinstance(again, EncodeOk) or again.memory_id.hex() != entry["id"]:
                    duplicated += 1
                continue
            try:
                shown = c.call(Opcode.STATEMENT_GET, StatementGet(id=bytes.fromhex(entry["id"])))
            except BrainError:
                lost += 1
                continue
            assert isinstance(shown, StatementGetOk)
            subject = shown.statement.subject
            assert isinstance(subject, EntityRef)
            per_subject.setdefault(subject.entity, set()).add(entry["id"])
            # The retry names the subject as first written, even if it was renamed
            # since: a repeated request gets its stored answer whatever changed.
            retry = c.call(
                Opcode.STATEMENT_CREATE,
                StatementCreate(
                    request_id=rid,
                    kind="fact",
                    subject=NameRef(name=entry["subject"]),
                    predicate="said",
                    object_=TextValue(text=entry["value"]),
                ),
            )
            if not isinstance(retry, StatementCreateOk) or retry.statement_id.hex() != entry["id"]:
                duplicated += 1
        for entity, wanted in per_subject.items():
            listed = c.call(
                Opcode.STATEMENT_LIST,
                StatementList(subject=EntityRef(entity=entity), predicate="said", limit=1000),
            )
            assert isinstance(listed, StatementListOk)
            # Writes in flight at a kill may have been applied without an ack: more rows
            # than acks is possible, but each acked one must be there exactly once.
            ids = [s.id.hex() for s in listed.statements]
            if len(ids) != len(set(ids)):
                duplicated += 1
            lost += len(wanted - set(ids))
        lost += _verify_renames(c, acked)
    return lost, duplicated


def _verify_renames(client: Client, acked: list[dict[str, str]]) -> int:
    """Renames lost: an entity must bear its last acknowledged name or one tried after it
    (in flight at the kill), and the acknowledged rename must replay as a retry."""
    tried: dict[str, list[str]] = {}
    last: dict[str, dict[str, str]] = {}
    for entry in acked:  # each client's log is in order, and owns its entities
        if entry["op"] == "rename-try":
            tried.setdefault(entry["entity"], []).append(entry["to"])
        elif entry["op"] == "rename":
            last[entry["entity"]] = entry
    lost = 0
    for entity, entry in last.items():
        attempts = tried[entity]
        since = len(attempts) - 1 - attempts[::-1].index(entry["to"])
        allowed = set(attempts[since:])
        shown = client.call(Opcode.ENTITY_GET, EntityGet(id=bytes.fromhex(entity)))
        assert isinstance(shown, EntityGetOk)
        again = client.call(
            Opcode.ENTITY_UPDATE,
            EntityUpdate(
                request_id=bytes.fromhex(entry["rid"]), id=bytes.fromhex(entity), name=entry["to"]
            ),
        )
        if shown.entity.name not in allowed or not isinstance(again, EntityUpdateOk):
            lost += 1
    return lost


def check_indexes(data_dir: Path) -> list[str]:
    """With the server stopped: the problems found between the indexes and LMDB."""
    import brain
    from brain.engine.database import DatabaseOptions
    from brain.engine.index.documents import document_text
    from brain.engine.index.lexical import DOCS, doc_row, doc_row_of
    from brain.engine.index.vectors import EMBED_QUEUE, VECTOR_LABELS, VECTORS
    from brain.engine.store.scope import Scope

    problems: list[str] = []
    with brain.open(data_dir, DatabaseOptions(embedder="hashing")) as db:
        # First let the indexer take in what the killed server left queued, then
        # compare one snapshot with the indexes as they then are.
        assert db.wait_indexed(60)
        store = db._store
        with store.read() as txn:
            memories = {
                bytes(k)[:32] + b"m" + bytes(k)[32:]
                for k, v in txn.cursor(db=store.table(b"memories"))
                if b"text" in bytes(v)
            }
            statements = set()
            for key, value in txn.cursor(db=store.table(b"statements")):
                if b"subject" in bytes(value):
                    statements.add(bytes(key)[:32] + b"s" + bytes(key)[32:])
            documents = memories | statements
            lexical = {bytes(k) for k, _ in txn.cursor(db=store.table(DOCS))}
            embedded = {bytes(k) for k, _ in txn.cursor(db=store.table(VECTORS))}
            queued = {bytes(k) for k, _ in txn.cursor(db=store.table(EMBED_QUEUE))}
            labels: dict[bytes, set[int]] = {}
            for key, _ in txn.cursor(db=store.table(VECTOR_LABELS)):
                raw = bytes(key)
                labels.setdefault(raw[:32], set()).add(int.from_bytes(raw[32:], "big"))
        if lexical != documents:
            problems.append(
                f"lexical index differs from the documents by {len(lexical ^ documents)}"
            )
        if not documents <= embedded | queued:
            problems.append(
                f"{len(documents - embedded - queued)} documents neither embedded nor queued"
            )
        if embedded - documents:
            problems.append(f"{len(embedded - documents)} vectors of documents that are gone")
        # Each document is indexed as its text reads now: a rename's re-index applied
        # exactly once, whatever the kill interrupted (the clients use one scope).
        scope = Scope.of("default", None)
        prefix = scope.key()
        with store.read() as txn:
            stale = sum(
                1
                for doc in documents
                if doc.startswith(prefix)
                and doc_row_of(store, txn, scope, doc[len(prefix) :])
                != doc_row(document_text(store, txn, scope, doc[len(prefix) :]) or "")
            )
        if stale:
            problems.append(f"{stale} documents indexed with other words than their text")
        for prefix, wanted in labels.items():
            held = db.retrieval.indexes._scopes.get(prefix)
            have = set() if held is None else set(held.labels)
            if have != wanted:
                problems.append(
                    f"HNSW of scope {prefix.hex()[:12]} differs by {len(have ^ wanted)} labels"
                )
    return problems


def run_rounds(
    data_dir: Path,
    rounds: int,
    seed: int,
    log: bool = False,
    progress: Callable[[dict[str, object]], None] | None = None,
) -> dict[str, object]:
    """Run ``rounds`` kill rounds on ``data_dir``; return the figures. ``progress``, if
    given, receives the figures so far after every round (a long run that is stopped
    early still leaves what it found)."""
    rng = random.Random(seed)
    env = {**os.environ, "BRAIN_RETRIEVAL__EMBEDDER": "hashing"}
    logs = data_dir.parent / "chaos-logs"
    logs.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    lost = duplicated = total_acked = checks = 0
    problems: list[str] = []
    context = multiprocessing.get_context("spawn")
    for round_no in range(1, rounds + 1):
        server = start_server(data_dir, env=env)
        try:
            procs = [
                context.Process(
                    target=_client,
                    args=(
                        _Job(
                            server.host,
                            server.wire_port,
                            server.credentials["api_key"],
                            str(logs / f"r{round_no}-c{i}.log"),
                            round_no,
                            i,
                            rng.randrange(1 << 30),
                        ),
                    ),
                )
                for i in range(CLIENTS)
            ]
            for proc in procs:
                proc.start()
            # Kill once the load is on: after the first acknowledged write, at random.
            deadline = time.monotonic() + LOAD_START_S
            while time.monotonic() < deadline and not _acked(logs, f"r{round_no}-*.log"):
                time.sleep(0.02)
            time.sleep(rng.uniform(*KILL_AFTER_S))
            server.process.send_signal(signal.SIGKILL)
            server.process.wait()
            for proc in procs:
                proc.join(timeout=30)
        finally:
            server.stop()
        server = start_server(data_dir, env=env)
        try:
            acked = _acked(logs, f"r{round_no}-*.log")
            earlier = [e for e in _acked(logs) if e["op"] == "encode"]
            sample = rng.sample(earlier, min(len(earlier), EARLIER_SAMPLE))
            round_lost, round_dup = _verify(server, acked + sample)
            lost += round_lost
            duplicated += round_dup
            total_acked += len(acked)
        finally:
            server.stop()
        if round_no % INDEX_CHECK_EVERY == 0 or round_no == rounds:
            problems += check_indexes(data_dir)
            checks += 1
        if log:
            print(
                f"round {round_no}: acked {len(acked)} lost {lost} duplicated {duplicated} "
                f"index problems {len(problems)}",
                flush=True,
            )
        figures: dict[str, object] = {
            "rounds": round_no,
            "planned_rounds": rounds,
            "seed": seed,
            "clients": CLIENTS,
            "acknowledged_writes": total_acked,
            "lost": lost,
            "duplicated": duplicated,
            "index_checks": checks,
            "index_problems": problems,
            "seconds": round(time.monotonic() - started, 1),
        }
        if progress is not None:
            progress(figures)
    return figures


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.chaos``."""
    parser = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=random.randrange(1 << 30))
    parser.add_argument("--save", action="store_true", help="write bench/results/chaos.json")
    args = parser.parse_args(argv)

    def save(figures: dict[str, object]) -> None:
        RESULTS.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")

    with tempfile.TemporaryDirectory(prefix="brain-chaos-") as tmp:
        figures = run_rounds(
            Path(tmp) / "data",
            args.rounds,
            args.seed,
            log=True,
            progress=save if args.save else None,
        )
    print(json.dumps(figures, indent=2))
    ok = figures["lost"] == 0 and figures["duplicated"] == 0 and not figures["index_problems"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
