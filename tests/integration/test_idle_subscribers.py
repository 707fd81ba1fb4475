"""A thousand idle subscriptions cost other tenants nothing, one key holds a bounded
number of them, and SIGTERM stops the server cleanly while they are open and
another tenant is writing.

Four read-only keys of namespace ``quiet``, where nobody writes, hold 250
subscriptions each (one of them tries one past ``MAX_SUBSCRIPTIONS_PER_KEY``);
the bootstrap key writes to ``default`` meanwhile. Every commit used to wake
every subscription, each of which then read the change log: the writes slowed
several-fold, and the flood of wake-ups could swallow the SIGTERM.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import threading
import time
import urllib.request
from pathlib import Path
from typing import Final

import pytest

from brain.client import Client
from brain.errors import BrainError
from brain.server.app import SHUTDOWN_GRACE_S
from brain.server.fanout import MAX_SUBSCRIPTIONS_PER_KEY
from brain.wire.messages.memory_ops import Encode
from brain.wire.opcodes import Opcode
from tests.integration.conftest import ServerProcess, start_server
from tests.integration.rawwire import RawClient, frame

KEYS: Final = 4
"""Read-only keys of the quiet namespace, each on a connection of its own."""

PER_KEY: Final = 250
"""Subscriptions each key holds (under ``MAX_SUBSCRIPTIONS_PER_KEY``)."""

WRITE_S: Final = 3.0
"""How long the other tenant writes in each phase."""

PIPELINE: Final = 20
"""Writes the other tenant sends before waiting for their answers."""

SLOWDOWN_LIMIT: Final = 3.0
"""How many times slower the other tenant's writes may be with the idle
subscriptions open than without: a generous bound for a shared machine, where
runs measured up to 1.8 (every commit waking every subscription made them six
times slower)."""

SETTLE_S: Final = 60.0
"""Longest the subscriptions may take to open (a loaded machine)."""


def _admin(server: ServerProcess, method: str, path: str, body: object) -> dict[str, object]:
    request = urllib.request.Request(
        f"http://{server.host}:{server.admin_port}{path}",
        data=json.dumps(body).encode(),
        method=method,
        headers={
            "Authorization": f"Bearer {server.credentials['admin_token']}",
            "Content-Type": "application/json",
        },
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        value = json.loads(answer.read())
    assert isinstance(value, dict)
    return value


class Tenant:
    """The other tenant: pipelined ENCODEs to ``default`` in a thread, counted."""

    def __init__(self, server: ServerProcess) -> None:
        self._client = Client.connect(
            server.host, server.wire_port, api_key=server.credentials["api_key"]
        )
        self.acknowledged = 0
        self.failure: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                batch = [
                    (Opcode.ENCODE, Encode(request_id=os.urandom(16), text=os.urandom(8).hex()))
                    for _ in range(PIPELINE)
                ]
                self._client.pipeline(batch)
                self.acknowledged += PIPELINE
        except (BrainError, OSError) as exc:
            self.failure = exc

    def writes_for(self, seconds: float) -> float:
        """Writes acknowledged per second over the next ``seconds``."""
        start, started = self.acknowledged, time.monotonic()
        time.sleep(seconds)
        return (self.acknowledged - start) / (time.monotonic() - started)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self._client.close()


def _subscribe(server: ServerProcess, count: int) -> RawClient:
    """A connection of a new read-only key of ``quiet`` that sends ``count`` SUBSCRIBEs."""
    made = _admin(server, "POST", "/v1/keys", {"namespace": "quiet", "permissions": ["read"]})
    client = RawClient(server.host, server.wire_port)
    server.clients.append(client)
    assert client.handshake(str(made["api_key"])).opcode == Opcode.AUTH | 0x80
    client.send_bytes(b"".join(_subscribe_frame(2 * i + 1) for i in range(count)))
    return client


def _subscribe_frame(stream_id: int) -> bytes:
    return frame(Opcode.SUBSCRIBE, stream_id, b"\xa0")  # an empty map: from now, every kind


@pytest.mark.serial
def test_idle_subscriptions_cost_others_nothing_and_sigterm_stops_cleanly(
    tmp_path: Path,
) -> None:
    env = {"BRAIN_RETRIEVAL__EMBEDDER": "hashing", "BRAIN_SERVER__MAX_STREAMS": "512"}
    server = start_server(tmp_path / "data", env=env)
    tenant = Tenant(server)
    try:
        tenant.start()
        alone = tenant.writes_for(WRITE_S)

        # One key asks for one subscription past its limit: the last is refused.
        greedy = _subscribe(server, MAX_SUBSCRIPTIONS_PER_KEY + 1)
        refused = greedy.recv()
        assert refused.stream_id == 2 * MAX_SUBSCRIPTIONS_PER_KEY + 1, refused
        assert refused.error_name == "OVERLOADED" and refused.eos, refused
        followers = [greedy] + [_subscribe(server, PER_KEY) for _ in range(KEYS - 1)]
        expected = MAX_SUBSCRIPTIONS_PER_KEY + (KEYS - 1) * PER_KEY
        deadline = time.monotonic() + SETTLE_S
        while server.metric("brain_subscriptions_open") < expected:
            assert time.monotonic() < deadline, "the subscriptions never all opened"
            time.sleep(0.1)

        with_idle = tenant.writes_for(WRITE_S)
        print(f"other tenant: {alone:.0f} writes/s alone, {with_idle:.0f} with idle subscriptions")
        assert with_idle * SLOWDOWN_LIMIT >= alone, (alone, with_idle)
        readable, _, _ = select.select([f.sock for f in followers], [], [], 0)
        assert not readable, "a subscription of the quiet namespace was sent something"

        # SIGTERM while the writes go on: a clean stop, well within the grace.
        signalled = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        code = server.process.wait(timeout=SHUTDOWN_GRACE_S + 30)
        took = time.monotonic() - signalled
        assert code == 0, "".join(server.output)
        assert took < SHUTDOWN_GRACE_S, f"the stop took {took:.1f} s"
        # Each subscription was ended as BYE ends it, with the LSN to resume from.
        ended = 0
        follower = followers[-1]
        while True:
            try:
                reply = follower.recv()
            except (EOFError, ConnectionError):
                break
            assert reply.eos and "next_lsn" in reply.body, reply
            ended += 1
        assert ended == PER_KEY
    finally:
        tenant.stop()
        server.stop()
    output = "".join(server.output)
    assert "wakeup fd" not in output and "Traceback" not in output, output[-3000:]
    assert tenant.acknowledged > 0


def test_sigterm_with_nothing_open_exits_at_once(tmp_path: Path) -> None:
    server = start_server(tmp_path / "data", env={"BRAIN_RETRIEVAL__EMBEDDER": "hashing"})
    try:
        idle = server.client()
        assert idle.handshake(server.credentials["api_key"]).opcode == Opcode.AUTH | 0x80
        signalled = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(timeout=SHUTDOWN_GRACE_S + 30) == 0
        # An idle connection does not hold the stop for the whole grace.
        assert time.monotonic() - signalled < SHUTDOWN_GRACE_S
        assert idle.closed_by_server()
    except subprocess.TimeoutExpired:
        raise AssertionError("the server did not stop") from None
    finally:
        server.stop()
