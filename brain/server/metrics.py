"""Prometheus metrics of one server (served on the public port at ``/metrics``).

Each server owns its registry rather than using the process-global one, so two
servers in one process (tests) never share counters.
"""

from __future__ import annotations

from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

__all__ = ["LATENCY_BUCKETS_S", "ServerMetrics"]

LATENCY_BUCKETS_S: Final = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
"""From 100 µs (a PING) to 10 s (a large RECALL under load)."""


class ServerMetrics:
    """The counters, gauges and histograms the server updates."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "brain_requests",
            "Requests answered, by opcode and outcome (ok or the error name).",
            ["opcode", "outcome"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "brain_request_duration_seconds",
            "Time from a request's last byte to its answer, by opcode.",
            ["opcode"],
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        self.connections_open = Gauge(
            "brain_connections_open", "Wire connections open now.", registry=self.registry
        )
        self.connections = Counter(
            "brain_connections", "Wire connections accepted.", registry=self.registry
        )
        self.connections_refused = Counter(
            "brain_connections_refused",
            "Wire connections refused because max_connections were open.",
            registry=self.registry,
        )
        self.protocol_errors = Counter(
            "brain_protocol_errors",
            "Connections closed for a broken frame, handshake or credentials, by error.",
            ["error"],
            registry=self.registry,
        )
        self.read_only = Gauge(
            "brain_read_only",
            "1 while the server refuses writes after a storage fault, else 0.",
            registry=self.registry,
        )

    def observe(self, opcode: str, outcome: str, seconds: float) -> None:
        """Count one answered request."""
        self.requests.labels(opcode=opcode, outcome=outcome).inc()
        self.latency.labels(opcode=opcode).observe(seconds)

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)
