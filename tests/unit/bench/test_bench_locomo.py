"""The locomo suite: its loader, its metric mapping, and a whole run on a file of its own.

The conversations here are invented for these tests (two speakers, three
sessions, a few questions of every category); they follow the LoCoMo format,
oddities included: an evidence entry holding two ids, an id that names no turn,
an adversarial question without an answer, a number as an answer, a session
date without a session, and one text said twice.
"""

from __future__ import annotations

import copy
import datetime
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench import locomo, locomo_data, modes
from bench.__main__ import SUITES
from bench.latency import latency_ms, percentile_ms
from bench.peers.bm25s_english import EnglishBm25
from brain.engine.database import DatabaseOptions

OFF_TOPIC: Final = 50
"""Cranfield queries the end-to-end run asks in every space: the suite's own default."""

MONTHS: Final = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


def _turns(session: int, lines: list[tuple[str, str]]) -> list[dict[str, Any]]:
    return [
        {"speaker": speaker, "dia_id": f"D{session}:{i}", "text": text}
        for i, (speaker, text) in enumerate(lines, start=1)
    ]


def sample() -> list[dict[str, Any]]:
    """Two conversations in the LoCoMo format."""
    first = {
        "sample_id": "conv-a",
        "conversation": {
            "speaker_a": "Ada",
            "speaker_b": "Bram",
            "session_1_date_time": "9:15 am on 3 March, 2023",
            "session_1": _turns(
                1,
                [
                    ("Ada", "Good morning! I finally bought a red kite at the harbour market."),
                    ("Bram", "Nice, I spent the weekend repairing my grandfather's sailboat."),
                    ("Ada", "Does the sailboat still have the green sail?"),
                    ("Bram", "Yes, and I named it Heron after the birds by the lake."),
                    ("Ada", "My cousin Lotte is visiting from Utrecht next month."),
                    ("Bram", "See you soon!"),
                ],
            ),
            "session_2_date_time": "12:05 am on 14 April, 2023",
            "session_2": _turns(
                2,
                [
                    ("Ada", "I could not sleep, so I started learning the cello."),
                    ("Bram", "The cello is lovely; I play the trumpet in a brass band."),
                    ("Ada", "Lotte arrived yesterday and we flew the red kite on the dunes."),
                    ("Bram", "I entered Heron in the spring regatta."),
                    ("Ada", "Good luck at the regatta!"),
                    ("Bram", "See you soon!"),
                ],
            ),
            "session_3_date_time": "12:40 pm on 2 May, 2023",
            "session_3": _turns(
                3,
                [
                    ("Bram", "Heron finished third in the spring regatta."),
                    ("Ada", "Third place is great! My cello teacher says I am improving."),
                    ("Bram", "My brass band plays at the town festival in June."),
                    ("Ada", "Lotte went back to Utrecht last week."),
                    ("Bram", "Did she enjoy the dunes?"),
                    ("Ada", "She loved flying the kite there."),
                ],
            ),
            "session_4_date_time": "3:00 pm on 20 May, 2023",
        },
        "qa": [
            {
                "question": "What colour is the kite Ada bought at the harbour market?",
                "answer": "a bright red one",
                "evidence": ["D1:1"],
                "category": 4,
            },
            {
                "question": "Where did Ada fly the kite with her cousin Lotte?",
                "answer": "over the sandy dunes",
                "evidence": ["D2:3; D1:5"],
                "category": 1,
            },
            {
                "question": "When did Heron finish third in the regatta?",
                "answer": "early in May 2023",
                "evidence": ["D3:1", "D9:9"],
                "category": 2,
            },
            {
                "question": "Would Bram enjoy a music festival?",
                "answer": "likely, he plays the trumpet",
                "evidence": ["D2:2", "D3:3"],
                "category": 3,
            },
            {
                "question": "In what place did Heron finish?",
                "answer": 3,
                "evidence": ["D3:1"],
                "category": 4,
            },
            {
                "question": "What did Bram name his cello?",
                "adversarial_answer": "Heron",
                "evidence": ["D2:1"],
                "category": 5,
            },
            {
                "question": "What might Lotte study in Utrecht?",
                "answer": "nothing is said about it",
                "evidence": [],
                "category": 3,
            },
            {
                "question": "Who said goodbye at the end of the second session?",
                "answer": "Bram said it",
                "evidence": ["D2:6"],
                "category": 4,
            },
        ],
        "session_summary": {"session_1_summary": "ignored by the loader"},
    }
    second = {
        "sample_id": "conv-b",
        "conversation": {
            "speaker_a": "Cleo",
            "speaker_b": "Dev",
            "session_1_date_time": "6:30 pm on 1 June, 2023",
            "session_1": _turns(
                1,
                [
                    ("Cleo", "I baked sourdough bread with rye flour this morning."),
                    ("Dev", "I am packing for a hike across the Pyrenees."),
                    ("Cleo", "Take plenty of water on the mountain trails."),
                ],
            ),
            "session_2_date_time": "7:45 am on 9 June, 2023",
            "session_2": _turns(
                2,
                [
                    ("Dev", "The Pyrenees hike took six days in the end."),
                    ("Cleo", "My rye sourdough won a prize at the bakery contest."),
                    ("Dev", "Congratulations on the bakery prize!"),
                ],
            ),
        },
        "qa": [
            {
                "question": "What flour does Cleo use for her sourdough?",
                "answer": "rye flour, as she said",
                "evidence": ["D1:1"],
                "category": 4,
            },
            {
                "question": "How long did the hike across the Pyrenees take?",
                "answer": "six days of walking",
                "evidence": ["D2:1"],
                "category": 2,
            },
        ],
    }
    return [first, second]


