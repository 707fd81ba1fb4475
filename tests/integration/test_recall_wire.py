"""RECALL and EXPLAIN over the wire against a real server with the real model.

Each row of the as-of truth table of spec/03-time.md §7 is asked through RECALL;
EXPLAIN counts a case where every step removes something; the admin port's
``POST /v1/explain`` answers the same Explain object; and a server killed with ``kill -9``
answers the same recalls after its restart, its indexes recovered.
"""

from __future__ import annotations

import json
import os
import signal
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from brain.client import Client
from brain.wire.messages.memory_ops import Encode, EncodeOk
from brain.wire.messages.recall_ops import (
    ArmWeights,
    ExplainOk,
    ExplainRequest,
    Recall,
    RecallOk,
)
from brain.wire.messages.statement_ops import (
    StatementCreate,
    StatementCreateOk,
    StatementDraft,
    StatementRetract,
    StatementSupersede,
    StatementSupersedeOk,
    StatementTombstone,
)
from brain.wire.messages.values import NameRef, TextValue
from brain.wire.opcodes import Opcode
from tests.integration.conftest import ServerProcess, start_server

LEXICAL = ArmWeights(semantic=0.0, lexical=1.0, graph=0.0)


def _connect(server: ServerProcess) -> Client:
    return Client.connect(server.host, server.wire_port, api_key=server.credentials["api_key"])


def _say(
    client: Client, subject: str, predicate: str, text: str, **kw: object
) -> StatementCreateOk:
    answer = client.call(
        Opcode.STATEMENT_CREATE,
        StatementCreate(
            request_id=os.urandom(16),
            kind="fact",
            subject=NameRef(name=subject),
            predicate=predicate,
            object_=TextValue(text=text),
            **kw,  # type: ignore[arg-type]
        ),
    )
    assert isinstance(answer, StatementCreateOk)
    return answer


def _supersede(
    client: Client, old: bytes, subject: str, predicate: str, text: str
) -> StatementSupersedeOk:
    answer = client.call(
        Opcode.STATEMENT_SUPERSEDE,
        StatementSupersede(
            request_id=os.urandom(16),
            old=old,
            new=StatementDraft(
                kind="fact",
                subject=NameRef(name=subject),
                predicate=predicate,
                object_=TextValue(text=text),
            ),
        ),
    )
    assert isinstance(answer, StatementSupersedeOk)
    return answer


def _recall(client: Client, cue: str, **kw: object) -> list[bytes]:
    answer = client.call(Opcode.RECALL, Recall(cue=cue, **kw))  # type: ignore[arg-type]
    assert isinstance(answer, RecallOk)
    return [h.id for h in answer.hits]


def test_truth_table_rows_over_the_wire(server: ServerProcess) -> None:
    with _connect(server) as client:
        base = _say(client, "Tess", "saw", "a lynx in the forest")
        later = _say(client, "Tess", "saw", "a lynx by the river")
        # recorded 1000, as_of 1500 and as_of 1000: kept; recorded 2000, as_of 1500: not.
        assert base.statement_id in _recall(client, "lynx", arms=LEXICAL, as_of=later.recorded_at)
        assert base.statement_id in _recall(client, "lynx", arms=LEXICAL, as_of=base.recorded_at)
        assert later.statement_id not in _recall(
            client, "lynx", arms=LEXICAL, as_of=base.recorded_at
        )
        # ... which is only the as-of step's doing: without as_of it is found.
        assert later.statement_id in _recall(client, "lynx", arms=LEXICAL)

        early = _say(client, "Tess", "owns", "an ocelot named Ode")
        probe = _say(client, "Tess", "saw", "a lynx at noon")
        newer = _supersede(client, early.statement_id, "Tess", "owns", "an ocelot named Odette")
        after = _say(client, "Tess", "saw", "a lynx at dusk")
        # superseded at 1200, as_of 1500: not kept.
        assert early.statement_id not in _recall(client, "ocelot", as_of=after.recorded_at)
        # superseded at 2000, as_of 1500: restored.
        answer = client.call(
            Opcode.RECALL, Recall(cue="ocelot", as_of=probe.recorded_at, explain=True)
        )
        assert isinstance(answer, RecallOk)
        assert early.statement_id in [h.id for h in answer.hits]
        assert newer.statement_id not in [h.id for h in answer.hits]
        assert answer.explain is not None and answer.explain.restored_by_as_of >= 1
        # superseded at 1500, as_of 1500: not kept.
        assert early.statement_id not in _recall(client, "ocelot", as_of=newer.recorded_at)

        gone = _say(client, "Tess", "heard", "a serval at night")
        struck = _say(client, "Tess", "heard", "a serval in the reeds")
        probe2 = _say(client, "Tess", "saw", "a lynx again")
        # Before the tombstone and the retraction, the question asked below finds both.
        past = _recall(client, "serval", as_of=probe2.recorded_at)
        assert gone.statement_id in past and struck.statement_id in past
        client.call(
            Opcode.STATEMENT_TOMBSTONE,
            StatementTombstone(request_id=os.urandom(16), id=gone.statement_id),
        )
        client.call(
            Opcode.STATEMENT_RETRACT,
            StatementRetract(request_id=os.urandom(16), id=struck.statement_id),
        )
        # tombstoned at 2000, as_of 1500: restored; retracted at 2000: never.
        now = _recall(client, "serval")
        assert gone.statement_id not in now and struck.statement_id not in now
        past = _recall(client, "serval", as_of=probe2.recorded_at)
        assert gone.statement_id in past and struck.statement_id not in past


