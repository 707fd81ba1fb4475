"""The cluster chaos run (spec/05-durability.md §14.8): three ``nats-server`` and three
``brain serve --cluster`` nodes of one shard under mixed load from several clients,
with the planner node, a follower node or one NATS server killed (SIGKILL) at random
each round and restarted on the same data directory and node id.

    python -m tests.cluster_chaos --rounds 200 [--seed N] [--max-s S] [--save] [--logs DIR]

Each client is a thread with its own connections. It writes (ENCODE, STATEMENT_CREATE
on subjects of its own) with a request id, to the node it believes plans the shard:
a follower's refusal names the planner ("node b1 follows shard s0, whose writes node
b0 plans") and the client retries there with the same request id; after a timeout
or a lost connection it retries at another node. It reads (MEMORY_GET of its own
memories, STATEMENT_LIST of its subjects, RECALL) at random nodes, and after some
writes checks read-your-writes on a follower: it reads the write there with the
write's LSN as the read's minimum (spec/01 §4), again until the answer shows it or
:data:`RYW_WAIT_S` passed. Every attempt goes to the history of
:mod:`tests.cluster_history`.

When the planner was killed, the takeover time is the end of the first write
acknowledged by another node after the kill, minus the kill's moment; it must stay
within :data:`TAKEOVER_BOUND_S` (spec/05 §14.3: with a 2 s term, under 6 s).

At the end the load stops, every node catches up, and every node's records (every
statement of the scope, every memory a client wrote) and the answers to a fixed set
of RECALL cues are compared across nodes; the checker then judges the whole history
against those final states. ``--save`` writes the figures to
``bench/results/cluster-chaos.json`` after every round, so a long run stopped early
still leaves what it found. The suite runs four rounds
(``tests/integration/test_cluster_chaos.py``).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final

from bench.peers.nats import NatsCluster, start_cluster
from brain.client import Client
from brain.errors import BrainError, NotFound, Unavailable
from brain.wire.messages.memory_ops import Encode, EncodeOk, MemoryGet, MemoryGetOk
from brain.wire.messages.recall_ops import ArmWeights, Recall, RecallOk
from brain.wire.messages.statement_ops import (
    StatementCreate,
    StatementCreateOk,
    StatementList,
    StatementListOk,
)
from brain.wire.messages.values import NameRef, TextValue
from brain.wire.opcodes import Opcode
from tests.cluster_history import Checked, FinalState, Op, Outcome, PlannerSpan, Seen, check
from tests.integration.conftest import ServerProcess, start_server
from tests.integration.httpcall import http_call

__all__ = ["TAKEOVER_BOUND_S", "Cluster", "main", "run_rounds"]

NODES: Final = ("b0", "b1", "b2")
"""Brain nodes of the shard: a planner and two followers."""

SHARD: Final = "s0"

TERM_S: Final = 2.0
"""The planner lease term of the run's nodes."""

TAKEOVER_BOUND_S: Final = 3 * TERM_S
"""spec/05 §14.3's bound on a takeover: the old lease runs out within one term, a
follower sees that within its next poll, and takes over with one KV write."""

ENV: Final = {"BRAIN_RETRIEVAL__EMBEDDER": "hashing", "BRAIN_CLUSTER__LEASE_TERM_S": str(TERM_S)}

CLIENTS: Final = 3
"""Client threads: several writers at once, few enough for two shared cores."""

SUBJECTS: Final = 3
"""Statement subjects per client: each STATEMENT_LIST of one covers several writes."""

MAX_SLOW_ERRORS: Final = 40
"""Failed writes kept in the record of one slow takeover: enough to see what the
clients were told, few enough to keep the record readable."""

CALL_TIMEOUT_S: Final = 10.0
"""One call's longest wait: past a takeover's bound and a follower's wait for a
minimum LSN (5 s), so a call that hangs longer is a fault."""

WRITE_GIVE_UP_S: Final = 30.0
"""How long a client retries one write before leaving it unanswered (indeterminate)."""

RYW_SHARE: Final = 0.1
"""Share of acknowledged writes whose read-your-writes a client checks on a follower."""

RYW_WAIT_S: Final = 10.0
"""Longest wait for a follower to show a write acknowledged by the planner."""

ELECTION_S: Final = 10.0
"""How long after a NATS server died and came back its streams may still be electing
a leader (seconds on nats-server 2.9): a follower then cannot read the stream, and a
read-your-writes check that ran out of time in it is counted apart, not failed (the
follower refused it, saying how far behind it was, as spec/05 §14.4 lets it)."""

