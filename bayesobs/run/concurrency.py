"""Adaptive concurrency (``--concurrency auto``): AIMD on the API's 429s."""

from __future__ import annotations

import asyncio
import math
from collections import deque
from dataclasses import dataclass

from . import DEFAULT_MAX_CONCURRENCY

START_LEVEL = 4
MIN_LEVEL = 1


@dataclass
class AIMD:
    """Additive-increase, multiplicative-decrease concurrency level (see the module doc)."""

    maximum: int = DEFAULT_MAX_CONCURRENCY
    level: int = START_LEVEL
    threshold: float = math.inf  # below it one a success; above it one a round (additive)
    epoch: int = 0  # how many cuts so far
    credit: int = 0  # successes since the level last grew (additive phase)
    throttles: int = 0  # 429s reported
    cuts: int = 0  # times the level was halved
    peak: int = 0  # the highest level reached

    def __post_init__(self):
        if isinstance(self.maximum, bool) or not isinstance(self.maximum, int) or self.maximum < 1:
            raise ValueError(f"the maximum level must be a whole number >= 1, not {self.maximum!r}")
        self.level = max(MIN_LEVEL, min(self.level, self.maximum))
        self.peak = self.level

    def succeeded(self, epoch: int = 0) -> bool:
        """A call came back with an answer; whether the level grew."""
        if self.level >= self.maximum:
            return False
        if self.level < self.threshold:
            self.level += 1
        else:
            self.credit += 1
            if self.credit < self.level:
                return False
            self.credit = 0
            self.level += 1
        self.peak = max(self.peak, self.level)
        return True

    def throttled(self, epoch: int) -> bool:
        """A call sent in ``epoch`` was answered 429; whether the level was cut."""
        self.throttles += 1
        if epoch < self.epoch:  # sent before the last cut: the same congestion
            return False
        before = self.level
        self.level = max(MIN_LEVEL, before // 2)
        # back quickly (one a success) to just under the level that met the 429, then additively
        self.threshold = max(self.level, before - 1)
        self.credit = 0
        self.epoch += 1
        self.cuts += 1
        return True

    def summary(self) -> dict:
        """The controller's figures, for ``runs.jsonl``."""
        return {
            "mode": "auto",
            "max_concurrency": self.maximum,
            "final": self.level,
            "peak": self.peak,
            "throttled": self.throttles,
            "cuts": self.cuts,
        }


class AdaptiveGate:
    """Slots for sessions under an :class:`AIMD` level (see the module doc); also the subjects' pacer."""

    def __init__(self, policy: AIMD):
        self.policy = policy
        self.active = 0  # sessions holding a slot
        self._started: deque[asyncio.Future] = deque()  # paused sessions, first in line
        self._new: deque[asyncio.Future] = deque()

    @property
    def level(self) -> int:
        """The level now."""
        return self.policy.level

    @property
    def epoch(self) -> int:
        """The policy's epoch (read by a subject as it sends a call)."""
        return self.policy.epoch

    def succeeded(self, epoch: int) -> None:
        """A call came back with an answer: the level may grow and admit a waiting session."""
        if self.policy.succeeded(epoch):
            self._wake()

    def throttled(self, epoch: int) -> None:
        """A call was answered 429: the level may be halved (sessions pause at their next trial)."""
        self.policy.throttled(epoch)

    async def acquire(self, started: bool = False) -> None:
        """Wait for a slot (a session that has ``started`` goes before new ones)."""
        if self.active < self.level and not self._started and (started or not self._new):
            self.active += 1
            return
        fut = asyncio.get_running_loop().create_future()
        (self._started if started else self._new).append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # the slot came with the cancellation
                self.release()
            raise

    def release(self) -> None:
        """Give a slot back (a session ended, or paused)."""
        self.active -= 1
        self._wake()

    async def checkpoint(self) -> None:
        """Between a session's trials: pause it while more sessions hold slots than the level allows."""
        if self.active > self.level:
            self.release()
            await self.acquire(started=True)

    def _wake(self) -> None:
        while self.active < self.level and (self._started or self._new):
            fut = (self._started or self._new).popleft()
            if fut.cancelled():
                continue
            self.active += 1
            fut.set_result(None)
