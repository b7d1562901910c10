"""Retries of a subject's failed requests: the wait a ``Retry-After`` asks for, the backoff, the pause."""

from __future__ import annotations

import asyncio
import email.utils
import math
import random
import time

from ...chat import SubjectError

MAX_RETRY_AFTER_S = 120.0  # a longer Retry-After is not believed: the backoff schedule is used


def retry_after(exc: Exception) -> float | None:
    """The wait a failed request's ``Retry-After`` header asks for, if it is to be believed."""
    resp = getattr(exc, "response", None)
    if resp is None:
        return None
    value = resp.headers.get("retry-after")
    if not value:
        return None
    try:
        delay = float(value)
    except ValueError:
        try:  # an HTTP date
            when = email.utils.parsedate_to_datetime(value)
        except (ValueError, TypeError, IndexError, OverflowError):
            return None  # unreadable ("soon"): fall back to backoff
        if when is None:
            return None
        delay = max(0.0, when.timestamp() - time.time())
    if not math.isfinite(delay) or not 0 <= delay <= MAX_RETRY_AFTER_S:
        return None
    return delay


def backoff(attempt: int, base_s: float, cap_s: float) -> float:
    """Seconds to wait before retry ``attempt`` (1, 2, ...): ``base * 2**(attempt-1)``, capped, jittered to 50-100 %."""
    return min(cap_s, base_s * 2 ** min(attempt - 1, 64)) * random.uniform(0.5, 1.0)


def retry_delay(
    exc: Exception, what: str, attempt: int, waited: float, options, redact_text
) -> float:
    """The wait before the next attempt of a failed request, or the error that ends it."""
    if attempt >= options.max_attempts:
        raise SubjectError(redact_text(f"gave up after {attempt} attempts: {what}")) from None
    delay = retry_after(exc)
    if delay is None:
        delay = backoff(attempt, options.backoff_s, options.backoff_cap_s)
    delay = min(delay, options.backoff_cap_s)
    if waited + delay > options.max_wait_s:
        raise SubjectError(
            redact_text(
                f"gave up after {attempt} attempts and {waited:.0f} s of waiting "
                f"(the next wait of {delay:.0f} s would pass --max-wait "
                f"{options.max_wait_s:g}): {what}"
            )
        ) from None
    return delay


async def pause(seconds: float) -> None:
    """Wait between attempts (one place, so tests can count the waits instead of sleeping)."""
    await asyncio.sleep(seconds)