ELECTION_TAKEOVER_BOUND_S: Final = TAKEOVER_BOUND_S + ELECTION_S
"""spec/05 §14.3's bound on a takeover begun while a NATS server's streams may still
be electing (a planner killed within :data:`ELECTION_S` of a NATS server's return):
neither the lease bucket nor the stream takes a write until its election ends."""

DOWN_S: Final = (0.3, 1.5)
"""How long a killed process stays down before its restart."""

LOAD_BEFORE_KILL_S: Final = (0.5, 1.5)
"""Load between a round's start and its kill."""

SETTLE_S: Final = 20.0
"""Longest wait, after a restart, for a write to be acknowledged again."""

CONVERGE_S: Final = 60.0
"""Longest wait at the end for every node to hold the same records and answers."""

RECALL_CUES: Final = ("note fact", "fact said", "note", "fact", "said note")
"""The fixed RECALL cues whose answers are compared across nodes at the end: each
matches words of the records, so the lexical arm ranks them. (A cue that matches no
word is ranked by the approximate vector arm alone, whose HNSW graph is built in
each node's own order: spec/05 §14.8.)"""

EXACT_ARMS: Final = ArmWeights(semantic=0.0)
"""The arms of the compared RECALLs: lexical and graph, exact over the same records.
The semantic arm is left out: its HNSW graph is built in each node's own order (a
restart loads the saved graph and adds the rest), so its approximate neighbours may
differ between nodes holding the same records (spec/05 §14.8)."""

PLANNER_NAMED: Final = re.compile(r"whose writes node (\S+) plans")
"""A follower's refusal of a write, naming the planner (brain/engine/database.py)."""

RECALL_BATCH: Final = 25
"""Memory keys per RECALL of the final state: a cue of a few hundred characters whose
every word matches at most the copies of one memory."""

CLIENT_PAUSE_S: Final = 0.01
"""A client's pause between calls: the load leaves the two cores room for the nodes'
followers and indexers."""

EXAMPLES: Final = 10
"""Differences between nodes kept in the figures when they did not converge."""

ROLE_POLL_S: Final = 0.05
"""How often the role watcher asks every node whether it plans (``GET /v1/cluster``):
the planner spans the checker judges planner reads within."""

ROLE_CALL_S: Final = 2.0
"""One role question's longest wait; a node that does not answer in time (killed,
busy) only leaves a gap in its spans."""

RESULTS: Final = Path(__file__).resolve().parents[1] / "bench" / "results" / "cluster-chaos.json"


class Cluster:
    """The NATS servers and brain nodes of the run, restarted in place."""

    def __init__(self, nats: NatsCluster, root: Path, logs: Path | None = None) -> None:
        self.nats = nats
        self.root = root
        self.logs = logs
        """Where each node's output is written when it stops or is killed, as
        ``<node>-<incarnation>.log`` (None: not kept)."""
        self.servers: dict[str, ServerProcess] = {}
        self.incarnation: dict[str, int] = dict.fromkeys(NODES, 0)
        self.lock = threading.Lock()

    def start(self, node: str) -> None:
        """Start (or restart) ``node`` on its own data directory."""
        server = start_server(
            self.root / node,
            "--cluster",
            ",".join(self.nats.servers),
            "--node",
            node,
            "--shard",
            SHARD,
            env=ENV,
        )
        with self.lock:
            self.incarnation[node] += 1
            self.servers[node] = server

    def kill(self, node: str) -> None:
        """SIGKILL ``node`` and wait for it to be gone."""
        with self.lock:
            server = self.servers.pop(node)
            incarnation = self.incarnation[node]
        server.process.kill()
        server.process.wait(10)
        server.stop()
        self._keep_output(node, incarnation, server)

    def _keep_output(self, node: str, incarnation: int, server: ServerProcess) -> None:
        if self.logs is not None:
            self.logs.mkdir(parents=True, exist_ok=True)
            text = "".join(server.output)
            (self.logs / f"{node}-{incarnation}.log").write_text(text, encoding="utf-8")

    def address(self, node: str) -> tuple[ServerProcess, int] | None:
        """The running process of ``node`` and its incarnation, or None while down."""
        with self.lock:
            server = self.servers.get(node)
            return None if server is None else (server, self.incarnation[node])

    def stop(self) -> None:
        """Stop every node still running."""
        with self.lock:
            servers, self.servers = dict(self.servers), {}
            incarnations = dict(self.incarnation)
        for node, server in servers.items():
            server.stop()
            self._keep_output(node, incarnations[node], server)


