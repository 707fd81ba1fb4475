"""``brain mcp``: serve Brain's tools to MCP clients (spec/06-operations.md §12).

It finds the server and its API key as the data verbs do
(:mod:`brain.cli.verbs.connect`: ``--host``/``--port``, ``BRAIN_API_KEY``, the
data directory's credentials), and connects on the first tool call. The MCP side
is standard input and output (``--transport stdio``, what a client that starts
it as a child expects) or a streamable HTTP endpoint (``--transport http``, on
``--http-host``/``--http-port``).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Final

from brain.cli.verbs.connect import ENV_SPACE, UsageProblem, add_connection_options, resolve_target

__all__ = ["COMMAND", "add_command", "run"]

COMMAND: Final = "mcp"
TRANSPORTS: Final = ("stdio", "http")
EXIT_OK: Final = 0
EXIT_USAGE: Final = 2


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``mcp`` to the ``brain`` command."""
    # A light module only: building the parser runs for every brain command.
    from brain.mcp.endpoint import DEFAULT_HTTP_HOST, DEFAULT_HTTP_PORT, HTTP_PATH

    parser = commands.add_parser(
        COMMAND,
        help="serve Brain's tools to agents over the Model Context Protocol",
        description="Serve remember, recall, state_fact, supersede, forget, history, "
        "review_list and review_decide as MCP tools, each a request to a running Brain "
        "server made with one API key (its namespace is the scope of every call).",
    )
    add_connection_options(parser)
    parser.add_argument(
        "--space",
        default=None,
        help=f"the space every tool works in (env {ENV_SPACE}, default: default)",
    )
    mcp = parser.add_argument_group("MCP")
    mcp.add_argument(
        "--transport",
        choices=TRANSPORTS,
        default="stdio",
        help="stdio: standard input and output, for a client that starts this command "
        "(default); http: a streamable HTTP endpoint",
    )
    mcp.add_argument(
        "--http-host",
        default=DEFAULT_HTTP_HOST,
        help=f"address the HTTP endpoint listens on (default {DEFAULT_HTTP_HOST}; anyone "
        "who reaches it acts with the API key)",
    )
    mcp.add_argument(
        "--http-port",
        type=int,
        default=DEFAULT_HTTP_PORT,
        help=f"port of the HTTP endpoint, path {HTTP_PATH} (default {DEFAULT_HTTP_PORT}; "
        "0 picks a free one, announced on standard error)",
    )


def run(args: argparse.Namespace) -> int:
    """Serve until the client goes (stdio) or the process is interrupted (HTTP)."""
    from brain.mcp.connection import Connection
    from brain.mcp.serve import run_http, run_stdio
    from brain.mcp.tools import build_server
    from brain.sdk import Brain
    from brain.sdk.sync import DEFAULT_SPACE

    try:
        target = resolve_target(args)
    except UsageProblem as exc:
        print(f"brain mcp: {exc}", file=sys.stderr)
        return EXIT_USAGE
    connection = Connection(
        lambda: Brain.connect(
            target.host,
            target.port,
            api_key=target.api_key,
            space=args.space or os.environ.get(ENV_SPACE) or DEFAULT_SPACE,
            timeout=args.timeout,
        )
    )
    server = build_server(connection, address=target.address)
    try:
        if args.transport == "http":
            run_http(server, host=args.http_host, port=args.http_port)
        else:
            run_stdio(server)
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        print(f"brain mcp: cannot serve: {exc}", file=sys.stderr)
        return 1
    finally:
        connection.close()
    return EXIT_OK
