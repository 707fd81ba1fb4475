"""The ``brain`` data verbs against a real server, run as a user runs them.

Each verb runs as its own process (``python -m brain …``), finds the server
through ``BRAIN_PORT`` and its key in the data directory's ``credentials.toml``
(``BRAIN_DATA``), and is read back through ``--json``. The Alice example of
spec/03-time.md §1 goes end to end; then memories, recall, entities, relations,
reviews, the change feed, a transaction file, and the exit codes and messages
of the failures people meet first.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest

from tests.integration.conftest import ServerProcess, start_server

FEB_1: Final = 1_706_745_600_000_000_000
"""2024-02-01T00:00:00Z: Alice's move to Globex."""

CLI_TIMEOUT_S: Final = 30
"""Longest one verb may take: a process start and one or two round trips."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One server for the module, with the fast hashing embedder."""
    proc = start_server(
        tmp_path_factory.mktemp("cli") / "data", env={"BRAIN_RETRIEVAL__EMBEDDER": "hashing"}
    )
    try:
        yield proc
    finally:
        proc.stop()


def _env(server: ServerProcess, **extra: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("BRAIN_") or key == "BRAIN_RETRIEVAL__EMBEDDER"
    }
    env.update(
        BRAIN_HOST=server.host,
        BRAIN_PORT=str(server.wire_port),
        BRAIN_DATA=str(server.data_dir),
        TZ="UTC",
        COLUMNS="200",
    )
    env.update(extra)
    return env


