"""A real server's ``/metrics`` carries its process's figures and its build
(spec/06-operations.md §5), parsed as Prometheus parses them and held to what
``/proc`` says of the same process."""

from __future__ import annotations

import os
import platform
import time
import urllib.request
from pathlib import Path
from typing import Final

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

import brain
from tests.integration.conftest import start_server

CLOCK_SLACK_S: Final = 2.0
"""How far the start time may fall outside the span of the start: the kernel counts
it in clock ticks from a boot time given in whole seconds."""

CPU_ROUNDING_S: Final = 1e-9
"""The exporter sums user and system time each divided by the clock tick, this test
divides their sum once: the same ticks can differ in the last bit (1.14 against
1.1400000000000001), far below one tick (10 ms)."""

FD_SLACK: Final = 8
"""Descriptors the server may open or close between the scrape and the test's own
count: the scrape's own connection, a file being read, a WAL segment rolled."""

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/stat").exists(), reason="the process figures are read from /proc"
)


def _scrape(host: str, port: int) -> dict[str, list[Sample]]:
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


def _value(families: dict[str, list[Sample]], family: str) -> float:
    (sample,) = families[family]
    return float(sample.value)


def _proc_cpu_seconds(pid: int) -> float:
    """User plus system CPU time of ``pid``, from its ``/proc`` stat line."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _proc_rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _proc_max_fds(pid: int) -> int:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    raise AssertionError("no open files limit")


def test_metrics_carry_the_process_and_the_build(tmp_path: Path) -> None:
    before = time.time()
    server = start_server(tmp_path / "data")
    ready = time.time()
    try:
        pid = server.process.pid
        cpu_before = _proc_cpu_seconds(pid)
        families = _scrape(server.host, server.public_port)
        cpu_after = _proc_cpu_seconds(pid)
        rss_now = _proc_rss_bytes(pid)
        fds_now = len(os.listdir(f"/proc/{pid}/fd"))

        started = _value(families, "process_start_time_seconds")
        assert before - CLOCK_SLACK_S <= started <= ready + CLOCK_SLACK_S, (before, started)

        # The server loaded the embedding model: it has used CPU and holds memory.
        cpu = _value(families, "process_cpu_seconds")
        assert 0 < cpu_before - CPU_ROUNDING_S <= cpu <= cpu_after + CPU_ROUNDING_S, (
            cpu_before,
            cpu,
            cpu_after,
        )
        rss = _value(families, "process_resident_memory_bytes")
        assert rss > 0 and rss_now / 2 <= rss <= rss_now * 2, (rss, rss_now)
        assert _value(families, "process_virtual_memory_bytes") >= rss

        fds = _value(families, "process_open_fds")
        assert fds > 0 and abs(fds - fds_now) <= FD_SLACK, (fds, fds_now)
        assert _value(families, "process_max_fds") == _proc_max_fds(pid)
        assert fds < _value(families, "process_max_fds")

        (build,) = families["brain_build_info"]
        assert build.name == "brain_build_info" and build.value == 1
        # start_server runs the server on this interpreter (sys.executable).
        assert build.labels == {
            "version": brain.__version__,
            "python": platform.python_version(),
            "implementation": platform.python_implementation(),
        }

        # A counter never goes back.
        later = _scrape(server.host, server.public_port)
        assert _value(later, "process_cpu_seconds") >= cpu
        assert _value(later, "process_start_time_seconds") == started
    finally:
        server.stop()
