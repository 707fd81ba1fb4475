"""The write-ahead log: segment files in one directory, appended and synced by one thread.

The engine's writer thread appends each batch of plans as records, calls
:meth:`WriteAheadLog.sync` once per batch (group commit) and only then applies
the batch to LMDB. Opening the log validates every segment; a torn tail (the
normal result of a crash during an append) is cut away, anything else refuses
with :class:`~brain.errors.WalCorruption` and leaves the disk untouched. The
engine defers the cut until it knows the store's applied LSN
(:meth:`WriteAheadLog.cut_torn_tail`): a torn end holding a record the store
has applied is damage, not a torn append, and is refused, not cut.

Segments of an older layout (:data:`~brain.engine.wal.format.READABLE_VERSIONS`)
are read; the first append after opening such a log starts a segment in the
current layout, and checkpoints delete the old ones in time.

A failed write or fsync fails the log for good (spec/05-durability.md §3): after an
fsync error the kernel may have dropped the dirty pages and marked them clean,
so a second fsync could report success for data that is gone.

A :class:`WriteAheadLog` is not thread-safe; the writer thread owns it.
"""

from __future__ import annotations

import bisect
import fcntl
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Final

from brain.engine.wal.format import (
    FORMAT_VERSION,
    MAX_PAYLOAD,
    RECORD_HEADER_SIZE,
    SEGMENT_HEADER_SIZE,
    SegmentScan,
    WalRecord,
    encode_record,
    encode_segment_header,
    iter_segment,
    parse_segment_name,
    scan_segment,
    segment_name,
)
from brain.errors import StorageFault, WalCorruption, WalSyncFailed

__all__ = [
    "DEFAULT_SEGMENT_BYTES",
    "MIN_SEGMENT_BYTES",
    "WriteAheadLog",
    "list_segments",
    "lock_directory",
]

DEFAULT_SEGMENT_BYTES: Final = 64 * 1024 * 1024
"""Big enough that rotation (three extra fsyncs) is rare, small enough to checkpoint often."""

MIN_SEGMENT_BYTES: Final = SEGMENT_HEADER_SIZE + RECORD_HEADER_SIZE
"""A segment must have room for its header and one empty record."""

SEGMENT_MODE: Final = 0o600
"""Segments hold client data; only the server's user may read them."""

DIRECTORY_MODE: Final = 0o700
"""The same for a WAL directory the log creates."""

_APPEND_FLAGS: Final = os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC


def list_segments(directory: Path) -> list[tuple[int, Path]]:
    """Every segment file in ``directory`` as ``(first_lsn, path)``, in LSN order.

    Files whose names are not segment names are not part of the log and are
    left alone.
    """
    found = []
    for path in directory.iterdir():
        lsn = parse_segment_name(path.name)
        if lsn is not None:
            found.append((lsn, path))
    found.sort()
    return found


