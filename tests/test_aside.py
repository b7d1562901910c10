"""Issue 32: a long task of plain Python on the second core (``run_aside``), results unchanged."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

from bayesobs.distributed import run_aside

two_cores = pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2, reason="run_aside starts a process only with two cores"
)


def pid_and_square(x):
    return os.getpid(), x * x


def dies_unless_in(parent_pid):
    if os.getpid() != parent_pid:
        os._exit(3)  # killed, as by the kernel's out-of-memory killer
    return "computed here"


def raises(message):
    raise ValueError(message)


def prints_then_returns(x):
    print("chatter on stdout")
    return x


@two_cores
def test_the_task_runs_in_another_process_and_returns_its_result():
    handle = run_aside(pid_and_square, 12)
    assert handle.aside
    pid, value = handle.result()
    assert value == 144
    assert pid != os.getpid()


def test_not_aside_runs_here_when_asked_for():
    handle = run_aside(pid_and_square, 3, aside=False)
    assert not handle.aside
    assert handle.result() == (os.getpid(), 9)


def test_a_dask_scheduler_keeps_the_task_here(monkeypatch):
    monkeypatch.setenv("BAYESOBS_SCHEDULER", "tcp://127.0.0.1:1")  # never contacted
    handle = run_aside(pid_and_square, 3)
    assert not handle.aside


@two_cores
def test_an_error_of_the_task_is_raised_here():
    handle = run_aside(raises, "no such group")
    with pytest.raises(ValueError, match="no such group"):
        handle.result()


@two_cores
def test_a_killed_process_loses_nothing_the_task_is_computed_here():
    handle = run_aside(dies_unless_in, os.getpid())
    assert handle.aside
    with pytest.warns(RuntimeWarning, match="dies_unless_in ended with status 3"):
        assert handle.result() == "computed here"


@two_cores
def test_what_the_task_prints_does_not_spoil_its_result(capfd):
    assert run_aside(prints_then_returns, {"a": 1}).result() == {"a": 1}
    assert "chatter on stdout" in capfd.readouterr().err


@two_cores
def test_a_script_without_a_main_guard_is_not_run_again(tmp_path):
    # multiprocessing's spawn would import the script again in the child
    script = tmp_path / "user_script.py"
    script.write_text(
        textwrap.dedent(
            """
            import os
            from bayesobs.distributed import run_aside
            print("script body ran")
            print("result", run_aside(os.path.basename, "/a/b/c.txt").result())
            """
        )
    )
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["script body ran", "result c.txt"]


def big_array(n):
    return np.arange(n, dtype=float)


@two_cores
def test_a_worker_returns_every_result_in_order_even_larger_than_a_pipe():
    from bayesobs.distributed import AsideWorker

    worker = AsideWorker()
    assert worker.aside
    for n in (3, 200_000, 5):  # 1.6 MB: more than a pipe holds, read as it comes
        worker.submit(big_array, n)
    got = worker.results()
    assert [len(a) for a in got] == [3, 200_000, 5]
    assert got[1][-1] == 199_999.0


@two_cores
def test_a_task_that_does_not_pickle_is_refused_and_the_others_keep_their_order():
    from bayesobs.distributed import AsideWorker

    worker = AsideWorker()
    worker.submit(big_array, 2)
    with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
        worker.submit(lambda n: n, 1)  # a lambda does not pickle
    worker.submit(big_array, 4)
    assert [len(a) for a in worker.results()] == [2, 4]


def marks_sleeps_returns(marker):
    import pathlib
    import time

    pathlib.Path(marker).write_text("started")  # the task runs: SIGINT is ignored by now
    time.sleep(1.0)
    return "done"


@two_cores
def test_ctrl_c_in_the_terminal_leaves_the_task_to_the_caller(tmp_path, capfd):
    import signal
    import time

    from bayesobs.distributed import AsideWorker

    marker = tmp_path / "started"
    worker = AsideWorker()
    worker.submit(marks_sleeps_returns, str(marker))
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(worker._processes[0].process.pid, signal.SIGINT)  # as a terminal's Ctrl-C
    assert worker.results() == ["done"]
    assert "KeyboardInterrupt" not in capfd.readouterr().err


@two_cores
def test_a_worker_dropped_unread_ends_its_process():
    import gc
    import time

    from bayesobs.distributed import AsideWorker

    worker = AsideWorker()
    worker.submit(big_array, 3)
    process = worker._processes[0].process
    del worker  # an error upstream: results() is never called
    gc.collect()
    deadline = time.monotonic() + 30
    while process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process.poll() is not None


class ProbeWarning(UserWarning):
    pass


def warns_then_returns(x):
    import warnings

    warnings.warn(f"few runs in {x} cells (threshold 2)", ProbeWarning, stacklevel=1)
    return os.getpid(), x


def sleeps(seconds):
    import time

    time.sleep(seconds)
    return seconds


@two_cores
def test_a_tasks_warnings_reach_the_caller_as_if_run_here():
    """A warning given in the other process is issued here, once, through this process's filters."""
    handle = run_aside(warns_then_returns, 7)
    assert handle.aside
    with pytest.warns(ProbeWarning, match=r"few runs in 7 cells \(threshold 2\)") as record:
        pid, value = handle.result()
    assert (value, len(record)) == (7, 1)
    assert pid != os.getpid()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # as pytest's warnings-as-errors: raised here
        with pytest.raises(ProbeWarning):
            run_aside(warns_then_returns, 8).result()