@dataclass(frozen=True, slots=True)
class _Role:
    """One answer of a node to the role watcher: asked at ``sent``, answered at
    ``answered``."""

    node: str
    incarnation: int
    sent: float
    answered: float
    role: str
    promotions: int


class _RoleWatch:
    """Asks every running node for its role every :data:`ROLE_POLL_S` on a thread of
    its own; :meth:`spans` turns the answers into the checker's planner spans."""

    def __init__(self, cluster: Cluster, stop: threading.Event) -> None:
        self.cluster = cluster
        self.stop = stop
        self.answers: list[_Role] = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, name="chaos-roles", daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(ROLE_POLL_S):
            for node in NODES:
                found = self.cluster.address(node)
                if found is None:
                    continue
                server, incarnation = found
                url = f"http://{server.host}:{server.admin_port}/v1/cluster"
                sent = time.monotonic()
                try:
                    status, body, _ = http_call(
                        "GET", url, token=server.credentials["admin_token"], timeout=ROLE_CALL_S
                    )
                except OSError:
                    continue
                if status != 200:
                    continue
                me = json.loads(body)["node"]
                answer = _Role(
                    node,
                    incarnation,
                    sent,
                    time.monotonic(),
                    str(me["role"]),
                    int(me["promotions"]),
                )
                with self.lock:
                    self.answers.append(answer)

    def planner(self) -> str | None:
        """The node that said last that it plans, if any said so."""
        with self.lock:
            for answer in reversed(self.answers):
                if answer.role == "planner":
                    return answer.node
        return None

    def spans(self) -> list[PlannerSpan]:
        """Each run of answers of one node's process saying, in one spell of planning
        (one ``promotions`` count), that it plans: it planned from the first answer's
        arrival to the last question's sending."""
        with self.lock:
            answers = list(self.answers)
        last: dict[tuple[str, int], _Role] = {}
        open_: dict[tuple[str, int], int] = {}
        """Each process's span still growing, by index in ``spans``."""
        spans: list[PlannerSpan] = []
        for answer in answers:
            process = (answer.node, answer.incarnation)
            before = last.get(process)
            last[process] = answer
            if (
                before is None
                or before.role != "planner"
                or answer.role != "planner"
                or before.promotions != answer.promotions
            ):
                open_.pop(process, None)
                continue
            growing = open_.get(process)
            if growing is None:
                open_[process] = len(spans)
                spans.append(
                    PlannerSpan(answer.node, answer.incarnation, before.answered, answer.sent)
                )
            else:
                spans[growing] = replace(spans[growing], end=answer.sent)
        return spans


@dataclass
class _Shared:
    """What the client threads share: the history, and what they wrote."""

    history: list[Op] = field(default_factory=list)
    memories: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Content key → (request id, text) of every memory write."""
    ryw_checked: int = 0
    ryw_unmet: list[tuple[float, float, str]] = field(default_factory=list)
    """Read-your-writes checks that ran out of time: (start, end, what)."""
    nats_down: list[tuple[float, float]] = field(default_factory=list)
    """When each NATS server kill happened and when the server came back."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)

    def record(self, op: Op) -> None:
        with self.lock:
            self.history.append(op)


class _Connections:
    """One client's connections, by node and incarnation, dropped on any fault."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.open: dict[str, tuple[int, Client]] = {}

    def get(self, node: str) -> tuple[Client, int] | None:
        found = self.cluster.address(node)
        if found is None:
            self.drop(node)
            return None
        server, incarnation = found
        held = self.open.get(node)
        if held is not None and held[0] == incarnation:
            return held[1], incarnation
        self.drop(node)
        client = Client.connect(
            server.host,
            server.wire_port,
            api_key=server.credentials["api_key"],
            timeout=CALL_TIMEOUT_S,
        )
        self.open[node] = (incarnation, client)
        return client, incarnation

    def drop(self, node: str) -> None:
        held = self.open.pop(node, None)
        if held is not None:
            held[1].close()

    def close(self) -> None:
        for node in list(self.open):
            self.drop(node)


def _outcome(error: BaseException) -> tuple[Outcome, str | None]:
    """An error's outcome for the history, and the planner it names if any."""
    if isinstance(error, Unavailable):
        named = PLANNER_NAMED.search(error.message)
        if named is not None:
            return "refused", named.group(1)  # a follower refuses before planning
    return "indeterminate", None


