"""The statement laws as a stateful property (spec/03-time.md §1 to §6, the filter chain's step 6).

A Hypothesis state machine drives one fresh database through random sequences
of statement writes (create, supersede, tombstone, retract), memories cited as
evidence and forgotten softly or hard, and ticks of the record clock that it
remembers as past instants. It keeps its own model of every statement, fed
only from the answers it gets, and after every step checks that:

- a subject holds at most one current statement per stateful predicate;
- ``record_invalidated_at``, once set, never changes (STATEMENT_GET over time);
- at every remembered past instant ``t``, STATEMENT_LIST ``as_of = t`` (with
  and without the include flags: the as-of step overrides steps 4 and 5)
  answers exactly what was believed at ``t``: ``recorded_at ≤ t`` and
  ``record_invalidated_at`` absent or ``> t``, never a retracted statement,
  each shown with the validity believed at ``t``;
- retracted content never comes back from GET, LIST or HISTORY;
- the current set (LIST without ``as_of``) is the model's current set.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
)

import brain
from brain.engine.database import Database, DatabaseOptions
from brain.errors import Conflict, Forgotten
from brain.wire.messages.memory_ops import (
    Encode,
    EncodeOk,
    Forget,
    ForgetOk,
    MemoryGet,
    MemoryGetOk,
)
from brain.wire.messages.records import Evidence, Statement
from brain.wire.messages.schema_ops import PredicateDecl, SchemaPut, SchemaPutOk
from brain.wire.messages.statement_ops import (
    StatementCreate,
    StatementCreateOk,
    StatementDraft,
    StatementGet,
    StatementGetOk,
    StatementHistory,
    StatementHistoryOk,
    StatementList,
    StatementListOk,
    StatementRetract,
    StatementRetracted,
    StatementSupersede,
    StatementSupersedeOk,
    StatementTombstone,
    StatementTombstoned,
)
from brain.wire.messages.values import EntityRef, NameRef, TextValue
from brain.wire.opcodes import Opcode
from brain.wire.schema import Message
from tests.request_ids import request_ids

NS: Final = "laws"
SUBJECTS: Final = ("Alice", "Bob", "Carol")
STATEFUL: Final = ("city", "employer")
FACT: Final = "likes"  # declared kind fact, not stateful: contradictions are queued
OPEN: Final = "note"  # undeclared: open vocabulary
PREDICATES: Final = (*STATEFUL, FACT, OPEN)
VALUES: Final = ("red", "green", "blue")
TEXTS: Final = ("first memory text", "second memory text", "third memory text")
VALID_FROM: Final = (None, None, 100, 200, 300)
MAX_PAGES: Final = 1000


def _no_fsync(fd: int) -> None:
    """Durability is not under test here; skipping the WAL's fdatasync saves time."""


@dataclass(slots=True)
class ModelStatement:
    """What the answers told us about one statement."""

    id: bytes
    subject: str
    predicate: str
    value: str
    evidence: tuple[bytes, ...]
    recorded_at: int
    version: int
    chain_root: bytes
    valid_from: int | None
    record_invalidated_at: int | None = None
    superseded_by: bytes | None = None
    tombstone_reason: str | None = None
    closed_valid_to: int | None = None
    closed_at: int | None = None

    @property
    def retracted(self) -> bool:
        return self.tombstone_reason == "retracted"

    @property
    def tombstoned(self) -> bool:
        return self.tombstone_reason is not None

    @property
    def current(self) -> bool:
        return self.superseded_by is None and not self.tombstoned

    def believed_at(self, t: int) -> bool:
        """spec/03-time.md §6 step 6, retracted rows never restored."""
        if self.retracted or self.recorded_at > t:
            return False
        return self.record_invalidated_at is None or self.record_invalidated_at > t

    def valid_to_at(self, t: int | None) -> int | None:
        """The end of validity believed at record time ``t`` (None: now), §3.

        The drafts here never carry their own ``valid_to``: only a close ends them.
        """
        if self.closed_at is not None and (t is None or self.closed_at <= t):
            return self.closed_valid_to
        return None

    def invalidate(self, at: int) -> None:
        """A record-axis stamp: set once, never moved."""
        if self.record_invalidated_at is None:
            self.record_invalidated_at = at


