"""Record and key ids: UUIDv7 as 16 raw bytes, so ids sort by creation time.

Layout (RFC 9562 §5.7): 48-bit Unix milliseconds, version 7, 12 bits that we
use as a counter within the millisecond (method 1 of §6.2, so ids from one
process are strictly increasing), variant 0b10, then 62 random bits.
"""

from __future__ import annotations

import os
import threading
import time

__all__ = ["new_id"]

_lock = threading.Lock()
_last_ms = 0
_counter = 0
_COUNTER_MAX = 0xFFF


def new_id() -> bytes:
    """A fresh UUIDv7, strictly greater than every earlier one from this process."""
    global _last_ms, _counter
    with _lock:
        now_ms = time.time_ns() // 1_000_000
        if now_ms > _last_ms:
            _last_ms = now_ms
            _counter = int.from_bytes(os.urandom(2), "big") & 0x3FF  # leave room to count
        else:
            _counter += 1
            if _counter > _COUNTER_MAX:
                # The counter ran out within one millisecond: borrow the next one.
                _last_ms += 1
                _counter = 0
        ms, counter = _last_ms, _counter
    rand = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (ms << 80) | (0x7 << 76) | (counter << 64) | (0b10 << 62) | rand
    return value.to_bytes(16, "big")