class _ClientThread:
    """One client: mixed writes and reads until told to stop."""

    def __init__(self, index: int, cluster: Cluster, shared: _Shared, seed: int) -> None:
        self.index = index
        self.cluster = cluster
        self.shared = shared
        self.rng = random.Random(seed)
        self.connections = _Connections(cluster)
        self.planner = NODES[0]
        self.subjects = [f"c{index}s{n}x{self.rng.getrandbits(32):08x}" for n in range(SUBJECTS)]
        self.by_subject: dict[str, list[str]] = {s: [] for s in self.subjects}
        self.my_memories: list[tuple[str, str]] = []  # (key, memory id) acknowledged
        self.seq = 0

    def run(self) -> None:
        try:
            while not self.shared.stop.wait(CLIENT_PAUSE_S):
                roll = self.rng.random()
                if roll < 0.3:
                    self._encode()
                elif roll < 0.6:
                    self._statement()
                elif roll < 0.75:
                    self._memory_get()
                elif roll < 0.9:
                    self._statement_list()
                else:
                    self._recall()
        finally:
            self.connections.close()

    def _request_id(self) -> bytes:
        self.seq += 1
        return (self.index << 64 | self.rng.getrandbits(32) << 32 | self.seq).to_bytes(16, "big")

    def _write(
        self, kind: str, request_id: bytes, key: str, call: Callable[[Client], tuple[str, int]]
    ) -> tuple[str, int, str] | None:
        """Send one write until acknowledged (at the planner the refusals name) or given
        up; return (record id, lsn, node) of its acknowledgement."""
        give_up = time.monotonic() + WRITE_GIVE_UP_S
        node = self.planner
        while time.monotonic() < give_up:
            start = time.monotonic()
            try:
                held = self.connections.get(node)
            except (BrainError, OSError):
                held = None
            if held is None:
                node = self.rng.choice([n for n in NODES if n != node])
                time.sleep(0.05)
                continue
            client, incarnation = held
            try:
                record, lsn = call(client)
            except (BrainError, OSError) as error:
                end = time.monotonic()
                outcome, named = _outcome(error)
                self.shared.record(
                    Op(
                        self.index,
                        node,
                        incarnation,
                        kind,
                        start,
                        end,
                        outcome,
                        request_id=request_id.hex(),
                        key=key,
                        error=f"{type(error).__name__}: {error}",
                    )
                )
                if named is not None and named != node:
                    node = named
                else:
                    self.connections.drop(node)
                    node = self.rng.choice([n for n in NODES if n != node])
                    time.sleep(0.1)
                continue
            self.shared.record(
                Op(
                    self.index,
                    node,
                    incarnation,
                    kind,
                    start,
                    time.monotonic(),
                    "ok",
                    request_id=request_id.hex(),
                    key=key,
                    record=record,
                    lsn=lsn,
                )
            )
            self.planner = node
            return record, lsn, node
        return None

    def _encode(self) -> None:
        request_id = self._request_id()
        key = f"m{request_id.hex()}"
        text = f"note {key}"
        with self.shared.lock:
            self.shared.memories[key] = (request_id.hex(), text)

        def call(client: Client) -> tuple[str, int]:
            made = client.call(Opcode.ENCODE, Encode(request_id=request_id, text=text))
            assert isinstance(made, EncodeOk)
            return made.memory_id.hex(), made.lsn

        acked = self._write("ENCODE", request_id, key, call)
        if acked is not None:
            self.my_memories.append((key, acked[0]))
            if self.rng.random() < RYW_SHARE:
                self._read_your_write(acked[2], key, acked[0], acked[1])

    def _statement(self) -> None:
        request_id = self._request_id()
        key = f"s{request_id.hex()}"
        subject = self.rng.choice(self.subjects)
        self.by_subject[subject].append(key)

        def call(client: Client) -> tuple[str, int]:
            made = client.call(
                Opcode.STATEMENT_CREATE,
                StatementCreate(
                    request_id=request_id,
                    kind="fact",
                    subject=NameRef(name=subject),
                    predicate="said",
                    object_=TextValue(text=f"fact {key}"),
                ),
            )
            assert isinstance(made, StatementCreateOk)
            return made.statement_id.hex(), made.lsn

        self._write("STATEMENT_CREATE", request_id, key, call)

    def _read(self, kind: str, node: str, read: Callable[[Client], tuple[Seen, ...]]) -> None:
        try:
            held = self.connections.get(node)
        except (BrainError, OSError):
            return
        if held is None:
            return
        client, incarnation = held
        start = time.monotonic()
        try:
            seen = read(client)
        except (BrainError, OSError) as error:
            self.connections.drop(node)
            self.shared.record(
                Op(
                    self.index,
                    node,
                    incarnation,
                    kind,
                    start,
                    time.monotonic(),
                    "indeterminate",
                    error=f"{type(error).__name__}: {error}",
                )
            )
            return
        self.shared.record(
            Op(self.index, node, incarnation, kind, start, time.monotonic(), "ok", seen=seen)
        )

    def _memory_get(self) -> None:
        if not self.my_memories:
            return
        key, memory_id = self.rng.choice(self.my_memories)
        self._read("MEMORY_GET", self.rng.choice(NODES), _get_memory(key, memory_id))

    def _statement_list(self) -> None:
        subject = self.rng.choice(self.subjects)
        keys = tuple(self.by_subject[subject])
        self._read("STATEMENT_LIST", self.rng.choice(NODES), _list_subject(subject, keys))

    def _recall(self) -> None:
        cue = self.rng.choice(RECALL_CUES)

        def read(client: Client) -> tuple[Seen, ...]:
            client.call(Opcode.RECALL, Recall(cue=cue, top_k=5))
            return ()

        self._read("RECALL", self.rng.choice(NODES), read)

    def _read_your_write(self, planner: str, key: str, memory_id: str, lsn: int) -> None:
        """Read the memory its planner acknowledged at ``lsn`` from a follower, with
        that LSN as the read's minimum (spec/01 §4): the follower answers once it
        applied it, or refuses after its bound; tried again until :data:`RYW_WAIT_S`.
        Each answer goes into the history, where the checker holds it to its minimum."""
        follower = self.rng.choice([n for n in NODES if n != planner])
        began = time.monotonic()
        deadline = began + RYW_WAIT_S
        read = _get_memory(key, memory_id, min_lsn=lsn)
        process = self.cluster.address(follower)
        while time.monotonic() < deadline and not self.shared.stop.is_set():
            try:
                held = self.connections.get(follower)
            except (BrainError, OSError):
                held = None
            if held is not None:
                client, incarnation = held
                start = time.monotonic()
                try:
                    seen = read(client)
                except (BrainError, OSError):
                    self.connections.drop(follower)
                else:
                    self.shared.record(
                        Op(
                            self.index,
                            follower,
                            incarnation,
                            "MEMORY_GET",
                            start,
                            time.monotonic(),
                            "ok",
                            seen=seen,
                            min_lsn=lsn,
                        )
                    )
                    if seen[0].record is not None:
                        with self.shared.lock:
                            self.shared.ryw_checked += 1
                        return
            time.sleep(0.05)
        # A follower killed or restarted meanwhile is no failure of its reads.
        running = self.cluster.address(follower)
        same = process is not None and running is not None and running[1] == process[1]
        if not self.shared.stop.is_set() and same:
            what = f"{follower} did not show {key} ({memory_id}, LSN {lsn}) within {RYW_WAIT_S} s"
            with self.shared.lock:
                self.shared.ryw_unmet.append((began, time.monotonic(), what))


