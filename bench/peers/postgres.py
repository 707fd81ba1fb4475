"""PostgreSQL 15, started by the harness in a temporary directory, with a bitemporal table.

The Debian package's binaries (``/usr/lib/postgresql/15/bin``) run a fresh
cluster as the unprivileged ``postgres`` user (PostgreSQL refuses to run as
root), listening on 127.0.0.1 on a free port with its unix socket in the same
temporary directory; :func:`postgres_server` waits until it accepts
connections, and stops it (``pg_ctl stop -m fast``) and removes the directory
when the block ends.

The cluster is configured the way PostgreSQL's documentation ("Resource
Consumption", "Write Ahead Log") recommends for a durable OLTP write workload:
``fsync`` and ``synchronous_commit`` on, ``shared_buffers`` a quarter of the
memory, room for the WAL between checkpoints. Every setting that differs from
the defaults is in :attr:`PostgresServer.settings`, so the results carry it.

:data:`SCHEMA` is the statements table of our model (two time axes,
supersession chains, an idempotency key) with the secondary indexes our store
keeps per statement (``brain/engine/records/statements.py``): by subject and predicate
in record order, by record time, the current statements of a subject and
predicate, by chain, and by request id.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import psycopg

__all__ = [
    "BIN",
    "OS_USER",
    "SCHEMA",
    "SHARED_BUFFERS_CAP_MB",
    "START_TIMEOUT_S",
    "PostgresMissing",
    "PostgresServer",
    "postgres_server",
    "recommended_settings",
]

BIN: Final = Path("/usr/lib/postgresql/15/bin")
"""Where the Debian ``postgresql-15`` package puts the server binaries."""

OS_USER: Final = "postgres"
"""The unprivileged account the Debian package creates; the server refuses root."""

START_TIMEOUT_S: Final = 120
"""How long ``pg_ctl start -w`` may wait for readiness (a busy 2-core machine)."""

SHARED_BUFFERS_CAP_MB: Final = 4096
"""Upper bound on ``shared_buffers``: the docs' 25% of memory, but no more than a
benchmark's working set (a few hundred MB at most) could ever use."""

SUPERUSER: Final = "postgres"
"""The database superuser ``initdb`` creates; local connections trust it."""

SCHEMA: Final = """
CREATE TABLE entities (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    space text NOT NULL DEFAULT 'default',
    name text NOT NULL,
    type text
);
CREATE TABLE statements (
    id bigint PRIMARY KEY,
    space text NOT NULL DEFAULT 'default',
    subject bigint NOT NULL REFERENCES entities (id),
    predicate text NOT NULL,
    kind text NOT NULL CHECK (kind IN ('fact', 'preference', 'event')),
    object text NOT NULL,
    confidence real NOT NULL DEFAULT 1.0,
    valid_from timestamptz,
    valid_to timestamptz,
    event_at timestamptz,
    recorded_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    record_invalidated_at timestamptz,
    supersedes bigint REFERENCES statements (id),
    chain_root bigint NOT NULL,
    version integer NOT NULL DEFAULT 1,
    request_id bytea NOT NULL,
    CONSTRAINT statements_request_id UNIQUE (space, request_id),
    CONSTRAINT statements_chain UNIQUE (chain_root, version)
);
CREATE SEQUENCE statement_ids OWNED BY statements.id;
CREATE INDEX statements_by_subject ON statements (space, subject, predicate, recorded_at);
CREATE INDEX statements_by_time ON statements (space, recorded_at);
CREATE INDEX statements_current ON statements (space, subject, predicate)
    WHERE record_invalidated_at IS NULL;
"""
"""The peer's tables. Ids come from a sequence (not an identity column) so a root
statement can name itself as its ``chain_root`` in the same INSERT."""


class PostgresMissing(RuntimeError):
    """The PostgreSQL 15 server binaries are not installed."""


