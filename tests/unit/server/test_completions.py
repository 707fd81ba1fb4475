"""Writes' answers reach the event loop a batch at a time: every outcome arrives, in
one wake-up of the loop for a burst, and a waiter given up on is skipped."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future

import pytest

from brain.errors import Conflict
from brain.server.completions import Completions

BURST = 64


def test_a_burst_of_answers_wakes_the_loop_once() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        completions = Completions(loop)
        wakes = 0
        original = loop.call_soon_threadsafe

        def counting(callback, *args):  # type: ignore[no-untyped-def]
            nonlocal wakes
            wakes += 1
            return original(callback, *args)

        loop.call_soon_threadsafe = counting  # type: ignore[method-assign,assignment]
        futures: list[Future[bytes]] = [Future() for _ in range(BURST)]
        waiters = [completions.wait(future) for future in futures]

        def writer() -> None:  # one batch, answered in a row as the writer does
            for n, future in enumerate(futures):
                if n % 5 == 0:
                    future.set_exception(Conflict(f"write {n} conflicts"))
                else:
                    future.set_result(b"answer %d" % n)

        thread = threading.Thread(target=writer)
        thread.start()
        thread.join()
        outcomes = await asyncio.gather(*waiters, return_exceptions=True)
        for n, outcome in enumerate(outcomes):
            if n % 5 == 0:
                assert isinstance(outcome, Conflict) and f"write {n}" in str(outcome)
            else:
                assert outcome == b"answer %d" % n
        assert wakes == 1

    asyncio.run(main())


def test_a_cancelled_waiter_is_skipped_and_the_rest_answered() -> None:
    async def main() -> None:
        completions = Completions(asyncio.get_running_loop())
        first, second = Future[bytes](), Future[bytes]()
        gone, kept = completions.wait(first), completions.wait(second)
        gone.cancel()
        first.set_result(b"late")
        second.set_result(b"kept")
        assert await kept == b"kept"
        assert gone.cancelled()

    asyncio.run(main())


def test_an_answer_that_is_already_there_is_delivered() -> None:
    async def main() -> None:
        completions = Completions(asyncio.get_running_loop())
        done = Future[bytes]()
        done.set_result(b"ready")
        assert await completions.wait(done) == b"ready"

    asyncio.run(main())


def test_an_answer_after_the_loop_closed_is_dropped_quietly() -> None:
    loop = asyncio.new_event_loop()
    completions = Completions(loop)
    future = Future[bytes]()
    waiter = completions.wait(future)
    loop.close()
    future.set_result(b"nobody listens")  # must not raise on the writer's thread
    assert not waiter.done()
    with pytest.raises(RuntimeError):
        loop.call_soon_threadsafe(lambda: None)


def test_giving_up_on_a_waiter_cancels_the_queued_write() -> None:
    async def main() -> None:
        completions = Completions(asyncio.get_running_loop())
        queued = Future[bytes]()
        waiter = completions.wait(queued)
        waiter.cancel()
        await asyncio.sleep(0)
        assert queued.cancelled()  # the writer's set_running_or_notify_cancel drops it
        running = Future[bytes]()
        assert running.set_running_or_notify_cancel()
        waiter = completions.wait(running)
        waiter.cancel()
        await asyncio.sleep(0)
        assert not running.cancelled()  # once planned, it is answered as usual
        running.set_result(b"done")

    asyncio.run(main())