def _get_memory(
    key: str, memory_id: str, min_lsn: int | None = None
) -> Callable[[Client], tuple[Seen, ...]]:
    def read(client: Client) -> tuple[Seen, ...]:
        request = MemoryGet(id=bytes.fromhex(memory_id), min_lsn=min_lsn)
        try:
            got = client.call(Opcode.MEMORY_GET, request)
        except NotFound:
            return (Seen(key, None),)
        assert isinstance(got, MemoryGetOk)
        return (Seen(key, got.memory.id.hex() if got.memory.text == f"note {key}" else None),)

    return read


def _list_subject(subject: str, keys: tuple[str, ...]) -> Callable[[Client], tuple[Seen, ...]]:
    def read(client: Client) -> tuple[Seen, ...]:
        shown = dict(_statements(client, subject))
        return tuple(Seen(key, shown.get(key)) for key in keys) + tuple(
            Seen(key, record) for key, record in shown.items() if key not in keys
        )

    return read


def _statements(client: Client, subject: str | None = None) -> Iterator[tuple[str, str]]:
    """(content key, statement id) of every statement of the scope (of ``subject``)."""
    cursor = None
    while True:
        listed = client.call(
            Opcode.STATEMENT_LIST,
            StatementList(
                subject=None if subject is None else NameRef(name=subject),
                predicate="said",
                limit=1000,
                cursor=cursor,
            ),
        )
        assert isinstance(listed, StatementListOk)
        for statement in listed.statements:
            value = statement.object_
            if isinstance(value, TextValue) and value.text.startswith("fact "):
                yield value.text.removeprefix("fact "), statement.id.hex()
        if listed.cursor is None:
            return
        cursor = listed.cursor


