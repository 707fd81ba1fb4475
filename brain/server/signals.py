"""The stop signals (SIGINT, SIGTERM), delivered to the event loop whatever its load.

``loop.add_signal_handler`` points the process's signal wakeup fd at the loop's
self-pipe, the socket every ``call_soon_threadsafe`` also writes a byte to. A
burst of thread-safe calls (worker threads finishing, a writer waking
subscribers) can fill that socket, and the byte that carries a signal is then
lost ("Exception ignored when trying to write to the signal wakeup fd"): the
server would ignore an orchestrator's SIGTERM until its SIGKILL. Here the
wakeup fd is a socket of its own, written by nothing but signals, so every stop
signal reaches the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Final

__all__ = ["STOP_SIGNALS", "watch_stop_signals"]

STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)
"""The signals that stop the server cleanly."""

_READ_BYTES: Final = 4096


def _ignore(signum: int, frame: FrameType | None) -> None:
    """The Python-level handler: the work is done on the loop, from the wakeup fd."""


def watch_stop_signals(
    loop: asyncio.AbstractEventLoop,
    on_stop: Callable[[], None],
    signals: Iterable[signal.Signals] = STOP_SIGNALS,
) -> Callable[[], None]:
    """Call ``on_stop`` on ``loop`` each time one of ``signals`` arrives; return the
    function that puts the previous handlers back. Call from the main thread."""
    wanted = {int(sig) for sig in signals}
    receive, send = socket.socketpair()
    receive.setblocking(False)
    send.setblocking(False)

    def received() -> None:
        with contextlib.suppress(BlockingIOError, InterruptedError):
            data = receive.recv(_READ_BYTES)
            if any(byte in wanted for byte in data):
                on_stop()

    loop.add_reader(receive.fileno(), received)
    previous_fd = signal.set_wakeup_fd(send.fileno(), warn_on_full_buffer=False)
    previous = {sig: signal.signal(sig, _ignore) for sig in wanted}

    def restore() -> None:
        for sig, handler in previous.items():
            # None: the handler was not set from Python; the default is what was there.
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
        signal.set_wakeup_fd(previous_fd)
        loop.remove_reader(receive.fileno())
        receive.close()
        send.close()

    return restore
