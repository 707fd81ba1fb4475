"""Where ``brain mcp`` listens over streamable HTTP by default: kept apart from
:mod:`brain.mcp.serve` so that the command line can name them without loading the
MCP SDK, which every other ``brain`` command would then pay for at start-up."""

from __future__ import annotations

from typing import Final

__all__ = ["DEFAULT_HTTP_HOST", "DEFAULT_HTTP_PORT", "HTTP_PATH"]

DEFAULT_HTTP_HOST: Final = "127.0.0.1"
"""Loopback by default: whoever reaches the endpoint acts with the server's API key."""

DEFAULT_HTTP_PORT: Final = 9093
"""The port after Brain's own three (wire 9090, public 9091, admin 9092)."""

HTTP_PATH: Final = "/mcp"
"""Where the streamable HTTP endpoint answers, the SDK's and clients' usual path."""
