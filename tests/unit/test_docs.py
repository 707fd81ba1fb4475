"""The specification covers what the code has: a test fails when something is undocumented."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from aiohttp import web

from brain.errors import registered_errors
from brain.server.config import Config
from brain.server.http import make_admin_app, make_public_app
from brain.server.metrics import ServerMetrics
from brain.wire.opcodes import Opcode

ROOT = Path(__file__).resolve().parents[2]
WIRE = (ROOT / "spec" / "01-wire.md").read_text(encoding="utf-8")
OPERATIONS = (ROOT / "spec" / "06-operations.md").read_text(encoding="utf-8")
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_every_opcode_is_in_the_wire_spec() -> None:
    for op in Opcode:
        assert re.search(rf"\| 0x{op.value:04X} \| {op.name} \|", WIRE), op.name


def test_every_error_is_in_the_wire_spec() -> None:
    for code, cls in registered_errors().items():
        assert re.search(rf"\| 0x{code:04X} \| {cls.name} \|", WIRE), cls.name


def test_every_config_key_is_documented() -> None:
    config = Config()
    for section in dataclasses.fields(config):
        for item in dataclasses.fields(getattr(config, section.name)):
            assert f"`{section.name}.{item.name}`" in OPERATIONS, f"{section.name}.{item.name}"


def _routes(app: web.Application) -> set[str]:
    out = set()
    for route in app.router.routes():
        if route.method == "HEAD":
            continue
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
        assert re.search(rf"`{name}(_total)?`", OPERATIONS), name


def test_readme_starts_with_the_two_commands() -> None:
    first_block = README.split("```")[1]
    assert "make serve" in first_block and "make test" in first_block