def write(tmp_path: Path, document: object) -> Path:
    path = tmp_path / "locomo-sample.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def _utc_ns(year: int, month: int, day: int, hour: int, minute: int) -> int:
    moment = datetime.datetime(year, month, day, hour, minute, tzinfo=datetime.UTC)
    return int(moment.timestamp()) * 1_000_000_000


# --- the loader ----------------------------------------------------------------------


def test_sessions_turns_and_dates(tmp_path: Path) -> None:
    first, second = locomo_data.load(write(tmp_path, sample()))
    assert first.sample_id == "conv-a" and second.sample_id == "conv-b"
    assert first.speakers == ("Ada", "Bram")
    assert [s.number for s in first.sessions] == [1, 2, 3]
    # 12:05 am is five past midnight, 12:40 pm twenty to one.
    assert [s.occurred_at for s in first.sessions] == [
        _utc_ns(2023, 3, 3, 9, 15),
        _utc_ns(2023, 4, 14, 0, 5),
        _utc_ns(2023, 5, 2, 12, 40),
    ]
    assert first.dates_without_session == (4,)
    assert second.dates_without_session == ()
    assert len(first.turns) == 18
    assert first.turns[6] == locomo_data.Turn(
        speaker="Ada", dia_id="D2:1", text="I could not sleep, so I started learning the cello."
    )
    assert first.turns[6].memory_text == "Ada: I could not sleep, so I started learning the cello."


def test_questions_evidence_and_answers(tmp_path: Path) -> None:
    first, _ = locomo_data.load(write(tmp_path, sample()))
    questions = first.questions
    assert [q.index for q in questions] == list(range(8))
    assert [q.category for q in questions] == [4, 1, 2, 3, 4, 5, 3, 4]
    # One entry holding two ids gives both, in the order written.
    assert questions[1].evidence == ("D2:3", "D1:5")
    # An id that names no turn is kept apart.
    assert questions[2].evidence == ("D3:1",)
    assert questions[2].unknown_evidence == ("D9:9",)
    assert questions[0].unknown_evidence == ()
    assert questions[4].answer == "3"
    assert questions[5].answer is None
    assert questions[6].evidence == ()


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("9:15 am on 3 March, 2023", (2023, 3, 3, 9, 15)),
        ("12:05 am on 14 April, 2023", (2023, 4, 14, 0, 5)),
        ("12:40 pm on 2 May, 2023", (2023, 5, 2, 12, 40)),
        ("11:59 pm on 31 December, 2024", (2024, 12, 31, 23, 59)),
    ],
)
def test_parse_date(text: str, parts: tuple[int, int, int, int, int]) -> None:
    assert locomo_data.parse_date(text) == _utc_ns(*parts)


