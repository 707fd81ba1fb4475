"""The ``brain`` command: ``serve``, ``keys create``, ``wal verify|truncate``, ``--version``.

Exit codes (spec/06-operations.md §1): 0 success, 1 the operation failed, 2 the command
could not run (bad usage or configuration), 3 ``wal verify`` found corruption.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from brain import __version__
from brain.cli import completion, mcp_server, transfer, verbs
from brain.errors import BrainError, StorageFault
from brain.server.files import PRIVATE_UMASK

if TYPE_CHECKING:
    from brain.server.config import Config

__all__ = ["main"]

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_CORRUPT: Final = 3


def _add_location(parser: argparse.ArgumentParser) -> None:
    """The options every command that works on a data directory takes."""
    parser.add_argument("--config", type=Path, help="TOML configuration file")
    parser.add_argument("--data", help="data directory (default ./brain-data, env BRAIN_DATA)")


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="brain", description="Brain, a bi-temporal statement database server."
    )
    parser.add_argument("--version", action="version", version=f"brain {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    serve = commands.add_parser("serve", help="run the server", description="Run the server.")
    _add_location(serve)
    serve.add_argument("--host", help="address of the wire listener")
    serve.add_argument("--port", type=int, help="wire protocol port (default 9090)")
    serve.add_argument("--public-port", type=int, help="public HTTP port (default 9091)")
    serve.add_argument("--admin-port", type=int, help="admin HTTP port (default 9092)")
    serve.add_argument(
        "--cluster",
        metavar="NATS_URLS",
        help="keep the log in NATS JetStream: the servers, nats://host:port,... (cluster.nats)",
    )
    serve.add_argument("--node", help="this node's id in the cluster (cluster.node)")
    serve.add_argument("--shard", help="the shard this node serves (cluster.shard, default 0)")

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
    _add_location(create)

    wal = commands.add_parser(
        "wal", help="inspect or repair the write-ahead log", description="WAL tools."
    )
    wal_commands = wal.add_subparsers(dest="wal_command", metavar="ACTION")
    verify = wal_commands.add_parser(
        "verify",
        help="check every WAL record without changing anything",
        description="Check every WAL record. Exit 0 when sound (a torn tail is normal "
        "and reported), 3 on corruption (naming file, offset and LSN), 2 when it cannot run.",
    )
    _add_location(verify)
    truncate = wal_commands.add_parser(
        "truncate",
        help="drop every WAL record from LSN on (after corruption)",
        description="Consciously drop the WAL records with LSN >= --at, so that a server "
        "refusing to start on a damaged log can start without them. Stop the server first.",
    )
    truncate.add_argument("--at", type=int, required=True, metavar="LSN")
    _add_location(truncate)

    snapshot = commands.add_parser(
        "snapshot", help="take or restore snapshots", description="Snapshot tools."
    )
    snapshot_commands = snapshot.add_subparsers(dest="snapshot_command", metavar="ACTION")
    take = snapshot_commands.add_parser(
        "create",
        help="write a snapshot bundle of a stopped server's data directory",
        description="Write a snapshot bundle. For a running server use POST /v1/snapshots.",
    )
    _add_location(take)
    take.add_argument("--out", type=Path, help="bundle directory (default DATA/snapshots/<time>)")
    restore = snapshot_commands.add_parser(
        "restore",
        help="restore a bundle into an empty data directory",
        description="Check every checksum of BUNDLE, then restore it into the empty "
        "directory --data. A damaged bundle is refused and nothing is written.",
    )
    restore.add_argument("bundle", type=Path, metavar="BUNDLE")
    restore.add_argument("--data", required=True, help="the empty data directory to fill")
    verbs.register(commands)  # the data verbs: memory, statement, recall, … (brain/cli/verbs/)
    transfer.add_commands(commands)  # export and import through the admin port
    mcp_server.add_command(commands)  # the tools for agents, over MCP (brain/mcp/)
    complete = commands.add_parser(
        "completion",
        help="print a shell completion script",
        description="Print the completion script for SHELL. bash: "
        'eval "$(brain completion bash)" (in ~/.bashrc); zsh: eval "$(brain completion zsh)" '
        "(in ~/.zshrc); fish: brain completion fish > ~/.config/fish/completions/brain.fish.",
    )
    complete.add_argument(
        "shell", choices=completion.SHELLS, metavar="SHELL", help="bash, zsh or fish"
    )
    return parser


def _config(args: argparse.Namespace) -> Config:
    from brain.server.config import load_config  # the engine's tuning: loaded on use

    overrides: dict[str, object] = {}
    for flag, key in (
        ("data", "server.data_dir"),
        ("host", "server.host"),
        ("port", "server.port"),
        ("public_port", "server.public_port"),
        ("admin_port", "server.admin_port"),
        ("cluster", "cluster.nats"),
        ("node", "cluster.node"),
        ("shard", "cluster.shard"),
    ):
        value = getattr(args, flag, None)
        if value is not None:
            overrides[key] = value
    return load_config(getattr(args, "config", None), overrides=overrides)


def _serve(args: argparse.Namespace) -> int:
    import asyncio

    from brain.embed import ModelMissing, load_embedder
    from brain.server.app import run_server

    config = _config(args)
    logging.basicConfig(
        level=config.log.level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    try:
        # Before any port opens: a server without its model must not start at all.
        load_embedder(config.retrieval.embedder, model_dir=config.retrieval.model_path)
    except ModelMissing as exc:
        print(f"brain serve: cannot start: {exc}", file=sys.stderr)
        return EXIT_FAILED
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
        api_key, record = store.create_key(args.namespace, permissions, via="cli")
    finally:
        store.close()
    perms = ",".join(sorted(p.value for p in record.permissions))
    print(f"key_id {record.key_id.hex()} namespace {record.namespace} permissions {perms}")
    print(api_key)
    return EXIT_OK


def _wal_directory(args: argparse.Namespace) -> Path | None:
    """The data directory's WAL, or None (after saying so) when there is none."""
    directory = _config(args).data_path / "wal"
    if not directory.is_dir():
        print(f"brain wal {args.wal_command}: no WAL at {directory}", file=sys.stderr)
        return None
    return directory