@dataclass(slots=True)
class ModelMemory:
    id: bytes
    text: str
    forgotten: str | None = None


_STRENGTH: Final = {None: 0, "soft": 1, "hard": 2}


class StatementLaws(RuleBasedStateMachine):
    """Random statement histories against a model of both time axes."""

    statements = Bundle("statements")
    memories = Bundle("memories")

    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="brain-laws-"))
        self.db: Database = brain.open(self.directory / "d", DatabaseOptions(fsync=_no_fsync))
        self.rid = request_ids().__next__
        """The next request id: the same sequence in every example, so each replays."""
        self.model: dict[bytes, ModelStatement] = {}
        self.mem: dict[bytes, ModelMemory] = {}
        self.dedup: dict[str, bytes] = {}  # text -> memory id ENCODE deduplicates to
        self.ledger: set[str] = set()  # hard-forgotten texts
        self.instants: list[int] = []
        self.first_invalidated: dict[bytes, int] = {}
        self.entity_of: dict[str, bytes] = {}
        self.last_write = 0
        self.steps = 0
        declared = self.run(
            Opcode.SCHEMA_PUT,
            SchemaPut(
                predicates=(
                    *(PredicateDecl(name=p, kind="fact", stateful=True) for p in STATEFUL),
                    PredicateDecl(name=FACT, kind="fact", stateful=False),
                )
            ),
        )
        assert isinstance(declared, SchemaPutOk)

    def teardown(self) -> None:
        try:
            self.db.close()
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)

    # --- plumbing -------------------------------------------------------------------------

    def run(self, opcode: Opcode, request: Message) -> Message:
        return self.db.execute(NS, opcode, request)

    def listing(self, page: int = 1000, **kw: object) -> list[Statement]:
        """Every row STATEMENT_LIST answers, following cursors."""
        rows: list[Statement] = []
        cursor: bytes | None = None
        for _ in range(MAX_PAGES):
            answer = self.run(
                Opcode.STATEMENT_LIST,
                StatementList(limit=page, cursor=cursor, **kw),  # type: ignore[arg-type]
            )
            assert isinstance(answer, StatementListOk)
            assert len(answer.statements) <= page
            rows += answer.statements
            if answer.cursor is None:
                return rows
            cursor = answer.cursor
        raise AssertionError("STATEMENT_LIST kept answering cursors")

    def get(self, statement_id: bytes) -> Statement:
        answer = self.run(Opcode.STATEMENT_GET, StatementGet(id=statement_id))
        assert isinstance(answer, StatementGetOk)
        return answer.statement

    def current_of(self, subject: str, predicate: str) -> list[ModelStatement]:
        return [
            s
            for s in self.model.values()
            if s.current and s.subject == subject and s.predicate == predicate
        ]

    def supersede_in_model(self, old: ModelStatement, new: ModelStatement) -> None:
        old.superseded_by = new.id
        old.invalidate(new.recorded_at)
        if new.valid_from is not None:  # the old ones never carry valid_to or event_at here
            # Closed from this record time on; a new version valid from before the
            # old one began leaves it the empty [from, from), never an inverted interval.
            old.closed_valid_to = (
                new.valid_from if old.valid_from is None else max(new.valid_from, old.valid_from)
            )
            old.closed_at = new.recorded_at

    def draft_fields(
        self, subject: str, predicate: str, value: str, valid_from: int | None
    ) -> dict[str, object]:
        return {
            "kind": "fact",
            "subject": NameRef(name=subject),
            "predicate": predicate,
            "object_": TextValue(text=value),
            "valid_from": valid_from,
        }

    def do_create(
        self,
        subject: str,
        predicate: str,
        value: str,
        valid_from: int | None,
        evidence: tuple[bytes, ...],
    ) -> bytes:
        replaced = self.current_of(subject, predicate) if predicate in STATEFUL else []
        answer = self.run(
            Opcode.STATEMENT_CREATE,
            StatementCreate(
                request_id=self.rid(),
                evidence=tuple(Evidence(memory=m) for m in evidence) or None,
                **self.draft_fields(subject, predicate, value, valid_from),  # type: ignore[arg-type]
            ),
        )
        assert isinstance(answer, StatementCreateOk)
        assert answer.recorded_at > self.last_write
        self.last_write = answer.recorded_at
        new = ModelStatement(
            id=answer.statement_id,
            subject=subject,
            predicate=predicate,
            value=value,
            evidence=evidence,
            recorded_at=answer.recorded_at,
            version=answer.version,
            chain_root=answer.chain_root,
            valid_from=valid_from,
        )
        if replaced:
            latest = max(replaced, key=lambda s: s.recorded_at)
            assert answer.superseded == latest.id
            assert (answer.version, answer.chain_root) == (latest.version + 1, latest.chain_root)
        else:
            assert answer.superseded is None
            assert (answer.version, answer.chain_root) == (1, answer.statement_id)
        for old in replaced:
            self.supersede_in_model(old, new)
        self.model[new.id] = new
        return new.id

    # --- rules ----------------------------------------------------------------------------

    @initialize(
        target=statements,
        subject=st.sampled_from(SUBJECTS),
        predicate=st.sampled_from(PREDICATES),
        value=st.sampled_from(VALUES),
    )
    def first_statement(self, subject: str, predicate: str, value: str) -> bytes:
        return self.do_create(subject, predicate, value, None, ())

    @initialize(target=memories, text=st.sampled_from(TEXTS))
    def first_memory(self, text: str) -> object:
        return self.encode(text, override=False)

    @rule(
        target=statements,
        subject=st.sampled_from(SUBJECTS),
        predicate=st.sampled_from(PREDICATES),
        value=st.sampled_from(VALUES),
        valid_from=st.sampled_from(VALID_FROM),
    )
    def create(self, subject: str, predicate: str, value: str, valid_from: int | None) -> bytes:
        return self.do_create(subject, predicate, value, valid_from, ())

    @precondition(lambda self: bool(self.mem))
    @rule(
        target=statements,
        subject=st.sampled_from(SUBJECTS),
        predicate=st.sampled_from(PREDICATES),
        value=st.sampled_from(VALUES),
        cited=st.lists(memories, min_size=1, max_size=2),
    )
    def create_with_evidence(
        self, subject: str, predicate: str, value: str, cited: list[bytes]
    ) -> bytes:
        # A forgotten memory cannot be cited (the engine answers CONFLICT).
        evidence = tuple(m for m in dict.fromkeys(cited) if self.mem[m].forgotten is None)
        return self.do_create(subject, predicate, value, None, evidence)

    @rule(
        target=statements,
        old=statements,
        predicate=st.none() | st.sampled_from(PREDICATES),
        value=st.sampled_from(VALUES),
        valid_from=st.sampled_from(VALID_FROM),
    )
    def supersede(
        self, old: bytes, predicate: str | None, value: str, valid_from: int | None
    ) -> object:
        before = self.model[old]
        new_predicate = before.predicate if predicate is None else predicate
        if (
            new_predicate != before.predicate
            and new_predicate in STATEFUL
            and self.current_of(before.subject, new_predicate)
        ):
            # The engine supersedes the subject's current value of that predicate too;
            # the model does not follow that second supersession, so the case is
            # covered by test_supersede_into_a_stateful_predicate_keeps_one_value.
            new_predicate = before.predicate
        draft = StatementDraft(
            **self.draft_fields(before.subject, new_predicate, value, valid_from)  # type: ignore[arg-type]
        )
        request = StatementSupersede(request_id=self.rid(), old=old, new=draft)
        if not before.current:
            with pytest.raises(Conflict):
                self.run(Opcode.STATEMENT_SUPERSEDE, request)
            return multiple()
        answer = self.run(Opcode.STATEMENT_SUPERSEDE, request)
        assert isinstance(answer, StatementSupersedeOk)
        assert answer.superseded == old and answer.recorded_at > self.last_write
        assert (answer.version, answer.chain_root) == (before.version + 1, before.chain_root)
        self.last_write = answer.recorded_at
        new = ModelStatement(
            id=answer.statement_id,
            subject=before.subject,
            predicate=new_predicate,
            value=value,
            evidence=(),
            recorded_at=answer.recorded_at,
            version=answer.version,
            chain_root=answer.chain_root,
            valid_from=valid_from,
        )
        self.supersede_in_model(before, new)
        self.model[new.id] = new
        return new.id

    @rule(target_id=statements)
    def tombstone(self, target_id: bytes) -> None:
        s = self.model[target_id]
        request = StatementTombstone(request_id=self.rid(), id=target_id, reason="law test")
        if s.tombstoned:
            with pytest.raises(Conflict):
                self.run(Opcode.STATEMENT_TOMBSTONE, request)
            return
        answer = self.run(Opcode.STATEMENT_TOMBSTONE, request)
        assert isinstance(answer, StatementTombstoned) and answer.id == target_id
        assert answer.tombstoned_at > self.last_write
        self.last_write = answer.tombstoned_at
        s.tombstone_reason = "user_request"
        s.invalidate(answer.tombstoned_at)

    @rule(target_id=statements)
    def retract(self, target_id: bytes) -> None:
        s = self.model[target_id]
        request = StatementRetract(request_id=self.rid(), id=target_id)
        if s.retracted:
            with pytest.raises(Conflict):
                self.run(Opcode.STATEMENT_RETRACT, request)
            return
        answer = self.run(Opcode.STATEMENT_RETRACT, request)
        assert isinstance(answer, StatementRetracted) and answer.id == target_id
        assert answer.tombstoned_at > self.last_write
        self.last_write = answer.tombstoned_at
        s.tombstone_reason = "retracted"
        s.invalidate(answer.tombstoned_at)

    @rule(target=memories, text=st.sampled_from(TEXTS), override=st.booleans())
    def encode(self, text: str, override: bool) -> object:
        request = Encode(request_id=self.rid(), text=text, override_forgotten=override or None)
        if text in self.ledger and not override:
            with pytest.raises(Forgotten):
                self.run(Opcode.ENCODE, request)
            return multiple()
        answer = self.run(Opcode.ENCODE, request)
        assert isinstance(answer, EncodeOk)
        known = self.dedup.get(text)
        if known is not None:
            assert answer.deduplicated and answer.memory_id == known
            return multiple()
        assert not answer.deduplicated and answer.memory_id not in self.mem
        self.last_write = answer.recorded_at
        self.mem[answer.memory_id] = ModelMemory(answer.memory_id, text)
        self.dedup[text] = answer.memory_id
        return answer.memory_id

    @rule(memory_id=memories, mode=st.sampled_from(("soft", "hard")))
    def forget(self, memory_id: bytes, mode: str) -> None:
        memory = self.mem[memory_id]
        answer = self.run(Opcode.FORGET, Forget(request_id=self.rid(), memory=memory_id, mode=mode))
        assert isinstance(answer, ForgetOk)
        if _STRENGTH[memory.forgotten] >= _STRENGTH[mode]:
            assert answer.already_forgotten and answer.statements_tombstoned == 0
            return
        assert not answer.already_forgotten
        shown = self.run(Opcode.MEMORY_GET, MemoryGet(id=memory_id))
        assert isinstance(shown, MemoryGetOk) and shown.memory.forgotten == mode
        at = shown.memory.forgotten_at
        assert at is not None and at > self.last_write
        self.last_write = at
        targets = {memory_id}
        if mode == "hard":
            # Keyed on the value (§4): every memory holding the same text loses it.
            self.ledger.add(memory.text)
            targets |= {m.id for m in self.mem.values() if m.text == memory.text}
        for target in targets:
            self.mem[target].forgotten = mode
        self.dedup.pop(memory.text, None)
        affected = 0
        for s in self.model.values():
            if targets.isdisjoint(s.evidence) or s.retracted:
                continue
            if any(self.mem[m].forgotten is None for m in s.evidence):
                continue
            if mode == "hard":
                s.tombstone_reason = "retracted"
            elif not s.tombstoned:
                s.tombstone_reason = "source_forgotten"
            else:
                continue
            s.invalidate(at)
            affected += 1
        assert answer.statements_tombstoned == affected

    @rule()
    def tick(self) -> None:
        t = self.db.writer.clock.tick()
        assert t > self.last_write
        self.instants.append(t)

    @precondition(lambda self: self.last_write > 0)
    @rule()
    def remember_last_write(self) -> None:
        """The record time of the last write itself: the ``=`` rows of the truth table."""
        self.instants.append(self.last_write)

    # --- invariants -----------------------------------------------------------------------

    def check_shown(self, row: Statement, s: ModelStatement, believed_at: int | None) -> None:
        """A non-retracted statement as an answer shows it, validity as believed then."""
        assert row.id == s.id and row.recorded_at == s.recorded_at
        assert (row.version, row.chain_root) == (s.version, s.chain_root)
        assert row.predicate == s.predicate and row.object_ == TextValue(text=s.value)
        assert row.evidence == tuple(Evidence(memory=m) for m in s.evidence)
        assert isinstance(row.subject, EntityRef)
        assert self.entity_of.setdefault(s.subject, row.subject.entity) == row.subject.entity
        assert (row.valid_from, row.valid_to) == (s.valid_from, s.valid_to_at(believed_at))

    @staticmethod
    def check_husk(row: Statement) -> None:
        assert row.tombstone_reason == "retracted"
        content = (row.kind, row.subject, row.predicate, row.object_, row.confidence)
        assert content == (None,) * 5
        assert (row.evidence, row.source, row.valid_from, row.valid_to) == (None,) * 4

    @invariant()
    def one_current_value_per_stateful_predicate(self) -> None:
        seen: set[tuple[object, str]] = set()
        for row in self.listing():
            if row.predicate in STATEFUL:
                key = (row.subject, row.predicate)
                assert key not in seen, f"two current {row.predicate} for {row.subject}"
                seen.add(key)

    @invariant()
    def current_set_is_the_models(self) -> None:
        rows = self.listing()
        expected = sorted(
            (s for s in self.model.values() if s.current), key=lambda s: s.recorded_at
        )
        assert [r.id for r in rows] == [s.id for s in expected]
        for row, s in zip(rows, expected, strict=True):
            self.check_shown(row, s, None)

    @invariant()
    def get_shows_the_model_and_invalidation_never_moves(self) -> None:
        for statement_id, s in self.model.items():
            row = self.get(statement_id)
            stamp = row.record_invalidated_at
            if statement_id in self.first_invalidated:
                assert stamp == self.first_invalidated[statement_id], "record_invalidated_at moved"
            elif stamp is not None:
                self.first_invalidated[statement_id] = stamp
            assert stamp == s.record_invalidated_at
            assert row.superseded_by == s.superseded_by
            assert row.tombstone_reason == s.tombstone_reason
            if s.retracted:
                self.check_husk(row)
            else:
                self.check_shown(row, s, None)

    @invariant()
    def as_of_answers_what_was_believed_then(self) -> None:
        self.steps += 1
        if not self.instants:
            return
        n = len(self.instants)
        # Every instant while they are few; then the newest three and two older ones.
        picks = (
            set(range(n)) if n <= 6 else {n - 1, n - 2, n - 3, self.steps % n, self.steps * 7 % n}
        )
        for t in sorted(self.instants[i] for i in picks):
            expected = sorted(
                (s for s in self.model.values() if s.believed_at(t)), key=lambda s: s.recorded_at
            )
            wide = self.listing(as_of=t, include_tombstoned=True, include_superseded=True)
            assert [r.id for r in wide] == [s.id for s in expected], f"as_of={t}"
            for row, s in zip(wide, expected, strict=True):
                self.check_shown(row, s, t)
            # Without the include flags: the as-of step overrides steps 4 and 5.
            narrow = self.listing(page=3, as_of=t)
            assert [r.id for r in narrow] == [s.id for s in expected], f"as_of={t}, no flags"

    @invariant()
    def retracted_content_never_returns(self) -> None:
        retracted = {i for i, s in self.model.items() if s.retracted}
        everything = self.listing(include_tombstoned=True, include_superseded=True)
        alive = sorted(
            (s for s in self.model.values() if not s.retracted), key=lambda s: s.recorded_at
        )
        assert [r.id for r in everything] == [s.id for s in alive]
        for name in SUBJECTS:
            by_subject = self.listing(
                subject=NameRef(name=name), include_tombstoned=True, include_superseded=True
            )
            assert {r.id for r in by_subject} == {s.id for s in alive if s.subject == name}
        # HISTORY: the chains that hold a retracted version show it as a husk only.
        roots = {self.model[i].chain_root for i in retracted}
        for root in roots:
            chain = sorted(
                (s for s in self.model.values() if s.chain_root == root), key=lambda s: s.version
            )
            answer = self.run(Opcode.STATEMENT_HISTORY, StatementHistory(id=chain[-1].id))
            assert isinstance(answer, StatementHistoryOk)
            assert [v.id for v in answer.versions] == [s.id for s in chain]
            for version, s in zip(answer.versions, chain, strict=True):
                if s.retracted:
                    self.check_husk(version)
                else:
                    self.check_shown(version, s, None)
        for memory in self.mem.values():
            if memory.forgotten == "hard":
                shown = self.run(Opcode.MEMORY_GET, MemoryGet(id=memory.id))
                assert isinstance(shown, MemoryGetOk) and shown.memory.text is None


