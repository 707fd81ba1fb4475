"""The write-ahead log: durable, ordered, checksummed records in segment files.

The engine's writer thread appends each batch as records, syncs once per batch
and then applies it; recovery replays :meth:`WriteAheadLog.read_from`. Payloads
are opaque bytes here. See ``spec/05-durability.md`` §3 for the byte layout.
"""

from brain.engine.wal.format import (
    MAX_PAYLOAD,
    MAX_RECORD_KIND,
    MIN_RECORD_KIND,
    WalRecord,
    decode_record,
    encode_record,
)
from brain.engine.wal.interface import RecordLog
from brain.engine.wal.log import DEFAULT_SEGMENT_BYTES, MIN_SEGMENT_BYTES, WriteAheadLog
from brain.engine.wal.tools import VerifyReport, truncate_at, verify
from brain.errors import StorageFault, WalCorruption, WalSyncFailed

__all__ = [
    "DEFAULT_SEGMENT_BYTES",
    "MAX_PAYLOAD",
    "MAX_RECORD_KIND",
    "MIN_RECORD_KIND",
    "MIN_SEGMENT_BYTES",
    "RecordLog",
    "StorageFault",
    "VerifyReport",
    "WalCorruption",
    "WalRecord",
    "WalSyncFailed",
    "WriteAheadLog",
    "decode_record",
    "encode_record",
    "truncate_at",
    "verify",
]