@two_cores
def test_one_tasks_result_while_the_process_goes_on_with_the_next():
    import time

    from bayesobs.distributed import AsideWorker

    with AsideWorker() as worker:
        first = worker.submit(pid_and_square, 5)
        second = worker.submit(sleeps, 30.0)
        t = time.perf_counter()
        pid, value = worker.result(first)  # without waiting for the 30 s task behind it
        assert value == 25 and pid != os.getpid()
        assert time.perf_counter() - t < 20
        process = worker._processes[0].process
    # closing abandons the running task at once: its result is not needed
    assert process.poll() is not None
    assert time.perf_counter() - t < 20
    assert second == 1


def test_without_a_process_each_result_is_computed_here_when_asked_for():
    from bayesobs.distributed import AsideWorker

    with AsideWorker(start=False) as worker:
        i = worker.submit(pid_and_square, 4)
        j = worker.submit(raises, "bad cell")
        assert worker.result(i) == (os.getpid(), 16)
        with pytest.raises(ValueError, match="bad cell"):
            worker.result(j)


@two_cores
def test_score_with_a_started_process_gives_the_same_tables_and_runs_its_work_there():
    """issue 32: the `score` command's early process takes the probe and the reference rows.

    The tables are those of the same call without a process; the probe's
    forests and the reference rows were computed in the other process
    (their results came back through it).
    """
    from bayesobs.distributed import AsideWorker, preload
    from bayesobs.fits.synthetic import simulated_trials
    from bayesobs.scores import score

    # logged as `bayesobs run` logs them (a prompt_id): the ideal reference is built for them
    trials = simulated_trials(n_subjects=2, trials_per_session=12, seed=3).assign(prompt_id="p0")
    here = score(trials, bootstrap=4, seed=2, references=True)
    with AsideWorker() as worker:
        worker.submit(preload, ("bayesobs.scores", "sklearn.tree"))
        there = score(trials, bootstrap=4, seed=2, references=True, aside=worker)
        assert len(worker._tasks) == 3  # the imports, the forests, the reference rows
        assert sorted(worker._done) == [0, 1, 2]  # each result came from the process
    for name in there._fields:
        a, b = getattr(here, name), getattr(there, name)
        if isinstance(a, pd.DataFrame):
            pd.testing.assert_frame_equal(a, b, obj=name)
    assert there.bayesbench["subject"].str.startswith("reference:").sum() == 2
    assert len(there.cue_probe)


@pytest.fixture
def started(monkeypatch):
    """Whether each ``AsideWorker`` made during the test has a process, in order."""
    from bayesobs import distributed

    made = []
    real = distributed.AsideWorker.__init__

    def counting(self, *args, **kwargs):
        real(self, *args, **kwargs)
        made.append(self.aside)

    monkeypatch.setattr(distributed.AsideWorker, "__init__", counting)
    return made


@two_cores
def test_the_score_command_starts_its_process_for_a_large_input_only(
    tmp_path, monkeypatch, started
):
    """issue 32: `score` of 1 MB of trial files or more starts its helper before reading.

    Counted through the processes started (``AsideWorker`` objects with a
    process); a small input starts none for the probe of a few groups, and
    ``--no-probe --no-references`` none at all, whatever the size.
    """
    from bayesobs import cli
    from bayesobs.fits.synthetic import simulated_trials

    path = tmp_path / "trials.csv"
    simulated_trials(n_subjects=2, trials_per_session=12, seed=3).to_csv(path, index=False)
    assert cli._input_bytes([path]) == path.stat().st_size < cli.ASIDE_INPUT_BYTES
    folder = tmp_path / "run"  # an experiment folder: its trials.jsonl, what read_trials reads
    (folder / "stimuli").mkdir(parents=True)
    (folder / "trials.jsonl").write_text('{"trial": 0}\n')
    (folder / "runs.jsonl").write_text('{"run": 0}\n' * 100)
    (folder / "stimuli" / "a.json").write_text("{}" * 1000)
    assert cli._input_bytes([folder, path]) == 13 + path.stat().st_size
    assert cli._input_bytes([tmp_path / "missing.csv"]) == 0
    out = tmp_path / "small"
    assert cli.main(["score", str(path), "--bootstrap", "2", "--out", str(out)]) == 0
    assert started and not any(started)  # the probe's 3 groups and the reference rows: here
    small = pd.read_csv(out / "bayesbench.csv")
    monkeypatch.setattr(cli, "ASIDE_INPUT_BYTES", path.stat().st_size)  # now "large"
    started.clear()
    out = tmp_path / "large"
    assert cli.main(["score", str(path), "--bootstrap", "2", "--out", str(out)]) == 0
    assert started == [True]  # one process, for the probe and the reference rows
    pd.testing.assert_frame_equal(pd.read_csv(out / "bayesbench.csv"), small)
    started.clear()
    argv = ["score", str(path), "--bootstrap", "2", "--no-probe", "--no-references"]
    assert cli.main([*argv, "--out", str(tmp_path / "none")]) == 0
    assert started and not any(started)


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