StatementLaws.TestCase.settings = settings(
    max_examples=30,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestStatementLaws = StatementLaws.TestCase


def test_supersede_into_a_stateful_predicate_keeps_one_value(tmp_path: Path) -> None:
    """spec/03-time.md §4: a stateful predicate holds one current value per subject.

    STATEMENT_SUPERSEDE may change the predicate; when the new one is stateful and
    the subject already holds a current value of it, two values end up current.
    """
    with brain.open(tmp_path / "d", DatabaseOptions(fsync=_no_fsync)) as db:
        ids = request_ids()

        def run(opcode: Opcode, request: Message) -> Message:
            return db.execute(NS, opcode, request)

        def draft(predicate: str, value: str) -> dict[str, object]:
            return {
                "kind": "fact",
                "subject": NameRef(name="Alice"),
                "predicate": predicate,
                "object_": TextValue(text=value),
            }

        run(Opcode.SCHEMA_PUT, SchemaPut(predicates=(PredicateDecl(name="city", stateful=True),)))
        run(
            Opcode.STATEMENT_CREATE,
            StatementCreate(request_id=next(ids), **draft("city", "Oslo")),  # type: ignore[arg-type]
        )
        other = run(
            Opcode.STATEMENT_CREATE,
            StatementCreate(request_id=next(ids), **draft("note", "tea")),  # type: ignore[arg-type]
        )
        assert isinstance(other, StatementCreateOk)
        # Refusing the change (CONFLICT) would also keep the law.
        with contextlib.suppress(Conflict):
            run(
                Opcode.STATEMENT_SUPERSEDE,
                StatementSupersede(
                    request_id=next(ids),
                    old=other.statement_id,
                    new=StatementDraft(**draft("city", "Rome")),  # type: ignore[arg-type]
                ),
            )
        current = run(
            Opcode.STATEMENT_LIST,
            StatementList(subject=NameRef(name="Alice"), predicate="city"),
        )
        assert isinstance(current, StatementListOk)
        assert len(current.statements) <= 1, [s.object_ for s in current.statements]