def _wal_verify(args: argparse.Namespace) -> int:
    from brain.engine.wal import verify

    directory = _wal_directory(args)
    if directory is None:
        return EXIT_USAGE
    report = verify(directory)
    if report.corruption is not None:
        print(f"corrupt: {report.corruption}")
        return EXIT_CORRUPT
    print(
        f"ok: {report.records} records, LSN {report.first_lsn}..{report.last_lsn}, "
        f"{report.segments} segments"
    )
    if report.torn_tail is not None:
        print(f"torn tail (trimmed at the next start): {report.torn_tail}")
    return EXIT_OK


def _wal_truncate(args: argparse.Namespace) -> int:
    from brain.engine.wal import truncate_at

    directory = _wal_directory(args)
    if directory is None:
        return EXIT_USAGE
    if args.at < 1:
        print("brain wal truncate: --at must be an LSN (1 or more)", file=sys.stderr)
        return EXIT_USAGE
    try:
        dropped = truncate_at(directory, args.at)
    except ValueError as exc:
        print(f"brain wal truncate: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"dropped {dropped} records from LSN {args.at} on")
    return EXIT_OK


def _snapshot_create(args: argparse.Namespace) -> int:
    from brain.engine.database import Database
    from brain.server.keys import KeyStore

    config = _config(args)
    bundle = args.out or config.data_path / "snapshots" / time.strftime(
        "%Y%m%dT%H%M%SZ", time.gmtime()
    )
    database = Database.open(config.data_path)
    keys = KeyStore(config.data_path)
    try:
        info = database.snapshot(bundle, extra_envs={"keys": keys.env})
    finally:
        keys.close()
        database.close()
    print(f"snapshot {info.id} at LSN {info.lsn}")
    print(info.path)
    return EXIT_OK


def _snapshot_restore(args: argparse.Namespace) -> int:
    from brain.engine.admin.snapshot import restore_snapshot

    info = restore_snapshot(args.bundle, Path(args.data))
    print(f"restored snapshot {info.id} (LSN {info.lsn}) into {info.path}")
    if info.log is not None and info.log.get("kind") == "jetstream":
        shard = info.log.get("shard")
        print(
            f"it holds shard {shard}'s stream {info.log.get('stream')} up to LSN {info.lsn}: "
            f"`brain serve --cluster NATS_URLS --node ID --shard {shard} --data {info.path}` "
            f"catches up from LSN {info.lsn + 1}"
        )
    return EXIT_OK


_ACTIONS: Final[dict[tuple[str, str | None], Callable[[argparse.Namespace], int]]] = {
    ("serve", None): _serve,
    ("keys", "create"): _keys_create,
    ("wal", "verify"): _wal_verify,
    ("wal", "truncate"): _wal_truncate,
    ("snapshot", "create"): _snapshot_create,
    ("snapshot", "restore"): _snapshot_restore,
}
"""The commands run here, by (command, action); ``serve`` has no action."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    # One BLAS thread: on a small machine the embedder's matrix products share the
    # cores with the server's other threads, and OpenBLAS's own threads only fight
    # them (measured 4-10x slower on two busy cores). Set before numpy loads.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # Everything a command writes (the store, snapshots, exports, keys) holds
    # tenants' data: it is created readable by this user only.
    os.umask(PRIVATE_UMASK)
    parser = _build_parser()
    args = parser.parse_args(argv)
    # Commands with runners of their own, which print their own errors.
    runners = {"export": transfer.run, "import": transfer.run, mcp_server.COMMAND: mcp_server.run}
    if args.command in runners:
        return runners[args.command](args)
    if args.command == "completion":
        sys.stdout.write(completion.script(parser, args.shell))
        return EXIT_OK
    if args.command in verbs.COMMANDS:
        return verbs.run(args)  # prints its own errors, exit codes as below
    from brain.server.config import ConfigError

    action = _ACTIONS.get((args.command, getattr(args, f"{args.command}_command", None)))
    try:
        if action is not None:
            return action(args)
    except ConfigError as exc:
        print(f"brain: configuration error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrainError as exc:
        where = f" ({exc.field})" if exc.field else ""
        print(f"brain: {exc.message}{where}", file=sys.stderr)
        return EXIT_FAILED
    except StorageFault as exc:
        print(f"brain: storage fault: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if args.command in ("keys", "wal", "snapshot"):
        parser.parse_args([args.command, "--help"])
    parser.print_help()
    return EXIT_USAGE