def recommended_settings(memory_mb: int) -> dict[str, str]:
    """The settings for a durable OLTP write workload on ``memory_mb`` of RAM.

    ``fsync``, ``synchronous_commit`` and ``full_page_writes`` are the defaults
    and are stated anyway, because durability is what the comparison is about."""
    shared = min(memory_mb // 4, SHARED_BUFFERS_CAP_MB)
    return {
        "fsync": "on",
        "synchronous_commit": "on",
        "full_page_writes": "on",
        # "Resource Consumption": 25% of memory is a reasonable starting value.
        "shared_buffers": f"{shared}MB",
        # The planner's view of the OS cache: about half to three quarters of memory.
        "effective_cache_size": f"{memory_mb // 2}MB",
        # "WAL Configuration": a larger max_wal_size spaces out checkpoints under writes.
        "max_wal_size": "4GB",
    }


def _memory_mb() -> int:
    with open("/proc/meminfo", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    raise RuntimeError("no MemTotal in /proc/meminfo")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _as_postgres(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    """Run a server binary as the unprivileged user (when we are root), failing loudly."""
    user = OS_USER if os.geteuid() == 0 else None
    result = subprocess.run(cmd, user=user, group=user, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(
            f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stdout}{result.stderr}"
        )
    return result


@dataclass
class PostgresServer:
    """A running cluster: where it listens, its version and its non-default settings."""

    host: str
    port: int
    socket_dir: Path
    data_dir: Path
    version: str
    settings: dict[str, str]
    options: list[str] = field(default_factory=list)

    def conninfo(self, dbname: str = "postgres") -> str:
        """A libpq connection string for ``dbname`` over TCP on 127.0.0.1."""
        return f"host={self.host} port={self.port} user={SUPERUSER} dbname={dbname}"

    def create_database(self, name: str) -> str:
        """A fresh database holding :data:`SCHEMA` (dropped first if it exists); its conninfo."""
        with psycopg.connect(self.conninfo(), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{name}"')
        with psycopg.connect(self.conninfo(name)) as conn:
            conn.execute(SCHEMA)
        return self.conninfo(name)

    def wal_syncs(self) -> int:
        """``pg_stat_wal.wal_sync``: WAL flushes to disk so far, cluster-wide."""
        with psycopg.connect(self.conninfo(), autocommit=True) as conn:
            row = conn.execute("SELECT wal_sync FROM pg_stat_wal").fetchone()
        assert row is not None
        return int(row[0])

    def describe(self) -> dict[str, Any]:
        """The peer as the results JSON records it."""
        return {
            "name": "PostgreSQL",
            "version": self.version,
            "binaries": str(BIN),
            # The durability settings are defaults, stated because they are the point.
            "settings": dict(self.settings),
            "initdb_options": list(self.options),
        }


@contextmanager
def postgres_server() -> Iterator[PostgresServer]:
    """Run a fresh PostgreSQL 15 cluster until the block ends, then stop and remove it."""
    if not (BIN / "postgres").exists():
        raise PostgresMissing(
            f"PostgreSQL 15 server binaries not found in {BIN}: "
            "install them with `apt-get install postgresql-15`"
        )
    tmp = Path(tempfile.mkdtemp(prefix="brain-bench-pg-"))
    data = tmp / "data"
    try:
        if os.geteuid() == 0:
            account = pwd.getpwnam(OS_USER)
            os.chown(tmp, account.pw_uid, account.pw_gid)
        # --no-sync only skips flushing initdb's own files: the measured runs
        # write with fsync on, and the scratch cluster is discarded afterwards.
        options = ["--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync"]
        _as_postgres([str(BIN / "initdb"), "-D", str(data), "-U", SUPERUSER, *options])
        port = _free_port()
        settings = recommended_settings(_memory_mb())
        local = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(port),
            "unix_socket_directories": f"'{tmp}'",
        }
        lines = [f"{k} = {v}" for k, v in local.items()]
        lines += [f"{k} = '{v}'" for k, v in settings.items()]
        with open(data / "postgresql.conf", "a", encoding="utf-8") as conf:
            conf.write("\n# bench/peers/postgres.py\n" + "\n".join(lines) + "\n")
        log = tmp / "server.log"
        _as_postgres(
            [
                str(BIN / "pg_ctl"), "-D", str(data), "-l", str(log),
                "-w", "-t", str(START_TIMEOUT_S), "start",
            ]
        )  # fmt: skip
        try:
            conninfo = f"host=127.0.0.1 port={port} user={SUPERUSER} dbname=postgres"
            with psycopg.connect(conninfo) as conn:
                row = conn.execute("SHOW server_version").fetchone()
            assert row is not None
            yield PostgresServer("127.0.0.1", port, tmp, data, str(row[0]), settings, options)
        finally:
            _as_postgres([str(BIN / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
