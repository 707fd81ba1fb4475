"""Every records opcode over the wire against one real server, then idempotency.

The first tests do the whole job of each family through the Python client and
check each answer: entities (create, get, update, resolve, list, merge,
unmerge, tombstone), relations (create, get, supersede, tombstone, list,
traverse), statements (one about a memory too), memories with ``occurred_at``
and ``context``, the schema and the review queue. Each test writes in its own
space, so they share the server without seeing each other.

The sweep then sends every write opcode that carries a ``request_id`` twice
(FORGET in both modes), from two connections: the answers must be the same
bytes, and the server's applied LSN must not move on the retry (spec/01-wire.md §4).
The LSN is read from ``/metrics`` on the public port once the indexer has
caught up, because the indexer logs writes of its own after a write that
leaves text to embed.
"""

from __future__ import annotations

import json
import re
import struct
import time
import unicodedata
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Final, TypeVar

import pytest

from brain import cbor
from brain.client import Client
from brain.errors import Forgotten, InvalidArgument
from brain.wire.messages.entity_ops import (
    EntityCreate,
    EntityCreateOk,
    EntityGet,
    EntityGetOk,
    EntityList,
    EntityListOk,
    EntityMerge,
    EntityMergeOk,
    EntityResolve,
    EntityResolveOk,
    EntityTombstone,
    EntityTombstoneOk,
    EntityUnmerge,
    EntityUnmergeOk,
    EntityUpdate,
    EntityUpdateOk,
)
from brain.wire.messages.memory_ops import (
    Encode,
    EncodeOk,
    Forget,
    MemoryGet,
    MemoryGetOk,
)
from brain.wire.messages.records import Evidence, Statement
from brain.wire.messages.relation_ops import (
    RelationCreate,
    RelationCreateOk,
    RelationDraft,
    RelationGet,
    RelationGetOk,
    RelationList,
    RelationListOk,
    RelationSupersede,
    RelationSupersedeOk,
    RelationTombstone,
    RelationTombstoned,
    RelationTraverse,
    RelationTraverseOk,
)
from brain.wire.messages.review_ops import ReviewDecide, ReviewDecided, ReviewList, ReviewListOk
from brain.wire.messages.schema_ops import (
    PredicateDecl,
    RelationTypeDecl,
    Schema,
    SchemaGet,
    SchemaPut,
    SchemaPutOk,
)
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
from brain.wire.messages.values import (
    EntityRef,
    EntityValue,
    IntValue,
    MemoryRef,
    NameRef,
    PendingRef,
    TextValue,
)
from brain.wire.opcodes import RESPONSE_BIT, Opcode
from brain.wire.registry import request_class
from brain.wire.schema import Message, field_keys
from tests.integration.conftest import ServerProcess, start_server
from tests.integration.rawwire import HEADER, RawClient
from tests.request_ids import fresh_request_id as rid

SETTLE_TIMEOUT_S: Final = 60.0
"""Longest wait for the indexer to catch up before an LSN is read: generous,
because the machine may be busy; a settled server answers in milliseconds."""

SETTLE_POLL_S: Final = 0.02
"""Pause between two looks at ``/metrics`` while the indexer catches up."""