def _final_state(client: Client, memories: dict[str, tuple[str, str]]) -> dict[str, list[str]]:
    """One node's records: every statement, and the memories bearing each written text
    (found by RECALL of the texts' keys, a word no other record holds, a batch at a
    time)."""
    state: dict[str, list[str]] = {}
    for key, record in _statements(client):
        state.setdefault(key, []).append(record)
    keys = sorted(memories)
    for at in range(0, len(keys), RECALL_BATCH):
        batch = {memories[key][1]: key for key in keys[at : at + RECALL_BATCH]}
        cue = " ".join(key for key in batch.values())
        found = client.call(
            Opcode.RECALL, Recall(cue=cue, top_k=4 * RECALL_BATCH, records=("memory",))
        )
        assert isinstance(found, RecallOk)
        for hit in found.hits:
            if hit.memory is not None and hit.memory.text in batch:
                state.setdefault(batch[hit.memory.text], []).append(hit.id.hex())
    return state


def _answers(client: Client) -> list[list[str]]:
    """The ids each fixed RECALL cue answers, in rank order."""
    answers = []
    for cue in RECALL_CUES:
        found = client.call(Opcode.RECALL, Recall(cue=cue, top_k=10, arms=EXACT_ARMS))
        assert isinstance(found, RecallOk)
        answers.append([hit.id.hex() for hit in found.hits])
    return answers


def _converge(
    cluster: Cluster, memories: dict[str, tuple[str, str]]
) -> tuple[dict[str, FinalState], list[str], float]:
    """Every node's final state, once they agree (statements and RECALL answers) or the
    bound runs out; what still differed (empty: they agreed), and how long it took."""
    started = time.monotonic()
    deadline = started + CONVERGE_S
    while True:
        differ: list[str] = []
        lists: dict[str, dict[str, list[str]]] = {}
        answers: dict[str, list[list[str]]] = {}
        for node in NODES:
            with _connect(cluster, node) as client:
                lists[node] = _final_state(client, {})
                answers[node] = _answers(client)
        for node in NODES[1:]:
            if lists[node] != lists[NODES[0]]:
                differ.append(f"statements of {node} and {NODES[0]}")
            for cue, one, other in zip(RECALL_CUES, answers[NODES[0]], answers[node], strict=True):
                if one != other:
                    differ.append(f"RECALL {cue!r} on {NODES[0]} {one} and on {node} {other}")
        if not differ or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    states: dict[str, FinalState] = {}
    for node in NODES:
        with _connect(cluster, node) as client:
            states[node] = _final_state(client, memories)
    return states, differ, time.monotonic() - started


def _connect(cluster: Cluster, node: str) -> Client:
    found = cluster.address(node)
    assert found is not None, f"node {node} is down"
    server = found[0]
    return Client.connect(server.host, server.wire_port, api_key=server.credentials["api_key"])


@contextmanager
def _running(root: Path, logs: Path | None) -> Iterator[Cluster]:
    with start_cluster(root / "nats") as nats:
        cluster = Cluster(nats, root, logs)
        try:
            for node in NODES:  # b0 first: it takes the lease
                cluster.start(node)
            yield cluster
        finally:
            cluster.stop()


def _acked_since(history: list[Op], moment: float, lock: threading.Lock) -> list[Op]:
    with lock:
        return [op for op in history if op.is_write and op.outcome == "ok" and op.start > moment]


def _wait_acked(shared: _Shared, moment: float, timeout: float) -> Op | None:
    """The first acknowledged write sent after ``moment`` (so planned after it too),
    waiting up to ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        acked = _acked_since(shared.history, moment, shared.lock)
        if acked:
            return min(acked, key=lambda op: op.end)
        time.sleep(0.02)
    return None


def _current_planner(shared: _Shared, roles: _RoleWatch) -> str:
    """The node that said last it plans; before any did, the node of the last
    acknowledgement."""
    said = roles.planner()
    if said is not None:
        return said
    with shared.lock:
        acked = [op for op in shared.history if op.is_write and op.outcome == "ok"]
    return max(acked, key=lambda op: op.end).node if acked else NODES[0]


@dataclass
class _Tally:
    """What the rounds so far did: kills by kind, takeover times, rounds that stuck."""

    kinds: dict[str, int] = field(default_factory=lambda: {"planner": 0, "follower": 0, "nats": 0})
    takeovers: list[float] = field(default_factory=list)
    takeovers_in_elections: list[float] = field(default_factory=list)
    """Takeovers of planners killed within :data:`ELECTION_S` of a NATS server's return."""
    stuck: list[str] = field(default_factory=list)
    slow: list[dict[str, object]] = field(default_factory=list)
    """Each takeover over its bound: the round, the node killed, and the failed
    writes between the kill and the first acknowledgement (what the clients saw)."""


