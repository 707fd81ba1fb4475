"""``brain mcp`` against a real server, driven by the MCP SDK's own clients: over
stdio the whole round (tools listed, a memory, a fact and its correction, recall
now and as of before the correction, history, forget, refusals as tool errors);
the README's client configuration with a read-only key; with no server to reach,
a tool error rather than a failed start; and over streamable HTTP a memory
recalled (spec/06-operations.md §12)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent

from tests.integration.conftest import ServerProcess, run_brain, start_server

FAST: Final = {"BRAIN_RETRIEVAL__EMBEDDER": "hashing"}
"""The hashing embedder: what is under test is the MCP server, not the model."""

TOOLS: Final = {
    "remember",
    "recall",
    "state_fact",
    "supersede",
    "forget",
    "history",
    "review_list",
    "review_decide",
}

START_TIMEOUT_S: Final = 60
"""Longest wait for ``brain mcp`` to announce its HTTP endpoint: the import of the
package and the SDK is slow on a busy two-core machine."""

SDK_PREFIX: Final = re.compile(r"^Error executing tool \w+: ")
"""How the SDK opens the text of every tool error."""

MISSING_ID: Final = "0" * 31 + "1"
"""A well-formed id no record has."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = start_server(Path(tmp_path_factory.mktemp("mcp")) / "data", env=FAST)
    try:
        yield proc
    finally:
        proc.stop()


def _environment(server: ServerProcess, space: str) -> dict[str, str]:
    """How a client configuration hands ``brain mcp`` its server, key and space."""
    return {
        "BRAIN_HOST": server.host,
        "BRAIN_PORT": str(server.wire_port),
        "BRAIN_API_KEY": server.credentials["api_key"],
        "BRAIN_SPACE": space,
    }