def lock_directory(directory: Path) -> int:
    """Open ``directory`` and take an exclusive lock on it; return the descriptor.

    The lock (``flock`` on the directory itself, so no lock file changes the
    directory) keeps a server and ``brain wal truncate`` from writing one log
    at once. Closing the descriptor releases it.
    """
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StorageFault(f"the WAL in {directory} is in use by another process") from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class WriteAheadLog:
    """An open write-ahead log; build it with :meth:`open`.

    Plain attributes, for metrics and logs: ``directory``; ``bytes_written``
    (record frames and new segment headers written by this handle);
    ``sync_count`` (fsyncs made by :meth:`sync`, one per group commit with new
    data); ``torn_tail`` (what :meth:`cut_torn_tail` cut from the end, or None).
    """

    def __init__(
        self,
        directory: Path,
        dir_fd: int,
        *,
        segment_bytes: int,
        fsync: Callable[[int], None],
        clock: Callable[[], int],
    ) -> None:
        """Private: use :meth:`WriteAheadLog.open`."""
        self.directory = directory
        self.bytes_written = 0
        self.sync_count = 0
        self.torn_tail: str | None = None
        self._dir_fd = dir_fd
        self._closed = False
        self._segment_bytes = segment_bytes
        self._fsync = fsync
        self._clock = clock
        self._segments: list[tuple[int, Path]] = []  # (first LSN, path), oldest first
        self._active_fd: int | None = None
        self._active_size = 0
        self._active_version = FORMAT_VERSION
        self._next_lsn = 1
        self._dirty = False
        self._failure: OSError | None = None
        self._pending: tuple[Path, SegmentScan] | None = None
        """The last segment and its scan while a torn tail waits for :meth:`cut_torn_tail`."""

    @property
    def max_record_payload(self) -> int:
        """The largest payload one record holds (:data:`MAX_PAYLOAD`); a larger plan is
        logged as parts (:mod:`brain.engine.wal.parts`)."""
        return MAX_PAYLOAD

    @classmethod
    def open(
        cls,
        directory: Path,
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        fsync: Callable[[int], None] = os.fdatasync,
        clock: Callable[[], int] = time.time_ns,
        defer_cut: bool = False,
    ) -> WriteAheadLog:
        """Open (creating if needed) the log in ``directory``, validating every segment.

        A torn tail in the last segment is cut away and the cut synced before
        this returns (``torn_tail`` says what was cut). With ``defer_cut`` the
        torn tail stays on disk until the caller, knowing which records must
        survive, calls :meth:`cut_torn_tail`; till then the log takes no
        appends. Corruption raises :class:`~brain.errors.WalCorruption` with
        nothing on disk changed; a failed fsync raises
        :class:`~brain.errors.WalSyncFailed`; another process holding the log
        raises :class:`~brain.errors.StorageFault`.
        """
        if segment_bytes < MIN_SEGMENT_BYTES:
            raise ValueError(f"segment_bytes {segment_bytes} is below {MIN_SEGMENT_BYTES}")
        directory = Path(directory)
        created = not directory.exists()
        directory.mkdir(mode=DIRECTORY_MODE, parents=True, exist_ok=True)
        log = cls(
            directory,
            lock_directory(directory),
            segment_bytes=segment_bytes,
            fsync=fsync,
            clock=clock,
        )
        try:
            scans = log._scan()
            try:
                if created:
                    # The new directory's entry in its parent must be durable too.
                    parent = os.open(directory.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                    try:
                        fsync(parent)
                    finally:
                        os.close(parent)
                log._take_over(scans)
            except OSError as exc:
                raise log._fail("opening", exc) from exc
            if not defer_cut:
                log.cut_torn_tail(0)
        except BaseException:
            log.close()
            raise
        return log

    @property
    def location(self) -> str:
        """The log's directory, for messages to the operator."""
        return str(self.directory)

    @property
    def first_lsn(self) -> int:
        """The lowest LSN still held (:attr:`next_lsn` when no record is held)."""
        return self._segments[0][0]

    @property
    def last_lsn(self) -> int:
        """The LSN of the last record appended; 0 for a log that never held one."""
        return self._next_lsn - 1

    @property
    def next_lsn(self) -> int:
        """The LSN the next appended record must carry."""
        return self._next_lsn

    @property
    def segments(self) -> list[Path]:
        """The segment files, oldest first; the last is the active one."""
        return [path for _, path in self._segments]

    @property
    def failed(self) -> bool:
        """Whether a write or fsync failed; the log then takes no more writes."""
        return self._failure is not None

    def append(self, records: Sequence[WalRecord]) -> None:
        """Write ``records`` (LSNs :attr:`next_lsn`, +1, …) to the log without syncing.

        One ``write`` per segment touched; a new segment starts at a record
        boundary when the active one would grow past ``segment_bytes``. Wrong
        LSNs raise ValueError with nothing written. A failed write raises
        :class:`~brain.errors.WalSyncFailed` and fails the log.
        """
        self._check_appendable()
        expected = self._next_lsn
        for record in records:
            if record.lsn != expected:
                raise ValueError(f"record has LSN {record.lsn} where LSN {expected} is next")
            expected += 1
        frames = [encode_record(record) for record in records]
        if not frames:
            return
        try:
            if self._active_version != FORMAT_VERSION:
                self._adopt_current_format()
            chunk: list[bytes] = []
            size = self._active_size
            for frame in frames:
                if size > SEGMENT_HEADER_SIZE and size + len(frame) > self._segment_bytes:
                    self._write(chunk)
                    self._rotate()
                    chunk = []
                    size = self._active_size
                chunk.append(frame)
                size += len(frame)
            self._write(chunk)
        except OSError as exc:
            raise self._fail("appending", exc) from exc

    def sync(self) -> None:
        """Make every appended record durable with one fsync of the active segment.

        Does nothing when nothing was appended since the last sync. A failed
        fsync raises :class:`~brain.errors.WalSyncFailed` and fails the log: it
        never calls fsync again, so it can never report a lost write as durable.
        """
        self._check_writable()
        if not self._dirty:
            return
        try:
            self._fsync(self._active())
        except OSError as exc:
            raise self._fail("syncing", exc) from exc
        self._dirty = False
        self.sync_count += 1

    def rotate(self) -> None:
        """Start a new segment now, so :meth:`checkpoint` can delete every record so far.

        A hard forget uses this to force the segment holding the forgotten text
        out. Does nothing when the active segment holds no record yet.
        """
        self._check_appendable()
        if self._active_size <= SEGMENT_HEADER_SIZE:
            return
        try:
            self._rotate()
        except OSError as exc:
            raise self._fail("rotating", exc) from exc

    def checkpoint(self, durable_lsn: int) -> list[Path]:
        """Delete the segments whose every record is at or below ``durable_lsn``.

        Call it once LMDB is durably synced up to ``durable_lsn``. The active
        segment is never deleted. Oldest segments go first, each deletion
        synced, so a crash midway never leaves a gap. Returns the deleted paths.
        A segment that cannot be deleted raises :class:`~brain.errors.StorageFault`
        (the log stays usable); a failed directory fsync fails the log.
        """
        self._check_appendable()
        if not 0 <= durable_lsn <= self.last_lsn:
            raise ValueError(f"durable LSN {durable_lsn} is outside 0..{self.last_lsn}")
        deleted: list[Path] = []
        while len(self._segments) > 1 and self._segments[1][0] - 1 <= durable_lsn:
            path = self._segments[0][1]
            try:
                path.unlink()
            except OSError as exc:
                raise StorageFault(f"cannot delete WAL segment {path}: {exc}") from exc
            del self._segments[0]
            deleted.append(path)
            try:
                self._fsync(self._dir_fd)
            except OSError as exc:
                raise self._fail("syncing the directory", exc) from exc
        return deleted

    def read_from(self, lsn: int) -> Iterator[WalRecord]:
        """Every record with LSN ≥ ``lsn``, in order, across segments.

        Reads what was appended up to this call (synced or not); records
        appended later are not included. ``lsn`` below :attr:`first_lsn` (the
        records were checkpointed away) raises ValueError; a failed log raises
        :class:`~brain.errors.WalSyncFailed`, as its files are no longer trusted.
        """
        self._check_writable()
        if lsn < self.first_lsn:
            raise ValueError(f"LSN {lsn} is below the first LSN held, {self.first_lsn}")
        return self._read(list(self._segments), self._active_size, lsn)

    @staticmethod
    def _read(segments: list[tuple[int, Path]], active_end: int, lsn: int) -> Iterator[WalRecord]:
        start = max(bisect.bisect_right([first for first, _ in segments], lsn) - 1, 0)
        for index in range(start, len(segments)):
            first, path = segments[index]
            is_active = index == len(segments) - 1
            with path.open("rb") as file:
                data = file.read(active_end) if is_active else file.read()
            end = active_end if is_active else len(data)
            for record in iter_segment(data, path=path, name_lsn=first, end=end):
                if record.lsn >= lsn:
                    yield record

    def close(self) -> None:
        """Close the files and release the directory lock; does not sync. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._active_fd is not None:
            os.close(self._active_fd)
            self._active_fd = None
        os.close(self._dir_fd)

    def __enter__(self) -> WriteAheadLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _scan(self) -> list[tuple[Path, SegmentScan]]:
        """Validate every segment; raises WalCorruption before anything is changed."""
        found = list_segments(self.directory)
        scans = []
        expected: int | None = None
        for index, (lsn, path) in enumerate(found):
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise StorageFault(f"cannot read WAL segment {path}: {exc}") from exc
            scan = scan_segment(
                data,
                path=path,
                name_lsn=lsn,
                expected_first_lsn=expected,
                is_last=index == len(found) - 1,
            )
            scans.append((path, scan))
            expected = scan.next_lsn
        return scans

    def _take_over(self, scans: list[tuple[Path, SegmentScan]]) -> None:
        """Adopt the scanned segments (a torn tail waits for its cut), or start the first."""
        if not scans:
            self._create_segment(1)
            return
        self._segments = [(scan.first_lsn, path) for path, scan in scans]
        path, last = scans[-1]
        self._active_fd = os.open(path, _APPEND_FLAGS)
        self._next_lsn = last.next_lsn
        self._active_size = last.end
        self._active_version = last.version
        if last.torn is not None:
            self._pending = (path, last)

    def cut_torn_tail(self, applied_lsn: int) -> None:
        """Cut the torn tail :meth:`open` found and sync the cut; nothing to do without one.

        ``applied_lsn`` is the last LSN the store has applied (0 when no store
        is involved). Every record up to it was whole and synced before it was
        applied, so a torn end at or below it is damage, not a torn append:
        that raises :class:`~brain.errors.WalCorruption` naming the file, the
        byte offset and the LSN, and nothing is cut. A failed cut or fsync
        fails the log (:class:`~brain.errors.WalSyncFailed`).
        """
        self._check_writable()
        if self._pending is None:
            return
        path, last = self._pending
        if last.next_lsn <= applied_lsn:
            raise WalCorruption(
                path,
                last.end,
                last.next_lsn,
                f"the log ends in what would be a torn tail ({last.torn}), but the store has "
                f"applied up to LSN {applied_lsn}: LSN {last.next_lsn} was whole and synced "
                "before it was applied, so this is damage, not a torn append; nothing was cut",
            )
        try:
            self._cut(path, last)
        except OSError as exc:
            raise self._fail("cutting a torn tail", exc) from exc
        self._pending = None

    def _cut(self, path: Path, last: SegmentScan) -> None:
        fd = self._active()
        self.torn_tail = f"{path}: cut {last.size - last.end} bytes at byte {last.end}: {last.torn}"
        os.ftruncate(fd, last.end)
        if last.header_torn:
            # The name still says where the log stands after a checkpoint; keep it.
            header = encode_segment_header(last.first_lsn, self._clock())
            _write_all(fd, header)
            self._active_size = len(header)
            self._active_version = FORMAT_VERSION
            self.bytes_written += len(header)
        self._fsync(fd)

    def _adopt_current_format(self) -> None:
        """Records go only into a segment of the current layout: close an older active
        segment that holds records (as a rotation does), or give an empty one a
        current header in place, so its name keeps the log's position."""
        if self._active_size > SEGMENT_HEADER_SIZE:
            self._rotate()
            return
        fd = self._active()
        # A crash between the cut and the sync leaves a short header: a torn tail,
        # rewritten from the name at the next start.
        os.ftruncate(fd, 0)
        header = encode_segment_header(self._segments[-1][0], self._clock())
        _write_all(fd, header)
        self._active_size = len(header)
        self._active_version = FORMAT_VERSION
        self.bytes_written += len(header)
        self._fsync(fd)

    def _create_segment(self, first_lsn: int) -> None:
        """Start a new active segment; its header and name are durable before use.

        Otherwise a crash could leave a last segment with a damaged header
        after its predecessor, which would read as corruption, not a torn tail.
        """
        path = self.directory / segment_name(first_lsn)
        fd = os.open(path, _APPEND_FLAGS | os.O_CREAT | os.O_EXCL, SEGMENT_MODE)
        self._active_fd = fd
        self._segments.append((first_lsn, path))
        self._active_version = FORMAT_VERSION
        header = encode_segment_header(first_lsn, self._clock())
        _write_all(fd, header)
        self._active_size = len(header)
        self.bytes_written += len(header)
        self._fsync(fd)
        self._fsync(self._dir_fd)

    def _rotate(self) -> None:
        # The old segment must be whole on disk before a successor exists:
        # a torn end is only forgiven in the last segment.
        old = self._active()
        self._fsync(old)
        self._active_fd = None
        os.close(old)
        self._dirty = False
        self._create_segment(self._next_lsn)

    def _write(self, frames: list[bytes]) -> None:
        if not frames:
            return
        data = b"".join(frames)
        self._dirty = True
        _write_all(self._active(), data)
        self._active_size += len(data)
        self.bytes_written += len(data)
        self._next_lsn += len(frames)

    def _fail(self, doing: str, exc: OSError) -> WalSyncFailed:
        if self._failure is None:
            self._failure = exc
        return WalSyncFailed(
            f"WAL in {self.directory} failed while {doing}: {exc}; "
            "it takes no more writes until the server restarts"
        )

    def _check_writable(self) -> None:
        if self._closed:
            raise ValueError("the write-ahead log is closed")
        if self._failure is not None:
            raise WalSyncFailed(
                f"WAL in {self.directory} failed earlier ({self._failure}); "
                "it takes no more writes until the server restarts"
            ) from self._failure

    def _check_appendable(self) -> None:
        self._check_writable()
        if self._pending is not None:
            # Appending now would put records after the torn bytes, which then
            # would read as corruption: the cut must come first.
            raise ValueError(
                f"the WAL in {self.directory} still ends in a torn tail: call cut_torn_tail first"
            )

    def _active(self) -> int:
        # Only a failed rotation leaves no active file, and a failed log is never used.
        assert self._active_fd is not None
        return self._active_fd
