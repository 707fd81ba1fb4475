"""The fuzzy tier's work per resolution has a ceiling that many or long names cannot raise.

A write naming a new subject runs the fuzzy tier on the writer thread, so the
scope's names must not make it slower past a bound: it reads at most
``FUZZY_SCAN_ROWS`` keys and ``FUZZY_SCAN_BYTES`` bytes of names, and compares
names of at most ``FUZZY_NAME_CHARS`` characters (spec/02-data-model.md §4.4).
The work is counted, not timed: the real rapidfuzz scorer is wrapped to keep
every name it is handed.
"""

from __future__ import annotations

import random
import string

import pytest
from rapidfuzz import fuzz

from brain.engine.database import Database
from brain.engine.records.entity_rows import NAME_KEY_BYTES
from brain.engine.records.resolution import FUZZY_NAME_CHARS, FUZZY_SCAN_BYTES, FUZZY_SCAN_ROWS
from brain.wire.messages.entity_ops import (
    MAX_ALIASES,
    EntityCreate,
    EntityCreateOk,
    EntityResolve,
    EntityResolveOk,
)
from brain.wire.messages.statement_ops import StatementCreate, StatementCreateOk
from brain.wire.messages.values import MAX_NAME_CHARS, NameRef, TextValue
from brain.wire.opcodes import Opcode
from tests.unit.common import NS, rid


class Compared:
    """The real ``fuzz.ratio``, keeping the names it is handed."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self._ratio = fuzz.ratio

    def __call__(self, query: str, name: str, *, score_cutoff: float | None = None) -> float:
        self.names.append(name)
        return float(self._ratio(query, name, score_cutoff=score_cutoff))

    @property
    def chars(self) -> int:
        """The characters of every name compared."""
        return sum(map(len, self.names))


@pytest.fixture
def compared(monkeypatch: pytest.MonkeyPatch) -> Compared:
    counter = Compared()
    monkeypatch.setattr(fuzz, "ratio", counter)
    return counter


def fill(db: Database, *, entities: int, length: int, seed: int) -> int:
    """Entities of MAX_ALIASES aliases of ``length`` letters each, all beginning with
    ``a`` (so they come first in key order); the characters stored."""
    rnd = random.Random(seed)
    stored = 0
    for number in range(entities):
        aliases = tuple(
            "a" + "".join(rnd.choices(string.ascii_lowercase, k=length - 1))
            for _ in range(MAX_ALIASES)
        )
        stored += sum(map(len, aliases))
        request = EntityCreate(request_id=rid(), name=f"a filler {number}", aliases=aliases)
        assert isinstance(db.execute(NS, Opcode.ENTITY_CREATE, request), EntityCreateOk)
    return stored


def name_new_subject(db: Database, name: str) -> None:
    request = StatementCreate(
        request_id=rid(),
        kind="fact",
        subject=NameRef(name=name),
        predicate="likes",
        object_=TextValue(text="tea"),
    )
    assert isinstance(db.execute(NS, Opcode.STATEMENT_CREATE, request), StatementCreateOk)


def resolve(db: Database, name: str) -> EntityResolveOk:
    answer = db.execute(NS, Opcode.ENTITY_RESOLVE, EntityResolve(name=name))
    assert isinstance(answer, EntityResolveOk)
    return answer


def test_a_write_naming_a_new_subject_compares_a_bounded_number_of_characters(
    db: Database, compared: Compared
) -> None:
    # Aliases of the longest length still compared, three times what one resolution reads.
    entities = 3 * FUZZY_SCAN_BYTES // (MAX_ALIASES * FUZZY_NAME_CHARS) + 1
    stored = fill(db, entities=entities, length=FUZZY_NAME_CHARS, seed=1)
    assert stored > 3 * FUZZY_SCAN_BYTES
    query = "".join(random.Random(2).choices(string.ascii_lowercase, k=FUZZY_NAME_CHARS))
    name_new_subject(db, query)
    # The tier ran on the writer, over what one resolution may read and no more:
    # a third of the aliases at most, all of them the whole name.
    assert 0 < compared.chars <= FUZZY_SCAN_BYTES
    aliases = [name for name in compared.names if len(name) == FUZZY_NAME_CHARS]
    assert FUZZY_SCAN_BYTES // (2 * FUZZY_NAME_CHARS) < len(aliases) <= stored // 3


def test_names_too_long_to_compare_still_count_against_the_bound(
    db: Database, compared: Compared
) -> None:
    # Aliases of the longest length allowed: their keys hold a head and a hash.
    # Each key holds NAME_KEY_BYTES of name: more than one resolution reads.
    entities = FUZZY_SCAN_BYTES // (MAX_ALIASES * NAME_KEY_BYTES) + 2
    fill(db, entities=entities, length=MAX_NAME_CHARS, seed=3)
    late = db.execute(NS, Opcode.ENTITY_CREATE, EntityCreate(request_id=rid(), name="zzzz three"))
    assert isinstance(late, EntityCreateOk)
    fillers = sorted(f"a filler {n}" for n in range(entities))
    # None of them is compared (only the short entity names before them in key
    # order are), and reading them uses up the bytes one resolution reads, so the
    # name after them is no candidate: on a read, and on the writer.
    assert resolve(db, "zzzz thre").matches == ()
    assert sorted(compared.names) == fillers
    compared.names.clear()
    name_new_subject(db, "zzzz thre")
    assert sorted(compared.names) == fillers
    # The exact tier does not scan: the late name still resolves by itself.
    assert resolve(db, "zzzz three").resolved == late.entity_id


def test_a_query_longer_than_the_fuzzy_limit_skips_the_tier(
    db: Database, compared: Compared
) -> None:
    near = "b" * FUZZY_NAME_CHARS
    created = db.execute(NS, Opcode.ENTITY_CREATE, EntityCreate(request_id=rid(), name=near))
    assert isinstance(created, EntityCreateOk)
    assert resolve(db, "b" * (FUZZY_NAME_CHARS - 1) + "c").resolved == created.entity_id
    assert resolve(db, "b" * (FUZZY_NAME_CHARS + 1)).matches == ()
    assert compared.names == [near]


def test_a_name_longer_than_the_fuzzy_limit_is_no_candidate(
    db: Database, compared: Compared
) -> None:
    long_name = "b" * (FUZZY_NAME_CHARS + 40)
    created = db.execute(NS, Opcode.ENTITY_CREATE, EntityCreate(request_id=rid(), name=long_name))
    assert isinstance(created, EntityCreateOk)
    # A ratio of 0.93: a fuzzy match if it were compared.
    assert fuzz.ratio("b" * FUZZY_NAME_CHARS, long_name) > 90
    compared.names.clear()
    assert resolve(db, "b" * FUZZY_NAME_CHARS).matches == ()
    assert compared.names == []
    assert resolve(db, long_name).resolved == created.entity_id


def test_a_scope_of_many_short_names_is_read_to_the_row_bound_only(
    db: Database, compared: Compared
) -> None:
    entities = 3 * FUZZY_SCAN_ROWS // (2 * MAX_ALIASES) + 1
    fill(db, entities=entities, length=12, seed=4)
    name_new_subject(db, "a new subject")
    assert FUZZY_SCAN_ROWS // 2 < len(compared.names) <= FUZZY_SCAN_ROWS
