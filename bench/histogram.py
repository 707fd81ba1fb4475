"""An HDR-style latency histogram: fixed relative precision, mergeable, serialisable.

Latencies are recorded in whole microseconds into log-linear buckets: below
:data:`SUB_BUCKETS` µs every value has its own bucket, and above it each power
of two is split into :data:`SUB_BUCKETS` equal buckets, so a recorded value is
known to within ``1 / SUB_BUCKETS`` (about 1.6%) at any magnitude, from 1 µs to
hours, in a few hundred buckets. Load-generator processes each keep one and the
parent merges them; percentiles come from the merged counts, never from an
average of per-process percentiles (which would be meaningless).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

__all__ = ["PERCENTILES", "SUB_BUCKETS", "Histogram"]

SUB_BUCKETS: Final = 64
"""Buckets per power of two above 64 µs: the histogram's relative precision is 1/64."""

_SHIFT: Final = SUB_BUCKETS.bit_length() - 1

PERCENTILES: Final = (50.0, 95.0, 99.0, 99.9)
"""The percentiles every summary reports (spec/08-benchmarks.md: p50, p95, p99, p99.9)."""


def _index(micros: int) -> int:
    if micros < SUB_BUCKETS:
        return micros
    exponent = micros.bit_length() - 1 - _SHIFT
    return SUB_BUCKETS + exponent * SUB_BUCKETS + ((micros >> exponent) - SUB_BUCKETS)


def _upper(index: int) -> int:
    """The largest value (µs) that falls in bucket ``index``."""
    if index < SUB_BUCKETS:
        return index
    exponent = (index - SUB_BUCKETS) // SUB_BUCKETS
    sub = (index - SUB_BUCKETS) % SUB_BUCKETS + SUB_BUCKETS
    return ((sub + 1) << exponent) - 1


class Histogram:
    """Counts of latencies in log-linear microsecond buckets."""

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.total = 0
        self.max_us = 0
        self.sum_us = 0

    def record(self, seconds: float) -> None:
        """Record one latency given in seconds."""
        micros = max(1, round(seconds * 1e6))
        index = _index(micros)
        self.counts[index] = self.counts.get(index, 0) + 1
        self.total += 1
        self.sum_us += micros
        self.max_us = max(self.max_us, micros)

    def merge(self, other: Histogram) -> None:
        """Add another histogram's counts to this one."""
        for index, count in other.counts.items():
            self.counts[index] = self.counts.get(index, 0) + count
        self.total += other.total
        self.sum_us += other.sum_us
        self.max_us = max(self.max_us, other.max_us)

    def percentile(self, share: float) -> float:
        """The latency in milliseconds at or below which ``share`` percent of samples fall.

        The answer is the upper edge of the bucket holding that sample, capped at
        the largest value recorded, so it never understates a latency."""
        if not 0.0 < share <= 100.0:
            raise ValueError(f"a percentile is in (0, 100], got {share}")
        if self.total == 0:
            raise ValueError("no latency was recorded")
        rank = max(1, -(-self.total * share // 100))  # ceil without floats drifting
        seen = 0
        for index in sorted(self.counts):
            seen += self.counts[index]
            if seen >= rank:
                return min(_upper(index), self.max_us) / 1e3
        return self.max_us / 1e3  # pragma: no cover - counts always reach total

    def summary(self) -> dict[str, float]:
        """Count, mean, max and the :data:`PERCENTILES`, in milliseconds."""
        if self.total == 0:
            return {"count": 0}
        out: dict[str, float] = {"count": self.total}
        for share in PERCENTILES:
            out[f"p{share:g}".replace(".", "_")] = round(self.percentile(share), 3)
        out["mean"] = round(self.sum_us / self.total / 1e3, 3)
        out["max"] = round(self.max_us / 1e3, 3)
        return out

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready form that :meth:`from_dict` reads back exactly."""
        return {
            "counts": {str(k): v for k, v in sorted(self.counts.items())},
            "total": self.total,
            "max_us": self.max_us,
            "sum_us": self.sum_us,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Histogram:
        """Rebuild a histogram written by :meth:`to_dict`."""
        hist = cls()
        counts = data["counts"]
        assert isinstance(counts, Mapping)
        hist.counts = {int(k): int(v) for k, v in counts.items()}
        hist.total = int(str(data["total"]))
        hist.max_us = int(str(data["max_us"]))
        hist.sum_us = int(str(data["sum_us"]))
        return hist
