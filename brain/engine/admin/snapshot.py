"""Snapshots (spec/05-durability.md §13): a consistent copy of a database, and its restore.

A bundle is a directory::

    MANIFEST.json     format, id, LSN, store LSN, creation time, SHA-256 of every other
                      file, and the log the database keeps (``log``)
    lmdb/data.mdb     an LMDB copy rebuilt from the rows one read transaction sees
    wal/wal-*.log     one segment holding the records after that copy's LSN
    keys/data.mdb     (server snapshots) the key store

A database on a shard's JetStream stream (spec/05-durability.md §14) has no
local segments: its bundle's segment holds no record, its LSN is the store LSN
(the node's applied LSN), and ``log`` names the stream and shard, which the
restored directory catches up from (``brain serve --cluster``) after that LSN.

Taking one does not stop writes: the LMDB copy is made from a read
transaction, whose ``applied_lsn`` (the store LSN) says where it stands, and
the records logged after it are copied while checkpoints are held off, so no
segment holding them can be deleted in between. Only those records are
copied, rewritten into one segment named for the store LSN + 1: a record the
copy already holds is not copied, so a text forgotten before the snapshot is
in no byte of it (the copy holds live rows only, and the forget's record is
applied in it). The bundle's LSN is the last copied record;
restoring it and opening the database replays the copied records, so a
restored database holds exactly the writes up to that LSN.

Restore checks every checksum before it writes a byte, refuses a target that
is not empty, assembles the data directory under a temporary name beside the
target and renames it into place, so a failed restore leaves nothing behind.

:func:`scrub_bundles` (run by the purge over ``DATA/snapshots/``) rewrites a
bundle whose WAL still holds records at or below its store LSN (as bundles of
earlier builds, which copied segments whole, do) to hold only the records
after it: the same snapshot, with the same id, LSN and state, without the
older records' bytes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import lmdb

from brain.engine.store.env import STORE_FILE_MODE, Store
from brain.engine.store.meta import get_progress
from brain.engine.store.rebuild import copy_rebuilt
from brain.engine.wal import RecordLog, encode_record, verify
from brain.engine.wal.format import (
    encode_segment_header,
    iter_segment,
    parse_segment_name,
    scan_segment,
    segment_name,
)
from brain.engine.wal.log import list_segments
from brain.engine.write.writer import Writer
from brain.errors import InvalidArgument, StorageFault
from brain.ids import new_id

__all__ = [
    "MANIFEST",
    "SNAPSHOT_DIR",
    "SnapshotInfo",
    "list_snapshots",
    "log_description",
    "restore_snapshot",
    "scrub_bundle",
    "scrub_bundles",
    "take_snapshot",
    "write_bundle",
]

log = logging.getLogger("brain.engine")

MANIFEST: Final = "MANIFEST.json"
BUNDLE_FORMAT: Final = 1
SNAPSHOT_DIR: Final = "snapshots"
"""The server's own bundles go to ``DATA/snapshots/`` (the admin port's and, by
default, ``brain snapshot create``'s); the purge scrubs the bundles there."""
_PARTIAL: Final = ".partial"
"""Suffix of a bundle being written."""
_SCRUBBING: Final = ".scrubbing"
"""Suffix of a bundle's scrubbed copy being assembled beside it."""
_CHUNK: Final = 1 << 20


@dataclass(frozen=True, slots=True)
class SnapshotInfo:
    """What a bundle's manifest says about it."""

    id: str
    lsn: int
    created_at: int
    path: Path
    log: dict[str, object] | None = None
    """The log the snapshotted database keeps: ``{"kind": "wal"}`` (its local WAL),
    or ``{"kind": "jetstream", "stream", "shard", "node"}``; None in bundles of
    earlier builds (a local WAL)."""

    def to_json(self) -> dict[str, object]:
        """The snapshot as the admin port shows it."""
        shown: dict[str, object] = {
            "id": self.id,
            "lsn": self.lsn,
            "created_at": self.created_at,
            "path": str(self.path),
        }
        if self.log is not None:
            shown["log"] = self.log
        return shown


