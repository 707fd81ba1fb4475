"""The graph arm over memories (spec/04-retrieval.md §4): the memories that mention what
the cue names (an entity by its name, an alias or a name merged into it, or a name no
entity has), scored by the rarity of what they mention; forgotten ones; and, as a
property, that the links of one scope never bring a record of another."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import brain
from brain.engine.database import Database
from brain.engine.index.documents import MEMORY_DOC, STATEMENT_DOC
from brain.engine.recall.graph import cue_entities, graph_search
from brain.engine.records.filters import Filters
from brain.engine.store.scope import Scope
from brain.engine.write.tuning import DEFAULT_RESOLUTION
from brain.wire.messages.entity_ops import EntityCreate, EntityCreateOk, EntityMerge
from brain.wire.messages.memory_ops import Encode, EncodeOk, Forget
from brain.wire.messages.recall_ops import ArmWeights, Recall, RecallOk
from brain.wire.messages.statement_ops import StatementCreate, StatementCreateOk
from brain.wire.messages.values import EntityRef, TextValue
from brain.wire.opcodes import Opcode
from tests.unit.common import NS, rid

SCOPE = Scope.of(NS, None)
RESOLUTION = DEFAULT_RESOLUTION
GRAPH_ONLY = ArmWeights(semantic=0, lexical=0, graph=1)


def encode(db: Database, text: str, namespace: str = NS, space: str | None = None) -> bytes:
    answer = db.execute(namespace, Opcode.ENCODE, Encode(request_id=rid(), text=text, space=space))
    assert isinstance(answer, EncodeOk)
    return answer.memory_id


def entity(
    db: Database, name: str, *aliases: str, namespace: str = NS, space: str | None = None
) -> bytes:
    made = db.execute(
        namespace,
        Opcode.ENTITY_CREATE,
        EntityCreate(request_id=rid(), name=name, aliases=aliases, space=space),
    )
    assert isinstance(made, EntityCreateOk)
    return made.entity_id


def search(
    db: Database, cue: str, *, scope: Scope = SCOPE, names_only: bool = False
) -> dict[bytes, float]:
    """What the arm answers for ``cue``: its starts are the entities the cue names (none
    with ``names_only``), as RECALL gives them."""
    with db._store.read() as txn:
        starts = set() if names_only else cue_entities(db._store, txn, scope, cue, RESOLUTION)
        found = graph_search(
            db._store, txn, scope, starts=starts, filters=Filters(), limit=1000, cue=cue
        )
    return dict(found)


def memories(found: dict[bytes, float]) -> set[bytes]:
    return {key[1:] for key in found if key[:1] == MEMORY_DOC}


def recalled(db: Database, cue: str, **kw: object) -> set[bytes]:
    answer = db.execute(NS, Opcode.RECALL, Recall(cue=cue, arms=GRAPH_ONLY, top_k=100, **kw))  # type: ignore[arg-type]
    assert isinstance(answer, RecallOk)
    return {h.id for h in answer.hits}


def test_memories_mentioning_the_cues_entity_by_name_or_alias(db: Database) -> None:
    entity(db, "Deborah", "Deb")
    by_alias = encode(db, "so Deb came by")
    by_name = encode(db, "we met Deborah at noon")
    other = encode(db, "so Mel came by")
    encode(db, "nothing named here")
    assert memories(search(db, "what did Deborah say")) == {by_alias, by_name}
    assert memories(search(db, "and Deb?")) == {by_alias, by_name}
    assert memories(search(db, "Mel")) == {other}  # a name no entity has, from the cue
    # RECALL's graph arm, through the entity the cue names.
    assert db.wait_indexed()
    assert recalled(db, "what did Deborah say") == {by_alias, by_name}


def test_a_name_merged_into_the_entity_finds_its_memories(db: Database) -> None:
    kept = entity(db, "Deborah")
    merged = entity(db, "Debbie")
    early = encode(db, "so Debbie phoned")  # linked to the entity merged away later
    db.execute(NS, Opcode.ENTITY_MERGE, EntityMerge(request_id=rid(), keep=kept, merge=merged))
    assert memories(search(db, "Deborah")) == {early}


def test_a_name_no_entity_has_is_found_only_by_the_cues_words(db: Database) -> None:
    mentioned = encode(db, "Jolene: I saw Quintavius today")
    assert memories(search(db, "did Quintavius call", names_only=True)) == {mentioned}
    assert memories(search(db, "did quintavius's sister call", names_only=True)) == {mentioned}
    assert memories(search(db, "Jolene", names_only=True)) == {mentioned}  # the speaker
    assert search(db, "did anyone call", names_only=True) == {}
    with db._store.read() as txn:
        assert graph_search(db._store, txn, SCOPE, starts=set(), filters=Filters(), limit=9) == []


def test_memories_score_by_the_rarity_of_what_they_mention(db: Database) -> None:
    both = encode(db, "so Mel met Quintavius")
    only_mel = [encode(db, f"so Mel went out {i}") for i in range(3)]
    found = search(db, "Mel and Quintavius", names_only=True)
    n = 4
    mel, quintavius = math.log(1 + n / 4), math.log(1 + n / 1)
    assert found[MEMORY_DOC + both] == 1.0
    for memory_id in only_mel:
        assert math.isclose(found[MEMORY_DOC + memory_id], mel / (mel + quintavius))
    assert memories(found) == {both, *only_mel}
    ranked = list(found)
    assert ranked[0] == MEMORY_DOC + both  # best first
    # Only the rare name: the memory mentioning it is the whole answer.
    assert memories(search(db, "Quintavius", names_only=True)) == {both}


def test_an_entitys_names_count_once(db: Database) -> None:
    entity(db, "Deborah", "Deb")
    both = encode(db, "so Deb, that is Deborah, came")
    name_only = encode(db, "so Deborah came")
    encode(db, "so Deborah left")
    found = search(db, "Deborah")
    # Deb is the rarer name (1 memory of 3, Deborah 3): its idf is the group's weight.
    deb, deborah = math.log(1 + 3 / 1), math.log(1 + 3 / 3)
    assert found[MEMORY_DOC + both] == 1.0
    assert math.isclose(found[MEMORY_DOC + name_only], deborah / deb)


def test_statements_keep_their_scores_beside_the_memories(db: Database) -> None:
    deborah = entity(db, "Deborah")
    said = db.execute(
        NS,
        Opcode.STATEMENT_CREATE,
        StatementCreate(
            request_id=rid(),
            kind="fact",
            subject=EntityRef(entity=deborah),
            predicate="likes",
            object_=TextValue(text="tea"),
        ),
    )
    assert isinstance(said, StatementCreateOk)
    mentioned = encode(db, "so Deborah came")
    found = search(db, "Deborah")
    assert found == {STATEMENT_DOC + said.statement_id: 1.0, MEMORY_DOC + mentioned: 1.0}


def test_forgotten_memories(db: Database) -> None:
    soft = encode(db, "so Quintavius came")
    hard = encode(db, "so Quintavius left")
    entity(db, "Quintavius")
    for memory_id, mode in ((soft, "soft"), (hard, "hard")):
        db.execute(NS, Opcode.FORGET, Forget(request_id=rid(), memory=memory_id, mode=mode))
    # Softly forgotten: still a candidate, which the filter chain judges.
    assert memories(search(db, "Quintavius")) == {soft}
    assert db.wait_indexed()
    assert recalled(db, "Quintavius") == set()
    assert recalled(db, "Quintavius", include_tombstoned=True) == {soft}


NAMES = ("Ada Lovelace", "Grace", "Quintavius", "LGBTQ", "Deb")
SCOPES = ((NS, None), (NS, "other"), ("tenant-b", None))


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    texts=st.lists(
        st.lists(st.sampled_from(NAMES), min_size=1, max_size=3).map(
            lambda names: "so " + " and ".join(names) + " came"
        ),
        min_size=1,
        max_size=5,
    ),
    entities=st.lists(st.sampled_from(NAMES), max_size=3, unique=True),
)
def test_the_links_of_one_scope_never_bring_another_scopes_records(
    texts: list[str], entities: list[str]
) -> None:
    with tempfile.TemporaryDirectory() as tmp, brain.open(Path(tmp) / "d") as db:
        own: dict[tuple[str, str | None], set[bytes]] = {}
        for namespace, space in SCOPES:
            mine = own.setdefault((namespace, space), set())
            for name in entities:
                mine.add(entity(db, name, namespace=namespace, space=space))
            for text in texts:
                mine.add(encode(db, text, namespace, space))
        assert db.wait_indexed()
        cue = " ".join(NAMES)
        for (namespace, space), mine in own.items():
            scope = Scope.of(namespace, space)
            for names_only in (False, True):
                found = search(db, cue, scope=scope, names_only=names_only)
                assert {key[1:] for key in found} <= mine
                assert memories(found)  # every text names someone of the cue
            for arms in (GRAPH_ONLY, None):
                answer = db.execute(
                    namespace, Opcode.RECALL, Recall(space=space, cue=cue, arms=arms, top_k=100)
                )
                assert isinstance(answer, RecallOk)
                assert {h.id for h in answer.hits} <= mine
