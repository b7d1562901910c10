"""Shared benchmark pieces: the BayesBench-scale data set, timing a CLI command, the result line.

Every benchmark ends with :func:`result` lines: its figure beside the
issue's target and a peer measured in the same run, with the ratio, so a
noisy (shared, loaded) machine cannot hide a regression: the load slows the
figure and the peer alike and the ratio stays.  Where the work has a
straightforward peer (the per-cell scipy loop of ``tests/naive.py``) the
script measures that; otherwise :func:`yardstick` is the peer: a fixed
piece of that scipy loop, timed in the same run.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def bayesbench_scale(out: Path):
    """Write the BayesBench-scale synthetic trials (9 subjects, 783 cells, 93,960 trials)."""
    from bayesobs.fits.synthetic import simulated_trials

    trials = simulated_trials(n_subjects=9, trials_per_session=40, seed=0)
    path = out / "bayesbench_scale.parquet"
    trials.to_parquet(path, index=False)
    return trials, path


def compiled_package() -> None:
    """Byte-compile the ``bayesobs`` package once, as a user's first run leaves it.

    An editable install compiles the package's modules on their first
    import and keeps the ``.pyc`` files; where ``PYTHONDONTWRITEBYTECODE``
    is set (some CI and sandbox shells) every run would compile about 130
    modules again (about a second on 2 cores), which no user's second run pays.
    """
    import compileall

    compileall.compile_dir(ROOT / "bayesobs", quiet=1)


def time_cli(*args: str) -> tuple[float, float]:
    """Wall seconds and the child's peak resident memory (MiB) of ``bayesobs ARGS``.

    The package is byte-compiled first (:func:`compiled_package`).
    """
    compiled_package()
    exe = Path(sys.executable).with_name("bayesobs")
    t0 = time.perf_counter()
    subprocess.run([str(exe), *args], check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    return wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def tree_memory(pid: int | None = None) -> tuple[int, int]:
    """Resident bytes of process ``pid`` (default this one) and all its descendants now.

    Returns ``(pss, rss)`` summed over the processes: PSS (proportional set size,
    ``/proc/PID/smaps_rollup``) counts a page shared by n processes (the
    libraries every worker maps) as 1/n in each, so the sum is the memory the
    processes hold together; RSS counts it in each.  ``(0, 0)`` where
    ``/proc`` has no ``smaps_rollup`` (not Linux).
    """
    root = os.getpid() if pid is None else pid
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int(proc_stat(int(entry.name))[1])
            except (OSError, IndexError, ValueError):
                continue  # ended meanwhile
    tree, frontier = {root}, [root]
    while frontier:
        kids = [p for p, pp in parents.items() if pp in frontier and p not in tree]
        tree.update(kids)
        frontier = kids
    total = {"Pss": 0, "Rss": 0}
    for p in tree:
        try:
            text = Path(f"/proc/{p}/smaps_rollup").read_text()
        except OSError:
            continue
        for line in text.splitlines():
            key, _, value = line.partition(":")
            if key in total:
                total[key] += int(value.split()[0]) * 1024  # kB
    return total["Pss"], total["Rss"]


def proc_stat(pid: int) -> list[str]:
    """The fields of ``/proc/PID/stat`` after the command name: state, ppid, ... (Linux).

    The name, in parentheses, may hold spaces and parentheses itself, so the
    fields are those after its last ``)``; field ``i`` of proc(5) (from 1) is
    item ``i - 3`` here.  Raises ``OSError`` for a process that has ended.
    """
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


class MemoryPeak:
    """The peak of :func:`tree_memory` (this process and its children) while the block runs.

    Sampled by a thread every ``interval`` seconds, or less often where a
    sample is dear: reading ``smaps_rollup`` walks a process's page tables,
    about 0.1-0.2 s for the three processes of the whole-benchmark posterior
    fit, which a sample every 0.25 s took from the workers' two cores (a
    fifth of one).  The wait after a sample is at least its own time over
    ``max_share``, so the sampler keeps to that share of one core.  ``pss``
    and ``rss`` are the peaks of the simultaneous sums (bytes), what the
    processes held together at one moment, unlike the sum of each one's own
    peak (``ru_maxrss``), which may come at different times and counts shared
    pages once per process; ``seconds`` is the time the samples took.
    """

    def __init__(self, interval: float = 0.25, max_share: float = 0.02) -> None:
        self.interval = interval
        self.max_share = max_share
        self.pss = self.rss = 0
        self.samples = 0  # samples taken so far
        self.seconds = 0.0  # time spent sampling
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while True:
            start = time.perf_counter()
            pss, rss = tree_memory()
            cost = time.perf_counter() - start
            self.pss, self.rss = max(self.pss, pss), max(self.rss, rss)
            self.samples += 1
            self.seconds += cost
            if self._stop.wait(max(self.interval, cost / self.max_share)):
                return

    def __enter__(self) -> MemoryPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def children_cpu() -> float:
    """CPU seconds (user + system) of every finished child process so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def load() -> str:
    """The machine's load beside its cores, for the record (``load 1.9 on 2 cores``)."""
    one = os.getloadavg()[0]
    return f"load {one:.1f} on {os.cpu_count()} cores"


def yardstick(cells: int = 1, seed: int = 0) -> float:
    """Seconds of a fixed piece of the straightforward per-cell scipy loop (the default peer).

    ``tests/naive.py``'s L-BFGS-B fit of the ten variants, one start each, on
    ``cells`` fixed cells of the BayesBench-scale data: the same work on
    every run, single-threaded Python and scipy like most of bayesobs.
    """
    sys.path.insert(0, str(ROOT / "tests"))
    from naive import naive_fit

    from bayesobs.fits.observers import VARIANT_NAMES
    from bayesobs.fits.synthetic import simulated_trials
    from bayesobs.trials import CELL_KEYS, normalize_trials

    t = normalize_trials(simulated_trials(n_subjects=1, trials_per_session=40, seed=seed))
    t0 = time.perf_counter()
    for _, cell in list(t.groupby(list(CELL_KEYS), sort=True))[:cells]:
        x, y = cell["stimulus"].to_numpy(), cell["response"].to_numpy()
        run = (cell["session"] + "/" + cell["run"].astype(str)).to_numpy()
        for name in VARIANT_NAMES:
            naive_fit(name, x, y, run, 1e-3 * x.max(), starts=1, rng=1)
    return time.perf_counter() - t0


def result(
    what: str,
    figure: float,
    target: float | None,
    peer: float,
    peer_name: str,
    unit: str = "s",
    higher_is_better: bool = False,
) -> dict:
    """Print one result line: the figure, the target (met or not), the peer and the ratio.

    ``peer`` is in the same unit as ``figure``; the ratio is
    ``figure / peer`` (for a time, below 1 means faster than the peer).
    Returns the numbers as a dict for the script's JSON.
    """
    ratio = figure / peer if peer else float("nan")
    if target is None:
        verdict = "no target"
    else:
        met = figure >= target if higher_is_better else figure <= target
        verdict = f"target {'>=' if higher_is_better else '<='} {target:g} {unit} " + (
            "(met)" if met else "(NOT met)"
        )
    print(
        f"RESULT {what}: {figure:.3g} {unit} | {verdict} | peer {peer_name}: "
        f"{peer:.3g} {unit}, ratio {ratio:.3g} | {load()}"
    )
    return {
        "what": what,
        "figure": figure,
        "unit": unit,
        "target": target,
        "peer": peer,
        "peer_name": peer_name,
        "ratio": ratio,
        "load": os.getloadavg()[0],
    }
