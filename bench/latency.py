"""Latency figures of timings taken in process: nearest-rank percentiles in milliseconds.

The suites that run an embedded database (``quality``, ``locomo``) time each
request with ``time.perf_counter`` and report the median and the tail.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

__all__ = ["LATENCY_PERCENTILES", "latency_ms", "percentile_ms"]

LATENCY_PERCENTILES: Final = (0.50, 0.95)
"""The latency percentiles reported: the median and the tail a user notices."""

_MS: Final = 1e3
"""Milliseconds per second."""

_DECIMALS: Final = 3
"""Decimal places kept: a microsecond, below what ``perf_counter`` timings of a request mean."""


def percentile_ms(samples: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile of ``samples`` (seconds), in milliseconds; NaN for none."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    index = max(0, math.ceil(fraction * len(ordered)) - 1)
    return round(ordered[index] * _MS, _DECIMALS)


def latency_ms(samples: Sequence[float]) -> dict[str, float]:
    """``{"p50": …, "p95": …}``: each of :data:`LATENCY_PERCENTILES` of ``samples``, in ms."""
    return {f"p{round(p * 100)}": percentile_ms(samples, p) for p in LATENCY_PERCENTILES}
