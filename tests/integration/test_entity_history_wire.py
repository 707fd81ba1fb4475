"""Entities on the record axis over the wire (spec/02-data-model.md §4.7): a rename and
a merge made after an instant do not change what a read ``as_of`` that instant
answers: the entity, what its names resolve to, the statements a name finds, and
the graph arm's starting set (seen in RECALL's hits); ENTITY_HISTORY shows every
version; and the history survives a restart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from brain.errors import NotFound
from brain.sdk import Brain
from brain.sdk.results import Ref
from tests.integration.conftest import ServerProcess, start_server

FAST: Final = {"BRAIN_RETRIEVAL__EMBEDDER": "hashing"}
"""The hashing embedder: what is under test is the record axis, not the model."""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    proc = start_server(tmp_path / "data", env=FAST)
    try:
        yield proc
    finally:
        proc.stop()


def _connect(server: ServerProcess) -> Brain:
    return Brain.connect(server.host, server.wire_port, api_key=server.credentials["api_key"])


def test_a_rename_and_a_merge_leave_the_past_as_it_was(server: ServerProcess) -> None:
    with _connect(server) as db:
        dana = db.create_entity("Dana").id
        fox = db.create_entity("Fox").id
        fact = db.create_statement("Dana", "works_at", "the bureau")
        before = db.create_statement("Fox", "believes", "aliens").recorded_at
        renamed = db.update_entity(dana, name="Dana Scully")
        merged = db.merge_entities(dana, fox)

        # Now: the new name, Fox's name an alias of Dana, Fox merged away.
        assert db.get_entity(dana).name == "Dana Scully"
        assert db.resolve_entity("Fox").resolved == dana
        assert db.list_statements(subject="Dana").statements == ()
        assert db.get_entity(fox).merged_into == dana

        # As of before: the old name, two entities, each name meaning its own.
        then = db.get_entity(dana, as_of=before)
        assert then.name == "Dana" and then.aliases == ()
        assert then.recorded_at == then.created_at
        assert then.record_invalidated_at == renamed.recorded_at
        assert db.get_entity(fox, as_of=before).merged_into is None
        assert db.resolve_entity("Fox", as_of=before).resolved == fox
        assert db.resolve_entity("Dana Scully", as_of=before).matches == ()
        listed = db.list_statements(subject="Dana", as_of=before).statements
        assert [s.id for s in listed] == [fact.id]
        # What a statement of Fox's answers as: itself then, Dana now.
        foxes = db.list_statements(subject="Fox", as_of=before).statements
        assert [s.subject for s in foxes] == [Ref("entity", fox)]
        # Now "Fox" names Dana, whose statements include Fox's, shown as Dana's.
        now = db.list_statements(subject="Fox").statements
        assert {s.subject for s in now} == {Ref("entity", dana)} and len(now) == 2
        assert {e.id for e in db.list_entities(as_of=before).entities} == {dana, fox}
        assert {e.id for e in db.list_entities().entities} == {dana}

        # The graph arm starts from what the cue named then.
        hits = db.recall("Dana", as_of=before).hits
        assert any(h.id == fact.id for h in hits)

        history = db.entity_history(fox)
        assert [v.merged_into for v in history] == [None, dana]
        assert history[0].record_invalidated_at == history[1].recorded_at
        with pytest.raises(NotFound):
            db.get_entity(dana, as_of=then.created_at.nanos - 1)
        assert merged.lsn > 0

    server.stop()
    again = start_server(server.data_dir, env=FAST)
    try:
        with _connect(again) as db:
            assert db.get_entity(dana, as_of=before).name == "Dana"
            names = [v.name for v in db.entity_history(dana)]
            assert names == ["Dana", "Dana Scully", "Dana Scully"]
    finally:
        again.stop()
