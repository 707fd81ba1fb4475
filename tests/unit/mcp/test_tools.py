"""The MCP tools in this process, over the SDK's in-memory client and an embedded
database: error lines, argument checks, objects of every scalar type, and
``valid_at`` choosing among facts by their validity."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import anyio
import pytest
from mcp.client import Client
from mcp_types import CallToolResult, TextContent

from brain.engine.database import DatabaseOptions
from brain.errors import ConnectionClosed, NotFound, Overloaded, PermissionDenied, RequestTimeout
from brain.mcp.connection import Connection
from brain.mcp.refusals import describe
from brain.mcp.tools import build_server
from brain.sdk import Brain

SDK_PREFIX: Final = re.compile(r"^Error executing tool \w+: ")
"""How the SDK opens the text of every tool error."""


def test_a_refusal_names_the_error_its_code_and_the_field() -> None:
    refused = NotFound("no statement 0190 in this space", field="id")
    assert describe(refused) == "NOT_FOUND (0x0050): no statement 0190 in this space [field: id]"
    assert describe(PermissionDenied("the key may not write")) == (
        "PERMISSION_DENIED (0x0031): the key may not write"
    )


def test_a_transient_refusal_says_when_to_retry() -> None:
    busy = Overloaded("the writer queue is full", retry_after_ms=250)
    assert describe(busy) == "OVERLOADED (0x0072): the writer queue is full; retry in 250 ms"
    assert describe(Overloaded("busy")).endswith("; retry later")


def test_client_side_failures_have_names_of_their_own() -> None:
    lost = describe(ConnectionClosed("cannot connect"), address="127.0.0.1:9090")
    assert lost.startswith("CONNECTION_CLOSED: the Brain server at 127.0.0.1:9090 cannot be")
    late = describe(RequestTimeout("no answer in 30 s"))
    assert late.startswith("TIMEOUT: no answer in 30 s") and "may still have happened" in late


@pytest.fixture
def connection(tmp_path: Path) -> Iterator[Connection]:
    options = DatabaseOptions(embedder="hashing")
    opened = Connection(lambda: Brain.open(tmp_path / "data", space="mcp", options=options))
    try:
        yield opened
    finally:
        opened.close()


@asynccontextmanager
async def _client(connection: Connection) -> AsyncIterator[Client]:
    async with Client(build_server(connection)) as client:
        yield client


def _text(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


async def _ok(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, _text(result)
    content = result.structured_content
    assert isinstance(content, dict)
    return content


async def _refused(client: Client, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, _text(result)
    return SDK_PREFIX.sub("", _text(result), count=1)


def test_arguments_outside_their_schema_are_refused_naming_them(connection: Connection) -> None:
    async def scenario() -> None:
        async with _client(connection) as client:
            too_many = await _refused(client, "recall", query="x", top_k=0)
            assert "top_k" in too_many
            unsure = await _refused(
                client, "state_fact", subject="A", predicate="p", object="o", confidence=1.5
            )
            assert "confidence" in unsure
            odd = await _refused(client, "review_decide", review_id="00" * 16, decision="maybe")
            assert "decision" in odd
            # into reaches the request: a malformed one is refused by its own name.
            bad_into = await _refused(
                client, "review_decide", review_id="00" * 16, decision="merge", into="zz"
            )
            assert bad_into.endswith("[field: into]")
            # A time with no offset: its zone would be a guess, and the facade says so.
            naive = await _refused(
                client, "remember", text="hello", occurred_at="2024-05-01T10:00:00"
            )
            assert naive.startswith("INVALID_ARGUMENT (0x0040): ")
            assert naive.endswith("[field: occurred_at]")

    anyio.run(scenario)


def test_objects_keep_their_json_types(connection: Connection) -> None:
    async def scenario() -> None:
        async with _client(connection) as client:
            shown: list[str] = []
            for value in ("Acme", 42, 2.5, True):
                made = await _ok(
                    client, "state_fact", subject="Widget", predicate="p", object=value
                )
                history = await _ok(client, "history", statement_id=made["statement_id"])
                shown.append(history["versions"][0]["object"])
            assert shown == ["Acme", "42", "2.5", "true"]

    anyio.run(scenario)


def test_valid_at_picks_the_fact_true_then(connection: Connection) -> None:
    async def scenario() -> None:
        async with _client(connection) as client:
            for city, start, end in (
                ("Paris", "2019-01-01", "2024-05-01"),
                ("Berlin", "2024-05-01", None),
            ):
                await _ok(
                    client, "state_fact", subject="Dan", predicate="lives_in", object=city,
                    valid_from=start, valid_to=end,
                )  # fmt: skip
            then = await _ok(client, "recall", query="Dan lives_in", valid_at="2020-06-01")
            now = await _ok(client, "recall", query="Dan lives_in", valid_at="2025-06-01")
            assert "Paris" in then["text"] and "Berlin" not in then["text"]
            assert "Berlin" in now["text"] and "Paris" not in now["text"]
            nothing = await client.call_tool("recall", {"query": "zebra", "valid_at": "1990-01-01"})
            assert _text(nothing) == "Nothing stored matches this query."

    anyio.run(scenario)