def test_explain_counts_every_step_over_the_wire(server: ServerProcess) -> None:
    with _connect(server) as client:
        client.call(Opcode.ENCODE, Encode(request_id=os.urandom(16), text="quasar notes"))
        _say(client, "Q", "seen", "quasar ended", valid_from=10, valid_to=20)
        _say(client, "Q", "seen", "quasar unsure", confidence=0.1)
        gone = _say(client, "Q", "seen", "quasar gone")
        client.call(
            Opcode.STATEMENT_TOMBSTONE,
            StatementTombstone(request_id=os.urandom(16), id=gone.statement_id),
        )
        old = _say(client, "Q", "seen", "quasar old")
        _supersede(client, old.statement_id, "Q", "seen", "quasar new")
        kept = [_say(client, "Q", "seen", f"quasar kept {i}") for i in range(3)]
        _say(client, "Q", "seen", "quasar late")
        question = ExplainRequest(
            cue="quasar",
            arms=LEXICAL,
            records=("statement",),
            valid_at=15 + 10**9,
            min_confidence=0.5,
            as_of=kept[-1].recorded_at,
            top_k=2,
        )
        answer = client.call(Opcode.EXPLAIN, question)
        assert isinstance(answer, ExplainOk)
        s = answer.explain.survivors
        assert [s.fused, s.type_, s.temporal, s.confidence] == [10, 9, 8, 7]
        assert [s.tombstone, s.supersession, s.as_of, s.limit] == [6, 5, 4, 2]

    body = {
        "namespace": "default",
        "cue": "quasar",
        "arms": {"semantic": 0.0, "lexical": 1.0, "graph": 0.0},
        "records": ["statement"],
        "valid_at": 15 + 10**9,
        "min_confidence": 0.5,
        "as_of": kept[-1].recorded_at,
        "top_k": 2,
    }
    status, shown = _admin(server, "/v1/explain", body)
    assert status == 200
    # The Explain object itself (spec/06-operations.md §4), with EXPLAIN's coverage and hits
    # beside it.
    assert sorted(shown) == [
        "coverage",
        "fusion",
        "hits",
        "restored_by_as_of",
        "survivors",
        "timings_us",
    ]
    assert shown["restored_by_as_of"] == answer.explain.restored_by_as_of
    assert shown["fusion"] == "convex"
    assert all("arm_scores" in hit for hit in shown["hits"])
    status, ranked = _admin(server, "/v1/explain", {**body, "rrf_k": 30})
    assert status == 200 and (ranked["fusion"], ranked["rrf_k"]) == ("rrf", 30)
    assert sorted(shown["timings_us"]) == sorted(
        ("embed", "semantic", "lexical", "graph", "fuse", "filter", "total")
    )
    assert shown["coverage"]["arms"] == ["lexical"]
    assert shown["coverage"]["candidates"]["lexical"] == 10
    assert shown["survivors"] == {
        "fused": 10,
        "type": 9,
        "temporal": 8,
        "confidence": 7,
        "tombstone": 6,
        "supersession": 5,
        "as_of": 4,
        "limit": 2,
    }
    assert [h["id"] for h in shown["hits"]] == [h.id.hex() for h in answer.hits]
    assert _admin(server, "/v1/explain", body, token="wrong")[0] == 401
    status, refused = _admin(server, "/v1/explain", {"cue": "x"})
    assert status == 400 and refused["field"] == "namespace"
    status, refused = _admin(
        server, "/v1/explain", {"namespace": "default", "cue": "x", "top_k": 0}
    )
    assert status == 400 and refused["field"] == "top_k"


def _admin(
    server: ServerProcess, path: str, body: dict[str, Any], token: str | None = None
) -> tuple[int, Any]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{server.admin_port}{path}", method="POST", data=json.dumps(body).encode()
    )
    request.add_header("Authorization", f"Bearer {token or server.credentials['admin_token']}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def test_recall_answers_survive_kill_9(tmp_path: Path) -> None:
    server = start_server(tmp_path / "data")
    cues = ["ocean tides", "the owl at night", "tea with honey", "who saw the comet"]
    texts = [
        "The tides of the ocean rise with the moon",
        "An owl hunted at night near the barn",
        "Green tea with a spoon of honey",
        "Mira saw the comet from the hill",
        "The barn roof needs repair before winter",
        "Honey bees swarm in late spring",
    ]
    try:
        with _connect(server) as client:
            for text in texts:
                made = client.call(Opcode.ENCODE, Encode(request_id=os.urandom(16), text=text))
                assert isinstance(made, EncodeOk)
            _say(client, "Mira", "saw", "the comet")
            before = {cue: _recall(client, cue, top_k=5) for cue in cues}
            # Acknowledged, then killed at once: the indexer may not have embedded
            # these yet, let alone saved an index file (another space, so that the
            # answers above stay comparable).
            late = set()
            for i in range(5):
                made = client.call(
                    Opcode.ENCODE,
                    Encode(request_id=os.urandom(16), text=f"A comet log entry {i}", space="late"),
                )
                assert isinstance(made, EncodeOk)
                late.add(made.memory_id)
        server.process.send_signal(signal.SIGKILL)
        server.process.wait()
        server.stop()
        server = start_server(tmp_path / "data")
        with _connect(server) as client:
            for cue in cues:
                assert _recall(client, cue, top_k=5) == before[cue], cue
            semantic = ArmWeights(semantic=1.0, lexical=0.0, graph=0.0)
            found = _recall(client, "comet log entry", top_k=10, space="late", arms=semantic)
            assert set(found) == late
    finally:
        server.stop()
