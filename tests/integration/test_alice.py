"""The example of spec/03-time.md §1, over the wire against a real server.

In May we learn that Alice changed jobs in February. The four questions of the
example, asked through STATEMENT_LIST, and the chain through STATEMENT_HISTORY.
"""

from __future__ import annotations

import os

from brain.client import Client
from brain.wire.messages.records import Statement
from brain.wire.messages.statement_ops import (
    StatementCreate,
    StatementCreateOk,
    StatementDraft,
    StatementHistory,
    StatementHistoryOk,
    StatementList,
    StatementListOk,
    StatementSupersede,
    StatementSupersedeOk,
)
from brain.wire.messages.values import NameRef, TextValue
from brain.wire.opcodes import Opcode
from tests.integration.conftest import ServerProcess

DAY = 86_400 * 10**9
FEB_1 = 1_706_745_600_000_000_000  # 2024-02-01
JAN_15 = FEB_1 - 17 * DAY
APR_1 = FEB_1 + 60 * DAY
HIRED = FEB_1 - 700 * DAY


def _employer(rows: tuple[Statement, ...]) -> list[str]:
    return [r.object_.text for r in rows]  # type: ignore[union-attr]


def _list(client: Client, **kw: object) -> tuple[Statement, ...]:
    answer = client.call(
        Opcode.STATEMENT_LIST,
        StatementList(subject=NameRef(name="Alice"), predicate="works_at", **kw),  # type: ignore[arg-type]
    )
    assert isinstance(answer, StatementListOk)
    return answer.statements


def test_alice_example(server: ServerProcess) -> None:
    with Client.connect(
        server.host, server.wire_port, api_key=server.credentials["api_key"]
    ) as client:
        first = client.call(
            Opcode.STATEMENT_CREATE,
            StatementCreate(
                request_id=os.urandom(16),
                kind="fact",
                subject=NameRef(name="Alice", type_="person"),
                predicate="works_at",
                object_=TextValue(text="Acme"),
                valid_from=HIRED,
            ),
        )
        assert isinstance(first, StatementCreateOk)
        april = first.recorded_at  # on the record axis, "April 1" is before we learned more
        learned = client.call(
            Opcode.STATEMENT_SUPERSEDE,
            StatementSupersede(
                request_id=os.urandom(16),
                old=first.statement_id,
                new=StatementDraft(
                    kind="fact",
                    subject=NameRef(name="Alice"),
                    predicate="works_at",
                    object_=TextValue(text="Globex"),
                    valid_from=FEB_1,
                ),
            ),
        )
        assert isinstance(learned, StatementSupersedeOk) and learned.recorded_at > april

        # What did we believe on April 1?
        assert _employer(_list(client, as_of=april)) == ["Acme"]
        # What was true on April 1?
        assert _employer(_list(client, valid_at=APR_1)) == ["Globex"]
        # On April 1, what did we believe was true on April 1? (the close came only in May)
        then = _list(client, valid_at=APR_1, as_of=april)
        assert _employer(then) == ["Acme"] and then[0].valid_to is None
        # What was true on January 15, superseded rows included? The old job, ended Feb 1.
        jan = _list(client, valid_at=JAN_15, include_superseded=True)
        assert _employer(jan) == ["Acme"] and jan[0].valid_to == FEB_1

        history = client.call(Opcode.STATEMENT_HISTORY, StatementHistory(id=learned.statement_id))
        assert isinstance(history, StatementHistoryOk)
        old, new = history.versions
        assert (old.version, new.version) == (1, 2)
        assert old.chain_root == new.chain_root == first.statement_id
        assert old.superseded_by == new.id and new.supersedes == old.id
        assert old.record_invalidated_at == learned.recorded_at
        assert new.record_invalidated_at is None
