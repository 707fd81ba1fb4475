"""How a verb finds the server and its API key.

Address, first match wins:

1. ``--host`` / ``--port``;
2. the environment: ``BRAIN_HOST``, ``BRAIN_PORT``;
3. the server configuration (``--config``, ``BRAIN_SERVER__HOST``/``__PORT``, …,
   loaded as ``brain serve`` loads it), so a verb given the server's ``--config``
   finds the server; a wildcard listen address (``0.0.0.0``, ``::``) means this
   machine, 127.0.0.1;
4. 127.0.0.1:9090.

API key: ``--api-key``, else ``BRAIN_API_KEY``, else ``api_key`` in
``DATA/credentials.toml``, where DATA is ``--data`` or the configuration's data
directory (``BRAIN_DATA``, default ``./brain-data``): the file ``brain serve``
writes on its first start, so on the server's own machine no key needs typing.
"""

from __future__ import annotations

import argparse
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from brain.client.sync import Client

__all__ = [
    "DEFAULT_HOST",
    "ENV_API_KEY",
    "ENV_HOST",
    "ENV_PORT",
    "ENV_SPACE",
    "ServerSettings",
    "Target",
    "UsageProblem",
    "add_connection_options",
    "connect",
    "resolve_target",
]

DEFAULT_HOST: Final = "127.0.0.1"
ENV_HOST: Final = "BRAIN_HOST"
ENV_PORT: Final = "BRAIN_PORT"
ENV_API_KEY: Final = "BRAIN_API_KEY"
ENV_SPACE: Final = "BRAIN_SPACE"
CREDENTIALS_FILE: Final = "credentials.toml"
"""The file ``brain serve`` writes in its data directory (brain/server/credentials.py)."""

DEFAULT_PORT: Final = 9090
"""The wire port, as :data:`brain.client.sync.DEFAULT_PORT`: repeated here because the
client library (asyncio and the wire session) loads only when a verb connects, not
for ``--help`` or a parser error; a unit test holds the two equal."""

DEFAULT_TIMEOUT_S: Final = 30.0
"""Longest wait for an answer, as :data:`brain.client.sync.DEFAULT_TIMEOUT_S`."""

_WILDCARDS: Final = frozenset({"", "0.0.0.0", "::", "[::]"})
_MAX_PORT: Final = 0xFFFF


class UsageProblem(Exception):
    """The command cannot run as given (exit 2): the message says what to change."""


@dataclass(frozen=True, slots=True)
class Target:
    """Where to connect and with which key; ``key_source`` says where the key came from."""

    host: str
    port: int
    api_key: str
    key_source: str

    @property
    def address(self) -> str:
        """``host:port``, as error messages show it."""
        return f"{self.host}:{self.port}"


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    """The options every verb that talks to a server takes."""
    group = parser.add_argument_group("connection")
    group.add_argument("--host", help=f"server address (env {ENV_HOST}, default {DEFAULT_HOST})")
    group.add_argument(
        "--port", type=int, help=f"wire protocol port (env {ENV_PORT}, default {DEFAULT_PORT})"
    )
    group.add_argument(
        "--api-key",
        help=f"API key (env {ENV_API_KEY}; default: api_key in DATA/{CREDENTIALS_FILE})",
    )
    group.add_argument("--data", help="the server's data directory, to read its credentials from")
    group.add_argument("--config", type=Path, help="the server's TOML configuration file")
    group.add_argument(
        "--timeout",
        type=_seconds,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"longest wait for each answer (default {DEFAULT_TIMEOUT_S:g})",
    )


def _seconds(text: str) -> float:
    """``--timeout``: a positive number of seconds (argparse reports the ValueError)."""
    value = float(text)
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"a timeout is a positive number of seconds, not {text}")
    return value


def _port(text: str, origin: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise UsageProblem(f"{origin} must be a port number, got {text!r}") from None
    if not 0 < port <= _MAX_PORT:
        raise UsageProblem(f"{origin} must be a port (1-{_MAX_PORT}), got {port}")
    return port


def resolve_target(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Target:
    """The address and key for ``args`` (the module docstring's order); raises
    :class:`UsageProblem` when no key can be found or a setting is malformed."""
    env = os.environ if environ is None else environ
    host: str | None = args.host or env.get(ENV_HOST) or None
    port: int | None = None
    if args.port is not None:
        port = _port(str(args.port), "--port")
    elif env.get(ENV_PORT):
        port = _port(env[ENV_PORT], ENV_PORT)
    api_key, source = args.api_key, "--api-key"
    if not api_key and env.get(ENV_API_KEY):
        api_key, source = env[ENV_API_KEY], ENV_API_KEY
    if host is None or port is None or not api_key:
        config = _server_config(args, env)
        if host is None:
            host = DEFAULT_HOST if config.host in _WILDCARDS else config.host
        if port is None:
            port = config.port or DEFAULT_PORT
        if not api_key:
            path = config.data_path / CREDENTIALS_FILE
            api_key, source = _read_key(path), str(path)
    return Target(host=host, port=port, api_key=api_key, key_source=source)


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """What a verb needs of the server's configuration: its listener and data directory."""

    host: str
    port: int
    data_path: Path


def _server_config(args: argparse.Namespace, env: Mapping[str, str]) -> ServerSettings:
    from brain.server.config import ConfigError, load_config

    overrides: dict[str, object] = {}
    if args.data:
        overrides["server.data_dir"] = args.data
    try:
        config = load_config(args.config, environ=env, overrides=overrides)
    except ConfigError as exc:
        raise UsageProblem(f"configuration error: {exc}") from None
    return ServerSettings(config.server.host, config.server.port, config.data_path)


def _read_key(path: Path) -> str:
    """``api_key`` from a credentials file, or a UsageProblem saying how to give one."""
    how = f"pass --api-key, set {ENV_API_KEY}, or point --data at the server's data directory"
    try:
        with path.open("rb") as handle:
            document = tomllib.load(handle)
    except FileNotFoundError:
        raise UsageProblem(f"no API key: {path} does not exist; {how}") from None
    except OSError as exc:
        raise UsageProblem(f"no API key: cannot read {path}: {exc.strerror}; {how}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageProblem(f"no API key: {path} is not valid TOML ({exc}); {how}") from None
    key = document.get("api_key")
    if not isinstance(key, str) or not key:
        raise UsageProblem(f"no API key: {path} has no api_key; {how}")
    return key


def connect(target: Target, *, timeout: float | None) -> Client:
    """A connection to ``target``, handshake done (raises the server's BrainError)."""
    from brain.client.sync import Client

    return Client.connect(target.host, target.port, api_key=target.api_key, timeout=timeout)