@asynccontextmanager
async def _stdio_session(
    env: dict[str, str],
    cwd: Path,
    *,
    command: str = sys.executable,
    args: Sequence[str] = ("-m", "brain", "mcp"),
) -> AsyncIterator[ClientSession]:
    """A session with ``command args`` started as the MCP server, as a client starts it."""
    parameters = StdioServerParameters(command=command, args=list(args), env=env, cwd=cwd)
    with (cwd / "mcp-stderr.log").open("w") as errlog:
        async with (
            stdio_client(parameters, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


async def _call(session: ClientSession, tool: str, **arguments: Any) -> CallToolResult:
    result = await session.call_tool(tool, arguments)
    assert isinstance(result, CallToolResult)
    return result


async def _ok(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    """The structured content of a call that must succeed."""
    result = await _call(session, tool, **arguments)
    assert not result.is_error, _text(result)
    content = result.structured_content
    assert isinstance(content, dict)
    return content


def _text(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


async def _refused(session: ClientSession, tool: str, **arguments: Any) -> str:
    """The text of a call that must end in a tool error, less the line's opening that
    the SDK adds (``Error executing tool NAME: ``)."""
    result = await _call(session, tool, **arguments)
    text = _text(result)
    assert result.is_error, text
    return SDK_PREFIX.sub("", text, count=1)


def test_the_tools_over_stdio(server: ServerProcess, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with _stdio_session(_environment(server, "mcp-stdio"), tmp_path) as session:
            listed = await session.list_tools()
            assert {tool.name for tool in listed.tools} == TOOLS
            for tool in listed.tools:
                assert tool.description is not None and len(tool.description) > 100
                # Every tool taking a time says how to write one.
                if tool.name in {"remember", "recall", "state_fact", "supersede"}:
                    assert "ISO 8601" in str(tool.input_schema), tool.name

            acme = await _ok(
                session,
                "state_fact",
                subject="Alice",
                predicate="works_at",
                object="Acme",
                subject_type="person",
                valid_from="2022-03-01",
            )
            # Learnt after the first fact, so not yet known as of its recorded_at.
            memory = await _ok(
                session, "remember", text="Alice: I left Acme and joined Globex in February."
            )
            globex = await _ok(
                session,
                "supersede",
                statement_id=acme["statement_id"],
                subject="Alice",
                predicate="works_at",
                object="Globex",
                subject_type="person",
                valid_from="2025-02-01",
                evidence=[memory["memory_id"]],
            )
            assert globex["superseded"] == acme["statement_id"] and globex["version"] == 2

            now = await _ok(session, "recall", query="Alice works_at")
            assert "Alice works_at Globex" in now["text"]
            cited = {(c["record"], c["id"]) for c in now["citations"]}
            assert ("statement", globex["statement_id"]) in cited
            assert ("statement", acme["statement_id"]) not in cited
            assert ("memory", memory["memory_id"]) in cited

            # As believed just after the first fact was written: Acme, not yet Globex.
            then = await _ok(session, "recall", query="Alice works_at", as_of=acme["recorded_at"])
            assert "Acme" in then["text"] and "Globex" not in then["text"]
            assert ("statement", acme["statement_id"]) in {
                (c["record"], c["id"]) for c in then["citations"]
            }

            history = await _ok(session, "history", statement_id=globex["statement_id"])
            assert [(v["object"], v["subject"]) for v in history["versions"]] == [
                ("Acme", "Alice"),
                ("Globex", "Alice"),
            ]
            assert history["versions"][0]["superseded_by"] == globex["statement_id"]

            # A correction of a version no longer current is the server's CONFLICT.
            stale = await _refused(
                session,
                "supersede",
                statement_id=acme["statement_id"],
                subject="Alice",
                predicate="works_at",
                object="Initech",
            )
            assert stale.startswith("CONFLICT (0x0061): ")
            missing = await _refused(session, "history", statement_id=MISSING_ID)
            assert missing.startswith("NOT_FOUND (0x0050): ")
            bad_time = await _refused(session, "recall", query="Alice", as_of="last Tuesday")
            assert bad_time.startswith("INVALID_ARGUMENT (0x0040): ") and "as_of" in bad_time
            not_an_id = await _refused(session, "forget", memory_id="Alice")
            assert not_an_id.startswith("INVALID_ARGUMENT (0x0040): ")
            wrong_type = await _refused(session, "forget", memory_id=memory["memory_id"], hard=7)
            assert "hard" in wrong_type

            forgotten = await _ok(session, "forget", memory_id=memory["memory_id"])
            assert forgotten == {
                "memory_id": memory["memory_id"],
                "already_forgotten": False,
                "statements_tombstoned": 1,
            }
            after = await _ok(session, "recall", query="Alice Globex February")
            assert "Globex" not in after["text"]

            assert (await _ok(session, "review_list"))["items"] == []
            undecided = await _refused(
                session, "review_decide", review_id=MISSING_ID, decision="keep_both"
            )
            assert undecided.startswith("NOT_FOUND (0x0050): ")

    anyio.run(scenario)


def _readme_config() -> dict[str, Any]:
    """The ``mcpServers`` entry README.md shows."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    blocks = [json.loads(b) for b in re.findall(r"^```json\n(.*?)^```", readme, re.S | re.M)]
    entries = [b["mcpServers"]["brain"] for b in blocks if "mcpServers" in b]
    assert len(entries) == 1
    entry: dict[str, Any] = entries[0]
    return entry


def test_the_readme_configuration_with_a_read_only_key(
    server: ServerProcess, tmp_path: Path
) -> None:
    """The README's client configuration, its placeholders filled in, with a key that
    may read: recall answers, a write is PERMISSION_DENIED."""
    minted = run_brain(
        "keys", "create", "--namespace", "default", "--permissions", "read",
        "--data", str(server.data_dir),
    )  # fmt: skip
    assert minted.returncode == 0, minted.stderr
    entry = _readme_config()
    assert entry["command"].endswith("/.venv/bin/brain") and entry["args"][0] == "mcp"
    env = entry["env"] | {
        "BRAIN_PORT": str(server.wire_port),
        "BRAIN_API_KEY": minted.stdout.strip().splitlines()[-1],
    }
    command = str(Path(sys.executable).with_name("brain"))

    async def scenario() -> None:
        async with _stdio_session(env, tmp_path, command=command, args=entry["args"]) as session:
            assert (await _ok(session, "recall", query="anything"))["citations"] == []
            text = await _refused(session, "remember", text="may I?")
            assert text.startswith("PERMISSION_DENIED (0x0031): ")

    anyio.run(scenario)


def test_no_server_is_a_tool_error_not_a_failed_start(tmp_path: Path) -> None:
    env = {"BRAIN_HOST": "127.0.0.1", "BRAIN_PORT": "1", "BRAIN_API_KEY": "brn_unused"}

    async def scenario() -> None:
        async with _stdio_session(env, tmp_path) as session:
            assert {tool.name for tool in (await session.list_tools()).tools} == TOOLS
            text = await _refused(session, "remember", text="anyone there?")
            assert text.startswith("CONNECTION_CLOSED: the Brain server at 127.0.0.1:1 ")

    anyio.run(scenario)


def _announced_url(process: subprocess.Popen[str]) -> str:
    """The endpoint ``brain mcp --transport http`` announces on standard error."""
    found: list[str] = []

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            if "streamable HTTP at " in line:
                found.append(line.rsplit(" ", 1)[1].strip())
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(START_TIMEOUT_S)
    assert found, "brain mcp did not announce its endpoint"
    return found[0]


def test_streamable_http(server: ServerProcess, tmp_path: Path) -> None:
    env = os.environ | _environment(server, "mcp-http")
    command = [sys.executable, "-m", "brain", "mcp", "--transport", "http", "--http-port", "0"]
    process = subprocess.Popen(
        command, env=env, cwd=tmp_path, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        url = _announced_url(process)
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")

        async def scenario() -> None:
            async with (
                streamable_http_client(url) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                made = await _ok(session, "remember", text="Bob prefers tea to coffee.")
                found = await _ok(session, "recall", query="what does Bob drink")
                assert "tea" in found["text"]
                assert {"record": "memory", "id": made["memory_id"]}.items() <= (
                    found["citations"][0].items()
                )

        anyio.run(scenario)
    finally:
        process.terminate()
        process.wait(timeout=20)
        assert process.stderr is not None
        process.stderr.close()
    assert process.returncode == 0
