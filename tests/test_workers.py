"""Issue 50: one execution layer (``distributed.submit``): work in local worker processes, results unchanged."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

from bayesobs import distributed
from bayesobs.distributed import release, submit

two_cores = pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2, reason="submit starts a worker only with two cores"
)


@pytest.fixture(autouse=True)
def _fresh_workers():
    """Every test starts and ends without workers (a killed one must not leak into the next)."""
    release()
    yield
    release()


def pid_and_square(x):
    return os.getpid(), x * x


def raises(message):
    raise ValueError(message)


def big_array(n):
    return np.arange(n, dtype=float)


def marks_sleeps_returns(marker, seconds=1.0, caller=None):
    import pathlib

    pathlib.Path(marker).write_text(str(os.getpid()))  # the task runs: its worker's pid
    time.sleep(0 if os.getpid() == caller else seconds)  # a rerun in the caller need not wait
    return "done", os.getpid()


def wait_for(marker):
    deadline = time.monotonic() + 60
    while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return int(marker.read_text())


@two_cores
def test_the_task_runs_in_a_worker_process_and_returns_its_result():
    task = submit(pid_and_square, 12)
    assert task.elsewhere
    pid, value = task.result()
    assert value == 144
    assert pid != os.getpid()


@pytest.mark.parametrize("how", ["not worth", "BAYESOBS_WORKERS=1", "scheduler"])
def test_the_task_runs_here_when_a_worker_is_not_wanted(how, monkeypatch):
    kwargs = {}
    if how == "not worth":
        kwargs["worth"] = False
    elif how == "BAYESOBS_WORKERS=1":
        monkeypatch.setenv("BAYESOBS_WORKERS", "1")
    else:
        monkeypatch.setenv("BAYESOBS_SCHEDULER", "tcp://127.0.0.1:1")  # never contacted
    task = submit(pid_and_square, 3, **kwargs)
    assert not task.elsewhere
    assert task.result() == (os.getpid(), 9)


@two_cores
def test_a_caller_that_keeps_working_asks_for_one_worker():
    """``workers=1`` (fit, score): a pool of one worker process, which takes every task in turn."""
    tasks = [submit(pid_and_square, x, workers=1) for x in (2, 3)]
    (pid_a, a), (pid_b, b) = (t.result() for t in tasks)
    assert (a, b) == (4, 9)
    assert pid_a == pid_b != os.getpid()


@pytest.mark.parametrize("raw", ["0", "two", "-1"])
def test_a_bad_worker_count_is_one_clear_error(raw, monkeypatch):
    from bayesobs.errors import BayesobsInputError

    monkeypatch.setenv("BAYESOBS_WORKERS", raw)
    with pytest.raises(
        BayesobsInputError, match=f"BAYESOBS_WORKERS must be a whole number >= 1, not '{raw}'"
    ):
        submit(pid_and_square, 3)


def test_a_bad_worker_count_at_the_cli_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    from bayesobs import cli

    monkeypatch.setenv("BAYESOBS_WORKERS", "lots")
    assert cli.main(["fit", str(tmp_path / "t.csv"), "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "bayesobs: error: BAYESOBS_WORKERS must be a whole number >= 1, not 'lots'"
    ]


@two_cores
def test_an_error_of_the_task_is_raised_here():
    task = submit(raises, "no such group")
    assert task.elsewhere
    with pytest.raises(ValueError, match="no such group"):
        task.result()


@two_cores
def test_a_killed_worker_loses_nothing_its_task_runs_again_here(tmp_path):
    """A worker killed mid-task (as by the out-of-memory killer): the task reruns here, with a warning."""
    marker = tmp_path / "pid"
    task = submit(marks_sleeps_returns, str(marker), 30.0, os.getpid())
    assert task.elsewhere
    worker = wait_for(marker)
    assert worker != os.getpid()
    os.kill(worker, signal.SIGKILL)
    with pytest.warns(RuntimeWarning, match="worker process ended before marks_sleeps_returns"):
        result = task.result()
    assert result[0] == "done"
    assert int(marker.read_text()) == os.getpid() == result[1]  # the rerun: in this process
    # the next task gets a fresh worker
    again = submit(pid_and_square, 4)
    assert again.elsewhere and again.result()[1] == 16


@two_cores
def test_the_workers_results_come_in_order_even_larger_than_a_pipe():
    tasks = [submit(big_array, n) for n in (3, 200_000, 5)]  # 1.6 MB: more than a pipe holds
    got = [t.result() for t in tasks]
    assert [len(a) for a in got] == [3, 200_000, 5]
    assert got[1][-1] == 199_999.0


@two_cores
def test_ctrl_c_in_the_terminal_leaves_the_task_to_the_caller(tmp_path, capfd):
    marker = tmp_path / "pid"
    task = submit(marks_sleeps_returns, str(marker), 1.0)
    os.kill(wait_for(marker), signal.SIGINT)  # as a terminal's Ctrl-C reaches the whole group
    assert task.result()[0] == "done"
    assert "KeyboardInterrupt" not in capfd.readouterr().err


class ProbeWarning(UserWarning):
    pass


def warns_then_returns(x):
    warnings.warn(f"few runs in {x} cells (threshold 2)", ProbeWarning, stacklevel=1)
    return os.getpid(), x


@two_cores
def test_a_tasks_warnings_reach_the_caller_as_if_run_here():
    """A warning given in a worker is issued here, once, through this process's filters."""
    task = submit(warns_then_returns, 7)
    assert task.elsewhere
    with pytest.warns(ProbeWarning, match=r"few runs in 7 cells \(threshold 2\)") as record:
        pid, value = task.result()
    assert (value, len(record)) == (7, 1)
    assert pid != os.getpid()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # as pytest's warnings-as-errors: raised here
        with pytest.raises(ProbeWarning):
            submit(warns_then_returns, 8).result()


