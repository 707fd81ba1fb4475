"""How ``brain import`` cuts an export into requests: by bytes, every request within
its budget (a larger row alone), every row sent once and in order from where the
import stands, and a row too large for any request refused before anything is sent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brain.cli.transfer import (
    ROW_SEPARATOR,
    TransferError,
    check_row_sizes,
    import_batches,
    read_export,
)

ENVELOPE = 300
BUDGET = 10_000


@given(
    sizes=st.lists(st.integers(1, 3 * BUDGET), max_size=200),
    first=st.integers(0, 200),
    max_rows=st.integers(1, 50),
)
def test_batches_cover_every_row_once_within_the_budget(
    sizes: list[int], first: int, max_rows: int
) -> None:
    first = min(first, len(sizes))
    batches = import_batches(sizes, first, envelope=ENVELOPE, batch_bytes=BUDGET, max_rows=max_rows)
    # Each batch begins where the one before it ended, the first at ``first``.
    follows = [first, *(end for _, end in batches)][: len(batches)]
    assert [start for start, _ in batches] == follows
    assert (batches[-1][1] if batches else first) == len(sizes)
    for start, end in batches:
        assert 0 < end - start <= max_rows
        body = ENVELOPE + sum(sizes[start:end]) + len(ROW_SEPARATOR) * (end - start - 1)
        assert body <= BUDGET or end - start == 1


def test_rows_of_three_kilobytes_go_hundreds_to_a_request() -> None:
    sizes = [3_300] * 1_100  # an embedded memory's vector row, in hex
    batches = import_batches(sizes, 0, envelope=ENVELOPE, batch_bytes=1024 * 1024, max_rows=10_000)
    assert len(batches) == 4 and all(end - start <= 317 for start, end in batches)


def test_a_row_too_large_for_any_request_is_refused_first() -> None:
    check_row_sizes([10, BUDGET - ENVELOPE], envelope=ENVELOPE, max_body=BUDGET)
    with pytest.raises(TransferError, match="row 1 is 9701 bytes"):
        check_row_sizes([10, BUDGET - ENVELOPE + 1], envelope=ENVELOPE, max_body=BUDGET)


def test_an_export_file_is_counted_per_space_and_table(tmp_path: Path) -> None:
    space_a, space_b = "aa" * 32, "bb" * 32
    rows = [
        {"table": "memories", "key": space_a + "01", "value": ""},
        {"table": "memories", "key": space_a + "02", "value": ""},
        {"table": "vectors", "key": space_b + "01", "value": ""},
    ]
    header = {"format": "brain-export/1", "namespace": "default", "export_id": "00" * 16}
    trailer = {"end": True, "rows": 3, "scopes": [space_a, space_b]}
    path = tmp_path / "dump.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in [header, *rows, trailer]) + "\n")
    export = read_export(path)
    assert export.total == 3
    assert export.counts == {space_a: {"memories": 2}, space_b: {"vectors": 1}}
    path.write_text("\n".join(json.dumps(line) for line in [header, *rows[:2], trailer]))
    with pytest.raises(TransferError, match="cut short"):
        read_export(path)