@pytest.mark.parametrize(
    "text",
    [
        "3 March 2023",
        "9:15 on 3 March, 2023",
        "13:15 pm on 3 March, 2023",
        "9:15 am on 3 Mars, 2023",
        "9:15 am on 30 February, 2023",
        "9:15 AM on 3 March, 2023",
    ],
)
def test_parse_date_refuses_other_forms(text: str) -> None:
    with pytest.raises(ValueError, match="date"):
        locomo_data.parse_date(text)


@given(
    st.datetimes(
        min_value=datetime.datetime(1970, 1, 1), max_value=datetime.datetime(2999, 12, 31)
    ).map(lambda moment: moment.replace(second=0, microsecond=0))
)
def test_parse_date_reads_every_minute(moment: datetime.datetime) -> None:
    half = "pm" if moment.hour >= 12 else "am"
    text = (
        f"{moment.hour % 12 or 12}:{moment.minute:02d} {half} on "
        f"{moment.day} {MONTHS[moment.month - 1]}, {moment.year:04d}"
    )
    expected = int(moment.replace(tzinfo=datetime.UTC).timestamp()) * 1_000_000_000
    assert locomo_data.parse_date(text) == expected


_IDS = st.lists(
    st.builds(lambda s, t: f"D{s}:{t}", st.integers(1, 40), st.integers(1, 60)), min_size=1
)


@given(_IDS, st.lists(st.sampled_from([";", "; ", ",", ", ", " ", "\t", " ; "]), min_size=40))
def test_split_evidence_finds_every_id_once(ids: list[str], separators: list[str]) -> None:
    joined = ids[0] + "".join(
        sep + dia_id for sep, dia_id in zip(separators, ids[1:], strict=False)
    )
    assert locomo_data.split_evidence([joined]) == tuple(dict.fromkeys(ids))


Mutation = Callable[[list[dict[str, Any]]], object]


def _set(path: list[object], value: object) -> Mutation:
    def mutate(document: list[dict[str, Any]]) -> object:
        target: Any = document
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        return document

    return mutate


def _delete(path: list[object]) -> Mutation:
    def mutate(document: list[dict[str, Any]]) -> object:
        target: Any = document
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]
        return document

    return mutate


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda _: {"not": "a list"}, "expected a list of conversations"),
        (lambda _: [], "no conversation"),
        (_delete([1, "sample_id"]), r"conversation 1: no 'sample_id'"),
        (
            _delete([0, "conversation", "session_2_date_time"]),
            r"conversation 0 \(conv-a\) conversation session_2: no 'session_2_date_time'",
        ),
        (
            _set([0, "conversation", "session_1_date_time"], "3 March 2023"),
            r"conversation 0 \(conv-a\) conversation session_1_date_time: date '3 March 2023'",
        ),
        (
            _set([0, "conversation", "session_3", 1, "speaker"], "Zed"),
            r"conversation 0 \(conv-a\) conversation session_3 turn 1: speaker 'Zed'",
        ),
        (
            _set([0, "conversation", "session_1", 2, "text"], 7),
            r"session_1 turn 2: 'text' is int, not str",
        ),
        (
            _set([1, "conversation", "session_2", 0, "dia_id"], "D1:1"),
            r"conversation 1 \(conv-b\) conversation session_2: dia_id 'D1:1' is used twice",
        ),
        (
            _set([0, "conversation", "session_two"], []),
            r"conversation 0 \(conv-a\) conversation: unexpected key 'session_two'",
        ),
        (_delete([1, "conversation", "speaker_b"]), r"\(conv-b\) conversation: no 'speaker_b'"),
        (_set([0, "qa", 2, "category"], 6), r"conversation 0 \(conv-a\) qa 2: category 6"),
        (_set([0, "qa", 2, "category"], True), r"qa 2: 'category' is bool, not int"),
        (_delete([0, "qa", 0, "answer"]), r"qa 0: no 'answer' \(only category 5"),
        (_set([0, "qa", 1, "evidence"], [7]), r"qa 1 evidence 0: int, not a text"),
        (_set([0, "qa", 1, "evidence"], "D1:1"), r"qa 1: 'evidence' is str, not list"),
        (_set([1, "qa", 0, "question"], " "), r"conversation 1 \(conv-b\) qa 0: empty 'question'"),
        (_set([1, "sample_id"], "conv-a"), r"conversation 1: sample_id 'conv-a' is used twice"),
    ],
)
def test_a_damaged_file_names_the_place(tmp_path: Path, mutate: Mutation, message: str) -> None:
    path = write(tmp_path, mutate(copy.deepcopy(sample())))
    with pytest.raises(locomo_data.FormatError, match=message) as caught:
        locomo_data.load(path)
    assert str(caught.value).startswith(str(path))
    assert isinstance(caught.value, ValueError)