M = TypeVar("M", bound=Message)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One server for the whole module: starting one costs more than all its tests."""
    proc = start_server(Path(tmp_path_factory.mktemp("records")) / "data")
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Iterator[Client]:
    with Client.connect(
        server.host, server.wire_port, api_key=server.credentials["api_key"]
    ) as connected:
        yield connected


def ask(client: Client, opcode: Opcode, message: Message, answer: type[M]) -> M:
    """Send ``message`` and check that the answer is of class ``answer``."""
    got = client.call(opcode, message)
    assert isinstance(got, answer), got
    return got


# --- entities ----------------------------------------------------------------------------


def test_entity_opcodes(client: Client) -> None:
    space = "entities"
    ada = ask(
        client,
        Opcode.ENTITY_CREATE,
        EntityCreate(
            space=space,
            request_id=rid(),
            name="Ada Lovelace",
            type_="person",
            aliases=("Ada",),
            attributes={"born": 1815, "field": "mathematics"},
        ),
        EntityCreateOk,
    )
    got = ask(client, Opcode.ENTITY_GET, EntityGet(space=space, id=ada.entity_id), EntityGetOk)
    assert got.entity.id == ada.entity_id and got.entity.name == "Ada Lovelace"
    assert got.entity.type_ == "person" and got.entity.aliases == ("Ada",)
    assert got.entity.attributes == {"born": 1815, "field": "mathematics"}
    assert got.entity.merged_into is None and got.entity.tombstoned_at is None

    updated = ask(
        client,
        Opcode.ENTITY_UPDATE,
        EntityUpdate(
            space=space,
            request_id=rid(),
            id=ada.entity_id,
            name="Augusta Ada King",
            add_aliases=("Ada Lovelace", "Countess of Lovelace"),
            remove_aliases=("Ada",),
            attributes={"born": 1815},
        ),
        EntityUpdateOk,
    )
    assert updated.entity.name == "Augusta Ada King"
    assert set(updated.entity.aliases) == {"Ada Lovelace", "Countess of Lovelace"}
    assert updated.entity.attributes == {"born": 1815}
    again = ask(client, Opcode.ENTITY_GET, EntityGet(space=space, id=ada.entity_id), EntityGetOk)
    assert again.entity == updated.entity

    by_alias = ask(
        client,
        Opcode.ENTITY_RESOLVE,
        EntityResolve(space=space, name="Countess of Lovelace"),
        EntityResolveOk,
    )
    assert by_alias.resolved == ada.entity_id and not by_alias.ambiguous
    assert by_alias.matches[0].tier == "alias" and by_alias.matches[0].score == 1.0
    exact = ask(
        client,
        Opcode.ENTITY_RESOLVE,
        EntityResolve(space=space, name="Augusta Ada King"),
        EntityResolveOk,
    )
    assert exact.resolved == ada.entity_id and exact.matches[0].tier == "exact"

    babbage = ask(
        client,
        Opcode.ENTITY_CREATE,
        EntityCreate(space=space, request_id=rid(), name="Charles Babbage", type_="person"),
        EntityCreateOk,
    )
    engine = ask(
        client,
        Opcode.ENTITY_CREATE,
        EntityCreate(space=space, request_id=rid(), name="Analytical Engine", type_="machine"),
        EntityCreateOk,
    )
    people = ask(client, Opcode.ENTITY_LIST, EntityList(space=space, type_="person"), EntityListOk)
    assert [e.id for e in people.entities] == sorted([ada.entity_id, babbage.entity_id])
    prefixed = ask(
        client, Opcode.ENTITY_LIST, EntityList(space=space, prefix="analytical"), EntityListOk
    )
    assert [e.id for e in prefixed.entities] == [engine.entity_id]
    paged = ask(client, Opcode.ENTITY_LIST, EntityList(space=space, limit=2), EntityListOk)
    assert len(paged.entities) == 2 and paged.cursor is not None
    rest = ask(
        client,
        Opcode.ENTITY_LIST,
        EntityList(space=space, limit=2, cursor=paged.cursor),
        EntityListOk,
    )
    assert rest.cursor is None
    assert [e.id for e in (*paged.entities, *rest.entities)] == sorted(
        [ada.entity_id, babbage.entity_id, engine.entity_id]
    )

    # A duplicate "Ada" merged into the real one, then the merge undone.
    twin = ask(
        client,
        Opcode.ENTITY_CREATE,
        EntityCreate(space=space, request_id=rid(), name="A. A. Lovelace", type_="person"),
        EntityCreateOk,
    )
    merged = ask(
        client,
        Opcode.ENTITY_MERGE,
        EntityMerge(space=space, request_id=rid(), keep=ada.entity_id, merge=twin.entity_id),
        EntityMergeOk,
    )
    gone = ask(client, Opcode.ENTITY_GET, EntityGet(space=space, id=twin.entity_id), EntityGetOk)
    assert gone.entity.merged_into == ada.entity_id and gone.entity.aliases == ()
    kept = ask(client, Opcode.ENTITY_GET, EntityGet(space=space, id=ada.entity_id), EntityGetOk)
    assert "A. A. Lovelace" in kept.entity.aliases
    resolved = ask(
        client,
        Opcode.ENTITY_RESOLVE,
        EntityResolve(space=space, name="A. A. Lovelace"),
        EntityResolveOk,
    )
    assert resolved.resolved == ada.entity_id
    unmerged = ask(
        client,
        Opcode.ENTITY_UNMERGE,
        EntityUnmerge(space=space, request_id=rid(), merge_id=merged.merge_id),
        EntityUnmergeOk,
    )
    assert unmerged.lsn > merged.lsn
    back = ask(client, Opcode.ENTITY_GET, EntityGet(space=space, id=twin.entity_id), EntityGetOk)
    assert back.entity.merged_into is None and back.entity.name == "A. A. Lovelace"
    restored = ask(client, Opcode.ENTITY_GET, EntityGet(space=space, id=ada.entity_id), EntityGetOk)
    # The rows are back exactly, in a version of their own (spec/02-data-model.md §4.7).
    assert replace(restored.entity, recorded_at=0) == replace(updated.entity, recorded_at=0)
    assert restored.entity.recorded_at > updated.entity.recorded_at

    dropped = ask(
        client,
        Opcode.ENTITY_TOMBSTONE,
        EntityTombstone(space=space, request_id=rid(), id=engine.entity_id),
        EntityTombstoneOk,
    )
    assert dropped.id == engine.entity_id
    dead = ask(client, Opcode.ENTITY_GET, EntityGet(space=space, id=engine.entity_id), EntityGetOk)
    assert dead.entity.tombstoned_at is not None
    live = ask(client, Opcode.ENTITY_LIST, EntityList(space=space), EntityListOk)
    assert engine.entity_id not in {e.id for e in live.entities}


# --- relations ---------------------------------------------------------------------------


def test_relation_opcodes(client: Client) -> None:
    space = "relations"
    first = ask(
        client,
        Opcode.RELATION_CREATE,
        RelationCreate(
            space=space,
            request_id=rid(),
            type_="works_at",
            from_=NameRef(name="Alice", type_="person"),
            to=NameRef(name="Acme", type_="company"),
            confidence=0.75,
            valid_from=1_000,
        ),
        RelationCreateOk,
    )
    assert first.superseded is None
    got = ask(
        client, Opcode.RELATION_GET, RelationGet(space=space, id=first.relation_id), RelationGetOk
    )
    relation = got.relation
    assert relation.type_ == "works_at" and relation.confidence == 0.75
    assert relation.valid_from == 1_000 and relation.recorded_at == first.recorded_at
    assert isinstance(relation.from_, EntityRef) and isinstance(relation.to, EntityRef)
    alice, acme = relation.from_.entity, relation.to.entity

    moved = ask(
        client,
        Opcode.RELATION_SUPERSEDE,
        RelationSupersede(
            space=space,
            request_id=rid(),
            old=first.relation_id,
            new=RelationDraft(
                type_="works_at",
                from_=EntityRef(entity=alice),
                to=NameRef(name="Globex", type_="company"),
                valid_from=2_000,
            ),
        ),
        RelationSupersedeOk,
    )
    assert moved.superseded == first.relation_id
    old = ask(
        client, Opcode.RELATION_GET, RelationGet(space=space, id=first.relation_id), RelationGetOk
    )
    assert old.relation.superseded_by == moved.relation_id
    assert old.relation.record_invalidated_at == moved.recorded_at
    assert old.relation.valid_to == 2_000  # closed where the new one begins
    new = ask(
        client, Opcode.RELATION_GET, RelationGet(space=space, id=moved.relation_id), RelationGetOk
    )
    assert new.relation.supersedes == first.relation_id and new.relation.from_ == EntityRef(
        entity=alice
    )
    assert isinstance(new.relation.to, EntityRef)
    globex = new.relation.to.entity

    knows = ask(
        client,
        Opcode.RELATION_CREATE,
        RelationCreate(
            space=space,
            request_id=rid(),
            type_="knows",
            from_=NameRef(name="Bob"),
            to=EntityRef(entity=alice),
        ),
        RelationCreateOk,
    )
    out = ask(
        client,
        Opcode.RELATION_LIST,
        RelationList(space=space, entity=alice, direction="out"),
        RelationListOk,
    )
    assert [r.id for r in out.relations] == [moved.relation_id]  # the superseded one is gone
    both = ask(
        client,
        Opcode.RELATION_LIST,
        RelationList(space=space, entity=alice, direction="both"),
        RelationListOk,
    )
    assert [r.id for r in both.relations] == [moved.relation_id, knows.relation_id]
    typed = ask(
        client,
        Opcode.RELATION_LIST,
        RelationList(space=space, entity=alice, direction="both", type_="knows"),
        RelationListOk,
    )
    assert [r.id for r in typed.relations] == [knows.relation_id]
    back_then = ask(
        client,
        Opcode.RELATION_LIST,
        RelationList(space=space, entity=alice, direction="out", as_of=first.recorded_at),
        RelationListOk,
    )
    assert [r.id for r in back_then.relations] == [first.relation_id]
    assert acme != globex

    walk = ask(
        client,
        Opcode.RELATION_TRAVERSE,
        RelationTraverse(space=space, from_=alice, depth=2),
        RelationTraverseOk,
    )
    hops = {n.entity_id: n.hop for n in walk.nodes}
    assert hops[alice] == 0 and hops[globex] == 1 and len(hops) == 3 and acme not in hops
    assert sorted(e.id for e in walk.edges) == sorted([moved.relation_id, knows.relation_id])
    only_work = ask(
        client,
        Opcode.RELATION_TRAVERSE,
        RelationTraverse(space=space, from_=alice, depth=1, types=("works_at",), direction="out"),
        RelationTraverseOk,
    )
    assert {n.entity_id for n in only_work.nodes} == {alice, globex}

    gone = ask(
        client,
        Opcode.RELATION_TOMBSTONE,
        RelationTombstone(space=space, request_id=rid(), id=knows.relation_id, reason="typo"),
        RelationTombstoned,
    )
    assert gone.id == knows.relation_id
    shown = ask(
        client, Opcode.RELATION_GET, RelationGet(space=space, id=knows.relation_id), RelationGetOk
    )
    assert shown.relation.tombstoned_at == gone.tombstoned_at
    after = ask(
        client,
        Opcode.RELATION_LIST,
        RelationList(space=space, entity=alice, direction="both"),
        RelationListOk,
    )
    assert [r.id for r in after.relations] == [moved.relation_id]


def test_a_symmetric_relation_type_is_read_both_ways(client: Client) -> None:
    """An edge of a type declared symmetric is found from its object as from its
    subject, in every direction; an edge of another type keeps its direction."""
    space = "symmetric"
    put = SchemaPut(
        space=space,
        relation_types=(
            RelationTypeDecl(name="married_to", cardinality="many_to_many", symmetric=True),
            RelationTypeDecl(name="knows", cardinality="many_to_many", symmetric=False),
        ),
    )
    ask(client, Opcode.SCHEMA_PUT, put, SchemaPutOk)

    def relate(type_: str, from_: str, to: str) -> RelationCreateOk:
        draft = RelationCreate(
            space=space,
            request_id=rid(),
            type_=type_,
            from_=NameRef(name=from_),
            to=NameRef(name=to),
        )
        return ask(client, Opcode.RELATION_CREATE, draft, RelationCreateOk)

    married, knows = relate("married_to", "Ann", "Ben"), relate("knows", "Cy", "Ben")
    ends = ask(
        client, Opcode.RELATION_GET, RelationGet(space=space, id=knows.relation_id), RelationGetOk
    ).relation
    assert isinstance(ends.from_, EntityRef) and isinstance(ends.to, EntityRef)
    cy, ben = ends.from_.entity, ends.to.entity

    def listed(entity: bytes, direction: str, type_: str | None = None) -> list[bytes]:
        request = RelationList(space=space, entity=entity, direction=direction, type_=type_)
        answer = ask(client, Opcode.RELATION_LIST, request, RelationListOk)
        return [r.id for r in answer.relations]

    # Ben is only the object of both edges; the symmetric one leads out of him too.
    assert listed(ben, "out") == [married.relation_id]
    assert listed(ben, "out", "married_to") == [married.relation_id]
    assert listed(ben, "out", "knows") == []
    assert listed(ben, "in") == [married.relation_id, knows.relation_id]
    assert listed(cy, "in") == []  # the non-symmetric edge keeps its direction

    walk = ask(
        client,
        Opcode.RELATION_TRAVERSE,
        RelationTraverse(space=space, from_=ben, depth=2, direction="out"),
        RelationTraverseOk,
    )
    assert [e.id for e in walk.edges] == [married.relation_id]
    (start, spouse) = walk.nodes
    assert (start.entity_id, start.hop, spouse.hop) == (ben, 0, 1)
    back = ask(
        client,
        Opcode.RELATION_TRAVERSE,
        RelationTraverse(space=space, from_=spouse.entity_id, depth=1, direction="in"),
        RelationTraverseOk,
    )
    assert [n.entity_id for n in back.nodes] == [spouse.entity_id, ben]
    reverse_knows = ask(
        client,
        Opcode.RELATION_TRAVERSE,
        RelationTraverse(space=space, from_=ben, depth=1, direction="out", types=("knows",)),
        RelationTraverseOk,
    )
    assert [n.entity_id for n in reverse_knows.nodes] == [ben] and reverse_knows.edges == ()


# --- memories and statements -------------------------------------------------------------


def test_memory_and_statement_opcodes(client: Client) -> None:
    space = "statements"
    occurred = 1_700_000_000_123_456_789
    encoded = ask(
        client,
        Opcode.ENCODE,
        Encode(
            space=space,
            request_id=rid(),
            text="Alice said she moved to Oslo last spring.",
            occurred_at=occurred,
            context="chat with Alice, thread 7",
        ),
        EncodeOk,
    )
    assert not encoded.deduplicated
    memory = ask(
        client, Opcode.MEMORY_GET, MemoryGet(space=space, id=encoded.memory_id), MemoryGetOk
    ).memory
    assert memory.text == "Alice said she moved to Oslo last spring."
    assert memory.occurred_at == occurred and memory.context == "chat with Alice, thread 7"
    assert memory.recorded_at == encoded.recorded_at and memory.forgotten is None
    assert memory.sha256 == encoded.sha256

    # A statement about the memory itself: its subject is {"memory": id}.
    about = ask(
        client,
        Opcode.STATEMENT_CREATE,
        StatementCreate(
            space=space,
            request_id=rid(),
            kind="fact",
            subject=MemoryRef(memory=encoded.memory_id),
            predicate="mentions city",
            object_=TextValue(text="Oslo"),
            evidence=(Evidence(memory=encoded.memory_id, sha256=memory.sha256),),
            source="agent:reader",
        ),
        StatementCreateOk,
    )
    shown = ask(
        client,
        Opcode.STATEMENT_GET,
        StatementGet(space=space, id=about.statement_id),
        StatementGetOk,
    ).statement
    assert shown.subject == MemoryRef(memory=encoded.memory_id)
    assert shown.predicate == "mentions city" and shown.object_ == TextValue(text="Oslo")
    assert shown.evidence == (Evidence(memory=encoded.memory_id, sha256=memory.sha256),)
    assert shown.source == "agent:reader" and shown.confidence == 1.0
    assert shown.space == space and shown.version == 1 and shown.chain_root == about.statement_id
    by_memory = ask(
        client,
        Opcode.STATEMENT_LIST,
        StatementList(space=space, subject=MemoryRef(memory=encoded.memory_id)),
        StatementListOk,
    )
    assert [s.id for s in by_memory.statements] == [about.statement_id]

    lives = ask(
        client,
        Opcode.STATEMENT_CREATE,
        StatementCreate(
            space=space,
            request_id=rid(),
            kind="fact",
            subject=NameRef(name="Alice", type_="person"),
            predicate="lives_in",
            object_=TextValue(text="Bergen"),
            confidence=0.5,
            valid_from=10,
        ),
        StatementCreateOk,
    )
    alice = ask(
        client,
        Opcode.STATEMENT_GET,
        StatementGet(space=space, id=lives.statement_id),
        StatementGetOk,
    ).statement.subject
    assert isinstance(alice, EntityRef)
    moved = ask(
        client,
        Opcode.STATEMENT_SUPERSEDE,
        StatementSupersede(
            space=space,
            request_id=rid(),
            old=lives.statement_id,
            new=StatementDraft(
                kind="fact",
                subject=alice,
                predicate="lives_in",
                object_=TextValue(text="Oslo"),
                evidence=(Evidence(memory=encoded.memory_id),),
                valid_from=20,
            ),
        ),
        StatementSupersedeOk,
    )
    assert moved.superseded == lives.statement_id
    assert moved.version == 2 and moved.chain_root == lives.statement_id
    history = ask(
        client,
        Opcode.STATEMENT_HISTORY,
        StatementHistory(space=space, id=moved.statement_id),
        StatementHistoryOk,
    ).versions
    assert [v.id for v in history] == [lives.statement_id, moved.statement_id]
    assert history[0].superseded_by == moved.statement_id and history[0].valid_to == 20
    current = ask(
        client,
        Opcode.STATEMENT_LIST,
        StatementList(space=space, subject=alice, predicate="lives_in"),
        StatementListOk,
    )
    assert [s.object_ for s in current.statements] == [TextValue(text="Oslo")]
    every = ask(
        client,
        Opcode.STATEMENT_LIST,
        StatementList(space=space, subject=alice, include_superseded=True),
        StatementListOk,
    )
    assert [s.id for s in every.statements] == [lives.statement_id, moved.statement_id]

    age = ask(
        client,
        Opcode.STATEMENT_CREATE,
        StatementCreate(
            space=space,
            request_id=rid(),
            kind="event",
            subject=alice,
            predicate="turned",
            object_=IntValue(int_=30),
            event_at=occurred,
        ),
        StatementCreateOk,
    )
    dropped = ask(
        client,
        Opcode.STATEMENT_TOMBSTONE,
        StatementTombstone(space=space, request_id=rid(), id=age.statement_id, reason="wrong"),
        StatementTombstoned,
    )
    tomb = ask(
        client,
        Opcode.STATEMENT_GET,
        StatementGet(space=space, id=age.statement_id),
        StatementGetOk,
    ).statement
    assert tomb.tombstoned_at == dropped.tombstoned_at and tomb.tombstone_reason == "user_request"
    assert tomb.event_at == occurred and tomb.kind == "event"

    retracted = ask(
        client,
        Opcode.STATEMENT_RETRACT,
        StatementRetract(space=space, request_id=rid(), id=about.statement_id),
        StatementRetracted,
    )
    husk = ask(
        client,
        Opcode.STATEMENT_GET,
        StatementGet(space=space, id=about.statement_id),
        StatementGetOk,
    ).statement
    assert husk.tombstone_reason == "retracted" and husk.tombstoned_at == retracted.tombstoned_at
    assert husk.subject is None and husk.object_ is None and husk.evidence is None
    gone = ask(
        client,
        Opcode.STATEMENT_LIST,
        StatementList(
            space=space, subject=MemoryRef(memory=encoded.memory_id), include_tombstoned=True
        ),
        StatementListOk,
    )
    assert gone.statements == ()

    # Evidence must name a memory of the scope, with its own hash when one is given.
    with pytest.raises(InvalidArgument) as bad_hash:
        client.call(
            Opcode.STATEMENT_CREATE,
            StatementCreate(
                space=space,
                request_id=rid(),
                kind="fact",
                subject=alice,
                predicate="likes",
                object_=TextValue(text="tea"),
                evidence=(Evidence(memory=encoded.memory_id, sha256=bytes(32)),),
            ),
        )
    assert bad_hash.value.field == "evidence[0].sha256"


def test_texts_that_normalise_alike_are_one_text_to_dedup_and_forgetting(client: Client) -> None:
    """Unicode composition and whitespace do not make a new text: an ENCODE of a
    variant names the stored memory, and after a hard forget every variant is
    FORGOTTEN (spec/02-data-model.md §3)."""
    space = "normalised"
    composed = "Caf\u00e9 on   Rue Cler,\tnoon"
    decomposed = unicodedata.normalize("NFD", composed)
    assert decomposed != composed

    def encode(text: str, *, override: bool | None = None) -> Message:
        request = Encode(space=space, request_id=rid(), text=text, override_forgotten=override)
        return client.call(Opcode.ENCODE, request)

    first = encode(composed)
    assert isinstance(first, EncodeOk) and not first.deduplicated
    for variant in (decomposed, composed + " ", " Caf\u00e9 on Rue Cler, noon\n"):
        again = encode(variant)
        assert isinstance(again, EncodeOk) and again.deduplicated
        # The answer names the stored memory with its own hash, the one a citation gives.
        assert (again.memory_id, again.sha256) == (first.memory_id, first.sha256)
    assert isinstance(encode("Cafe on Rue Cler, noon"), EncodeOk)  # other letters: other text

    forget = Forget(space=space, request_id=rid(), memory=first.memory_id, mode="hard")
    client.call(Opcode.FORGET, forget)
    for variant in (composed, decomposed, composed + " ", "Caf\u00e9 on Rue\nCler, noon"):
        with pytest.raises(Forgotten) as refused:
            encode(variant)
        assert refused.value.field == "text"
    overridden = encode(composed + "\n", override=True)
    assert isinstance(overridden, EncodeOk) and not overridden.deduplicated


# --- schema and reviews ------------------------------------------------------------------


def test_schema_and_review_opcodes(client: Client, server: ServerProcess) -> None:
    space = "reviews"
    empty = ask(client, Opcode.SCHEMA_GET, SchemaGet(space=space), Schema)
    assert empty.version == 0 and empty.predicates == () and empty.entity_types == ()
    put = SchemaPut(
        space=space,
        predicates=(
            PredicateDecl(name="born_in", kind="fact", stateful=False),
            PredicateDecl(name="home", stateful=True),
        ),
        relation_types=(
            RelationTypeDecl(name="married_to", cardinality="one_to_one", symmetric=True),
        ),
        entity_types=("person", "city"),
    )
    assert ask(client, Opcode.SCHEMA_PUT, put, SchemaPutOk).version == 1
    lsn = settled_lsn(server)
    # SCHEMA_PUT has no request_id: a repeat is idempotent by content, and takes no LSN.
    assert ask(client, Opcode.SCHEMA_PUT, put, SchemaPutOk).version == 1
    assert settled_lsn(server) == lsn
    schema = ask(client, Opcode.SCHEMA_GET, SchemaGet(space=space), Schema)
    assert schema.version == 1
    assert schema.predicates == (
        PredicateDecl(name="born_in", kind="fact", stateful=False),
        PredicateDecl(name="home", stateful=True),
    )
    assert schema.relation_types == (
        RelationTypeDecl(name="married_to", cardinality="one_to_one", symmetric=True),
    )
    assert schema.entity_types == ("person", "city")

    # A contradiction of a declared fact waits for review; keep_both closes it.
    def born(city: str) -> StatementCreateOk:
        return ask(
            client,
            Opcode.STATEMENT_CREATE,
            StatementCreate(
                space=space,
                request_id=rid(),
                kind="fact",
                subject=NameRef(name="Dee"),
                predicate="born_in",
                object_=TextValue(text=city),
            ),
            StatementCreateOk,
        )

    paris, lyon = born("Paris"), born("Lyon")
    (item,) = ask(client, Opcode.REVIEW_LIST, ReviewList(space=space), ReviewListOk).items
    assert item.kind == "contradiction"
    assert item.records == (paris.statement_id, lyon.statement_id)
    decided = ask(
        client,
        Opcode.REVIEW_DECIDE,
        ReviewDecide(space=space, request_id=rid(), review_id=item.review_id, decision="keep_both"),
        ReviewDecided,
    )
    assert decided.lsn > lyon.lsn
    assert ask(client, Opcode.REVIEW_LIST, ReviewList(space=space), ReviewListOk).items == ()

    # An ambiguous name: the statement waits on a pending subject until decided.
    twins = [
        ask(
            client,
            Opcode.ENTITY_CREATE,
            EntityCreate(space=space, request_id=rid(), name="Sam Lee"),
            EntityCreateOk,
        ).entity_id
        for _ in range(2)
    ]
    said = ask(
        client,
        Opcode.STATEMENT_CREATE,
        StatementCreate(
            space=space,
            request_id=rid(),
            kind="fact",
            subject=NameRef(name="Sam Lee"),
            predicate="likes",
            object_=EntityValue(entity=twins[0]),
        ),
        StatementCreateOk,
    )
    (waiting,) = ask(client, Opcode.REVIEW_LIST, ReviewList(space=space), ReviewListOk).items
    assert waiting.kind == "ambiguous_entity" and waiting.name == "Sam Lee"
    assert set(waiting.records[:2]) == set(twins)
    assert waiting.records[2:] == (said.statement_id,)
    pending = ask(
        client,
        Opcode.STATEMENT_GET,
        StatementGet(space=space, id=said.statement_id),
        StatementGetOk,
    ).statement
    assert pending.subject == PendingRef(pending=waiting.review_id)
    ask(
        client,
        Opcode.REVIEW_DECIDE,
        ReviewDecide(
            space=space, request_id=rid(), review_id=waiting.review_id, decision="distinct"
        ),
        ReviewDecided,
    )
    resolved = ask(
        client,
        Opcode.STATEMENT_GET,
        StatementGet(space=space, id=said.statement_id),
        StatementGetOk,
    ).statement
    assert isinstance(resolved.subject, EntityRef) and resolved.subject.entity not in twins
    assert ask(client, Opcode.REVIEW_LIST, ReviewList(space=space), ReviewListOk).items == ()


def test_a_merge_decision_points_an_ambiguous_name_at_the_candidate_it_names(
    client: Client,
) -> None:
    """``merge`` names the candidate the name means (``into``): the waiting records
    answer as it, and the other candidate is left as it was."""
    space = "review-into"

    def entity(name: str) -> bytes:
        request = EntityCreate(space=space, request_id=rid(), name=name)
        return ask(client, Opcode.ENTITY_CREATE, request, EntityCreateOk).entity_id

    first, second, stranger = entity("Quinn Ray"), entity("Quinn Ray"), entity("Noor")
    on_first = ask(
        client,
        Opcode.STATEMENT_CREATE,
        StatementCreate(
            space=space,
            request_id=rid(),
            kind="fact",
            subject=EntityRef(entity=first),
            predicate="plays",
            object_=TextValue(text="chess"),
        ),
        StatementCreateOk,
    ).statement_id
    waiting = ask(
        client,
        Opcode.STATEMENT_CREATE,
        StatementCreate(
            space=space,
            request_id=rid(),
            kind="fact",
            subject=NameRef(name="Quinn Ray"),
            predicate="likes",
            object_=TextValue(text="tea"),
        ),
        StatementCreateOk,
    ).statement_id
    (item,) = ask(client, Opcode.REVIEW_LIST, ReviewList(space=space), ReviewListOk).items
    assert set(item.records[:2]) == {first, second}

    def decide(decision: str, into: bytes | None) -> Message:
        request = ReviewDecide(
            space=space, request_id=rid(), review_id=item.review_id, decision=decision, into=into
        )
        return client.call(Opcode.REVIEW_DECIDE, request)

    # A merge without a choice, a choice that is no candidate, a choice with distinct.
    for decision, into in (("merge", None), ("merge", stranger), ("distinct", second)):
        with pytest.raises(InvalidArgument) as refused:
            decide(decision, into)
        assert refused.value.field == "into"
    still_open = ask(client, Opcode.REVIEW_LIST, ReviewList(space=space), ReviewListOk).items
    assert still_open == (item,)  # a refused decision changes nothing

    assert isinstance(decide("merge", second), ReviewDecided)
    assert ask(client, Opcode.REVIEW_LIST, ReviewList(space=space), ReviewListOk).items == ()

    def subject(statement_id: bytes) -> object:
        request = StatementGet(space=space, id=statement_id)
        return ask(client, Opcode.STATEMENT_GET, request, StatementGetOk).statement.subject

    assert subject(waiting) == EntityRef(entity=second)
    assert subject(on_first) == EntityRef(entity=first)
    untouched = ask(client, Opcode.ENTITY_GET, EntityGet(space=space, id=first), EntityGetOk).entity
    assert untouched.merged_into is None and untouched.tombstoned_at is None
    listed = ask(
        client,
        Opcode.STATEMENT_LIST,
        StatementList(space=space, subject=EntityRef(entity=second)),
        StatementListOk,
    )
    assert [st.id for st in listed.statements] == [waiting]


def test_a_supersede_decision_continues_one_chain(client: Client) -> None:
    """A contradiction decided ``supersede``: the newest statement is the next version
    of the one it supersedes, so the history of either holds both, and a later
    correction of the newest continues the same chain."""
    space = "review-chain"
    declare = SchemaPut(
        space=space, predicates=(PredicateDecl(name="born_in", kind="fact", stateful=False),)
    )
    ask(client, Opcode.SCHEMA_PUT, declare, SchemaPutOk)

    def draft(city: str) -> StatementDraft:
        return StatementDraft(
            kind="fact",
            subject=NameRef(name="Ines"),
            predicate="born_in",
            object_=TextValue(text=city),
        )

    def born(city: str) -> StatementCreateOk:
        request = StatementCreate(
            space=space,
            request_id=rid(),
            kind="fact",
            subject=NameRef(name="Ines"),
            predicate="born_in",
            object_=TextValue(text=city),
        )
        return ask(client, Opcode.STATEMENT_CREATE, request, StatementCreateOk)

    older, newer = born("Porto"), born("Braga")
    (item,) = ask(client, Opcode.REVIEW_LIST, ReviewList(space=space), ReviewListOk).items
    assert item.records == (older.statement_id, newer.statement_id)
    decide = ReviewDecide(
        space=space, request_id=rid(), review_id=item.review_id, decision="supersede"
    )
    ask(client, Opcode.REVIEW_DECIDE, decide, ReviewDecided)

    def history(statement_id: bytes) -> tuple[Statement, ...]:
        request = StatementHistory(space=space, id=statement_id)
        return ask(client, Opcode.STATEMENT_HISTORY, request, StatementHistoryOk).versions

    for either in (older.statement_id, newer.statement_id):
        first, second = history(either)
        assert (first.id, second.id) == (older.statement_id, newer.statement_id)
        assert first.chain_root == second.chain_root == older.statement_id
        assert (first.version, second.version) == (1, 2)
        assert first.superseded_by == newer.statement_id and first.record_invalidated_at
        assert second.supersedes == older.statement_id and second.superseded_by is None
    third = ask(
        client,
        Opcode.STATEMENT_SUPERSEDE,
        StatementSupersede(
            space=space, request_id=rid(), old=newer.statement_id, new=draft("Faro")
        ),
        StatementSupersedeOk,
    )
    assert (third.chain_root, third.version) == (older.statement_id, 3)
    assert [v.id for v in history(older.statement_id)] == [
        older.statement_id,
        newer.statement_id,
        third.statement_id,
    ]


def test_declared_entity_types_constrain_new_entities(client: Client) -> None:
    """Once a space's schema lists entity types, a write that would make an entity of
    another type is INVALID_ARGUMENT naming the type's field; untyped entities and
    names of existing entities pass, and a space declaring none takes any type."""
    space, open_space = "entity-types", "entity-types-open"
    declare = SchemaPut(space=space, entity_types=("person", "city"))
    ask(client, Opcode.SCHEMA_PUT, declare, SchemaPutOk)

    def create(name: str, type_: str | None, where: str = space) -> Message:
        request = EntityCreate(space=where, request_id=rid(), name=name, type_=type_)
        return client.call(Opcode.ENTITY_CREATE, request)

    assert isinstance(create("Ada", "person"), EntityCreateOk)
    assert isinstance(create("Someone", None), EntityCreateOk)
    assert isinstance(create("Rex", "dog", open_space), EntityCreateOk)
    with pytest.raises(InvalidArgument) as refused:
        create("Rex", "dog")
    assert refused.value.field == "type"

    def state(subject: NameRef) -> Message:
        request = StatementCreate(
            space=space,
            request_id=rid(),
            kind="fact",
            subject=subject,
            predicate="likes",
            object_=TextValue(text="tea"),
        )
        return client.call(Opcode.STATEMENT_CREATE, request)

    assert isinstance(state(NameRef(name="Ada", type_="person")), StatementCreateOk)
    assert isinstance(state(NameRef(name="Bea", type_="person")), StatementCreateOk)
    with pytest.raises(InvalidArgument) as by_name:
        state(NameRef(name="Acme", type_="company"))
    assert by_name.value.field == "subject.type"

    def relate(from_: NameRef, to: NameRef) -> Message:
        request = RelationCreate(
            space=space, request_id=rid(), type_="lives_in", from_=from_, to=to
        )
        return client.call(Opcode.RELATION_CREATE, request)

    assert isinstance(
        relate(NameRef(name="Ada", type_="person"), NameRef(name="Paris", type_="city")),
        RelationCreateOk,
    )
    with pytest.raises(InvalidArgument) as end:
        relate(NameRef(name="Ada", type_="person"), NameRef(name="Mars", type_="planet"))
    assert end.value.field == "to.type"
    # Nothing of a refused write was stored.
    listed = ask(client, Opcode.ENTITY_LIST, EntityList(space=space), EntityListOk)
    assert sorted(e.name for e in listed.entities) == ["Ada", "Bea", "Paris", "Someone"]


# --- idempotency of every write --------------------------------------------------------


def _metrics(server: ServerProcess) -> dict[str, int]:
    url = f"http://{server.host}:{server.public_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode("utf-8")
    return {
        name: int(float(value))
        for name, value in re.findall(r"^(brain_\w+) (\S+)$", text, flags=re.MULTILINE)
    }


def _readyz_lsn(server: ServerProcess) -> int:
    url = f"http://{server.host}:{server.public_port}/readyz"
    with urllib.request.urlopen(url, timeout=10) as response:
        body = json.loads(response.read())
    lsn = body["applied_lsn"]
    assert isinstance(lsn, int)
    return lsn


def settled_lsn(server: ServerProcess) -> int:
    """The applied LSN (from ``/readyz``) once the indexer has nothing left to do.

    The indexer logs a write of its own after any write that leaves text to
    embed; it is done when its indexed LSN has reached the applied one with no
    backlog, and the applied LSN read after that is unchanged.
    """
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while True:
        before = _readyz_lsn(server)
        seen = _metrics(server)
        after = _readyz_lsn(server)
        if (
            before == after == seen["brain_applied_lsn"] == seen["brain_indexed_lsn"]
            and seen["brain_embed_backlog"] == 0
        ):
            return after
        assert time.monotonic() < deadline, f"the indexer did not settle: {seen}"
        time.sleep(SETTLE_POLL_S)


class _RawAnswers(RawClient):
    """The wire client of the test suite, keeping each answer's payload bytes."""

    next_stream = 1

    def call_raw(self, opcode: Opcode, message: Message) -> tuple[int, bytes]:
        stream = self.next_stream
        self.next_stream += 2
        self.send(opcode, stream, raw=cbor.encode(message.to_wire()))
        if not self._fill(HEADER):
            raise EOFError("server closed the connection")
        head = self.buffer[:HEADER]
        length = int.from_bytes(head[16:19], "big")
        if not self._fill(HEADER + length):
            raise EOFError("server closed inside a frame")
        payload = self.buffer[HEADER : HEADER + length]
        self.buffer = self.buffer[HEADER + length :]
        assert struct.unpack(">I", head[12:16])[0] == stream
        return struct.unpack(">H", head[5:7])[0], payload