def brain(
    server: ServerProcess,
    line: str,
    *args: str,
    expect: int = 0,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``brain LINE ARGS`` (LINE split as a shell would) and check its exit code."""
    done = subprocess.run(
        [sys.executable, "-m", "brain", *shlex.split(line), *args],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        env=env if env is not None else _env(server),
        check=False,
    )
    assert done.returncode == expect, (done.returncode, done.stdout, done.stderr)
    return done


def brain_json(server: ServerProcess, line: str, *args: str) -> Any:
    """Run ``brain LINE ARGS --json`` and parse its one JSON document."""
    return json.loads(brain(server, line, *args, "--json").stdout)


def _employers(answer: Any) -> list[str]:
    return [row["object"]["text"] for row in answer["statements"]]


def test_alice_example(server: ServerProcess) -> None:
    first = brain_json(
        server, "statement add Alice works_at Acme --subject-type person --valid-from 2022-03-01"
    )
    april = str(first["recorded_at"])  # on the record axis, "April 1" is before we learned more
    old = first["statement_id"]
    # In May we learn that Alice moved to Globex on February 1.
    learned = brain_json(
        server, f"statement supersede {old} Alice works_at Globex --valid-from 2024-02-01T00:00Z"
    )
    assert learned["superseded"] == old and learned["version"] == 2
    alice = "statement list --subject Alice --predicate works_at"

    # What did we believe on April 1?
    assert _employers(brain_json(server, alice, "--as-of", april)) == ["Acme"]
    # What was true on April 1?
    assert _employers(brain_json(server, alice, "--valid-at", "2024-04-01")) == ["Globex"]
    # On April 1, what did we believe was true on April 1? The move was learned in May.
    then = brain_json(server, alice, "--valid-at", "2024-04-01", "--as-of", april)
    assert _employers(then) == ["Acme"] and "valid_to" not in then["statements"][0]
    # What was true on January 15, superseded rows included? The old job, ended Feb 1.
    jan = brain_json(server, alice, "--valid-at", "2024-01-15", "--include-superseded")
    assert _employers(jan) == ["Acme"] and jan["statements"][0]["valid_to"] == FEB_1

    versions = brain_json(server, f"history {learned['statement_id']}")["versions"]
    assert [v["version"] for v in versions] == [1, 2]
    assert versions[0]["superseded_by"] == versions[1]["id"] == learned["statement_id"]
    assert versions[0]["chain_root"] == versions[1]["chain_root"] == old

    # The old statement's validity as believed on April 1: still open.
    believed = brain_json(server, f"statement get {old} --as-of {april}")["statement"]
    assert "valid_to" not in believed and believed["object"] == {"text": "Acme"}
    now = brain_json(server, f"statement get {old}")["statement"]
    assert now["valid_to"] == FEB_1 and now["superseded_by"] == learned["statement_id"]

    # The same questions, as a person reads them.
    table = brain(server, alice, "--valid-at", "2024-04-01").stdout
    assert "Globex" in table and "Acme" not in table and "current" in table
    # Believed on April 1: Acme, current then, with its validity still open then.
    then_table = brain(server, alice, "--as-of", april).stdout
    assert "Acme" in then_table and "current" in then_table
    assert "superseded" not in then_table and "2022-03-01 00:00:00+00:00 → open" in then_table
    shown = brain(server, f"history {old}").stdout
    assert "superseded" in shown and "2024-02-01 00:00:00+00:00" in shown


def test_memory_add_get_forget(server: ServerProcess) -> None:
    text = "Alice said she prefers tea over coffee."
    made = brain_json(
        server, "memory add", text, "--occurred-at=2024-05-02T10:00Z", "--context=channel=chat"
    )
    assert made["deduplicated"] is False and len(bytes.fromhex(made["sha256"])) == 32
    again = brain_json(server, "memory add", text)
    assert again["deduplicated"] is True and again["memory_id"] == made["memory_id"]
    assert brain(server, "memory add -q", text).stdout == made["memory_id"] + "\n"

    memory = brain_json(server, f"memory get {made['memory_id']}")["memory"]
    assert memory["text"] == text and memory["context"] == "channel=chat"
    assert memory["occurred_at"] == 1_714_644_000_000_000_000

    assert brain_json(server, f"forget {made['memory_id']} --hard")["already_forgotten"] is False
    gone = brain_json(server, f"memory get {made['memory_id']}")["memory"]
    assert gone["forgotten"] == "hard" and "text" not in gone
    refused = brain(server, "memory add", text, expect=1)
    assert "FORGOTTEN" in refused.stderr and "--override-forgotten" in refused.stderr


def test_recall_json_and_render(server: ServerProcess) -> None:
    brain(server, "memory add 'The quarterly report is due on Friday.' --space recall")
    brain(server, "statement add Bob owns 'quarterly report' --space recall")
    answer = brain_json(
        server,
        "recall 'quarterly report' --space recall --top-k 5 "
        "--arms semantic=1,lexical=1,graph=0 --explain",
    )
    assert answer["abstained"] is False
    assert {hit["record"] for hit in answer["hits"]} == {"memory", "statement"}
    assert answer["coverage"]["space"] == "recall" and "graph" not in answer["coverage"]["arms"]
    assert answer["explain"]["survivors"]["fused"] >= 2
    rendered = brain(server, "recall 'quarterly report' --space recall --render").stdout
    assert "— data, not instructions]" in rendered and "quarterly report" in rendered
    assert "\nBob owns quarterly report\n" in rendered  # the subject by its name, not its id
    empty = brain_json(server, "recall 'quarterly report' --space empty-space")
    assert empty["abstained"] is True and empty["hits"] == []
    explained = brain(server, "explain 'quarterly report' --space recall").stdout
    assert "survivors per step" in explained and "timings" in explained
    assert "fusion convex" in explained
    ranked = brain(
        server,
        "explain 'quarterly report' --space recall --fusion rrf --rrf-k 30 --no-context "
        "--no-named-time",
    ).stdout
    assert "fusion rrf, rrf_k 30" in ranked
    held = brain_json(server, "recall 'quarterly report' --space recall --min-relevance 0.9999")
    assert held["abstained"] is True and held["coverage"]["relevance_floor"] == 0.9999
    refused = brain(server, "recall x --space recall --min-relevance 2", expect=2)
    assert "min-relevance" in refused.stderr


def test_entities_and_relations(server: ServerProcess) -> None:
    eve = brain(
        server,
        "entity add 'Eve Example' --type person --alias Evie --attr team=infra "
        "--attr level:=3 -q --space graph",
    ).stdout.strip()
    resolved = brain_json(server, "entity resolve evie --space graph")
    assert resolved["resolved"] == eve and resolved["matches"][0]["tier"] == "alias"
    entity = brain_json(server, "entity get Evie --space graph")["entity"]
    assert entity["id"] == eve and entity["attributes"] == {"team": "infra", "level": 3}

    edge = brain_json(server, f"relation add works_with Frank id:{eve} --space graph")
    walk = brain_json(server, "relation traverse Frank --depth 1 --space graph")
    assert eve in {node["entity_id"] for node in walk["nodes"]}
    assert [e["id"] for e in walk["edges"]] == [edge["relation_id"]]
    listed = brain_json(server, f"relation list {eve} --direction in --space graph")
    assert [r["id"] for r in listed["relations"]] == [edge["relation_id"]]
    shown = brain(server, "relation traverse Frank --space graph").stdout
    assert "Eve Example" in shown and "works_with" in shown


def test_entity_history_and_reads_as_of(server: ServerProcess) -> None:
    """A rename leaves the entity as it was believed before: `entity get --as-of` finds
    it by its old name, and `entity history` shows both versions."""
    gus = brain(server, "entity add Gus -q --space hist").stdout.strip()
    brain(server, f"entity update {gus} --name Gustav -q --space hist")
    versions = brain_json(server, f"entity history {gus} --space hist")["versions"]
    assert [v["name"] for v in versions] == ["Gus", "Gustav"]
    first = versions[0]["recorded_at"]
    assert versions[0]["record_invalidated_at"] == versions[1]["recorded_at"]
    then = brain_json(server, f"entity get Gus --as-of {first} --space hist")["entity"]
    assert then["id"] == gus and then["name"] == "Gus"
    assert brain_json(server, f"entity resolve Gus --as-of {first} --space hist")["resolved"] == gus
    assert brain_json(server, "entity resolve Gus --space hist").get("resolved") is None
    shown = brain(server, f"entity history {gus} --space hist").stdout
    assert "Gus" in shown and "Gustav" in shown
    # The version a view shows says when it was believed, and until when.
    view = brain(server, f"entity get {gus} --as-of {first} --space hist").stdout
    assert "recorded at" in view and "believed until" in view
    assert "believed until" not in brain(server, f"entity get {gus} --space hist").stdout


def test_review_list_and_decide(server: ServerProcess) -> None:
    assert brain_json(server, "schema put --predicate likes:fact --space reviews")["version"] == 1
    schema = brain_json(server, "schema get --space reviews")
    assert schema["predicates"] == [{"name": "likes", "kind": "fact", "stateful": False}]
    tea = brain(server, "statement add Zoe likes tea -q --space reviews").stdout.strip()
    coffee = brain(server, "statement add Zoe likes coffee -q --space reviews").stdout.strip()
    items = brain_json(server, "review list --space reviews")["items"]
    assert [(i["kind"], i["records"]) for i in items] == [("contradiction", [tea, coffee])]
    decided = brain_json(server, f"review decide {items[0]['review_id']} keep_both --space reviews")
    assert decided["lsn"] > 0
    assert brain_json(server, "review list --space reviews")["items"] == []

    # An ambiguous name: merge --into names the candidate it means.
    twins = [
        brain(server, "entity add 'Lee Park' -q --space reviews").stdout.strip() for _ in range(2)
    ]
    said = brain(server, "statement add 'Lee Park' likes tea -q --space reviews").stdout.strip()
    (item,) = brain_json(server, "review list --space reviews")["items"]
    review = item["review_id"]
    brain(server, f"review decide {review} merge --space reviews", expect=1)  # into is required
    brain(server, f"review decide {review} merge --into {twins[1]} -q --space reviews")
    shown = brain_json(server, f"statement get {said} --space reviews")["statement"]
    assert shown["subject"] == {"entity": twins[1]}


def test_statement_add_names_the_review_it_opened(server: ServerProcess) -> None:
    brain(server, "schema put --predicate drinks:fact --space opened")
    first = brain(server, "statement add Yan drinks tea --space opened")
    assert "review" not in first.stdout + first.stderr  # nothing contradicted yet
    second = brain(server, "statement add Yan drinks coffee --space opened")
    items = brain_json(server, "review list --space opened")["items"]
    assert [i["kind"] for i in items] == ["contradiction"]
    review = items[0]["review_id"]
    assert f"review {review} opened" in second.stdout
    assert f"decide it: brain review decide {review} keep_both|supersede|reject_new" in (
        second.stdout
    )
    # --json stays the answer alone; the remark goes to standard error.
    third = brain(server, "statement add Yan drinks water --space opened --json")
    assert set(json.loads(third.stdout)) >= {"statement_id", "lsn"}
    assert "review " in third.stderr and "opened" in third.stderr

    # A name two entities answer to: the statement waits for the name's review.
    for _ in range(2):
        brain(server, "entity add Sam --type person --space opened")
    waiting = brain(server, "statement add Sam drinks tea --subject-type person --space opened")
    named = brain_json(server, "review list --space opened")["items"]
    pending = [i["review_id"] for i in named if i["kind"] == "ambiguous_entity"]
    assert len(pending) == 1 and f"review {pending[0]}: the subject's name is ambiguous" in (
        waiting.stdout
    )
    assert f"brain review decide {pending[0]} merge|distinct" in waiting.stdout
    related = brain(server, "relation add knows Sam Yan --from-type person --space opened")
    assert f"review {pending[0]}: the FROM's name is ambiguous; the relation waits" in (
        related.stdout
    )


def test_follow_prints_the_changes(server: ServerProcess) -> None:
    first = brain_json(server, "memory add 'first change' --space feed")
    second = brain_json(server, "memory add 'second change' --space feed")
    done = brain(server, "follow --from-lsn 1 --max-events 2 --json --space feed")
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(e["op"], e["record"], e["id"]) for e in events] == [
        ("create", "memory", first["memory_id"]),
        ("create", "memory", second["memory_id"]),
    ]
    assert events[0]["lsn"] == first["lsn"] and "resume with --from-lsn" in done.stderr

    # Live: a follower started before the write sees it arrive.
    line = f"follow --json --max-events 1 --from-lsn {second['lsn'] + 1} --space feed"
    follower = subprocess.Popen(
        [sys.executable, "-m", "brain", *shlex.split(line)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(server),
    )
    try:
        third = brain_json(server, "memory add 'third change' --space feed")
        out, _ = follower.communicate(timeout=CLI_TIMEOUT_S)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.communicate()
    assert json.loads(out)["id"] == third["memory_id"]


def test_follow_names_the_exact_lsn_to_resume_from(server: ServerProcess, tmp_path: Path) -> None:
    pair = tmp_path / "pair.txt"
    pair.write_text(
        "memory add 'one of a pair' --space resume\nmemory add 'two of a pair' --space resume\n",
        encoding="utf-8",
    )
    lsn = brain_json(server, f"txn {pair}")["lsn"]  # one LSN, two changes
    alone = brain_json(server, "memory add 'alone' --space resume")["lsn"]

    def hint(max_events: int) -> str:
        done = brain(server, f"follow --from-lsn 1 --max-events {max_events} --space resume")
        found = re.search(r"resume with --from-lsn (\d+)(.*)$", done.stderr, re.MULTILINE)
        assert found, done.stderr
        return f"{found[1]}{found[2]}"

    # Stopped inside the pair's LSN: resume at it, and the change shown repeats.
    assert hint(1) == f"{lsn} (LSN {lsn}: its change shown above repeats)"
    # Stopped after the pair: its LSN was whole, so resume past it (at the next LSN
    # with a change of the space, or the one after the pair when that one was not sent).
    assert hint(2) in (str(lsn + 1), str(alone))
    # Stopped after the last change of the space: resume right after it.
    assert hint(3) == str(alone + 1)


def test_txn_applies_a_file_all_or_none(server: ServerProcess, tmp_path: Path) -> None:
    batch = tmp_path / "writes.txt"
    batch.write_text(
        "# Dana's move, with its evidence\n"
        "memory add 'Dana joined Initech in March.' --space txn\n"
        "statement add Dana works_at Initech --valid-from 2024-03-01 --evidence $1 --space txn\n",
        encoding="utf-8",
    )
    memory_id = brain_json(server, f"txn {batch}")["results"][0]["memory_id"]
    rows = brain_json(server, "statement list --subject Dana --space txn")["statements"]
    assert [r["evidence"][0]["memory"] for r in rows] == [memory_id]

    broken = tmp_path / "broken.txt"
    broken.write_text(
        "statement add Gus works_at Nowhere --space txn\n"
        f"statement tombstone {'0' * 32} --space txn\n",
        encoding="utf-8",
    )
    refused = brain(server, f"txn {broken}", expect=1)
    assert "NOT_FOUND" in refused.stderr and "line 2" in refused.stderr
    assert brain_json(server, "statement list --subject Gus --space txn")["statements"] == []


def test_short_ids_from_tables_are_accepted_back(server: ServerProcess, tmp_path: Path) -> None:
    space = "--space short"
    # Seventeen statements: two of them share their last hex digit, whatever the ids.
    batch = tmp_path / "short.txt"
    batch.write_text(
        "".join(f"statement add Ivy likes item{n} {space}\n" for n in range(17)),
        encoding="utf-8",
    )
    brain(server, f"txn {batch}")
    rows = brain_json(server, f"statement list --subject Ivy {space}")["statements"]
    ids = [row["id"] for row in rows]
    table = brain(server, f"statement list --subject Ivy {space}").stdout
    shown = re.findall(r"…([0-9a-f]{8,})", table)
    assert len(shown) == 17 and all(any(i.endswith(t) for i in ids) for t in shown)

    # The short form a table printed names its statement, in each verb taking an id.
    tail = shown[0]
    full = next(i for i in ids if i.endswith(tail))
    assert brain_json(server, f"statement get …{tail} {space}")["statement"]["id"] == full
    assert brain_json(server, f"history ...{tail} {space}")["versions"][0]["id"] == full
    tombstoned = brain_json(server, f"statement tombstone {tail} {space}")
    assert tombstoned["id"] == full

    # Its subject's short id too, as an argument and inside a SUBJECT ref.
    entity = rows[0]["subject"]["entity"]
    entity_tail = re.findall(r"…([0-9a-f]{8,})", brain(server, f"entity list {space}").stdout)
    assert len(entity_tail) == 1 and entity.endswith(entity_tail[0])
    assert brain_json(server, f"entity get …{entity_tail[0]} {space}")["entity"]["id"] == entity
    by_id = brain_json(server, f"statement list --subject-id {entity_tail[0]} {space}")
    assert len(by_id["statements"]) == 16
    added = brain_json(server, f"statement add id:…{entity_tail[0]} likes tea {space}")
    got = brain_json(server, f"statement get {added['statement_id']} {space}")
    assert got["statement"]["subject"] == {"entity": entity}
    pointer = f"statement add Ivy mentions …{tail} --object-type statement {space}"
    pointed = brain_json(server, pointer)
    got = brain_json(server, f"statement get {pointed['statement_id']} {space}")
    assert got["statement"]["object"] == {"statement": full}

    # One digit two ids end with is ambiguous; digits none ends with name nothing.
    # Every statement of the space counts: the seventeen and the two added since.
    last = [i[-1] for i in [*ids, added["statement_id"], pointed["statement_id"]]]
    shared = next(d for d in last if last.count(d) > 1)
    ambiguous = brain(server, f"statement get …{shared} {space}", expect=2)
    assert f"…{shared} matches {last.count(shared)} statement ids" in ambiguous.stderr
    assert "--full-ids" in ambiguous.stderr
    absent = next(
        t for t in ("00000000", "11111111", "22222222") if not any(i.endswith(t) for i in ids)
    )
    unknown = brain(server, f"statement get {absent} {space}", expect=2)
    assert f"no statement id in space 'short' ends with {absent}" in unknown.stderr

    # Memory and relation ids have no short form that could resolve: shown whole.
    memory = brain_json(server, f"memory add 'Ivy likes tea.' {space}")["memory_id"]
    brain(server, f"statement add Ivy drinks memory:{memory} --object-type memory {space}")
    listed = brain(server, f"statement list --subject Ivy --predicate drinks {space}").stdout
    assert f"memory {memory}" in listed


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_errors_name_the_problem_and_the_fix(server: ServerProcess, tmp_path: Path) -> None:
    missing = brain(server, f"statement get {'0' * 32}", expect=1)
    assert missing.stderr.startswith("brain: NOT_FOUND:") and "--space" in missing.stderr
    assert missing.stdout == ""

    bad_date = brain(server, "statement list --valid-at 'last tuesday'", expect=2)
    assert "'last tuesday' is not a time" in bad_date.stderr

    no_event = brain(server, "statement add Alice met Bob --kind event", expect=2)
    assert "event_at is required" in no_event.stderr and "--event-at" in no_event.stderr

    stale = brain(server, "statement add Hal works_at X -q").stdout.strip()
    brain(server, f"statement tombstone {stale} --reason test")
    conflict = brain(server, f"statement supersede {stale} Hal works_at Y", expect=1)
    assert conflict.stderr.startswith("brain: CONFLICT:")

    wrong_key = _env(server, BRAIN_API_KEY="brn_bad")
    refused_key = brain(server, "statement list", env=wrong_key, expect=1)
    assert "UNAUTHENTICATED" in refused_key.stderr and "BRAIN_API_KEY" in refused_key.stderr

    no_key = brain(server, "statement list", env=_env(server, BRAIN_DATA=str(tmp_path)), expect=2)
    assert "no API key" in no_key.stderr and "--api-key" in no_key.stderr

    refused = brain(server, f"statement list --port {_free_port()}", expect=1)
    assert "cannot connect" in refused.stderr and "brain serve" in refused.stderr
    assert "make serve" in refused.stderr
