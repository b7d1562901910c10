"""Adaptive concurrency (``--concurrency auto``): AIMD on the API's 429s.

:class:`AIMD` is the policy, a pure state machine: the *level* (how many
sessions may be in flight) starts at :data:`START_LEVEL` and, until the
first 429, grows by one with every successful call (doubling each round
of calls, TCP's slow start); after it, by one for every ``level``
successful calls (one a round: additive increase).  A 429 halves it (at
least :data:`MIN_LEVEL`; multiplicative decrease); growth is then again one
a success up to the *threshold*, one below the level that met the 429, and
additive beyond it (so the level comes back within a round to just under
where the server refused, instead of spending half the run below it: plain
AIMD averages three quarters of the server's capacity).  The calls in
flight when the level was cut were sent at the old level: their 429s are
the same congestion, so a 429 of a call that began before the last cut
(its *epoch* is older) changes nothing.  The level never exceeds
``maximum`` (``--max-concurrency``, default :data:`DEFAULT_MAX_CONCURRENCY`).

:class:`AdaptiveGate` applies it to the runner's sessions: a session takes
a slot before its first call and keeps it for the trials that follow; at
each later trial it checks in (:meth:`AdaptiveGate.checkpoint`) and, when
more sessions hold slots than the level now allows, gives its slot up and
waits.  Waiting sessions that have started go before new ones, so a cut
pauses sessions instead of spreading the run over more of them.  The
subjects report each call's outcome to the gate (``pacer.succeeded(epoch)``,
``pacer.throttled(epoch)``, with ``pacer.epoch`` read as the call was sent).
"""

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
    """Additive-increase, multiplicative-decrease concurrency level (see the module doc).

    Parameters
    ----------
    maximum : int
        The highest level.
    level : int
        The level to start at (clipped to ``1..maximum``).
    """

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
        """A call came back with an answer; whether the level grew.

        Below the threshold the level grows by one; above it, by one for every
        ``level`` successes.  It never exceeds ``maximum``.

        Parameters
        ----------
        epoch : int
            The epoch the call was sent in (accepted for symmetry with
            :meth:`throttled`; a success counts whatever its epoch).

        Returns
        -------
        bool
            True when the level grew by one.
        """
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
        """A call sent in ``epoch`` was answered 429; whether the level was cut.

        A 429 halves the level (at least :data:`MIN_LEVEL`), sets the threshold
        to one below the old level and starts a new epoch; a 429 of a call sent
        before the last cut only counts in ``throttles``.

        Parameters
        ----------
        epoch : int
            The epoch the call was sent in (the policy's ``epoch`` as it was sent).

        Returns
        -------
        bool
            True when the level was cut.
        """
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
        """The controller's figures, for ``runs.jsonl``.

        Returns
        -------
        dict
            ``mode`` (``"auto"``), ``max_concurrency``, ``final`` (the level now),
            ``peak``, ``throttled`` (429s reported) and ``cuts``.
        """
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
        """A call came back with an answer: the level may grow and admit a waiting session.

        Parameters
        ----------
        epoch : int
            The epoch the call was sent in.
        """
        if self.policy.succeeded(epoch):
            self._wake()

    def throttled(self, epoch: int) -> None:
        """A call was answered 429: the level may be halved (sessions pause at their next trial).

        Parameters
        ----------
        epoch : int
            The epoch the call was sent in (a 429 of an older epoch changes nothing).
        """
        self.policy.throttled(epoch)

    async def acquire(self, started: bool = False) -> None:
        """Wait for a slot (a session that has ``started`` goes before new ones).

        Returns at once when a slot is free and nobody waits ahead; otherwise
        waits in line.  A slot granted while the wait is cancelled is given back.

        Parameters
        ----------
        started : bool
            Whether the session has begun (a session paused by
            :meth:`checkpoint`); such sessions are admitted before new ones.
        """
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