def _slow_takeover(
    shared: _Shared, round_no: int, node: str, killed_at: float, first: Op
) -> dict[str, object]:
    """What a takeover over its bound looked like to the clients, for its record."""
    with shared.lock:
        seen = [op for op in shared.history if killed_at <= op.end <= first.end and op.is_write]
    return {
        "round": round_no,
        "killed": node,
        "took_s": round(first.end - killed_at, 3),
        "acknowledged_by": first.node,
        "failed_writes": [
            f"+{op.end - killed_at:.2f}s {op.node}: {(op.error or op.outcome)[:160]}"
            for op in seen
            if op.outcome != "ok"
        ][:MAX_SLOW_ERRORS],
    }


def _one_round(
    cluster: Cluster,
    shared: _Shared,
    roles: _RoleWatch,
    *,
    rng: random.Random,
    round_no: int,
    tally: _Tally,
) -> None:
    """Kill a random process under load, restart it, and wait for writes again."""
    time.sleep(rng.uniform(*LOAD_BEFORE_KILL_S))
    kind = rng.choice(("planner", "follower", "nats"))
    tally.kinds[kind] += 1
    if kind == "nats":
        victim = cluster.nats.nodes[rng.randrange(len(cluster.nats.nodes))]
        killed_at = time.monotonic()
        cluster.nats.kill(victim)
        time.sleep(rng.uniform(*DOWN_S))
        cluster.nats.start(victim)
        with shared.lock:
            shared.nats_down.append((killed_at, time.monotonic()))
    else:
        planner = _current_planner(shared, roles)
        others = [n for n in NODES if n != planner]
        node = planner if kind == "planner" else rng.choice(others)
        killed_at = time.monotonic()
        cluster.kill(node)
        if kind == "planner":
            # Takeover: the first write another node acknowledges after the kill.
            first = _wait_acked(shared, killed_at, ELECTION_TAKEOVER_BOUND_S * 2)
            if first is None:
                tally.stuck.append(f"round {round_no}: no takeover after killing {node}")
            else:
                with shared.lock:
                    electing = _in_election(killed_at, first.end, shared.nats_down)
                took = first.end - killed_at
                (tally.takeovers_in_elections if electing else tally.takeovers).append(took)
                if took > (ELECTION_TAKEOVER_BOUND_S if electing else TAKEOVER_BOUND_S):
                    tally.slow.append(_slow_takeover(shared, round_no, node, killed_at, first))
        else:
            time.sleep(rng.uniform(*DOWN_S))
        cluster.start(node)
    if _wait_acked(shared, time.monotonic(), SETTLE_S) is None:
        tally.stuck.append(f"round {round_no}: no write acknowledged after the {kind} kill")


def run_rounds(
    root: Path,
    rounds: int,
    seed: int,
    progress: Callable[[dict[str, object]], None] | None = None,
    max_s: float | None = None,
    *,
    logs: Path | None = None,
) -> dict[str, object]:
    """Run ``rounds`` kill rounds in ``root``; return the figures. ``progress``, if
    given, receives the figures of the rounds so far after every round; with
    ``max_s``, no round starts after that many seconds (the final checks still run);
    with ``logs``, every node's output is kept there."""
    rng = random.Random(seed)
    shared = _Shared()
    started = time.monotonic()
    tally = _Tally()
    with _running(root, logs) as cluster:
        threads = [
            threading.Thread(
                target=_ClientThread(i, cluster, shared, rng.randrange(1 << 30)).run,
                name=f"chaos-client-{i}",
            )
            for i in range(CLIENTS)
        ]
        roles = _RoleWatch(cluster, shared.stop)
        roles.thread.start()
        for thread in threads:
            thread.start()
        try:
            if _wait_acked(shared, started, SETTLE_S) is None:
                raise RuntimeError("no write was acknowledged after the cluster started")
            done = 0
            for round_no in range(1, rounds + 1):
                if max_s is not None and time.monotonic() - started > max_s:
                    break
                _one_round(cluster, shared, roles, rng=rng, round_no=round_no, tally=tally)
                done = round_no
                if progress is not None:
                    progress(_figures(round_no, tally, shared, started))
        finally:
            shared.stop.set()
            for thread in threads:
                thread.join(WRITE_GIVE_UP_S + CALL_TIMEOUT_S * 2)
            roles.thread.join(ROLE_CALL_S * len(NODES) + 1)
        states, differ, converge_s = _converge(cluster, shared.memories)
    figures = _figures(done, tally, shared, started)
    figures["rounds_asked"] = rounds
    spans = roles.spans()
    figures.update(_checked(check(shared.history, states, spans)))
    figures["planner_spans"] = len(spans)
    figures["planner_span_s"] = round(sum(span.end - span.start for span in spans), 1)
    figures["converged"] = not differ
    figures["still_differ"] = differ[:EXAMPLES]
    figures["converge_s"] = round(converge_s, 2)
    figures["records_per_node"] = {n: sum(len(v) for v in s.values()) for n, s in states.items()}
    figures["run_s"] = round(time.monotonic() - started, 1)
    figures["seed"] = seed
    if progress is not None:
        progress(figures)
    return figures


