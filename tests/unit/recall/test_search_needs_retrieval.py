"""RECALL and EXPLAIN check that the read was given the retrieval services.

:class:`brain.engine.write.reads.ReadContext` sits below the index and holds
them as a plain object; the recall readers check it is a
:class:`brain.engine.index.service.Retrieval` before they search.
"""

from __future__ import annotations

import pytest

from brain.engine.database import Database
from brain.engine.recall.handlers import read_explain, read_recall
from brain.engine.store.scope import Scope
from brain.engine.write.reads import ReadContext
from brain.errors import InvalidArgument
from brain.wire.messages.recall_ops import ExplainOk, ExplainRequest, Recall, RecallOk
from tests.unit.common import NS

# Any instant after the empty database's record clock: the reads ask for no as_of.
NOW = 1


@pytest.mark.parametrize("retrieval", [None, object()], ids=["none", "another-object"])
def test_a_read_without_retrieval_is_refused(db: Database, retrieval: object | None) -> None:
    store = db._store
    scope = Scope.of(NS, None)
    with store.read() as txn:
        ctx = ReadContext(store, txn, NOW, retrieval=retrieval)
        with pytest.raises(InvalidArgument, match="opened without retrieval"):
            read_recall(ctx, scope, Recall(cue="anything"))
        with pytest.raises(InvalidArgument, match="opened without retrieval"):
            read_explain(ctx, scope, ExplainRequest(cue="anything"))


def test_a_read_with_the_databases_retrieval_searches(db: Database) -> None:
    store = db._store
    scope = Scope.of(NS, None)
    with store.read() as txn:
        ctx = ReadContext(store, txn, NOW, retrieval=db.retrieval)
        recalled = read_recall(ctx, scope, Recall(cue="anything"))
        explained = read_explain(ctx, scope, ExplainRequest(cue="anything"))
    assert isinstance(recalled, RecallOk) and recalled.abstained
    assert isinstance(explained, ExplainOk) and explained.explain.survivors.fused == 0
