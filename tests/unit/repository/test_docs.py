"""The specification covers what the code has: a test fails when something is undocumented."""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path
from typing import Final

from aiohttp import web

from brain.cli.main import _build_parser
from brain.engine.database import Database
from brain.engine.index.tokens import tokenize
from brain.errors import registered_errors
from brain.server.config import ENV_PREFIX, Config, load_config
from brain.server.http import make_admin_app, make_public_app
from brain.server.metrics import ServerMetrics
from brain.wire.messages.memory_ops import Encode, EncodeOk
from brain.wire.opcodes import Opcode
from tests.unit.common import rid

ROOT = Path(__file__).resolve().parents[3]
WIRE = (ROOT / "spec" / "01-wire.md").read_text(encoding="utf-8")
OPERATIONS = (ROOT / "spec" / "06-operations.md").read_text(encoding="utf-8")
README = (ROOT / "README.md").read_text(encoding="utf-8")

INDEX_WAIT_S: Final = 60.0
"""Longest the metrics test waits for the indexer: far past two short documents
on a loaded machine, so only a stuck indexer fails it."""


def test_every_opcode_is_in_the_wire_spec() -> None:
    for op in Opcode:
        assert re.search(rf"\| 0x{op.value:04X} \| {op.name} \|", WIRE), op.name


def test_every_error_is_in_the_wire_spec() -> None:
    for code, cls in registered_errors().items():
        assert re.search(rf"\| 0x{code:04X} \| {cls.name} \|", WIRE), cls.name


_CONFIG_ROW = re.compile(r"^\| `(\w+)\.(\w+)` \| ([^|]+) \| `([^`]+)` \| [^|]")
"""A row of spec/06's configuration table: key, default, environment variable, meaning."""


def _documented_config() -> dict[tuple[str, str], tuple[str, str]]:
    """spec/06's configuration table: (section, key) -> (default as written, variable)."""
    table = OPERATIONS.split("| key | default | environment | meaning |", 1)[1]
    rows: dict[tuple[str, str], tuple[str, str]] = {}
    for line in table.splitlines()[2:]:
        if not line.startswith("|"):
            break
        found = _CONFIG_ROW.match(line)
        assert found, f"a configuration row of spec/06 does not read: {line}"
        section, key, default, variable = found.groups()
        rows[(section, key)] = (default.strip(), variable)
    return rows


def _default_text(value: object) -> str:
    """A default as spec/06 writes it: ``empty`` for empty text, else in backticks,
    a whole number without its ``.0``."""
    if value == "":
        return "empty"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`"


def test_every_config_key_is_documented_with_its_default_and_variable() -> None:
    documented = _documented_config()
    config = Config()
    keys = {
        (section.name, item.name): getattr(getattr(config, section.name), item.name)
        for section in dataclasses.fields(config)
        for item in dataclasses.fields(getattr(config, section.name))
    }
    assert set(documented) == set(keys), "spec/06's configuration table and the code differ"
    for (section, key), default in keys.items():
        written, variable = documented[(section, key)]
        assert written == _default_text(default), f"{section}.{key}: spec/06 says {written}"
        assert variable == f"{ENV_PREFIX}{section.upper()}__{key.upper()}", variable
        # The variable is the one load_config reads, and the default as written reads back.
        raw = "" if written == "empty" else written.strip("`")
        loaded = load_config(environ={variable: raw})
        assert getattr(getattr(loaded, section), key) == default, variable


def _routes(app: web.Application) -> set[str]:
    out = set()
    for route in app.router.routes():
        info = route.resource.canonical if route.resource is not None else ""
        out.add(f"{route.method} {info}")
    return out


def test_every_http_route_is_documented(tmp_path: Path) -> None:
    from brain.server.backend import UnbuiltBackend
    from brain.server.keys import KeyStore

    keys = KeyStore(tmp_path)
    try:
        routes = _routes(make_public_app(UnbuiltBackend().status, ServerMetrics()))
        routes |= _routes(make_admin_app(Config(), keys))
    finally:
        keys.close()
    assert routes
    for route in routes:
        assert f"`{route}" in OPERATIONS, route


def test_every_metric_is_documented() -> None:
    metrics = ServerMetrics()
    names = {m.name for m in metrics.registry.collect()}
    assert names
    for name in names:
        # Prometheus exposes a counter as <name>_total and an info as <name>_info.
        assert re.search(rf"`{name}(_total|_info)?`", OPERATIONS), name


_SAMPLE_SUFFIXES = ("_total", "_created", "_bucket", "_count", "_sum")
"""What prometheus_client appends to a family's name in its sample names."""