def log_description(wal: RecordLog) -> dict[str, object]:
    """What a bundle's manifest says of the log ``wal``: the local WAL, or the shard's
    JetStream stream this database follows or plans."""
    stream = getattr(wal, "stream", None)
    options = getattr(wal, "options", None)
    if stream is None or options is None:
        return {"kind": "wal"}
    return {
        "kind": "jetstream",
        "stream": str(stream),
        "shard": str(options.shard),
        "node": options.node,
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
    """Copy ``env`` as seen by ``txn`` into directory ``target``, rebuilt from its live
    rows (:func:`~brain.engine.store.rebuild.copy_rebuilt`): no free page, and no
    branch page keeping the key of a deleted row."""
    copy_rebuilt(env, target, txn, mode=STORE_FILE_MODE)


def write_bundle(
    bundle: Path,
    *,
    env: lmdb.Environment,
    meta_db_reader: lmdb.Transaction,
    lsn: int,
    wal_segments: list[Path],
    extra_envs: dict[str, lmdb.Environment] | None = None,
    log_info: dict[str, object] | None = None,
) -> SnapshotInfo:
    """Write a bundle: LMDB as seen by ``meta_db_reader`` (at ``lsn``), then the WAL
    segments; ``log_info`` (:func:`log_description`) goes in the manifest.

    The caller holds checkpoints off until this returns.
    """
    if bundle.exists():
        raise InvalidArgument(f"snapshot target {bundle} already exists")
    tmp = bundle.with_name(bundle.name + _PARTIAL)
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
            log_info=log_info,
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
    wal: RecordLog,
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
            log_info=log_description(wal),
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
    log_info: dict[str, object] | None,
) -> SnapshotInfo:
    copy_lmdb(env, tmp / "lmdb", reader)
    for name, other in extra_envs.items():
        with other.begin() as txn:
            copy_lmdb(other, tmp / name, txn)
    last = copy_wal_after(lsn, wal_segments, tmp / "wal")
    info = SnapshotInfo(new_id().hex(), last, time.time_ns(), bundle, log_info)
    _write_manifest(tmp, info, store_lsn=lsn, known={})
    return info


