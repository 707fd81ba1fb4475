"""The ``brain`` command: ``serve``, ``keys create`` and ``--version`` (WIRE.md §10).

Exit codes: 0 success, 1 the operation failed, 2 the command could not run
(bad usage or configuration).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from brain import __version__
from brain.errors import BrainError
from brain.server.config import Config, ConfigError, load_config

__all__ = ["main"]

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="brain", description="Brain, a bi-temporal statement database server."
    )
    parser.add_argument("--version", action="version", version=f"brain {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    serve = commands.add_parser("serve", help="run the server", description="Run the server.")
    serve.add_argument("--config", type=Path, help="TOML configuration file")
    serve.add_argument("--data", help="data directory (default ./brain-data, env BRAIN_DATA)")
    serve.add_argument("--host", help="address of the wire listener")
    serve.add_argument("--port", type=int, help="wire protocol port (default 9090)")
    serve.add_argument("--public-port", type=int, help="public HTTP port (default 9091)")
    serve.add_argument("--admin-port", type=int, help="admin HTTP port (default 9092)")

    keys = commands.add_parser("keys", help="manage API keys", description="Manage API keys.")
    key_commands = keys.add_subparsers(dest="keys_command", metavar="ACTION")
    create = key_commands.add_parser(
        "create",
        help="mint an API key",
        description="Mint an API key; prints it alone on the last line of output. "
        "Works whether or not a server runs on the data directory.",
    )
    create.add_argument("--namespace", required=True, help="namespace the key belongs to")
    create.add_argument(
        "--permissions", default="read,write", help="comma-separated: read,write,admin"
    )
    create.add_argument("--data", help="data directory (default ./brain-data, env BRAIN_DATA)")
    create.add_argument("--config", type=Path, help="TOML configuration file")
    return parser


def _config(args: argparse.Namespace) -> Config:
    overrides: dict[str, object] = {}
    for flag, key in (
        ("data", "server.data_dir"),
        ("host", "server.host"),
        ("port", "server.port"),
        ("public_port", "server.public_port"),
        ("admin_port", "server.admin_port"),
    ):
        value = getattr(args, flag, None)
        if value is not None:
            overrides[key] = value
    return load_config(getattr(args, "config", None), overrides=overrides)


def _serve(args: argparse.Namespace) -> int:
    from brain.server.app import run_server

    config = _config(args)
    logging.basicConfig(
        level=config.log.level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    try:
        asyncio.run(run_server(config))
    except OSError as exc:
        print(f"brain serve: cannot start: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _keys_create(args: argparse.Namespace) -> int:
    from brain.server.keys import KeyStore, parse_permissions

    config = _config(args)
    permissions = parse_permissions(p for p in args.permissions.split(",") if p.strip())
    config.data_path.mkdir(parents=True, exist_ok=True)
    store = KeyStore(config.data_path)
    try:
        api_key, record = store.create_key(args.namespace, permissions)
    finally:
        store.close()
    perms = ",".join(sorted(p.value for p in record.permissions))
    print(f"key_id {record.key_id.hex()} namespace {record.namespace} permissions {perms}")
    print(api_key)
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "serve":
            return _serve(args)
        if args.command == "keys" and args.keys_command == "create":
            return _keys_create(args)
    except ConfigError as exc:
        print(f"brain: configuration error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrainError as exc:
        where = f" ({exc.field})" if exc.field else ""
        print(f"brain: {exc.message}{where}", file=sys.stderr)
        return EXIT_FAILED
    if args.command == "keys":
        parser.parse_args(["keys", "--help"])
    parser.print_help()
    return EXIT_USAGE
