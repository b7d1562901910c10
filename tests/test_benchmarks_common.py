"""Issue 32: the benchmarks' memory measure (``benchmarks/common.py``): what processes hold together."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from common import MemoryPeak, tree_memory

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/smaps_rollup").exists(), reason="needs Linux's /proc/PID/smaps_rollup"
)

HOLD = (
    "import sys, numpy as np; a = np.ones({n}); a += 1; print('ready', flush=True); "
    "sys.stdin.read()"
)


@pytest.mark.slow  # two children holding 160 MB each
def test_the_sampled_peak_counts_children_together_and_shared_pages_once():
    """Two children holding 160 MB each: the peak together is about 320 MB more than before.

    Their interpreters' shared libraries count once in the PSS sum (so the
    PSS peak is below the RSS peak by about one process's worth of them),
    and after they end the tree holds that much less again.
    """
    base_pss, _ = tree_memory()
    n = 20_000_000  # float64: 160 MB each
    with MemoryPeak(interval=0.05) as peak:
        kids = [
            subprocess.Popen(
                [sys.executable, "-c", HOLD.format(n=n)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        for k in kids:
            assert k.stdout.readline().strip() == "ready"
        held_pss, held_rss = tree_memory()
        taken = peak.samples
        while peak.samples < taken + 2:  # a whole sample while they hold their arrays
            time.sleep(0.01)
        for k in kids:
            k.communicate("")
    arrays = 2 * n * 8
    assert arrays <= held_pss - base_pss <= arrays * 1.5
    assert held_rss - held_pss > 0  # the children's shared library pages, counted per process
    # the peak is at least what was held (less the drift of this process's own memory,
    # e.g. a test worker's garbage collection between the two readings)
    assert peak.pss >= held_pss - arrays / 20 and peak.rss >= held_rss - arrays / 20
    after_pss, _ = tree_memory()
    assert after_pss < base_pss + arrays / 4


def test_a_dear_sample_spaces_the_next_out(monkeypatch):
    """A sample that takes 50 ms is followed by a wait of 50 ms / max_share (here 0.5 s):
    the sampler keeps to its share of a core however slow /proc is to read."""
    import common

    def slow():
        time.sleep(0.05)
        return 1, 2

    monkeypatch.setattr(common, "tree_memory", slow)
    with MemoryPeak(interval=0.01, max_share=0.1) as peak:
        time.sleep(1.2)
    # samples at about 0, 0.55 and 1.1 s: three, where the interval alone allows ~20
    assert 2 <= peak.samples <= 3
    assert peak.seconds == pytest.approx(0.05 * peak.samples, rel=0.5)
    assert (peak.pss, peak.rss) == (1, 2)
