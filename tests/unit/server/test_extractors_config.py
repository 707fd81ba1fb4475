"""The ``entities.extractors`` key (spec/06-operations.md §3): what ENCODE runs to link the
names a memory mentions, named in the file, the environment or a flag, separated by
commas."""

from __future__ import annotations

from pathlib import Path

import pytest

from brain.engine.extract import DEFAULT_EXTRACTORS
from brain.server.config import ConfigError, load_config


def test_the_default_runs_the_names_extractor() -> None:
    entities = load_config(environ={}).entities
    assert entities.extractors == "names"
    assert entities.chosen_extractors() == DEFAULT_EXTRACTORS


@pytest.mark.parametrize(
    ("text", "count"),
    [('extractors = "names"', 1), ('extractors = ""', 0), ('extractors = " names , names "', 1)],
)
def test_the_file_names_them(tmp_path: Path, text: str, count: int) -> None:
    path = tmp_path / "brain.toml"
    path.write_text(f"[entities]\n{text}\n", encoding="utf-8")
    assert len(load_config(path, environ={}).entities.chosen_extractors()) == count


def test_the_environment_and_flags_name_them() -> None:
    off = load_config(environ={"BRAIN_ENTITIES__EXTRACTORS": ""}).entities
    assert off.chosen_extractors() == ()
    on = load_config(environ={"BRAIN_ENTITIES__EXTRACTORS": "names"}).entities
    assert on.chosen_extractors() == DEFAULT_EXTRACTORS
    flagged = load_config(environ={}, overrides={"entities.extractors": ""}).entities
    assert flagged.chosen_extractors() == ()


def test_an_unknown_extractor_or_a_bad_value_fails_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown extractor 'spacy'"):
        load_config(environ={"BRAIN_ENTITIES__EXTRACTORS": "names,spacy"})
    path = tmp_path / "brain.toml"
    path.write_text('[entities]\nextractors = ["names"]\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"entities\.extractors .* must be text"):
        load_config(path, environ={})
