"""Ingest micro-benchmark: acknowledged writes per second and fsyncs per 1,000 writes.

A real ``brain serve`` process runs on a fresh data directory (fsync on); a
separate load process drives it over the wire with N concurrent connections,
each sending ENCODE requests one at a time (so N is also the number of writes
in flight). Group commit shows as fsyncs per 1,000 writes falling far below
1,000 as N grows. Each client count runs on its own fresh server.

    python -m bench ingest [--quick] [--clients 1,16] [--seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import subprocess
import tempfile
import time
import tomllib
import urllib.request
from pathlib import Path
from typing import Final

from brain.server.spawn import spawn_server

RESULTS: Final = Path(__file__).resolve().parent / "results"


def _start_server(data: Path) -> tuple[subprocess.Popen[str], int, int]:
    spawned = spawn_server(data)
    return spawned.process, spawned.wire_port, spawned.public_port


def _metric(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return 0.0


async def _drive(port: int, api_key: str, clients: int, seconds: float) -> tuple[int, list[float]]:
    from brain.client import AsyncClient
    from brain.wire.messages.memory_ops import Encode
    from brain.wire.opcodes import Opcode

    conns = [await AsyncClient.connect("127.0.0.1", port, api_key=api_key) for _ in range(clients)]
    deadline = time.perf_counter() + seconds
    latencies: list[float] = []

    async def worker(index: int) -> int:
        done = 0
        client = conns[index]
        while time.perf_counter() < deadline:
            request_id = index.to_bytes(4, "big") + done.to_bytes(12, "big")
            started = time.perf_counter()
            await client.call(Opcode.ENCODE, Encode(request_id=request_id, text=f"w{index}-{done}"))
            latencies.append(time.perf_counter() - started)
            done += 1
        return done

    counts = await asyncio.gather(*(worker(i) for i in range(clients)))
    for client in conns:
        await client.close()
    return sum(counts), latencies


def run_one(clients: int, seconds: float) -> dict[str, object]:
    """One measurement on a fresh server."""
    with tempfile.TemporaryDirectory(prefix="brain-bench-") as tmp:
        data = Path(tmp) / "data"
        proc, wire_port, public_port = _start_server(data)
        try:
            api_key = tomllib.loads((data / "credentials.toml").read_text())["api_key"]
            fsyncs_before = _metric(public_port, "brain_wal_fsyncs_total")
            cpu_before = time.process_time()
            started = time.perf_counter()
            writes, latencies = asyncio.run(_drive(wire_port, api_key, clients, seconds))
            elapsed = time.perf_counter() - started
            load_cpu = time.process_time() - cpu_before
            fsyncs = _metric(public_port, "brain_wal_fsyncs_total") - fsyncs_before
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
            if proc.stdout is not None:
                proc.stdout.close()
    latencies.sort()

    def pct(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1e3 if latencies else 0

    return {
        "clients": clients,
        "seconds": round(elapsed, 3),
        "writes": writes,
        "writes_per_s": round(writes / elapsed, 1),
        "fsyncs": int(fsyncs),
        "fsyncs_per_1000_writes": round(1000 * fsyncs / writes, 1) if writes else None,
        "latency_ms": {"p50": round(pct(0.5), 3), "p99": round(pct(0.99), 3)},
        "load_generator_cpu_s": round(load_cpu, 3),
    }


def main(argv: list[str]) -> int:
    """Entry point of the suite."""
    parser = argparse.ArgumentParser(prog="python -m bench ingest")
    parser.add_argument("--quick", action="store_true", help="a few seconds, to keep it alive")
    parser.add_argument("--clients", default="1,16", help="comma-separated client counts")
    parser.add_argument("--seconds", type=float, default=10.0, help="load time per client count")
    parser.add_argument("--no-save", action="store_true", help="do not write bench/results/")
    args = parser.parse_args(argv)
    seconds = 1.0 if args.quick else args.seconds
    runs = [run_one(int(c), seconds) for c in args.clients.split(",")]
    result = {
        "suite": "ingest",
        "quick": args.quick,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "runs": runs,
    }
    for run in runs:
        latency = run["latency_ms"]
        assert isinstance(latency, dict)
        print(
            f"clients={run['clients']:>3}  writes/s={run['writes_per_s']:>9}  "
            f"fsyncs/1000 writes={run['fsyncs_per_1000_writes']}  "
            f"p50={latency['p50']} ms  p99={latency['p99']} ms"
        )
    if not args.quick and not args.no_save:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "ingest.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0