def _exposed_families(exposition: str) -> dict[str, str]:
    """Every metric family in a Prometheus text exposition, by the name the spec uses.

    Counters are named with ``_total``, as Prometheus exposes them; the
    ``<counter>_created`` gauges prometheus_client adds beside counters are not
    families of their own. Every sample must belong to one of the families.
    """
    declared = dict(re.findall(r"^# TYPE (\S+) (\S+)$", exposition, re.MULTILINE))
    bases = {name.removesuffix("_total"): kind for name, kind in declared.items()}
    families: dict[str, str] = {}
    for name, kind in declared.items():
        created_of = name.removesuffix("_created")
        if name != created_of and bases.get(created_of) in ("counter", "histogram"):
            continue
        base = name.removesuffix("_total") if kind == "counter" else name
        families[f"{base}_total" if kind == "counter" else base] = kind
    for sample in re.findall(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]", exposition, re.MULTILINE):
        stems = {sample} | {sample.removesuffix(s) for s in _SAMPLE_SUFFIXES}
        assert stems & set(bases), f"sample {sample} belongs to no declared family"
    return families


def test_every_database_metric_is_documented(tmp_path: Path) -> None:
    database = Database.open(tmp_path / "data")
    try:
        metrics = ServerMetrics()
        metrics.attach_database(database)
        exposition = metrics.render().decode("utf-8")
    finally:
        database.close()
    families = _exposed_families(exposition)
    assert "brain_wal_appends_total" in families and "brain_applied_lsn" in families
    for name in families:
        assert f"| `{name}` |" in OPERATIONS, name


def _sample(exposition: str, sample: str) -> float:
    """The value of one sample line (name and labels as exposed) of an exposition."""
    found = re.search(rf"^{re.escape(sample)} (\S+)$", exposition, re.MULTILINE)
    assert found, f"no sample {sample}"
    return float(found[1])


def test_the_batch_and_lexical_metrics_read_the_engine(db: Database) -> None:
    texts = ["Alice moved to Globex in February", "Globex hired Alice"]
    last = 0
    for text in texts:
        made = db.execute("default", Opcode.ENCODE, Encode(request_id=rid(), text=text))
        assert isinstance(made, EncodeOk)
        last = made.lsn
    # The indexer writes the postings (and vectors) in batches of its own; once it has
    # reached the last write, nothing more is written and the counts hold still.
    assert db.retrieval.indexer.wait_for(last, timeout=INDEX_WAIT_S)
    metrics = ServerMetrics()
    metrics.attach_database(db)
    exposition = metrics.render().decode("utf-8")
    writer = db.writer
    assert writer.batches >= len(texts)
    assert _sample(exposition, "brain_group_commit_size_count") == writer.batches
    assert _sample(exposition, "brain_group_commit_size_sum") == writer.batched_jobs
    assert _sample(exposition, 'brain_group_commit_size_bucket{le="+Inf"}') == writer.batches
    # The first write was a batch alone (the second may share one with the indexer).
    ones = _sample(exposition, 'brain_group_commit_size_bucket{le="1.0"}')
    assert 1 <= ones <= _sample(exposition, 'brain_group_commit_size_bucket{le="2.0"}')
    assert _sample(exposition, "brain_lexical_documents") == len(texts)
    postings = sum(len(set(tokenize(text))) for text in texts)
    assert _sample(exposition, "brain_lexical_postings") == postings


def _cli_commands(parser: argparse.ArgumentParser, prefix: str) -> list[str]:
    """Every leaf command under ``parser``, as typed: ``brain wal verify``."""
    groups = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not groups:
        return [prefix]
    commands: list[str] = []
    for group in groups:
        for name, sub in group.choices.items():
            commands += _cli_commands(sub, f"{prefix} {name}")
    return commands


def test_every_cli_command_is_documented() -> None:
    commands = _cli_commands(_build_parser(), "brain")
    assert "brain wal verify" in commands
    for command in commands:
        assert re.search(rf"^\| `{re.escape(command)}[ `]", OPERATIONS, re.MULTILINE), command


def test_readme_starts_with_the_two_commands() -> None:
    first_block = README.split("```")[1]
    assert "make serve" in first_block and "make test" in first_block


def test_opcode_table_lists_every_key_of_every_message() -> None:
    from brain.wire.registry import MESSAGES
    from brain.wire.schema import Message, describe_message

    def keys(cls: type[Message]) -> str:
        parts = [f["key"] if f["required"] else f"{f['key']}?" for f in describe_message(cls)]
        return "{" + ", ".join(str(p) for p in parts) + "}"

    for op, (request, response) in MESSAGES.items():
        row = f"| `{request.__name__}` {keys(request)} | `{response.__name__}` {keys(response)} |"
        assert row in WIRE, f"spec/01-wire.md's row for {op.name} is stale: {row}"
