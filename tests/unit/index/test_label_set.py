"""The byte-per-label set an HNSW index's labels are kept in: it answers as a Python
set of the same labels would, survives its packed text, and reads the label lists
of descriptions written before it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brain.engine.index.labels import MAX_LABEL, LabelSet
from brain.engine.index.vectors import VectorIndexes, _knn

LABELS = st.integers(min_value=0, max_value=5000)
STEPS = st.lists(st.tuples(st.booleans(), st.lists(LABELS, max_size=20)), max_size=30)


@settings(max_examples=200, deadline=None)
@given(STEPS, st.lists(LABELS, max_size=10))
def test_it_answers_as_a_set_does(steps: list[tuple[bool, list[int]]], probes: list[int]) -> None:
    model: set[int] = set()
    labels = LabelSet()
    for adding, chosen in steps:
        if adding:
            labels.update(chosen)
            model.update(chosen)
        else:
            for label in chosen:
                labels.discard(label)
                model.discard(label)
        assert len(labels) == len(model)
    assert set(labels) == model
    for probe in probes:
        assert (probe in labels) == (probe in model)
    assert set(LabelSet.from_text(labels.to_text())) == model


def test_labels_out_of_range_are_refused() -> None:
    with pytest.raises(ValueError, match="label"):
        LabelSet([MAX_LABEL + 1])
    with pytest.raises(ValueError, match="label"):
        LabelSet([-1])
    assert -1 not in LabelSet([0]) and "0" not in LabelSet([0])


def test_a_million_labels_take_about_a_megabyte() -> None:
    labels = LabelSet(np.arange(1_000_000))
    assert len(labels) == 1_000_000 and 999_999 in labels and 1_000_000 not in labels
    assert labels._present.nbytes <= 2 * 2**20
    assert len(labels.to_text()) < 200_000  # packed one bit a label, in base64


def test_a_description_listing_its_labels_still_loads(tmp_path: Path) -> None:
    """Index files saved by earlier builds list the labels; they load as they are."""
    dimensions = 8
    indexes = VectorIndexes(tmp_path, dimensions)
    prefix = b"\x01" * 32
    vectors = np.eye(dimensions, dtype=np.float32)[:3]
    indexes.apply(prefix, 7, [(label, vectors[label]) for label in range(3)], [])
    indexes.save_dirty()
    _, meta_path = indexes._paths(prefix)
    meta = json.loads(meta_path.read_text())
    assert set(LabelSet.from_text(meta.pop("label_bits"))) == {0, 1, 2}
    meta["labels"] = [0, 1, 2]
    meta_path.write_text(json.dumps(meta))
    again = VectorIndexes(tmp_path, dimensions)
    loaded = again._load_file(prefix, 7)
    assert loaded is not None and set(loaded.labels) == {0, 1, 2}
    assert [label for label, _ in _knn(loaded.index, vectors[1].reshape(1, -1), 1)] == [1]
