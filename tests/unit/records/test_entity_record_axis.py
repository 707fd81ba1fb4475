"""Entities on the record axis (spec/02-data-model.md §4.7, spec/03-time.md §5): a
random history of entity creates, renames, aliases, merges, unmerges and
tombstones, interleaved with statements naming entities, and after it every read
``as_of`` an earlier instant answers what was believed then.

The model of the history is what the reads answered at each instant, taken right
after each step: the entity by id (ENTITY_GET), every name's resolution
(ENTITY_RESOLVE), the graph arm's starting set for a cue of that name
(:func:`~brain.engine.recall.graph.cue_entities`), and the statements a LIST by
that name finds. Asked later ``as_of`` that instant, each must answer the same
(the version shown closes, so ``record_invalidated_at`` is left out; everything else
is compared whole).
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

import brain
from brain.engine.database import Database, DatabaseOptions
from brain.engine.recall.graph import cue_entities
from brain.engine.records import resolution
from brain.engine.store.scope import Scope
from brain.engine.write.tuning import DEFAULT_RESOLUTION
from brain.errors import BrainError, NotFound
from brain.wire.messages.entity_ops import (
    EntityCreate,
    EntityCreateOk,
    EntityGet,
    EntityGetOk,
    EntityHistory,
    EntityHistoryOk,
    EntityList,
    EntityListOk,
    EntityMerge,
    EntityMergeOk,
    EntityResolve,
    EntityResolveOk,
    EntityTombstone,
    EntityUnmerge,
    EntityUpdate,
)
from brain.wire.messages.statement_ops import StatementCreate, StatementList, StatementListOk
from brain.wire.messages.values import NameRef, TextValue
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message
from tests.unit.common import NS, rid

NAMES: Final = ("Alice", "Boris", "Chen", "Dmitri", "Esme")
"""Names far enough apart that the fuzzy tier never confuses two of them."""

SCOPE: Final = Scope.of(NS, None)


def _no_fsync(fd: int) -> None:
    """The model is about what reads answer, not about durability."""
    del fd


@dataclass(frozen=True)
class Instant:
    """What the reads answered right after one step, and when."""

    at: int
    entities: dict[bytes, dict[str, object] | None]
    resolved: dict[str, EntityResolveOk]
    starts: dict[str, set[bytes]]
    listed: dict[str, list[bytes]]
    live: list[bytes]


def _shown(entity: dict[str, object]) -> dict[str, object]:
    entity.pop("record_invalidated_at", None)
    return entity


class EntityRecordAxis(RuleBasedStateMachine):
    """Random entity histories; every read as of an earlier instant against it."""

    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="brain-entity-axis-"))
        self.db: Database = brain.open(self.directory / "d", DatabaseOptions(fsync=_no_fsync))
        self.ids: list[bytes] = []
        self.merges: list[bytes] = []
        self.instants: list[Instant] = []

    def teardown(self) -> None:
        try:
            for instant in self.instants:
                self._check(instant)
        finally:
            self.db.close()
            shutil.rmtree(self.directory, ignore_errors=True)

    # --- plumbing -------------------------------------------------------------------------

    def run(self, opcode: Opcode, request: Message) -> Message | None:
        """The answer, or None when the write was refused (a refusal changes nothing)."""
        try:
            return self.db.execute(NS, opcode, request)
        except BrainError:
            return None

    def entity(self, entity_id: bytes, as_of: int | None) -> dict[str, object] | None:
        try:
            answer = self.db.execute(NS, Opcode.ENTITY_GET, EntityGet(id=entity_id, as_of=as_of))
        except NotFound:
            return None
        assert isinstance(answer, EntityGetOk)
        return _shown(answer.entity.to_wire())

    def resolve(self, name: str, as_of: int | None) -> EntityResolveOk:
        answer = self.db.execute(NS, Opcode.ENTITY_RESOLVE, EntityResolve(name=name, as_of=as_of))
        assert isinstance(answer, EntityResolveOk)
        return answer

    def starts(self, name: str, as_of: int | None) -> set[bytes]:
        with self.db._store.read() as txn:
            return cue_entities(self.db._store, txn, SCOPE, name, DEFAULT_RESOLUTION, as_of=as_of)

    def listed(self, name: str, as_of: int | None) -> list[bytes]:
        request = StatementList(subject=NameRef(name=name), as_of=as_of, limit=1000)
        answer = self.db.execute(NS, Opcode.STATEMENT_LIST, request)
        assert isinstance(answer, StatementListOk)
        return [s.id for s in answer.statements]

    def live(self, as_of: int | None) -> list[bytes]:
        answer = self.db.execute(NS, Opcode.ENTITY_LIST, EntityList(as_of=as_of, limit=1000))
        assert isinstance(answer, EntityListOk)
        return [e.id for e in answer.entities]

    def _check(self, instant: Instant) -> None:
        at = instant.at
        for entity_id, shown in instant.entities.items():
            assert self.entity(entity_id, at) == shown, (entity_id.hex(), at)
        for name in NAMES:
            assert self.resolve(name, at) == instant.resolved[name], (name, at)
            assert self.starts(name, at) == instant.starts[name], (name, at)
            assert self.listed(name, at) == instant.listed[name], (name, at)
        assert self.live(at) == instant.live, at

    # --- rules ----------------------------------------------------------------------------

    @initialize(name=st.sampled_from(NAMES))
    def first(self, name: str) -> None:
        self.create(name)

    @rule(name=st.sampled_from(NAMES))
    def create(self, name: str) -> None:
        answer = self.run(Opcode.ENTITY_CREATE, EntityCreate(request_id=rid(), name=name))
        assert isinstance(answer, EntityCreateOk)
        self.ids.append(answer.entity_id)

    @rule(pick=st.integers(min_value=0), name=st.sampled_from(NAMES))
    def rename(self, pick: int, name: str) -> None:
        entity_id = self.ids[pick % len(self.ids)]
        self.run(Opcode.ENTITY_UPDATE, EntityUpdate(request_id=rid(), id=entity_id, name=name))

    @rule(pick=st.integers(min_value=0), alias=st.sampled_from(NAMES), remove=st.booleans())
    def alias(self, pick: int, alias: str, remove: bool) -> None:
        entity_id = self.ids[pick % len(self.ids)]
        change = {"remove_aliases" if remove else "add_aliases": (alias,)}
        request = EntityUpdate(request_id=rid(), id=entity_id, **change)  # type: ignore[arg-type]
        self.run(Opcode.ENTITY_UPDATE, request)

    @rule(keep=st.integers(min_value=0), gone=st.integers(min_value=0))
    def merge(self, keep: int, gone: int) -> None:
        kept, merged = self.ids[keep % len(self.ids)], self.ids[gone % len(self.ids)]
        if kept == merged:
            return
        answer = self.run(
            Opcode.ENTITY_MERGE, EntityMerge(request_id=rid(), keep=kept, merge=merged)
        )
        if isinstance(answer, EntityMergeOk):
            self.merges.append(answer.merge_id)

    @precondition(lambda self: bool(self.merges))
    @rule(pick=st.integers(min_value=0))
    def unmerge(self, pick: int) -> None:
        merge_id = self.merges[pick % len(self.merges)]
        self.run(Opcode.ENTITY_UNMERGE, EntityUnmerge(request_id=rid(), merge_id=merge_id))

    @rule(pick=st.integers(min_value=0))
    def tombstone(self, pick: int) -> None:
        entity_id = self.ids[pick % len(self.ids)]
        self.run(Opcode.ENTITY_TOMBSTONE, EntityTombstone(request_id=rid(), id=entity_id))

    @rule(name=st.sampled_from(NAMES), text=st.sampled_from(("tea", "chess", "rain")))
    def state(self, name: str, text: str) -> None:
        """A statement about a name: it may resolve, create an entity, or wait on a review."""
        request = StatementCreate(
            request_id=rid(),
            kind="fact",
            subject=NameRef(name=name),
            predicate="likes",
            object_=TextValue(text=text),
        )
        self.run(Opcode.STATEMENT_CREATE, request)
        for entity_id in self.live(None):
            if entity_id not in self.ids:
                self.ids.append(entity_id)

    @invariant()
    def remember_this_instant(self) -> None:
        """What every read answers now, kept to be asked again as of now."""
        at = self.db.writer.clock.last
        self.instants.append(
            Instant(
                at=at,
                entities={e: self.entity(e, None) for e in self.ids},
                resolved={n: self.resolve(n, None) for n in NAMES},
                starts={n: self.starts(n, None) for n in NAMES},
                listed={n: self.listed(n, None) for n in NAMES},
                live=self.live(None),
            )
        )

    @rule(pick=st.integers(min_value=0))
    def ask_the_past(self, pick: int) -> None:
        """One earlier instant, asked again now (the teardown asks them all)."""
        self._check(self.instants[pick % len(self.instants)])


def test_history_of_each_entity_has_every_version() -> None:
    """ENTITY_HISTORY: created, renamed, tombstoned, each closed by the next."""
    directory = Path(tempfile.mkdtemp(prefix="brain-entity-history-"))
    try:
        with brain.open(directory / "d", DatabaseOptions(fsync=_no_fsync)) as db:
            made = db.execute(NS, Opcode.ENTITY_CREATE, EntityCreate(request_id=rid(), name="Ann"))
            assert isinstance(made, EntityCreateOk)
            entity_id = made.entity_id
            db.execute(
                NS, Opcode.ENTITY_UPDATE, EntityUpdate(request_id=rid(), id=entity_id, name="Anne")
            )
            db.execute(NS, Opcode.ENTITY_TOMBSTONE, EntityTombstone(request_id=rid(), id=entity_id))
            answer = db.execute(NS, Opcode.ENTITY_HISTORY, EntityHistory(id=entity_id))
            assert isinstance(answer, EntityHistoryOk)
            versions = answer.versions
            assert [v.name for v in versions] == ["Ann", "Anne", "Anne"]
            assert [v.tombstoned_at is not None for v in versions] == [False, False, True]
            for older, newer in itertools.pairwise(versions):
                assert older.record_invalidated_at == newer.recorded_at
            assert versions[-1].record_invalidated_at is None
            assert versions[0].recorded_at == versions[0].created_at
            audit = [entry["operation"] for entry in db.audit(NS)]
            assert audit.count("entity_update") == 1 and audit.count("entity_create") == 1
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def test_the_fuzzy_tier_as_of_reads_a_bounded_history(monkeypatch: pytest.MonkeyPatch) -> None:
    """As of an instant the fuzzy tier reads at most AS_OF_EVENTS_PER_KEY events per key
    of FUZZY_SCAN_ROWS, however many times the names changed."""
    directory = Path(tempfile.mkdtemp(prefix="brain-entity-bound-"))
    try:
        with brain.open(directory / "d", DatabaseOptions(fsync=_no_fsync)) as db:
            made = [
                db.execute(NS, Opcode.ENTITY_CREATE, EntityCreate(request_id=rid(), name=name))
                for name in NAMES
            ]
            first = made[0]
            assert isinstance(first, EntityCreateOk)
            # An alias given and taken back ten times: twenty events of one key, "al",
            # which sorts before every name.
            for _ in range(10):
                for change in ({"add_aliases": ("Al",)}, {"remove_aliases": ("Al",)}):
                    update = EntityUpdate(request_id=rid(), id=first.entity_id, **change)  # type: ignore[arg-type]
                    db.execute(NS, Opcode.ENTITY_UPDATE, update)
            at = db.writer.clock.last
            with db._store.read() as txn:
                names, _ = resolution.name_index(db._store, txn, SCOPE, as_of=at)
                assert sorted(names) == sorted(n.casefold() for n in NAMES)
                # Ten keys' worth of events at one event a key: the churned alias uses
                # them all, and no name is reached.
                monkeypatch.setattr(resolution, "FUZZY_SCAN_ROWS", 10)
                monkeypatch.setattr(resolution, "AS_OF_EVENTS_PER_KEY", 1)
                names, _ = resolution.name_index(db._store, txn, SCOPE, as_of=at)
                assert names == []
    finally:
        shutil.rmtree(directory, ignore_errors=True)


EntityRecordAxis.TestCase.settings = settings(
    max_examples=15,
    stateful_step_count=14,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_entity_record_axis = EntityRecordAxis.TestCase
