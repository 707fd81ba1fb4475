"""A stop signal reaches the event loop even when other threads have flooded it with
callbacks (each ``call_soon_threadsafe`` writes a byte to the loop's self-pipe,
which fills)."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from typing import Final

from brain.server.signals import watch_stop_signals

FLOOD: Final = 50_000
"""Thread-safe callbacks queued while the loop is busy: far more bytes than the
loop's self-pipe holds (a few hundred one-byte writes fill a socket pair)."""

WAIT_S: Final = 30.0
"""Longest the test waits for the signal's callback (it comes at once)."""


def test_sigterm_is_delivered_while_the_loop_is_flooded() -> None:
    async def main() -> bool:
        loop = asyncio.get_running_loop()
        stopped = asyncio.Event()
        restore = watch_stop_signals(loop, stopped.set)
        try:

            def flood() -> None:
                for _ in range(FLOOD):
                    loop.call_soon_threadsafe(lambda: None)

            # The loop is blocked in join(): nothing drains its self-pipe meanwhile.
            thread = threading.Thread(target=flood)
            thread.start()
            thread.join()
            os.kill(os.getpid(), signal.SIGTERM)
            try:
                await asyncio.wait_for(stopped.wait(), WAIT_S)
            except TimeoutError:
                return False
            return True
        finally:
            restore()

    assert asyncio.run(main()), "SIGTERM never reached the loop"


def test_handlers_are_put_back() -> None:
    before = signal.getsignal(signal.SIGTERM)
    wakeup = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(wakeup)

    async def main() -> None:
        restore = watch_stop_signals(asyncio.get_running_loop(), lambda: None)
        assert signal.getsignal(signal.SIGTERM) is not before
        restore()

    asyncio.run(main())
    assert signal.getsignal(signal.SIGTERM) is before
    assert signal.set_wakeup_fd(-1) == wakeup
    signal.set_wakeup_fd(wakeup)
