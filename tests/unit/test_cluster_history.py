"""The history checker of the cluster chaos run (tests/cluster_history.py): histories
drawn from a model of a correct cluster pass, and a hand-built history breaking each
rule is caught by that rule."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.cluster_history import RULES, FinalState, Op, PlannerSpan, Seen, check


def write(
    rid: str,
    *,
    node: str = "b0",
    start: float,
    end: float,
    lsn: int | None = None,
    outcome: str = "ok",
    record: str | None = None,
    incarnation: int = 1,
    client: int = 0,
) -> Op:
    assert outcome in ("ok", "refused", "indeterminate")
    ok = outcome == "ok"
    return Op(
        client=client,
        node=node,
        incarnation=incarnation,
        kind="encode",
        start=start,
        end=end,
        outcome=outcome,  # type: ignore[arg-type]
        request_id=rid,
        key=f"note {rid}",
        record=(record or f"m-{rid}") if ok else None,
        lsn=lsn if ok else None,
    )


def read(
    seen: dict[str, str | None],
    *,
    node: str = "b1",
    start: float,
    end: float,
    min_lsn: int | None = None,
    incarnation: int = 1,
) -> Op:
    return Op(
        client=9,
        node=node,
        incarnation=incarnation,
        kind="memory_get",
        start=start,
        end=end,
        outcome="ok",
        seen=tuple(Seen(f"note {rid}", record) for rid, record in seen.items()),
        min_lsn=min_lsn,
    )


def holding(*rids: str) -> FinalState:
    return {f"note {rid}": [f"m-{rid}"] for rid in rids}


def same(state: FinalState) -> dict[str, FinalState]:
    return {"b0": state, "b1": state, "b2": state}


B0_PLANS = (PlannerSpan("b0", 1, 0.0, 100.0),)
"""b0's first process plans throughout the hand-built histories."""


def broken(
    history: list[Op],
    finals: dict[str, FinalState],
    planners: tuple[PlannerSpan, ...] = B0_PLANS,
) -> dict[str, int]:
    return {rule: n for rule, n in check(history, finals, planners).by_rule().items() if n}


TWO = [write("a", start=0, end=1, lsn=1), write("b", start=2, end=3, lsn=2)]
"""Two acknowledged writes on the planner b0, at LSNs 1 and 2."""


def test_a_correct_history_passes() -> None:
    history = [
        *TWO,
        read({"a": "m-a", "b": None}, start=1.5, end=1.6),  # a follower behind
        read({"a": "m-a", "b": "m-b"}, start=4, end=5),
        read({"a": "m-a", "b": "m-b"}, node="b0", start=3.5, end=3.6),
    ]
    found = check(history, same(holding("a", "b")), B0_PLANS)
    assert found.violations == []
    assert (found.writes_acknowledged, found.reads_checked, found.lost) == (2, 3, 0)


def test_a_lost_acknowledged_write_breaks_acked() -> None:
    finals = same(holding("a", "b"))
    finals["b2"] = holding("a")
    found = check(TWO, finals)
    assert broken(TWO, finals) == {"acked": 1, "converged": 1}
    assert found.lost == 1


def test_a_write_held_twice_breaks_acked() -> None:
    finals = same({**holding("a"), "note b": ["m-b", "m-b2"]})
    found = check(TWO, finals)
    assert broken(TWO, finals) == {"acked": 3}
    assert (found.lost, found.duplicated) == (0, 1)


def test_an_acknowledged_write_held_as_another_record_breaks_acked() -> None:
    finals = same({**holding("a"), "note b": ["m-other"]})
    assert broken(TWO, finals) == {"acked": 3}


def test_a_retry_answered_with_another_record_breaks_same_answer() -> None:
    history = [*TWO, write("b", node="b1", start=4, end=5, lsn=3, record="m-b2")]
    found = check(history, same(holding("a", "b")))
    assert broken(history, same(holding("a", "b"))) == {"same-answer": 1}
    assert found.duplicated == 1


def test_a_refused_write_that_appears_breaks_refused() -> None:
    history = [*TWO, write("c", node="b1", start=1, end=1.1, outcome="refused")]
    assert broken(history, same(holding("a", "b"))) == {}
    assert broken(history, same(holding("a", "b", "c"))) == {"refused": 3}


def test_a_refusal_then_a_timeout_is_indeterminate_not_refused() -> None:
    history = [
        *TWO,
        write("c", node="b1", start=1, end=1.1, outcome="refused"),
        write("c", node="b0", start=1.2, end=9, outcome="indeterminate"),
    ]
    found = check(history, same(holding("a", "b", "c")))
    assert found.violations == []
    assert (found.writes_refused, found.writes_indeterminate) == (0, 1)