def test_a_file_that_is_not_json_is_named(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text("[{", encoding="utf-8")
    with pytest.raises(locomo_data.FormatError, match=r"broken\.json: not JSON"):
        locomo_data.load(path)


# --- the metric mapping --------------------------------------------------------------


def test_ranked_turns_expands_memories_to_their_turns() -> None:
    turns = {b"m1": (0,), b"m2": (5, 11), b"m3": (2,)}
    assert locomo.ranked_turns([b"m2", b"m1", b"m2", b"m3"], turns) == [5, 11, 0, 2]
    with pytest.raises(RuntimeError, match="never loaded"):
        locomo.ranked_turns([b"m1", b"zz"], turns)


def test_score_cue_reads_10_and_50_turns() -> None:
    score = locomo.score_cue(2, [0, 5, 11, 2], {11, 40})
    assert score.category == 2
    assert score.recall_at_10 == score.recall_at_50 == 0.5
    # DCG: one gain at rank 3, 1/log2(4); ideal: ranks 1 and 2, 1 + 1/log2(3).
    assert score.ndcg_at_10 == pytest.approx(0.5 / (1 + 1 / math.log2(3)))
    deep = locomo.score_cue(1, list(range(60)), {30})
    assert (deep.recall_at_10, deep.recall_at_50, deep.ndcg_at_10) == (0.0, 1.0, 0.0)
    beyond = locomo.score_cue(1, list(range(60)), {55})
    assert beyond.recall_at_50 == 0.0


def test_cues_are_the_first_questions_of_categories_1_to_4(tmp_path: Path) -> None:
    first, _ = locomo_data.load(write(tmp_path, sample()))
    assert [q.index for q in locomo.cues_of(first)] == [0, 1, 2, 3, 4, 6, 7]
    assert [q.index for q in locomo.cues_of(first, 3)] == [0, 1, 2]


def test_parse_mode() -> None:
    assert modes.parse_mode("defaults=null") == ("defaults", {})
    assert modes.parse_mode('half={"arms": {"lexical": 0.5}, "fusion": "rrf"}') == (
        "half",
        {"arms": {"lexical": 0.5}, "fusion": "rrf"},
    )
    for bad in (
        "nosign",
        "=null",
        "x={",
        'x={"colour": 1}',
        'x={"arms": {"graph": true}}',
        "x=[1]",
        'x={"fusion": "mean"}',
        'x={"top_k": 3}',
    ):
        with pytest.raises(ValueError, match="mode"):
            modes.parse_mode(bad)


def test_bad_mode_on_the_command_line_exits_2(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as caught:
        locomo.main(["--data", str(write(tmp_path, sample())), "--mode", "x={"])
    assert caught.value.code == 2


def test_the_suite_is_registered() -> None:
    assert SUITES["locomo"] == "bench.locomo"


def test_modes_must_include_the_hybrid(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="hybrid"):
        locomo.run(write(tmp_path, sample()), modes={"semantic": locomo.MODES["semantic"]})


def test_the_bm25s_peer_leaves_texts_sharing_no_term_out() -> None:
    peer = EnglishBm25(["red kites over dunes", "brass band trumpet", "a kite festival"])
    assert peer.ranked("kite", 10) == [0, 2] or peer.ranked("kite", 10) == [2, 0]
    assert peer.ranked("quantum chromodynamics", 10) == []
    assert peer.config()["method"] == "lucene"
    with pytest.raises(ValueError, match="at least one"):
        EnglishBm25([])


def test_latency_percentiles_are_nearest_rank() -> None:
    samples = [0.001 * i for i in range(1, 101)]
    assert percentile_ms(samples, 0.5) == 50.0
    assert latency_ms(samples) == {"p50": 50.0, "p95": 95.0}
    assert math.isnan(percentile_ms([], 0.5))


# --- a whole run ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = write(tmp_path_factory.mktemp("locomo"), sample())
    return locomo.run(path, options=DatabaseOptions(embedder="hashing"))


def _check_figures(figures: dict[str, Any], scored: int) -> None:
    assert figures["scored"] == scored
    for key in ("recall_at_10", "recall_at_50", "ndcg_at_10"):
        assert 0.0 <= figures[key] <= 1.0


def test_run_measures_every_mode_and_both_peers(result: dict[str, Any]) -> None:
    assert list(result["modes"]) == ["hybrid", "semantic", "lexical", "graph"]
    assert sorted(result["peers"]) == ["bm25s", "dense"]
    scored_by_category = {"1": 1, "2": 2, "3": 1, "4": 4}
    for summary in (*result["modes"].values(), *result["peers"].values()):
        _check_figures(summary["overall"], sum(scored_by_category.values()))
        assert sorted(summary["by_category"]) == sorted(scored_by_category)
        for category, figures in summary["by_category"].items():
            _check_figures(figures, scored_by_category[category])
        latency = summary["latency_ms"]
        assert 0.0 < latency["p50"] <= latency["p95"]
    assert result["modes"]["hybrid"]["request"] == {}
    assert result["modes"]["lexical"]["request"] == {
        "arms": {"semantic": 0.0, "lexical": 1.0, "graph": 0.0},
        "context": False,
        "named_time": False,
    }
    # The dense peer ranks every stored text (fewer than 50), so it finds every evidence
    # turn by rank 50: a wrong mapping from memories to turns would show here (question 7
    # cites the second of the two turns stored as one memory).
    assert result["peers"]["dense"]["overall"]["recall_at_50"] == 1.0
    assert result["peers"]["bm25s"]["config"]["per"] == "conversation"


def test_run_counts_abstention_for_every_mode(result: dict[str, Any]) -> None:
    expected = {"on_topic": 9, "off_topic_rotated": 9, "off_topic_cranfield": 2 * OFF_TOPIC}
    for summary in result["modes"].values():
        abstention = summary["abstention"]
        for cue_set, asked in expected.items():
            counted = abstention[cue_set]
            assert counted["asked"] == asked
            assert counted["rate"] == round(counted["abstained"] / asked, 4)
    for summary in result["peers"].values():
        assert "abstention" not in summary


def test_run_counts_the_collection(result: dict[str, Any]) -> None:
    collection = result["collection"]
    assert collection["conversations"] == 2
    assert collection["turns"] == 24
    # "Bram: See you soon!" is said twice and stored once.
    assert collection["memories"] == 23
    assert collection["deduplicated"] == 1
    assert collection["questions_by_category"] == {"1": 1, "2": 2, "3": 2, "4": 4, "5": 1}
    assert collection["cues"] == 9
    assert collection["cues_without_evidence"] == 1
    assert collection["unknown_evidence_ids"] == 1
    first = collection["per_conversation"][0]
    assert first["space"] == "locomo.0"
    assert first["unknown_evidence"] == [[2, "D9:9"]]
    assert first["dates_without_session"] == [4]
    assert first["cues_without_evidence"] == [6]


def test_run_writes_every_goal(result: dict[str, Any]) -> None:
    goals = result["goal"]
    assert sorted(goals) == sorted(
        [
            "recall_at_10_over_best_arm",
            "ndcg_at_10_over_best_arm",
            "recall_at_10",
            "ndcg_at_10",
            "off_topic_rotated_abstention",
            "off_topic_cranfield_abstention",
            "on_topic_abstention",
        ]
    )
    hybrid = result["modes"]["hybrid"]
    for verdict in goals.values():
        assert isinstance(verdict["met"], bool)
    recall = goals["recall_at_10"]
    assert recall["value"] == hybrid["overall"]["recall_at_10"]
    assert recall["met"] == (recall["value"] >= 0.72)
    best = goals["recall_at_10_over_best_arm"]
    arm = best["best_single_arm"]
    assert best["best_single_arm_value"] == result["modes"][arm]["overall"]["recall_at_10"]
    on_topic = goals["on_topic_abstention"]
    assert on_topic["met"] == (hybrid["abstention"]["on_topic"]["rate"] <= 0.05)
    assert len(result["summary"]) == len(goals)
    table = locomo.format_table(result)
    for name in ("| hybrid |", "| graph |", "| bm25s (peer) |", "| dense (peer) |"):
        assert table.count(name) == 2
    statuses = [line for line in table.splitlines() if line.startswith("goal ")]
    assert len(statuses) == len(goals)
    assert all(": met (" in line or ": NOT MET (" in line for line in statuses)


def test_run_results_hold_no_text_of_the_file(result: dict[str, Any]) -> None:
    dumped = json.dumps(result)
    texts: list[str] = []
    for conversation in sample():
        for key, value in conversation["conversation"].items():
            if key.startswith("session_") and isinstance(value, list):
                texts += [turn["text"] for turn in value]
        for question in conversation["qa"]:
            texts.append(question["question"])
            texts += [
                str(question[key])
                for key in ("answer", "adversarial_answer")
                if isinstance(question.get(key), str)
            ]
    assert len(texts) > 30
    leaked = [text for text in texts if text in dumped or json.dumps(text)[1:-1] in dumped]
    assert leaked == []


def test_quick_run_takes_the_first_conversation(tmp_path: Path) -> None:
    quick: dict[str, Any] = locomo.run(
        write(tmp_path, sample()),
        quick=True,
        options=DatabaseOptions(embedder="hashing"),
        modes={"hybrid": {}},
        off_topic_queries=3,
    )
    assert quick["quick"] is True
    assert quick["collection"]["conversations"] == 1
    abstention = quick["modes"]["hybrid"]["abstention"]
    # One conversation has no neighbour to ask its questions in.
    assert abstention["off_topic_rotated"] == {"rate": None, "abstained": 0, "asked": 0}
    assert abstention["off_topic_cranfield"]["asked"] == 3
    goals = quick["goal"]
    assert goals["off_topic_rotated_abstention"]["met"] is None
    # Without a single arm run there is nothing to be above.
    assert goals["recall_at_10_over_best_arm"]["met"] is None
    assert len(quick["summary"]) == len(goals) - 3
    assert "not measured" in locomo.format_table(quick)


def test_the_baseline_is_asked_of_a_database_without_the_extractor(tmp_path: Path) -> None:
    result: dict[str, Any] = locomo.run(
        write(tmp_path, sample()),
        options=DatabaseOptions(embedder="hashing"),
        modes={"hybrid": {}, "graph": locomo.MODES["graph"]},
        off_topic_queries=0,
        baseline=True,
    )
    before = result["modes"]["before"]
    assert before["request"] == {
        **locomo.BASELINE_MODES["before"],
        "database": "extractors=()",
    }
    assert before["overall"]["scored"] == result["modes"]["hybrid"]["overall"]["scored"]
    # The extractor's links are what the graph arm finds memories by: with them, the
    # speakers' names reach their turns.
    assert result["modes"]["graph"]["overall"]["recall_at_50"] > 0.0
