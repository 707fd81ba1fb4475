"""The as-of law of STATEMENT_LIST, as a stateful property (spec/02-data-model.md §5.4,
spec/03-time.md §6).

A Hypothesis state machine drives one fresh database through random interleavings
of statement writes (create, supersede, tombstone, retract), memories cited as
evidence and forgotten softly or hard, entity merges and unmerges, in three scopes
(two spaces of one namespace and a second namespace) with the same subject names in
each. Whenever it checks, the LIST it asks (by subject and predicate, by subject
alone, or by neither; ``as_of`` a remembered instant or none; with or without the
include flags; small pages followed through their cursors) must answer exactly what
a brute-force filter of every statement of the scope, each read by STATEMENT_GET,
says: the rows whose subject answers as the one asked for, believed at ``as_of``
(recorded at or before it, not invalidated by then, never retracted), in
``recorded_at ‖ id`` order. LIST walks indexes and stops early; the brute force
reads every row.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    multiple,
    precondition,
    rule,
)

import brain
from brain.engine.database import Database, DatabaseOptions
from brain.errors import Conflict
from brain.wire.messages.entity_ops import (
    EntityCreate,
    EntityCreateOk,
    EntityMerge,
    EntityMergeOk,
    EntityUnmerge,
    EntityUnmergeOk,
)
from brain.wire.messages.memory_ops import Encode, EncodeOk, Forget, ForgetOk
from brain.wire.messages.records import Evidence, Statement
from brain.wire.messages.schema_ops import PredicateDecl, SchemaPut
from brain.wire.messages.statement_ops import (
    StatementCreate,
    StatementCreateOk,
    StatementDraft,
    StatementGet,
    StatementGetOk,
    StatementList,
    StatementListOk,
    StatementRetract,
    StatementSupersede,
    StatementSupersedeOk,
    StatementTombstone,
)
from brain.wire.messages.values import EntityRef, TextValue
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message
from tests.request_ids import request_ids

SCOPES: Final = (("asof-a", None), ("asof-a", "other"), ("asof-b", None))
"""(namespace, space) of each scope: two spaces of one namespace, and another namespace."""
NAMES: Final = ("Alice", "Bob", "Carol")
STATEFUL: Final = "city"
FACT: Final = "likes"  # declared kind fact: a contradiction is queued, both stay current
PREDICATES: Final = (STATEFUL, FACT, "note", "tag")
VALUES: Final = ("red", "green", "blue")
TEXTS: Final = ("first cited text", "second cited text")
MAX_PAGES: Final = 1000
"""More pages than any listing here can have: a LIST that keeps answering cursors is a bug."""


def _no_fsync(fd: int) -> None:
    """Durability is not under test here; skipping the WAL's fdatasync saves time."""


@dataclass(slots=True)
class ScopeModel:
    """What one scope holds, as the answers told it."""

    namespace: str
    space: str | None
    entities: list[bytes] = field(default_factory=list)
    statements: list[bytes] = field(default_factory=list)
    merged_into: dict[bytes, bytes] = field(default_factory=dict)
    """Entity merged away -> the entity it was merged into, while the merge stands."""
    merges: dict[bytes, bytes] = field(default_factory=dict)
    """merge_id -> the entity it merged away, while it stands, oldest first."""
    memories: list[bytes] = field(default_factory=list)

    def canonical(self, entity: bytes) -> bytes:
        while entity in self.merged_into:
            entity = self.merged_into[entity]
        return entity