@two_cores
def test_a_script_without_a_main_guard_is_not_run_again_nor_leaves_a_file(tmp_path):
    script = tmp_path / "user_script.py"
    script.write_text(
        textwrap.dedent(
            """
            import os
            from bayesobs.distributed import submit
            print("script body ran")
            task = submit(os.path.basename, "/a/b/c.txt")
            print("result", task.result(), task.elsewhere)
            """
        )
    )
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp)}  # the workers' core claims go there
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["script body ran", "result c.txt True"]
    assert list(temp.iterdir()) == []  # the script never called release()


def module_file(name):
    import importlib

    return importlib.import_module(name).__file__


@two_cores
def test_a_worker_imports_bayesobs_from_where_the_caller_did(tmp_path, monkeypatch):
    """A `bayesobs` folder in the working directory is not what a worker runs."""
    import bayesobs

    decoy = tmp_path / "bayesobs"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("raise ImportError('the decoy bayesobs was imported')\n")
    monkeypatch.chdir(tmp_path)
    task = submit(module_file, "bayesobs")
    assert task.elsewhere
    assert task.result() == bayesobs.__file__


def thread_caps():
    return {k: os.environ.get(k) for k in distributed.THREAD_VARS}


@two_cores
def test_a_worker_runs_one_compute_thread():
    assert submit(thread_caps).result() == dict.fromkeys(distributed.THREAD_VARS, "1")


def affinity_after(seconds):
    time.sleep(seconds)  # both workers hold a task at once
    return sorted(os.sched_getaffinity(0))


@two_cores
def test_each_worker_runs_on_a_core_of_its_own():
    """jaxlib sizes its thread pool from the affinity: an unpinned worker would run two."""
    cores = sorted(os.sched_getaffinity(0))
    got = [t.result() for t in [submit(affinity_after, 0.5, workers=2) for _ in range(2)]]
    assert all(len(c) == 1 and c[0] in cores for c in got) and got[0] != got[1], got


def test_trim_memory_hands_freed_pages_back_to_the_system():
    """issue 32: after a large array is freed, trimming lowers the resident size (glibc)."""
    import ctypes

    from bayesobs.distributed import trim_memory

    try:
        ctypes.CDLL("libc.so.6").malloc_trim  # noqa: B018 - is this glibc?
    except (OSError, AttributeError):
        pytest.skip("not glibc: malloc_trim does not exist here, trim_memory does nothing")

    def resident() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    # many mid-sized blocks (below glibc's mmap threshold): freed into the heap, kept there
    blocks = [np.ones(8_000) for _ in range(5_000)]  # 64 kB each, 320 MB in all
    del blocks[::2]  # 160 MB freed in holes between live blocks: the heap cannot shrink
    before = resident()
    assert trim_memory()
    after = resident()
    assert before - after > 100 * 2**20, (before, after)
    assert len(blocks) == 2_500


@two_cores
def test_iter_tasks_streams_every_result_from_local_workers_with_its_index():
    got = dict(distributed.iter_tasks(pid_and_square, range(7), workers=2))
    assert sorted(got) == list(range(7)) and [got[i][1] for i in range(7)] == [
        i * i for i in range(7)
    ]
    assert os.getpid() not in {pid for pid, _ in got.values()}  # all ran in the workers
    assert dict(distributed.iter_tasks(pid_and_square, [3], workers=1)) == {0: (os.getpid(), 9)}
