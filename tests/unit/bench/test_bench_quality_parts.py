"""The quality suite's parts: the Cranfield loader and the retrieval metrics.

Spot checks use lines copied from the raw files; metric cases are computed by
hand (the arithmetic is spelled out beside each expected value).
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Final

import pytest

from bench import cranfield
from bench.cranfield import Document, Query
from bench.metrics import has_relevant, mean, ndcg_at_k, recall_at_k, summarise

CRANFIELD: Final = Path(__file__).resolve().parents[3] / "bench" / "data" / "cranfield"


@functools.cache
def documents() -> list[Document]:
    return cranfield.load_documents(CRANFIELD)


@functools.cache
def queries() -> list[Query]:
    return cranfield.load_queries(CRANFIELD)


@functools.cache
def judgements() -> dict[int, dict[int, int]]:
    return cranfield.load_judgements(CRANFIELD)


# --- the collection ------------------------------------------------------------------


def test_default_data_dir_is_the_repository_copy() -> None:
    assert cranfield.data_dir() == CRANFIELD
    assert cranfield.data_dir(str(CRANFIELD)) == CRANFIELD


def test_missing_data_dir_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nowhere"):
        cranfield.data_dir(tmp_path / "nowhere")


def test_documents_are_numbered_1_to_1400() -> None:
    docs = documents()
    assert len(docs) == 1400
    assert [doc.doc_id for doc in docs] == list(range(1, 1401))


def test_document_text_is_title_blank_line_abstract() -> None:
    first = documents()[0]
    title = "experimental investigation of the aerodynamics of a wing in a slipstream ."
    assert first.title == title
    # The abstract itself opens by repeating the title, as in the file.
    assert first.text.startswith(title + "\n\n" + title + " an experimental study of a wing")
    assert first.text.endswith("for the specific configuration of the experiment .")
    assert "  " not in first.text


def test_last_document() -> None:
    last = documents()[-1]
    assert last.title == (
        "the buckling shear stress of simply-supported infinitely long plates with "
        "transverse stiffeners ."
    )


def test_empty_records_give_empty_text() -> None:
    for doc_id in (471, 995):
        assert documents()[doc_id - 1] == Document(doc_id=doc_id, title="", text="")


def test_stray_markers_inside_an_abstract_keep_the_text_around_them() -> None:
    # Document 240 has ".A" and ".B" lines in the middle of its abstract.
    text = documents()[239].text
    assert "application to turbulent separations is made for a prandtl number of" in text
    assert "unity in low-speed flow without injection ." in text
    assert text.endswith("reduces to zero the heat transfer in a laminar separated flow .")
    assert ".A" not in text.split() and ".B" not in text.split()


def test_queries_are_renumbered_by_position() -> None:
    qs = queries()
    assert [q.query_id for q in qs] == list(range(1, 226))
    assert qs[0].text == (
        "what similarity laws must be obeyed when constructing aeroelastic models "
        "of heated high speed aircraft ."
    )
    # ".I 004" is the third query, and ".I 365" the 225th.
    assert qs[2].text.startswith("what problems of heat conduction in composite slabs")
    assert qs[224].text == (
        "what design factors can be used to control lift-drag ratios at mach numbers above 5 ."
    )


def test_judgements_spot_checks() -> None:
    qrels = judgements()
    assert sorted(qrels) == list(range(1, 226))
    # "1 184 2", "1 29 2", "1 12 3", "1 13 4", "2 12 1": gain = 5 - code.
    assert qrels[1][184] == 3
    assert qrels[1][29] == 3
    assert qrels[1][12] == 2
    assert qrels[1][13] == 1
    assert qrels[2][12] == 4
    assert qrels[225][1379] == 3
    # "1 486 -1" and "225 1188 -1": not relevant, dropped.
    assert 486 not in qrels[1]
    assert 1188 not in qrels[225]
    assert len(qrels[1]) == 28


def test_judgement_totals_match_the_file() -> None:
    # cranqrel: 128 rows of code 1, 387 of 2, 734 of 3, 363 of 4, 225 of -1.
    gains = [gain for per_query in judgements().values() for gain in per_query.values()]
    assert len(gains) == 128 + 387 + 734 + 363
    assert {gain: gains.count(gain) for gain in (4, 3, 2, 1)} == {4: 128, 3: 387, 2: 734, 1: 363}


def test_gain_of_rejects_unknown_codes() -> None:
    assert [cranfield.gain_of(code) for code in (1, 2, 3, 4)] == [4, 3, 2, 1]
    for code in (-1, 0, 5):
        with pytest.raises(ValueError, match="relevance code"):
            cranfield.gain_of(code)


# --- malformed copies ----------------------------------------------------------------


def test_short_document_file_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "cran.all.1400").write_text(".I 1\n.T\nt\n.A\n.B\n.W\nw\n")
    with pytest.raises(ValueError, match=r"cran\.all\.1400: 1 documents, expected 1400"):
        cranfield.load_documents(tmp_path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("junk\n.I 1\n", "line 1: text before the first .I record"),
        (".I one\n", "line 1: expected '.I <number>'"),
        (".I 2\n.T\nt\n.A\n.B\n.W\nw\n", r"line 1: document \.I 2, expected 1"),
        (".I 1\n.T\nt\n.T\nu\n", r"line 4: field \.T repeated"),
        (".I 1\n.T\nt\n.W\nw\n", r"line 1: document 1 lacks \.A, \.B"),
        (".I 1\nloose\n", "line 2: text outside any field"),
    ],
)
def test_malformed_documents_name_file_and_line(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "cran.all.1400").write_text(content)
    with pytest.raises(ValueError, match=r"cran\.all\.1400: " + message):
        cranfield.load_documents(tmp_path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (".I 002\n.W\na\n.I 001\n.W\nb\n", r"line 4: query \.I 001 does not increase"),
        (".I 001\n.W\n\n", r"line 1: query \.I 001 has no text"),
        (".I 001\n.W\na\n", "1 queries, expected 225"),
    ],
)
def test_malformed_queries_name_the_file(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "cran.qry").write_text(content)
    with pytest.raises(ValueError, match=r"cran\.qry: " + message):
        cranfield.load_queries(tmp_path)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("1 184", "expected 'query doc code'"),
        ("1 184 x", "expected 'query doc code'"),
        ("226 1 2", "query 226 is not in"),
        ("1 1401 2", "document 1401 is not in"),
        ("1 184 5", "relevance code 5 is not 1…4 or -1"),
        ("1 184 0", "relevance code 0"),
    ],
)
def test_malformed_judgements_name_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    (tmp_path / "cranqrel").write_text(f"1 29 2\n\n{line}\n")
    with pytest.raises(ValueError, match=r"cranqrel: line 3: " + message):
        cranfield.load_judgements(tmp_path)


def test_repeated_judgement_is_refused(tmp_path: Path) -> None:
    (tmp_path / "cranqrel").write_text("1 29 2\n1 29 -1\n")
    with pytest.raises(ValueError, match="line 2: query 1, document 29 listed twice"):
        cranfield.load_judgements(tmp_path)


# --- nDCG ----------------------------------------------------------------------------

GAINS: Final = {1: 3, 2: 2, 3: 1, 9: 0}


def test_perfect_ranking_scores_one() -> None:
    assert ndcg_at_k([1, 2, 3], GAINS, k=10) == pytest.approx(1.0, abs=1e-12)
    assert ndcg_at_k([1, 2, 3, 4, 5], GAINS, k=3) == pytest.approx(1.0, abs=1e-12)
    # Ties may come in either order.
    assert ndcg_at_k([2, 1], {1: 2, 2: 2}, k=2) == pytest.approx(1.0, abs=1e-12)


def test_imperfect_ranking_by_hand() -> None:
    # Ranking [3, 1, 4] at k = 3:
    #   DCG  = 1/log2(2) + 3/log2(3) + 0            = 1 + 1.892789260714372
    #   IDCG = 3/log2(2) + 2/log2(3) + 1/log2(4)    = 3 + 1.261859507142915 + 0.5
    #   nDCG = 2.892789260714372 / 4.761859507142915 = 0.6074915180456525
    assert ndcg_at_k([3, 1, 4], GAINS, k=3) == pytest.approx(0.6074915180456525, abs=1e-9)
    assert ndcg_at_k([3, 1, 4], GAINS, k=3) == pytest.approx(
        (1 + 3 / math.log2(3)) / (3 + 2 / math.log2(3) + 0.5), abs=1e-12
    )


def test_gain_is_linear_not_exponential() -> None:
    # Relevant document at rank 2 of a one-document ideal: 1/log2(3) whatever its gain.
    assert ndcg_at_k([7, 1], {1: 4}, k=10) == pytest.approx(1 / math.log2(3), abs=1e-12)
    # Gains 4 and 1 swapped: (1 + 4/log2 3) / (4 + 1/log2 3) = 3.523719014285829 / 4.630929753571457
    assert ndcg_at_k([2, 1], {1: 4, 2: 1}, k=2) == pytest.approx(0.7609096232928763, abs=1e-9)


def test_ndcg_cut_off_and_short_lists() -> None:
    # Only rank 1 counts at k = 1; the ideal at k = 1 is the best gain alone.
    assert ndcg_at_k([2, 1], GAINS, k=1) == pytest.approx(2 / 3, abs=1e-12)
    # k larger than the ranking: missing ranks add nothing.
    assert ndcg_at_k([1], GAINS, k=100) == pytest.approx(3 / (3 + 2 / math.log2(3) + 0.5))
    assert ndcg_at_k([], GAINS, k=10) == 0.0
    assert ndcg_at_k([9, 8], GAINS, k=10) == 0.0


def test_query_without_relevant_documents() -> None:
    assert not has_relevant({})
    assert not has_relevant({5: 0})
    assert has_relevant({5: 0, 6: 1})
    assert ndcg_at_k([1, 2], {}, k=10) == 0.0
    assert ndcg_at_k([1, 2], {1: 0}, k=10) == 0.0


def test_ndcg_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="k must be at least 1"):
        ndcg_at_k([1], GAINS, k=0)
    with pytest.raises(ValueError, match="more than once"):
        ndcg_at_k([1, 1], GAINS)
    with pytest.raises(ValueError, match="negative"):
        ndcg_at_k([1], {1: -1})


# --- recall --------------------------------------------------------------------------


def test_recall_at_k() -> None:
    relevant = {1, 2, 3, 4}
    assert recall_at_k([1, 2, 3, 4], relevant, k=4) == 1.0
    assert recall_at_k([9, 1, 8, 2], relevant, k=4) == 0.5
    assert recall_at_k([9, 1, 8, 2], relevant, k=2) == 0.25
    assert recall_at_k([9, 8], relevant, k=100) == 0.0


def test_recall_edge_cases() -> None:
    # k larger than the ranking, and an empty ranking.
    assert recall_at_k([3], [3, 4, 5], k=100) == pytest.approx(1 / 3)
    assert recall_at_k([], [3], k=100) == 0.0
    # More relevant documents than k: the denominator stays all of them.
    assert recall_at_k([1, 2], {1, 2, 3, 4}, k=2) == 0.5
    # No relevant document: 0.0, and the caller is told to skip the query.
    assert recall_at_k([1, 2], set(), k=2) == 0.0
    with pytest.raises(ValueError, match="k must be at least 1"):
        recall_at_k([1], {1}, k=0)
    with pytest.raises(ValueError, match="more than once"):
        recall_at_k([1, 2, 1], {1}, k=2)


# --- means ---------------------------------------------------------------------------


def test_mean_and_summary() -> None:
    assert mean([1.0, 0.5, 0.0]) == 0.5
    assert mean(iter([0.1] * 10)) == pytest.approx(0.1, abs=1e-15)
    assert summarise({1: 1.0, 2: 0.25}) == {"mean": 0.625, "count": 2}
    with pytest.raises(ValueError, match="no values"):
        mean([])
    with pytest.raises(ValueError, match="no values"):
        summarise({})


def test_metrics_run_over_the_whole_collection() -> None:
    # An oracle ranking (judged documents, best first) scores 1.0 on every query.
    per_query_ndcg: dict[int, float] = {}
    per_query_recall: dict[int, float] = {}
    for query in queries():
        gains = judgements().get(query.query_id, {})
        if not has_relevant(gains):
            continue
        oracle = sorted(gains, key=lambda doc: (-gains[doc], doc))
        per_query_ndcg[query.query_id] = ndcg_at_k(oracle, gains)
        per_query_recall[query.query_id] = recall_at_k(oracle, gains.keys())
    assert summarise(per_query_ndcg) == pytest.approx({"mean": 1.0, "count": 225})
    assert summarise(per_query_recall) == pytest.approx({"mean": 1.0, "count": 225})