class ListAsOfLaw(RuleBasedStateMachine):
    """Random histories in several scopes; every LIST against a brute-force filter."""

    statements = Bundle("statements")

    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="brain-asof-"))
        self.db: Database = brain.open(self.directory / "d", DatabaseOptions(fsync=_no_fsync))
        self.rid = request_ids().__next__
        """The next request id: the same sequence in every example, so each replays."""
        self.scopes = [ScopeModel(ns, space) for ns, space in SCOPES]
        self.where: dict[bytes, int] = {}
        """Statement id -> the index of its scope."""
        self.instants: list[int] = []

    def teardown(self) -> None:
        try:
            self.db.close()
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)

    # --- plumbing -------------------------------------------------------------------------

    def run(self, scope: ScopeModel, opcode: Opcode, request: Message) -> Message:
        return self.db.execute(scope.namespace, opcode, request)

    def listing(self, scope: ScopeModel, page: int, **kw: object) -> list[Statement]:
        """Every row STATEMENT_LIST answers, following cursors."""
        rows: list[Statement] = []
        cursor: bytes | None = None
        for _ in range(MAX_PAGES):
            answer = self.run(
                scope,
                Opcode.STATEMENT_LIST,
                StatementList(space=scope.space, limit=page, cursor=cursor, **kw),  # type: ignore[arg-type]
            )
            assert isinstance(answer, StatementListOk)
            assert len(answer.statements) <= page
            rows += answer.statements
            if answer.cursor is None:
                return rows
            assert answer.statements, "a cursor after an empty page"
            cursor = answer.cursor
        raise AssertionError("STATEMENT_LIST kept answering cursors")

    def get(self, scope: ScopeModel, statement_id: bytes) -> Statement:
        answer = self.run(
            scope, Opcode.STATEMENT_GET, StatementGet(id=statement_id, space=scope.space)
        )
        assert isinstance(answer, StatementGetOk)
        return answer.statement

    def draft(
        self, scope: ScopeModel, subject: bytes, predicate: str, value: str
    ) -> dict[str, object]:
        return {
            "kind": "fact",
            "subject": EntityRef(entity=subject),
            "predicate": predicate,
            "object_": TextValue(text=value),
        }

    # --- rules ----------------------------------------------------------------------------

    @initialize()
    def declare_and_name(self) -> None:
        """Each scope's schema and its three entities, of the same names in every scope."""
        for scope in self.scopes:
            self.run(
                scope,
                Opcode.SCHEMA_PUT,
                SchemaPut(
                    space=scope.space,
                    predicates=(
                        PredicateDecl(name=STATEFUL, kind="fact", stateful=True),
                        PredicateDecl(name=FACT, kind="fact", stateful=False),
                    ),
                ),
            )
            for name in NAMES:
                made = self.run(
                    scope,
                    Opcode.ENTITY_CREATE,
                    EntityCreate(request_id=self.rid(), space=scope.space, name=name),
                )
                assert isinstance(made, EntityCreateOk)
                scope.entities.append(made.entity_id)

    @rule(
        target=statements,
        where=st.integers(0, len(SCOPES) - 1),
        subject=st.integers(0, len(NAMES) - 1),
        predicate=st.sampled_from(PREDICATES),
        value=st.sampled_from(VALUES),
        cite=st.booleans(),
    )
    def create(self, where: int, subject: int, predicate: str, value: str, cite: bool) -> object:
        scope = self.scopes[where]
        evidence = (Evidence(memory=scope.memories[-1]),) if cite and scope.memories else None
        request = StatementCreate(
            request_id=self.rid(),
            space=scope.space,
            evidence=evidence,
            **self.draft(scope, scope.entities[subject], predicate, value),  # type: ignore[arg-type]
        )
        try:
            answer = self.run(scope, Opcode.STATEMENT_CREATE, request)
        except Conflict:
            return multiple()  # the cited memory was forgotten
        assert isinstance(answer, StatementCreateOk)
        scope.statements.append(answer.statement_id)
        self.where[answer.statement_id] = where
        self.instants.append(answer.recorded_at)  # as_of a row's own record time keeps it
        return answer.statement_id

    @rule(target=statements, old=statements, value=st.sampled_from(VALUES))
    def supersede(self, old: bytes, value: str) -> object:
        where = self.where[old]
        scope = self.scopes[where]
        before = self.get(scope, old)
        if before.superseded_by is not None or before.tombstone_reason is not None:
            return multiple()
        assert isinstance(before.subject, EntityRef) and before.predicate is not None
        draft = StatementDraft(
            **self.draft(scope, before.subject.entity, before.predicate, value)  # type: ignore[arg-type]
        )
        request = StatementSupersede(request_id=self.rid(), space=scope.space, old=old, new=draft)
        answer = self.run(scope, Opcode.STATEMENT_SUPERSEDE, request)
        assert isinstance(answer, StatementSupersedeOk)
        scope.statements.append(answer.statement_id)
        self.where[answer.statement_id] = where
        self.instants.append(answer.recorded_at)
        return answer.statement_id

    @rule(target_id=statements, retract=st.booleans())
    def invalidate(self, target_id: bytes, retract: bool) -> None:
        """A tombstone or a retraction; CONFLICT when the statement already has one."""
        scope = self.scopes[self.where[target_id]]
        request: Message = (
            StatementRetract(request_id=self.rid(), space=scope.space, id=target_id)
            if retract
            else StatementTombstone(request_id=self.rid(), space=scope.space, id=target_id)
        )
        opcode = Opcode.STATEMENT_RETRACT if retract else Opcode.STATEMENT_TOMBSTONE
        with contextlib.suppress(Conflict):
            self.run(scope, opcode, request)

    @rule(where=st.integers(0, len(SCOPES) - 1), text=st.sampled_from(TEXTS))
    def encode(self, where: int, text: str) -> None:
        scope = self.scopes[where]
        request = Encode(
            request_id=self.rid(), space=scope.space, text=text, override_forgotten=True
        )
        answer = self.run(scope, Opcode.ENCODE, request)
        assert isinstance(answer, EncodeOk)
        scope.memories.append(answer.memory_id)

    @precondition(lambda self: any(scope.memories for scope in self.scopes))
    @rule(where=st.integers(0, len(SCOPES) - 1), mode=st.sampled_from(("soft", "hard")))
    def forget(self, where: int, mode: str) -> None:
        """Forget the scope's newest memory: the statements citing only it are tombstoned
        (soft) or retracted (hard)."""
        scope = self.scopes[where]
        if not scope.memories:
            return
        request = Forget(
            request_id=self.rid(), space=scope.space, memory=scope.memories[-1], mode=mode
        )
        assert isinstance(self.run(scope, Opcode.FORGET, request), ForgetOk)

    @rule(where=st.integers(0, len(SCOPES) - 1), keep=st.integers(0, 2), away=st.integers(0, 2))
    def merge(self, where: int, keep: int, away: int) -> None:
        scope = self.scopes[where]
        kept, merged = scope.entities[keep], scope.entities[away]
        if kept == merged or merged in scope.merged_into or scope.canonical(kept) == merged:
            return
        if kept in scope.merged_into:
            return  # a merge keeps a live entity
        request = EntityMerge(request_id=self.rid(), space=scope.space, keep=kept, merge=merged)
        answer = self.run(scope, Opcode.ENTITY_MERGE, request)
        assert isinstance(answer, EntityMergeOk)
        scope.merged_into[merged] = kept
        scope.merges[answer.merge_id] = merged

    @precondition(lambda self: any(scope.merges for scope in self.scopes))
    @rule(where=st.integers(0, len(SCOPES) - 1))
    def unmerge(self, where: int) -> None:
        """Undo the scope's newest merge (an older one may not be undone while a later
        merge changed its entities)."""
        scope = self.scopes[where]
        if not scope.merges:
            return
        merge_id, merged = scope.merges.popitem()
        request = EntityUnmerge(request_id=self.rid(), space=scope.space, merge_id=merge_id)
        assert isinstance(self.run(scope, Opcode.ENTITY_UNMERGE, request), EntityUnmergeOk)
        del scope.merged_into[merged]

    @rule()
    def tick(self) -> None:
        self.instants.append(self.db.writer.clock.tick())

    # --- the law --------------------------------------------------------------------------

    def believed(self, row: Statement, as_of: int | None, flags: bool) -> bool:
        """spec/03-time.md §6 steps 4 to 6, from what STATEMENT_GET shows of a row."""
        if row.tombstone_reason == "retracted":
            return False
        if as_of is None:
            hidden = row.tombstone_reason is not None or row.superseded_by is not None
            return flags or not hidden
        invalidated = row.record_invalidated_at
        return row.recorded_at <= as_of and (invalidated is None or invalidated > as_of)

    @rule(
        where=st.integers(0, len(SCOPES) - 1),
        subject=st.none() | st.integers(0, len(NAMES) - 1),
        predicate=st.none() | st.sampled_from(PREDICATES),
        instant=st.none() | st.integers(0, 10**6),
        flags=st.booleans(),
        page=st.sampled_from((1, 2, 3, 100)),
    )
    def list_answers_the_brute_force(
        self,
        *,
        where: int,
        subject: int | None,
        predicate: str | None,
        instant: int | None,
        flags: bool,
        page: int,
    ) -> None:
        scope = self.scopes[where]
        as_of = None
        if instant is not None and self.instants:
            as_of = self.instants[instant % len(self.instants)]
        rows = [self.get(scope, statement_id) for statement_id in scope.statements]
        if subject is not None:
            # A merged-away entity is listed as the one it answers as.
            shown = EntityRef(entity=scope.canonical(scope.entities[subject]))
            rows = [r for r in rows if r.subject == shown]
        if predicate is not None:
            rows = [r for r in rows if r.predicate == predicate]
        expected = sorted(
            (r for r in rows if self.believed(r, as_of, flags)), key=lambda r: (r.recorded_at, r.id)
        )
        asked: dict[str, object] = {"as_of": as_of, "predicate": predicate}
        if subject is not None:
            asked["subject"] = EntityRef(entity=scope.entities[subject])
        if flags:
            asked |= {"include_tombstoned": True, "include_superseded": True}
        listed = self.listing(scope, page, **asked)
        assert [r.id for r in listed] == [r.id for r in expected], asked


ListAsOfLaw.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestListAsOfLaw = ListAsOfLaw.TestCase
