"""Benchmark the reply parser (issue 26: 8,000 numbers took 2.9 s, quadratic).

Usage::

    .venv/bin/python benchmarks/bench_parse.py

Times :func:`bayesobs.parse.read_answer` on long replies: 8,000 numbers
without a cue, the same with a labelled answer at the end, and a 1 MB reply
(read from its first and last ``MAX_READ_CHARS / 2`` characters).  The median
of 5 runs each, in milliseconds; the target is under 50 ms.
"""

from __future__ import annotations

import re
import statistics
import time

from common import result

from bayesobs.parse import MAX_READ_CHARS, read_answer


def _ms(reply: str) -> float:
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        read_answer(reply, fraction=True, answer_range=(0.0, 1.0))
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main() -> int:
    """Print the timings."""
    numbers = " ".join(f"0.{i % 997:03d}" for i in range(8000))
    cases = {
        "8,000 numbers, no cue": numbers,
        "8,000 numbers, then 'Answer: 0.4'": numbers + " Answer: 0.4",
        "1 MB of words and numbers": ("lorem 0.5 ipsum " * 70_000),
    }
    print(f"MAX_READ_CHARS = {MAX_READ_CHARS}")
    worst = 0.0
    for name, reply in cases.items():
        ms = _ms(reply)
        worst = max(worst, ms)
        print(f"{name:<40} {len(reply):>9,} chars  {ms:8.1f} ms")
    # peer: the straightforward reading, every number of the 1 MB reply by one regex
    big = cases["1 MB of words and numbers"]
    t0 = time.perf_counter()
    re.findall(r"[-+]?\d*\.?\d+", big)
    peer = 1000 * (time.perf_counter() - t0)
    result("read_answer, slowest case", worst, 50.0, peer, "re.findall of every number, 1 MB", "ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
