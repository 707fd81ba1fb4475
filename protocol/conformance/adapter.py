"""The adapter process under test: one JSON request line out, one answer line back."""

from __future__ import annotations

import contextlib
import json
import queue
import subprocess
import threading
from collections.abc import Sequence
from typing import IO, Any, Final

__all__ = ["ANSWER_TIMEOUT_S", "STARTUP_TIMEOUT_S", "STOP_TIMEOUT_S", "Adapter", "AdapterFailure"]

ANSWER_TIMEOUT_S: Final = 10.0
"""Longest wait for one answer; an adapter answers in milliseconds, so this only catches a hang."""

STARTUP_TIMEOUT_S: Final = 60.0
"""Longest wait for the first answer, which includes starting the adapter's runtime."""

STOP_TIMEOUT_S: Final = 5.0
"""How long an adapter gets to exit after its stdin closes, before it is killed."""

MAX_ECHOED: Final = 200
"""Longest piece of a malformed answer line quoted in the failure."""


class AdapterFailure(Exception):
    """The adapter crashed, hung or broke the line protocol; the run cannot go on."""


class Adapter:
    """A running adapter: one request line out, one answer line back."""

    def __init__(self, command: Sequence[str]) -> None:
        self.command = list(command)
        try:
            self.process = subprocess.Popen(
                self.command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                encoding="utf-8",
                bufsize=1,
            )
        except OSError as exc:
            raise AdapterFailure(f"cannot start {self.command!r}: {exc}") from exc
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: list[str] = []
        assert self.process.stdout is not None and self.process.stderr is not None
        self._readers = [
            threading.Thread(target=self._pump, args=(self.process.stdout,), daemon=True),
            threading.Thread(target=self._drain, args=(self.process.stderr,), daemon=True),
        ]
        for reader in self._readers:
            reader.start()
        self.answered = 0

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self._lines.put(line)
        self._lines.put(None)

    def _drain(self, stream: IO[str]) -> None:
        for line in stream:
            self._stderr.append(line)

    def stderr_tail(self, lines: int = 20) -> str:
        """The last lines the adapter wrote to stderr."""
        return "".join(self._stderr[-lines:])

    def ask(self, request: dict[str, object]) -> dict[str, Any]:
        """Send one request; return its answer or raise AdapterFailure."""
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
        except OSError as exc:
            raise AdapterFailure(f"the adapter stopped reading: {exc}") from exc
        timeout = STARTUP_TIMEOUT_S if self.answered == 0 else ANSWER_TIMEOUT_S
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AdapterFailure(f"no answer within {timeout:g} s") from None
        if line is None:
            code = self.process.wait()
            raise AdapterFailure(f"the adapter exited (status {code})")
        self.answered += 1
        try:
            answer = json.loads(line)
        except json.JSONDecodeError as exc:
            raise AdapterFailure(f"answer is not JSON ({exc}): {line[:MAX_ECHOED]!r}") from exc
        if not isinstance(answer, dict) or not isinstance(answer.get("ok"), bool):
            raise AdapterFailure(f"answer lacks a boolean 'ok': {line[:MAX_ECHOED]!r}")
        return answer

    def stop(self, *, kill: bool = False) -> None:
        """Close stdin and wait for the adapter to exit; kill it if it does not (or at once)."""
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):  # it may have stopped reading already
                self.process.stdin.close()
        if kill:
            self.process.kill()
        try:
            self.process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        # The pipes reach EOF once the process is gone; then they can be closed.
        for reader in self._readers:
            reader.join(timeout=STOP_TIMEOUT_S)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
