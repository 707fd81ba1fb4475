"""A fault layer that models a power loss: every write not yet synced is dropped.

It watches a running database's syncs from the outside: the fsync function the
database is given (the WAL's segments and directory, the checkpoint file and its
directory) and LMDB's own forced syncs (a wrapper around the environment's
``sync``). At each sync it records what the file holds then: that is what a power
loss cannot take away. An image of the data directory built from those records is
the disk after a power loss at that instant. Two forms:

- ``dropped``: nothing written since a file's last sync survives;
- ``torn``: of LMDB's data file, any subset of the pages written since its last
  sync survives as well (the kernel writes dirty pages back in an order of its
  choosing), meta pages included.

Files no sync covers (LMDB's lock file, the vector index's files, which are
derived) are left out of the image or copied as they are.
"""

from __future__ import annotations

import os
import random
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from brain.engine.database import Database
from brain.engine.store.checkpoint import CHECKPOINT_FILE
from brain.engine.store.datafile import DATA_FILE

PAGE = 4096
"""The page size LMDB uses here (the OS page size)."""


class _SyncSpy:
    """Stands in for the LMDB environment: forwards everything, and reports forced syncs."""

    def __init__(self, env: Any, on_sync: Callable[[], None]) -> None:
        self._env = env
        self._on_sync = on_sync

    def sync(self, force: bool = False) -> None:
        self._env.sync(force)
        self._on_sync()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)


class PowerLoss:
    """Records the synced state of a data directory while a database runs in it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.synced: dict[Path, bytes] = {}
        """Each file's content at its last fsync."""
        self.lock = threading.Lock()
        self.syncs = 0
        self.on_wal_sync: Callable[[int], None] | None = None
        """Called with the count of WAL fsyncs so far, before each one is made."""

    def fsync(self, fd: int) -> None:
        """The fsync the database is opened with."""
        path = Path(os.readlink(f"/proc/self/fd/{fd}"))
        if path.is_dir():
            self._directory_synced(path)
            return
        if path.parent.name == "wal":
            self.syncs += 1
            if self.on_wal_sync is not None:
                self.on_wal_sync(self.syncs)
        os.fsync(fd)
        with self.lock:
            self.synced[path] = path.read_bytes()

    def _directory_synced(self, directory: Path) -> None:
        # A synced directory makes its renames durable: the checkpoint file's
        # content is what was synced under its temporary name.
        with self.lock:
            staged = directory / (CHECKPOINT_FILE + ".new")
            if staged in self.synced:
                self.synced[directory / CHECKPOINT_FILE] = self.synced.pop(staged)
            for path in list(self.synced):
                if path.parent == directory and not path.exists():
                    del self.synced[path]  # deleted, and the deletion is durable

    def lmdb_synced(self) -> None:
        data = self.root / "lmdb" / DATA_FILE
        with self.lock:
            self.synced[data] = data.read_bytes()

    def watch(self, db: Database) -> None:
        """Start watching LMDB's forced syncs of ``db`` (its store synced at open)."""
        store = db._store
        self.lmdb_synced()
        store.env = _SyncSpy(store.env, self.lmdb_synced)  # type: ignore[assignment]

    def image(self, target: Path, *, torn: random.Random | None = None) -> None:
        """Write the disk as a power loss now would leave it into ``target``."""
        with self.lock:
            synced = dict(self.synced)
        shutil.copytree(
            self.root,
            target,
            ignore=shutil.ignore_patterns("lock.mdb", "*.new", "wal-*.log", DATA_FILE, "lmdb"),
        )
        (target / "lmdb").mkdir(exist_ok=True)
        (target / "wal").mkdir(exist_ok=True)
        for path, content in synced.items():
            relative = path.relative_to(self.root)
            if relative.parts[0] not in ("lmdb", "wal"):
                continue
            out = target / relative
            if path.name == DATA_FILE and torn is not None and path.exists():
                out.write_bytes(_torn(content, path.read_bytes(), torn))
            else:
                out.write_bytes(content)


def _torn(synced: bytes, current: bytes, rng: random.Random) -> bytes:
    """The synced file with a random subset of the pages written since laid over it."""
    out = bytearray(synced)
    if len(current) > len(out):
        out.extend(bytes(len(current) - len(out)))
    changed = [
        n
        for n in range(len(current) // PAGE)
        if current[n * PAGE : (n + 1) * PAGE] != out[n * PAGE : (n + 1) * PAGE]
    ]
    # Meta pages first among the candidates: a later meta page without its tree is
    # the damage that matters most.
    share = rng.choice((0.25, 0.5, 0.9))
    for n in changed:
        if (n < 2 and rng.random() < 0.7) or rng.random() < share:
            out[n * PAGE : (n + 1) * PAGE] = current[n * PAGE : (n + 1) * PAGE]
    return bytes(out)
