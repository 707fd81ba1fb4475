"""Running the MCP server: over stdio (the client starts ``brain mcp`` as its child
and speaks on its standard input and output) or over streamable HTTP.

Over stdio, standard output carries only MCP messages; anything else this
process says goes to standard error.
"""

from __future__ import annotations

import signal
import socket
import sys
from types import FrameType
from typing import Final, TextIO

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer

from brain.mcp.endpoint import DEFAULT_HTTP_HOST, DEFAULT_HTTP_PORT, HTTP_PATH

__all__ = ["DEFAULT_HTTP_HOST", "DEFAULT_HTTP_PORT", "HTTP_PATH", "run_http", "run_stdio"]

LISTEN_BACKLOG: Final = 128
"""Pending connections the listening socket queues: a few agents, with room to spare."""


class _Stopped(Exception):
    """SIGTERM or SIGINT arrived: the HTTP server has shut down and the command ends."""


def _stop(signum: int, frame: FrameType | None) -> None:
    raise _Stopped


def run_stdio(server: MCPServer) -> None:
    """Serve one client on standard input and output until it closes them."""
    anyio.run(server.run_stdio_async)


def run_http(
    server: MCPServer,
    *,
    host: str = DEFAULT_HTTP_HOST,
    port: int = DEFAULT_HTTP_PORT,
    announce: TextIO | None = None,
) -> None:
    """Serve streamable HTTP on ``host:port`` (0 picks a free port) until SIGTERM or
    SIGINT, then return; the endpoint's URL is written to ``announce`` (standard
    error) once it listens."""
    app = server.streamable_http_app(streamable_http_path=HTTP_PATH, host=host)
    # The socket is bound here, not by uvicorn, so that the port it got (for
    # --http-port 0) is known and announced before the first client comes.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
        listener.listen(LISTEN_BACKLOG)
        bound = listener.getsockname()[1]
        shown = f"[{host}]" if family == socket.AF_INET6 else host
        out = announce if announce is not None else sys.stderr
        out.write(f"brain mcp: streamable HTTP at http://{shown}:{bound}{HTTP_PATH}\n")
        out.flush()
        config = uvicorn.Config(app, log_level="warning", lifespan="on")
        # uvicorn shuts down gracefully on the signal, then raises it again for the
        # handler that was there before; this one makes that a normal return (exit 0)
        # rather than death by the signal.
        previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            anyio.run(uvicorn.Server(config).serve, [listener])
        except _Stopped:
            pass
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    finally:
        listener.close()