def _writes_with_request_id() -> set[Opcode]:
    return {
        opcode
        for opcode in Opcode
        if "request_id" in {key for key, _ in field_keys(request_class(opcode))}
    }


def _sweep_cases(client: Client, space: str) -> list[tuple[str, Opcode, Message]]:
    """One request per write opcode with a request_id, each against fresh records."""

    def make(opcode: Opcode, message: Message, answer: type[M]) -> M:
        return ask(client, opcode, message, answer)

    def entity(name: str) -> bytes:
        return make(
            Opcode.ENTITY_CREATE,
            EntityCreate(space=space, request_id=rid(), name=name),
            EntityCreateOk,
        ).entity_id

    def memory(text: str) -> bytes:
        return make(
            Opcode.ENCODE, Encode(space=space, request_id=rid(), text=text), EncodeOk
        ).memory_id

    def statement(subject: str, value: str) -> bytes:
        return make(
            Opcode.STATEMENT_CREATE,
            StatementCreate(
                space=space,
                request_id=rid(),
                kind="fact",
                subject=NameRef(name=subject),
                predicate="likes",
                object_=TextValue(text=value),
            ),
            StatementCreateOk,
        ).statement_id

    def relation(a: str, b: str) -> bytes:
        return make(
            Opcode.RELATION_CREATE,
            RelationCreate(
                space=space,
                request_id=rid(),
                type_="knows",
                from_=NameRef(name=a),
                to=NameRef(name=b),
            ),
            RelationCreateOk,
        ).relation_id

    keep, absorbed = entity("Kim Keep"), entity("Kim Merge")
    undo = make(
        Opcode.ENTITY_MERGE,
        EntityMerge(space=space, request_id=rid(), keep=keep, merge=absorbed),
        EntityMergeOk,
    ).merge_id
    for _ in range(2):
        entity("Pat Twin")
    make(
        Opcode.STATEMENT_CREATE,
        StatementCreate(
            space=space,
            request_id=rid(),
            kind="fact",
            subject=NameRef(name="Pat Twin"),
            predicate="likes",
            object_=TextValue(text="chess"),
        ),
        StatementCreateOk,
    )
    (review,) = make(Opcode.REVIEW_LIST, ReviewList(space=space), ReviewListOk).items
    soft, hard = memory("a memory to forget softly"), memory("a memory to forget hard")
    cited = make(
        Opcode.STATEMENT_CREATE,
        StatementCreate(
            space=space,
            request_id=rid(),
            kind="fact",
            subject=NameRef(name="Lou"),
            predicate="read",
            object_=TextValue(text="the hard one"),
            evidence=(Evidence(memory=hard),),
        ),
        StatementCreateOk,
    )
    assert cited.statement_id
    old_statement = statement("Noa", "tea")
    old_relation = relation("Noa", "Kai")
    return [
        (
            "encode",
            Opcode.ENCODE,
            Encode(
                space=space, request_id=rid(), text="a new memory", occurred_at=5, context="sweep"
            ),
        ),
        (
            "forget soft",
            Opcode.FORGET,
            Forget(space=space, request_id=rid(), memory=soft, mode="soft"),
        ),
        (
            "forget hard",
            Opcode.FORGET,
            Forget(space=space, request_id=rid(), memory=hard, mode="hard"),
        ),
        (
            "entity create",
            Opcode.ENTITY_CREATE,
            EntityCreate(space=space, request_id=rid(), name="Rio", attributes={"w": 2.5}),
        ),
        (
            "entity update",
            Opcode.ENTITY_UPDATE,
            EntityUpdate(space=space, request_id=rid(), id=entity("Ula"), add_aliases=("U",)),
        ),
        (
            "entity merge",
            Opcode.ENTITY_MERGE,
            EntityMerge(space=space, request_id=rid(), keep=entity("Vic"), merge=entity("Vik")),
        ),
        (
            "entity unmerge",
            Opcode.ENTITY_UNMERGE,
            EntityUnmerge(space=space, request_id=rid(), merge_id=undo),
        ),
        (
            "entity tombstone",
            Opcode.ENTITY_TOMBSTONE,
            EntityTombstone(space=space, request_id=rid(), id=entity("Wyn")),
        ),
        (
            "statement create",
            Opcode.STATEMENT_CREATE,
            StatementCreate(
                space=space,
                request_id=rid(),
                kind="preference",
                subject=NameRef(name="Xan"),
                predicate="likes",
                object_=TextValue(text="rain"),
                confidence=0.25,
            ),
        ),
        (
            "statement supersede",
            Opcode.STATEMENT_SUPERSEDE,
            StatementSupersede(
                space=space,
                request_id=rid(),
                old=old_statement,
                new=StatementDraft(
                    kind="fact",
                    subject=NameRef(name="Noa"),
                    predicate="likes",
                    object_=TextValue(text="coffee"),
                ),
            ),
        ),
        (
            "statement tombstone",
            Opcode.STATEMENT_TOMBSTONE,
            StatementTombstone(space=space, request_id=rid(), id=statement("Yul", "figs")),
        ),
        (
            "statement retract",
            Opcode.STATEMENT_RETRACT,
            StatementRetract(space=space, request_id=rid(), id=statement("Zed", "plums")),
        ),
        (
            "relation create",
            Opcode.RELATION_CREATE,
            RelationCreate(
                space=space,
                request_id=rid(),
                type_="knows",
                from_=NameRef(name="Ann"),
                to=NameRef(name="Ben"),
                confidence=0.5,
            ),
        ),
        (
            "relation supersede",
            Opcode.RELATION_SUPERSEDE,
            RelationSupersede(
                space=space,
                request_id=rid(),
                old=old_relation,
                new=RelationDraft(type_="knows", from_=NameRef(name="Noa"), to=NameRef(name="Cy")),
            ),
        ),
        (
            "relation tombstone",
            Opcode.RELATION_TOMBSTONE,
            RelationTombstone(space=space, request_id=rid(), id=relation("Dov", "Eve")),
        ),
        (
            "review decide",
            Opcode.REVIEW_DECIDE,
            ReviewDecide(
                space=space,
                request_id=rid(),
                review_id=review.review_id,
                decision="merge",
                into=review.records[0],
            ),
        ),
    ]


def test_every_write_with_a_request_id_is_idempotent(client: Client, server: ServerProcess) -> None:
    cases = _sweep_cases(client, "sweep")
    assert {opcode for _, opcode, _ in cases} == _writes_with_request_id()
    assert {c[2].mode for c in cases if isinstance(c[2], Forget)} == {"soft", "hard"}
    key = server.credentials["api_key"]
    # The retry comes on another connection: a client that lost its connection
    # with the answer retries on a new one.
    first = _RawAnswers(server.host, server.wire_port)
    second = _RawAnswers(server.host, server.wire_port)
    try:
        for conn in (first, second):
            assert conn.handshake(key).opcode == Opcode.AUTH | RESPONSE_BIT
        for name, opcode, request in cases:
            before = settled_lsn(server)
            code, answer = first.call_raw(opcode, request)
            assert code == opcode | RESPONSE_BIT, (name, cbor.decode(answer))
            wrote = settled_lsn(server)
            assert wrote > before, name  # the first send did write
            again_code, again = second.call_raw(opcode, request)
            assert again_code == code and again == answer, name
            assert settled_lsn(server) == wrote, name
    finally:
        first.close()
        second.close()