def test_an_indeterminate_write_held_twice_breaks_indeterminate() -> None:
    history = [*TWO, write("c", start=3, end=9, outcome="indeterminate")]
    assert broken(history, same(holding("a", "b"))) == {}
    assert broken(history, same(holding("a", "b", "c"))) == {}
    twice = same({**holding("a", "b"), "note c": ["m-c", "m-c2"]})
    assert broken(history, twice) == {"indeterminate": 3}


def test_nodes_that_differ_breaks_converged() -> None:
    history = [*TWO, write("c", start=3, end=9, outcome="indeterminate")]
    finals = same(holding("a", "b", "c"))
    finals["b1"] = holding("a", "b")
    assert broken(history, finals) == {"converged": 2}


def test_a_read_of_what_no_write_made_breaks_phantom() -> None:
    history = [*TWO, read({"z": "m-z"}, start=4, end=5)]
    assert broken(history, same(holding("a", "b"))) == {"phantom": 1}


def test_a_read_of_a_refused_write_breaks_phantom() -> None:
    history = [
        *TWO,
        write("c", node="b1", start=1, end=1.1, outcome="refused"),
        read({"c": "m-c"}, start=4, end=5),
    ]
    assert broken(history, same(holding("a", "b"))) == {"phantom": 1}


def test_a_read_showing_another_record_breaks_phantom() -> None:
    history = [*TWO, read({"a": "m-x"}, start=4, end=5)]
    assert broken(history, same(holding("a", "b"))) == {"phantom": 1}


def test_a_read_missing_a_lower_lsn_than_it_shows_breaks_prefix() -> None:
    history = [*TWO, read({"a": None, "b": "m-b"}, start=4, end=5)]
    assert broken(history, same(holding("a", "b"))) == {"prefix": 1}


def test_a_read_going_back_on_one_node_breaks_monotonic() -> None:
    history = [
        *TWO,
        read({"b": "m-b"}, start=4, end=5),
        read({"a": None}, start=6, end=7),
    ]
    assert broken(history, same(holding("a", "b"))) == {"monotonic": 1}


def test_overlapping_reads_or_reads_of_two_processes_may_differ() -> None:
    overlapping = [*TWO, read({"b": "m-b"}, start=4, end=6.5), read({"a": None}, start=6, end=7)]
    restarted = [
        *TWO,
        read({"b": "m-b"}, start=4, end=5),
        read({"a": None}, start=6, end=7, incarnation=2),
    ]
    other_node = [
        *TWO,
        read({"b": "m-b"}, start=4, end=5),
        read({"a": None}, node="b2", start=6, end=7),
    ]
    for history in (overlapping, restarted, other_node):
        assert broken(history, same(holding("a", "b"))) == {}


def test_a_planner_read_missing_an_earlier_ack_breaks_planner() -> None:
    history = [*TWO, read({"b": None}, node="b0", start=3.5, end=3.6)]
    assert broken(history, same(holding("a", "b"))) == {"planner": 1}
    # The same read on a follower, or begun before the ack, is allowed.
    assert broken([*TWO, read({"b": None}, start=3.5, end=3.6)], same(holding("a", "b"))) == {}
    assert (
        broken([*TWO, read({"b": None}, node="b0", start=2.5, end=3.6)], same(holding("a", "b")))
        == {}
    )


def test_only_a_read_within_its_nodes_planning_span_is_judged_as_the_planners() -> None:
    # b0 planned until 3.8, b1 from 4 on and acknowledged c: b0 may be behind.
    spans = (PlannerSpan("b0", 1, 0.0, 3.8), PlannerSpan("b1", 1, 4.0, 100.0))
    history = [*TWO, write("c", node="b1", start=4, end=4.5, lsn=3)]
    finals = same(holding("a", "b", "c"))
    assert broken([*history, read({"c": None}, node="b0", start=5, end=5.1)], finals, spans) == {}
    on_b1 = read({"c": None}, node="b1", start=5, end=5.1)
    assert broken([*history, on_b1], finals, spans) == {"planner": 1}
    # A read that outlasts the span, or of another process of the node, is not.
    assert broken([*history, replace(on_b1, end=200.0)], finals, spans) == {}
    assert broken([*history, replace(on_b1, incarnation=2)], finals, spans) == {}
    # An acknowledgement, a follower's forwarded one too, does not make a planner.
    assert broken([*history, on_b1], finals, ()) == {}


def test_a_read_missing_its_minimum_lsn_breaks_min_lsn() -> None:
    history = [*TWO, read({"b": None}, start=2.5, end=2.6, min_lsn=2)]
    assert broken(history, same(holding("a", "b"))) == {"min-lsn": 1}
    history = [*TWO, read({"b": None}, start=2.5, end=2.6, min_lsn=1)]
    assert broken(history, same(holding("a", "b"))) == {}