def module_file(name):
    import importlib

    return importlib.import_module(name).__file__


@two_cores
def test_the_helper_imports_bayesobs_from_where_the_caller_did(tmp_path, monkeypatch):
    """A `bayesobs` folder in the working directory is not what the helper runs.

    ``python -c`` puts the working folder first on ``sys.path``; the helper
    takes the caller's path before it imports anything, so a decoy package
    there (whose import would fail loudly) is never imported.
    """
    import bayesobs

    decoy = tmp_path / "bayesobs"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("raise ImportError('the decoy bayesobs was imported')\n")
    (decoy / "distributed.py").write_text("raise ImportError('the decoy was imported')\n")
    monkeypatch.chdir(tmp_path)
    handle = run_aside(module_file, "bayesobs")
    assert handle.aside
    assert handle.result() == bayesobs.__file__


@two_cores
def test_fit_batch_with_a_started_process_fits_the_log_scale_there_with_the_same_numbers():
    """issue 32: `fit_batch(..., aside=worker)` sends the log scale's Kalman fits to the process.

    Every array of the batch equals the one fitted without a process (the
    same operations on the same numbers), and the Kalman task's result came
    back from the process (the worker's record of finished tasks).
    """
    from bayesobs.distributed import AsideWorker, preload
    from bayesobs.fits.fitting import fit_batch
    from bayesobs.fits.synthetic import simulated_trials
    from bayesobs.trials import normalize_trials

    trials = normalize_trials(simulated_trials(n_subjects=2, trials_per_session=12, seed=3))
    here = fit_batch(trials, bootstrap=4, seed=2)
    with AsideWorker() as worker:
        worker.submit(preload, ("bayesobs.fits.kernel",))
        there = fit_batch(trials, bootstrap=4, seed=2, aside=worker)
        assert [fn.__name__ for fn, _ in worker._tasks] == ["preload", "fit_kalman_task"]
        assert sorted(worker._done) == [0, 1]  # both results came from the process
    np.testing.assert_array_equal(there.loglik, here.loglik)
    np.testing.assert_array_equal(there.aic, here.aic)
    for name in here.params:
        np.testing.assert_array_equal(there.params[name], here.params[name], err_msg=name)
    pd.testing.assert_frame_equal(there.cells, here.cells)


@two_cores
def test_the_fit_command_starts_its_process_for_a_large_input_only(tmp_path, monkeypatch, started):
    """issue 32: `fit` of 1 MB of trial files or more starts its helper before reading.

    The helper's imports must not wait for this process's: sizing the input
    loads no pandas (a fresh interpreter). The tables are the same with and
    without the process; ``--interleaved`` (its own fits) starts none.
    """
    from bayesobs import cli
    from bayesobs.fits.synthetic import simulated_trials

    code = (
        "import sys; from pathlib import Path; from bayesobs import cli; "
        f"cli._input_bytes([Path({str(tmp_path)!r})]); print('pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    path = tmp_path / "trials.csv"
    trials = simulated_trials(n_subjects=2, trials_per_session=12, seed=3)
    trials.assign(coherence=np.where(trials.index % 2, "low", "high")).to_csv(path, index=False)
    argv = ["fit", str(path), "--bootstrap", "3"]
    assert cli.main([*argv, "--out", str(tmp_path / "small")]) == 0
    assert started == [False]
    monkeypatch.setattr(cli, "ASIDE_INPUT_BYTES", path.stat().st_size)  # now "large"
    started.clear()
    assert cli.main([*argv, "--out", str(tmp_path / "large")]) == 0
    assert started == [True]
    for name in ("fits.csv", "evidence.csv", "cells.csv", "controls.csv"):
        small = (tmp_path / "small" / name).read_bytes()
        assert (tmp_path / "large" / name).read_bytes() == small, name
    started.clear()
    assert cli.main([*argv, "--interleaved", "coherence", "--out", str(tmp_path / "il")]) == 0
    assert started == [False]
