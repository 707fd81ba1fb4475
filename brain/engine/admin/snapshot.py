"""Snapshots (spec/05-durability.md §13): a consistent copy of a database, and its restore.

A bundle is a directory::

    MANIFEST.json     format, id, LSN, creation time, SHA-256 of every other file
    lmdb/data.mdb     a compacted LMDB copy taken in one read transaction
    wal/wal-*.log     the WAL segments holding every record after that copy's LSN
    keys/data.mdb     (server snapshots) the key store

Taking one does not stop writes: the LMDB copy is made from a read
transaction, whose ``applied_lsn`` says where it stands, and the WAL segments
after that LSN are copied while checkpoints are held off, so none of them can
be deleted in between. The bundle's LSN is the last whole record of the copied
WAL; restoring it and opening the database replays those records, so a
restored database holds exactly the writes up to that LSN.

Restore checks every checksum before it writes a byte, refuses a target that
is not empty, assembles the data directory under a temporary name beside the
target and renames it into place, so a failed restore leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import lmdb

from brain.engine.store.env import Store
from brain.engine.store.meta import get_progress
from brain.engine.wal import WriteAheadLog, verify
from brain.engine.write.writer import Writer
from brain.errors import InvalidArgument, StorageFault
from brain.ids import new_id

__all__ = [
    "MANIFEST",
    "SnapshotInfo",
    "list_snapshots",
    "restore_snapshot",
    "take_snapshot",
    "write_bundle",
]

MANIFEST: Final = "MANIFEST.json"
BUNDLE_FORMAT: Final = 1
_CHUNK: Final = 1 << 20


@dataclass(frozen=True, slots=True)
class SnapshotInfo:
    """What a bundle's manifest says about it."""

    id: str
    lsn: int
    created_at: int
    path: Path

    def to_json(self) -> dict[str, object]:
        """The snapshot as the admin port shows it."""
        return {
            "id": self.id,
            "lsn": self.lsn,
            "created_at": self.created_at,
            "path": str(self.path),
        }


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(root: Path) -> None:
    for path in sorted(root.rglob("*"), reverse=True):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    _fsync_dir(root)


def copy_lmdb(env: lmdb.Environment, target: Path, txn: lmdb.Transaction) -> None:
    """Copy ``env`` as seen by ``txn`` into directory ``target`` (compacted)."""
    target.mkdir(parents=True)
    env.copy(str(target), compact=True, txn=txn)