def test_every_rule_has_a_test() -> None:
    names = " ".join(name for name in globals() if name.startswith("test_"))
    for rule in RULES:
        assert f"breaks_{rule.replace('-', '_')}" in names, rule


# A model of a correct cluster, for the property: one log; a planner that applies a
# write before acknowledging it; followers that apply a growing prefix; writes that
# may be refused (a follower) or left unanswered (their record may or may not land).


@dataclass
class _Model:
    time: float = 0.0
    log: list[str] = field(default_factory=list)
    applied: dict[str, int] = field(default_factory=lambda: {"b0": 0, "b1": 0, "b2": 0})
    history: list[Op] = field(default_factory=list)
    written: list[str] = field(default_factory=list)

    def tick(self) -> float:
        self.time += 1.0
        return self.time


_STEP = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(["ok", "refused", "indeterminate", "lost"])),
    st.tuples(st.just("follow"), st.sampled_from(["b1", "b2"])),
    st.tuples(st.just("read"), st.sampled_from(["b0", "b1", "b2"])),
    st.tuples(st.just("min"), st.sampled_from(["b1", "b2"])),
)


def _run(steps: list[tuple[str, str]]) -> _Model:
    model = _Model()
    for number, (kind, arg) in enumerate(steps):
        rid = f"r{number}"
        if kind == "write":
            start = model.tick()
            if arg in ("ok", "indeterminate"):
                model.log.append(rid)
                model.applied["b0"] = len(model.log)
            lsn = len(model.log) if arg == "ok" else None
            outcome = "indeterminate" if arg == "lost" else arg
            model.history.append(
                write(
                    rid,
                    node="b1" if arg == "refused" else "b0",
                    start=start,
                    end=model.tick(),
                    lsn=lsn,
                    outcome=outcome,
                )
            )
            model.written.append(rid)
        elif kind == "follow":
            model.applied[arg] = len(model.log)
        else:
            node = arg
            wanted = None
            if kind == "min":
                wanted = len(model.log)
                model.applied[node] = wanted
            prefix = set(model.log[: model.applied[node]])
            seen = {rid: (f"m-{rid}" if rid in prefix else None) for rid in model.written}
            start = model.tick()
            model.history.append(
                read(seen, node=node, start=start, end=model.tick(), min_lsn=wanted)
            )
    return model


@settings(max_examples=200, deadline=None)
@given(st.lists(_STEP, max_size=40))
def test_histories_of_a_correct_cluster_pass(steps: list[tuple[str, str]]) -> None:
    model = _run(steps)
    final = {f"note {rid}": [f"m-{rid}"] for rid in model.log}
    found = check(model.history, same(final), B0_PLANS)
    assert found.violations == []
    assert found.lost == found.duplicated == 0


@settings(max_examples=200, deadline=None)
@given(st.lists(_STEP, min_size=1, max_size=40), st.data())
def test_a_lost_acknowledged_write_is_always_caught(
    steps: list[tuple[str, str]], data: st.DataObject
) -> None:
    model = _run(steps)
    acked = [op.request_id for op in model.history if op.outcome == "ok" and op.request_id]
    if not acked:
        return
    gone = data.draw(st.sampled_from(acked))
    final = {f"note {rid}": [f"m-{rid}"] for rid in model.log if rid != gone}
    found = check(model.history, {"b0": final, "b1": final, "b2": final})
    assert found.lost == 1
    assert found.by_rule()["acked"] == 3


@settings(max_examples=200, deadline=None)
@given(st.lists(_STEP, min_size=1, max_size=40), st.data())
def test_a_follower_read_turned_back_is_always_caught(
    steps: list[tuple[str, str]], data: st.DataObject
) -> None:
    """Hiding from a read an acknowledged write its node had applied breaks a rule:
    the prefix (it shows a later one), monotonic reads, the planner's or the minimum's."""
    model = _run([*steps, ("write", "ok"), ("min", "b1"), ("read", "b1")])
    last = model.history[-1]
    acked = {op.key for op in model.history if op.outcome == "ok" and op.key}
    shown = [s for s in last.seen if s.record is not None and s.key in acked]
    hidden = data.draw(st.sampled_from(shown))
    turned = replace(last, seen=tuple(Seen(s.key, None) if s == hidden else s for s in last.seen))
    final = {f"note {rid}": [f"m-{rid}"] for rid in model.log}
    found = check([*model.history[:-1], turned], same(final), B0_PLANS)
    assert found.violations, "a read that went back passed"
