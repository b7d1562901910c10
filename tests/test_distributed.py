"""Thread caps per Dask worker (XLA included), the SLURM recipe, results streamed as they finish."""

from __future__ import annotations

import os
import warnings

import pytest
from docs_pages import fenced_blocks, page, section

from bayesobs.distributed import (
    THREAD_VARS,
    iter_tasks,
    jobqueue_options,
    local_cluster,
    thread_env,
    worker_cores,
)

distributed = pytest.importorskip("distributed")


def test_thread_env_caps_blas_and_xla():
    env = thread_env(1)
    assert all(env[v] == "1" for v in THREAD_VARS)
    assert env["XLA_FLAGS"] == ("--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
    assert thread_env(4)["OMP_NUM_THREADS"] == "4"
    assert "intra_op_parallelism_threads=4" in thread_env(4)["XLA_FLAGS"]
    for bad in (0, -2, 1.5, "2", True):
        with pytest.raises(ValueError, match="positive integer"):
            thread_env(bad)


def test_worker_cores_give_each_worker_its_own():
    cores = [0, 1, 2, 3, 4, 5, 6, 7]
    assert worker_cores(0, 1, [0, 1]) == [0]
    assert worker_cores(1, 1, [0, 1]) == [1]
    assert worker_cores("SLURMCluster-3-1", 4, cores) == [4, 5, 6, 7]
    assert worker_cores("SLURMCluster-3-0", 4, cores) == [0, 1, 2, 3]
    assert worker_cores("tcp://x", 1, cores) is None  # no number: left alone
    assert worker_cores(2, 1, [0, 1]) is None  # more workers than cores: left alone
    assert worker_cores(0, 2, [0, 1]) is None  # one worker has the machine anyway


def _worker_view():
    import jax.numpy as jnp

    float(jnp.ones(3).sum())  # JAX started in the worker after the caps
    return (
        {v: os.environ.get(v) for v in (*THREAD_VARS, "XLA_FLAGS")},
        sorted(os.sched_getaffinity(0)),
    )


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to pin two workers")
def test_local_cluster_workers_see_their_thread_caps():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with (
            local_cluster(n_workers=2, threads_per_worker=1) as cluster,
            distributed.Client(cluster) as client,
        ):
            seen = client.run(_worker_view)
    assert len(seen) == 2
    for env, _ in seen.values():
        assert env == thread_env(1)
    pinned = [cores for _, cores in seen.values()]
    assert all(len(c) == 1 for c in pinned) and pinned[0] != pinned[1]


def test_iter_tasks_hands_over_every_result_with_its_index(monkeypatch):
    monkeypatch.delenv("BAYESOBS_SCHEDULER", raising=False)
    assert sorted(iter_tasks(abs, [-3, 1, -2])) == [(0, 3), (1, 1), (2, 2)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with distributed.LocalCluster(
            n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None
        ) as cluster:
            got = dict(iter_tasks(abs, [-3, 1, -2, 5], scheduler=cluster.scheduler_address))
    assert got == {0: 3, 1: 1, 2: 2, 3: 5}


def test_jobqueue_options_validate():
    with pytest.raises(ValueError, match="split evenly"):
        jobqueue_options(cores=8, processes=3)


def test_docs_slurm_recipe_builds_a_job_script_with_the_caps():
    """docs/scale.md's SLURMCluster, built as written (no scheduler runs, no job is submitted)."""
    pytest.importorskip("dask_jobqueue")
    text = section(page("scale.md"), "Scale: many cells, a cluster, a GPU")
    (recipe,) = [b for b in fenced_blocks(text, "python") if "SLURMCluster(" in b]
    ns: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(recipe, "docs/scale.md", "exec"), ns)  # the page's own code
        cluster = ns["cluster"]
        try:
            script = cluster.job_script()
        finally:
            cluster.close()
    lines = script.splitlines()
    assert "#SBATCH --cpus-per-task=8" in lines
    assert "#SBATCH --mem=15G" in lines  # 16 GB in GiB, as dask-jobqueue writes it
    assert "#SBATCH -t 02:00:00" in lines
    assert "#SBATCH -p normal" in lines and "#SBATCH -A mylab" in lines
    for k, v in thread_env(4).items():  # 8 cores, 2 workers: 4 threads each
        assert any(line.startswith(f"export {k}=") and v in line for line in lines), k
    (cmd,) = [line for line in lines if "distributed.cli.dask_worker" in line]
    assert "--nthreads 4" in cmd and "--nworkers 2" in cmd
    assert "--preload bayesobs.distributed" in cmd
    assert cmd.split()[0].endswith("python") or "python" in cmd.split()[0]