def write_bundle(
    bundle: Path,
    *,
    env: lmdb.Environment,
    meta_db_reader: lmdb.Transaction,
    lsn: int,
    wal_segments: list[Path],
    extra_envs: dict[str, lmdb.Environment] | None = None,
) -> SnapshotInfo:
    """Write a bundle: LMDB as seen by ``meta_db_reader`` (at ``lsn``), then the WAL segments.

    The caller holds checkpoints off until this returns.
    """
    if bundle.exists():
        raise InvalidArgument(f"snapshot target {bundle} already exists")
    tmp = bundle.with_name(bundle.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        info = _assemble(
            tmp,
            bundle=bundle,
            env=env,
            reader=meta_db_reader,
            lsn=lsn,
            wal_segments=wal_segments,
            extra_envs=extra_envs or {},
        )
        _fsync_tree(tmp)
        os.replace(tmp, bundle)
        _fsync_dir(bundle.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return info


def take_snapshot(
    bundle: Path,
    *,
    writer: Writer,
    store: Store,
    wal: WriteAheadLog,
    extra_envs: dict[str, lmdb.Environment] | None = None,
) -> SnapshotInfo:
    """Write a consistent snapshot bundle of an open database while writes go on:
    checkpoints are held off, so no WAL segment after the copy's LSN is deleted."""
    with writer.checkpoints_held(), store.read() as txn:
        lsn = get_progress(store, txn).applied_lsn
        return write_bundle(
            bundle,
            env=store.env,
            meta_db_reader=txn,
            lsn=lsn,
            wal_segments=list(wal.segments),
            extra_envs=extra_envs,
        )


def _assemble(
    tmp: Path,
    *,
    bundle: Path,
    env: lmdb.Environment,
    reader: lmdb.Transaction,
    lsn: int,
    wal_segments: list[Path],
    extra_envs: dict[str, lmdb.Environment],
) -> SnapshotInfo:
    copy_lmdb(env, tmp / "lmdb", reader)
    for name, other in extra_envs.items():
        with other.begin() as txn:
            copy_lmdb(other, tmp / name, txn)
    wal_dir = tmp / "wal"
    wal_dir.mkdir()
    for segment in wal_segments:
        shutil.copyfile(segment, wal_dir / segment.name)
    last = lsn
    if wal_segments:
        report = verify(wal_dir)
        if report.corruption is not None:
            raise StorageFault(f"the WAL copied into a snapshot is damaged: {report.corruption}")
        last = max(lsn, report.last_lsn)
    info = SnapshotInfo(new_id().hex(), last, time.time_ns(), bundle)
    files = {str(p.relative_to(tmp)): _sha256(p) for p in sorted(tmp.rglob("*")) if p.is_file()}
    manifest = {
        "format": BUNDLE_FORMAT,
        "id": info.id,
        "lsn": info.lsn,
        "store_lsn": lsn,
        "created_at": info.created_at,
        "files": files,
    }
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return info


def read_manifest(bundle: Path) -> dict[str, object]:
    """The manifest of ``bundle``; StorageFault when it is missing or malformed."""
    try:
        manifest = json.loads((bundle / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise StorageFault(f"{bundle} has no readable {MANIFEST}: {exc}") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != BUNDLE_FORMAT:
        raise StorageFault(f"{bundle}/{MANIFEST} is not a format-{BUNDLE_FORMAT} manifest")
    return manifest


def _check_bundle(bundle: Path) -> dict[str, object]:
    manifest = read_manifest(bundle)
    files = manifest.get("files")
    if not isinstance(files, dict) or "lmdb/data.mdb" not in files:
        raise StorageFault(f"{bundle}/{MANIFEST} lists no LMDB copy")
    present = {str(p.relative_to(bundle)) for p in bundle.rglob("*") if p.is_file()}
    present.discard(MANIFEST)
    if present != set(files):
        extra = sorted(present - set(files))
        missing = sorted(set(files) - present)
        raise StorageFault(
            f"{bundle} does not match its manifest (missing {missing}, extra {extra})"
        )
    for name, expected in files.items():
        if _sha256(bundle / name) != expected:
            raise StorageFault(f"{bundle}/{name} fails its SHA-256 check: the bundle is damaged")
    return manifest


def restore_snapshot(bundle: Path, data_dir: Path) -> SnapshotInfo:
    """Restore ``bundle`` into the empty (or absent) directory ``data_dir``."""
    manifest = _check_bundle(bundle)
    if data_dir.exists() and any(data_dir.iterdir()):
        raise InvalidArgument(f"restore target {data_dir} is not empty")
    staging = data_dir.with_name(data_dir.name + ".restoring")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        shutil.copytree(bundle, staging, ignore=shutil.ignore_patterns(MANIFEST))
        _fsync_tree(staging)
        if data_dir.exists():
            data_dir.rmdir()
        os.replace(staging, data_dir)
        _fsync_dir(data_dir.parent)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    lsn, created = manifest.get("lsn"), manifest.get("created_at")
    assert isinstance(lsn, int) and isinstance(created, int)
    return SnapshotInfo(str(manifest.get("id")), lsn, created, data_dir)


def list_snapshots(directory: Path) -> list[SnapshotInfo]:
    """Every bundle in ``directory`` whose manifest reads, oldest first."""
    found: list[SnapshotInfo] = []
    if not directory.is_dir():
        return found
    for bundle in sorted(directory.iterdir()):
        if not bundle.is_dir() or bundle.name.endswith(".partial"):
            continue
        try:
            manifest = read_manifest(bundle)
        except StorageFault:
            continue
        lsn, created = manifest.get("lsn"), manifest.get("created_at")
        if isinstance(lsn, int) and isinstance(created, int):
            found.append(SnapshotInfo(str(manifest.get("id")), lsn, created, bundle))
    return sorted(found, key=lambda s: s.created_at)