def _write_manifest(
    root: Path, info: SnapshotInfo, *, store_lsn: int, known: dict[str, str]
) -> None:
    """The manifest of the bundle assembled in ``root``; ``known`` gives the SHA-256 of
    files already checked (linked unchanged from a checked bundle)."""
    files = {
        name: known.get(name) or _sha256(p)
        for p in sorted(root.rglob("*"))
        if p.is_file() and (name := str(p.relative_to(root))) != MANIFEST
    }
    manifest = {
        "format": BUNDLE_FORMAT,
        "id": info.id,
        "lsn": info.lsn,
        "store_lsn": store_lsn,
        "created_at": info.created_at,
        "files": files,
    }
    if info.log is not None:
        manifest["log"] = info.log
    (root / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


def copy_wal_after(lsn: int, segments: list[Path], target: Path) -> int:
    """Write into the new directory ``target`` one segment, named for ``lsn + 1``, holding
    every whole record of ``segments`` (a log's files, oldest first) after ``lsn``;
    return the LSN of the last one (``lsn`` when there is none).

    The last segment may be growing: its whole records are taken, a torn end is
    not. Segments whose every record is at or below ``lsn`` are not read. Damage,
    or a gap before ``lsn + 1``, raises StorageFault; what is written is checked
    as ``brain wal verify`` checks a log."""
    target.mkdir()
    named = sorted((first, path) for path in segments if (first := _first_lsn(path)) is not None)
    wanted = [
        (first, path)
        for index, (first, path) in enumerate(named)
        if index == len(named) - 1 or named[index + 1][0] - 1 > lsn
    ]
    last = lsn
    with (target / segment_name(lsn + 1)).open("wb") as out:
        out.write(encode_segment_header(lsn + 1, time.time_ns()))
        expected: int | None = None
        for index, (first, path) in enumerate(wanted):
            data = path.read_bytes()
            try:
                scan = scan_segment(
                    data,
                    path=path,
                    name_lsn=first,
                    expected_first_lsn=expected,
                    is_last=index == len(wanted) - 1,
                )
                records = list(iter_segment(data, path=path, name_lsn=first, end=scan.end))
            except StorageFault as exc:
                raise StorageFault(f"the WAL copied into a snapshot is damaged: {exc}") from exc
            expected = scan.next_lsn
            for record in records:
                if record.lsn <= lsn:
                    continue
                if record.lsn != last + 1:
                    raise StorageFault(
                        f"the WAL holds LSN {record.lsn} where a snapshot needs {last + 1}: "
                        "records in between are missing"
                    )
                out.write(encode_record(record))
                last = record.lsn
    report = verify(target)
    if report.corruption is not None or report.last_lsn != last:
        raise StorageFault(f"the WAL written into a snapshot does not read back: {report}")
    return last


def _first_lsn(path: Path) -> int | None:
    return parse_segment_name(path.name)


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
    return SnapshotInfo(str(manifest.get("id")), lsn, created, data_dir, _log_of(manifest))


def _log_of(manifest: dict[str, object]) -> dict[str, object] | None:
    """The manifest's ``log``, when it has a readable one."""
    described = manifest.get("log")
    return {str(k): v for k, v in described.items()} if isinstance(described, dict) else None


def list_snapshots(directory: Path) -> list[SnapshotInfo]:
    """Every bundle in ``directory`` whose manifest reads, oldest first."""
    found: list[SnapshotInfo] = []
    if not directory.is_dir():
        return found
    for bundle in sorted(directory.iterdir()):
        if not bundle.is_dir() or bundle.name.endswith((_PARTIAL, _SCRUBBING)):
            continue
        try:
            manifest = read_manifest(bundle)
        except StorageFault:
            continue
        lsn, created = manifest.get("lsn"), manifest.get("created_at")
        if isinstance(lsn, int) and isinstance(created, int):
            found.append(
                SnapshotInfo(str(manifest.get("id")), lsn, created, bundle, _log_of(manifest))
            )
    return sorted(found, key=lambda s: s.created_at)


def scrub_bundles(directory: Path) -> int:
    """Scrub every bundle in ``directory`` (:func:`scrub_bundle`), first finishing a scrub
    a crash interrupted; return how many bundles were rewritten. A bundle that cannot
    be scrubbed (damaged, unreadable) is logged and left as it is."""
    if not directory.is_dir():
        return 0
    for staging in sorted(directory.glob("*" + _SCRUBBING)):
        _finish_scrub(staging, staging.with_name(staging.name.removesuffix(_SCRUBBING)))
    scrubbed = 0
    for bundle in sorted(directory.iterdir()):
        if not (bundle / MANIFEST).is_file() or bundle.name.endswith((_PARTIAL, _SCRUBBING)):
            continue
        try:
            scrubbed += scrub_bundle(bundle)
        except (OSError, StorageFault):
            log.exception("snapshot %s could not be scrubbed; it is left as it was", bundle)
    return scrubbed


def scrub_bundle(bundle: Path) -> bool:
    """Rewrite ``bundle`` so that its WAL holds only the records after its store LSN, if
    it holds others; return whether it did.

    The rewritten bundle is the same snapshot (same id, LSN, store LSN, creation
    time and files but the WAL, which a restore replays to the same state). It is
    assembled beside the bundle (its other files hard-linked, not copied), checked,
    synced, and only then put in the bundle's place, so a crash leaves the old
    bundle or the new one (:func:`scrub_bundles` finishes the swap)."""
    manifest = read_manifest(bundle)
    store_lsn, lsn, created = (manifest.get(k) for k in ("store_lsn", "lsn", "created_at"))
    if not (isinstance(store_lsn, int) and isinstance(lsn, int) and isinstance(created, int)):
        raise StorageFault(f"{bundle}/{MANIFEST} lacks its store LSN, LSN or creation time")
    wal_dir = bundle / "wal"
    segments = list_segments(wal_dir) if wal_dir.is_dir() else []
    if not segments or segments[0][0] > store_lsn:
        return False  # it holds only what its LMDB copy lacks
    files = _check_bundle(bundle)["files"]
    assert isinstance(files, dict)
    kept = {str(k): str(v) for k, v in files.items() if not str(k).startswith("wal/")}
    staging = bundle.with_name(bundle.name + _SCRUBBING)
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    info = SnapshotInfo(str(manifest.get("id")), lsn, created, bundle, _log_of(manifest))
    try:
        _assemble_scrubbed(staging, info, store_lsn, [path for _, path in segments], kept)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _finish_scrub(staging, bundle)
    return True


def _assemble_scrubbed(
    staging: Path, info: SnapshotInfo, store_lsn: int, segments: list[Path], kept: dict[str, str]
) -> None:
    """Fill ``staging`` with the scrubbed copy of ``info.path``: its files but the WAL
    linked, the WAL's records after ``store_lsn`` rewritten, a new manifest."""
    for name in kept:
        _link(info.path / name, staging / name)
    last = copy_wal_after(store_lsn, segments, staging / "wal")
    if last != info.lsn:
        raise StorageFault(f"{info.path}'s WAL ends at LSN {last}, its manifest says {info.lsn}")
    _write_manifest(staging, info, store_lsn=store_lsn, known=kept)
    _fsync_tree(staging)


def _link(source: Path, target: Path) -> None:
    """``target`` names the file ``source`` names (a copy where links are refused)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def _finish_scrub(staging: Path, bundle: Path) -> None:
    """Put the scrubbed copy ``staging`` in the place of ``bundle`` if it is whole (it
    passes every check), else drop it: the bundle was not touched yet."""
    try:
        _check_bundle(staging)
    except StorageFault:
        shutil.rmtree(staging, ignore_errors=True)
        return
    _fsync_tree(staging)
    shutil.rmtree(bundle, ignore_errors=True)
    os.replace(staging, bundle)
    _fsync_dir(bundle.parent)