def _in_election(start: float, end: float, down: list[tuple[float, float]]) -> bool:
    """Whether ``start``..``end`` overlaps a NATS server's death and the
    :data:`ELECTION_S` after its return (``down``: each kill's and return's moment)."""
    return any(killed <= end and back + ELECTION_S >= start for killed, back in down)


def _figures(rounds: int, tally: _Tally, shared: _Shared, started: float) -> dict[str, object]:
    with shared.lock:
        ops = list(shared.history)
        ryw_checked, unmet = shared.ryw_checked, list(shared.ryw_unmet)
        down = list(shared.nats_down)
    # A follower that waited out a stream leader election after a NATS server's
    # death answered honestly that it was behind; anything else is a failure.
    electing = [what for start, end, what in unmet if _in_election(start, end, down)]
    failed = [what for _, _, what in unmet if what not in electing]
    takeovers, in_elections = tally.takeovers, tally.takeovers_in_elections
    return {
        "rounds": rounds,
        "rounds_by_kind": dict(tally.kinds),
        "clients": CLIENTS,
        "lease_term_s": TERM_S,
        "takeover_bound_s": TAKEOVER_BOUND_S,
        "takeovers": len(takeovers),
        "takeover_max_s": round(max(takeovers), 3) if takeovers else None,
        "takeover_p50_s": round(statistics.median(takeovers), 3) if takeovers else None,
        "takeovers_over_bound": sum(t > TAKEOVER_BOUND_S for t in takeovers),
        "takeover_in_elections_bound_s": ELECTION_TAKEOVER_BOUND_S,
        "takeovers_in_elections": len(in_elections),
        "takeover_in_elections_max_s": round(max(in_elections), 3) if in_elections else None,
        "takeovers_in_elections_over_bound": sum(
            t > ELECTION_TAKEOVER_BOUND_S for t in in_elections
        ),
        "stuck": list(tally.stuck),
        "slow_takeovers": list(tally.slow),
        "attempts": len(ops),
        "write_attempts": sum(op.is_write for op in ops),
        "read_your_writes_checked": ryw_checked,
        "read_your_writes_failed": failed,
        "read_your_writes_unmet_in_elections": electing,
        "elapsed_s": round(time.monotonic() - started, 1),
    }


def _checked(found: Checked) -> dict[str, object]:
    return {
        "writes_acknowledged": found.writes_acknowledged,
        "writes_refused": found.writes_refused,
        "writes_indeterminate": found.writes_indeterminate,
        "lost": found.lost,
        "duplicated": found.duplicated,
        "reads_checked": found.reads_checked,
        "planner_reads": found.planner_reads,
        "min_lsn_reads": found.min_lsn_reads,
        "violations": len(found.violations),
        "violations_by_rule": found.by_rule(),
        "violation_examples": found.examples(),
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.cluster_chaos``: the long form of the run."""
    parser = argparse.ArgumentParser(prog="python -m tests.cluster_chaos")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument(
        "--max-s", type=float, default=None, help="start no round after this many seconds"
    )
    parser.add_argument("--save", action="store_true", help=f"write the figures to {RESULTS}")
    parser.add_argument(
        "--logs", type=Path, default=None, help="keep every node's output in this directory"
    )
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)

    def progress(figures: dict[str, object]) -> None:
        print(json.dumps(figures), flush=True)
        if args.save:
            RESULTS.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")

    with tempfile.TemporaryDirectory(prefix="brain-cluster-chaos-") as root:
        figures = run_rounds(Path(root), args.rounds, seed, progress, args.max_s, logs=args.logs)
    ok = (
        figures["lost"] == figures["duplicated"] == figures["violations"] == 0
        and figures["converged"] is True
        and figures["takeovers_over_bound"] == figures["takeovers_in_elections_over_bound"] == 0
        and not figures["stuck"]
        and not figures["read_your_writes_failed"]
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
