"""The Dask path: a LocalCluster with two workers gives exactly the local results (same seeds)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import make_cell

import bayesobs
from bayesobs.distributed import local_cluster, map_tasks, scheduler_address, use_scheduler

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def cluster():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # the capped cluster of docs/scale.md (bayesobs.distributed.local_cluster)
        with local_cluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as c:
            yield c.scheduler_address


def _trials(n=3, name="static"):
    truth = {"static": {"w_prior": 0.4, "sigma": 0.03}}[name]
    return pd.concat(
        [
            make_cell(np.random.default_rng(40 + i), name, truth, n_per=30, subject=f"s{i}")
            for i in range(n)
        ]
    )


def test_default_is_this_process(monkeypatch):
    monkeypatch.delenv("BAYESOBS_SCHEDULER", raising=False)
    assert scheduler_address() is None
    assert map_tasks(abs, [-1, 2]) == [1, 2]
    monkeypatch.setenv("BAYESOBS_SCHEDULER", "tcp://example:8786")
    assert scheduler_address() == "tcp://example:8786"
    with use_scheduler("tcp://other:1"):
        assert scheduler_address() == "tcp://other:1"
    assert scheduler_address("tcp://given:2") == "tcp://given:2"


def test_mle_fits_and_bootstrap_are_identical_on_the_cluster(cluster):
    from bayesobs.fits.fitting import fit_batch

    t = bayesobs.normalize_trials(_trials(9))
    local = fit_batch(t, bootstrap=5, seed=3)
    with use_scheduler(cluster):
        remote = fit_batch(t, bootstrap=5, seed=3)
    np.testing.assert_array_equal(remote.loglik, local.loglik)
    for k in local.params:
        np.testing.assert_array_equal(remote.params[k], local.params[k])


def test_cue_probe_is_identical_on_the_cluster(cluster):
    from bayesobs.fits.synthetic import simulated_trials
    from bayesobs.scores import with_baseline
    from bayesobs.scores.cue import cue_probe_table

    t = with_baseline(
        bayesobs.normalize_trials(simulated_trials(n_subjects=1, trials_per_session=20, seed=1))
    )
    local = cue_probe_table(t, 0)
    with use_scheduler(cluster):
        remote = cue_probe_table(t, 0)
    assert len(local) >= 3
    pd.testing.assert_frame_equal(remote, local)


@pytest.mark.slow  # each worker compiles the sampler (minutes on a loaded 2-core machine)
def test_batched_posterior_is_identical_on_the_cluster(cluster):
    posterior = pytest.importorskip("bayesobs.fits.posterior")
    kw = {"variants": ["static", "kalman"], "chains": 2, "warmup": 100, "draws": 100, "seed": 1}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # short chains: diagnostics notes
        s1, l1, i1, n1 = posterior.fit_posterior(_trials(), **kw)
        s2, l2, i2, n2 = posterior.fit_posterior(_trials(), scheduler=cluster, **kw)
    pd.testing.assert_frame_equal(s2, s1)
    pd.testing.assert_frame_equal(l2, l1)
    assert n1 == n2 and i1.keys() == i2.keys()
    for key in i1:
        np.testing.assert_array_equal(i2[key].posterior["sigma"], i1[key].posterior["sigma"])


def test_cli_scheduler_option_writes_the_same_fits(cluster, tmp_path):
    from bayesobs.cli import main

    _trials(4).to_csv(tmp_path / "t.csv", index=False)
    base = ["fit", str(tmp_path / "t.csv"), "--bootstrap", "4", "--no-progress"]
    assert main([*base, "--out", str(tmp_path / "a")]) == 0
    assert main([*base, "--out", str(tmp_path / "b"), "--scheduler", cluster]) == 0
    for name in ("fits.csv", "evidence.csv"):
        a = (tmp_path / "a" / name).read_text()
        assert a == (tmp_path / "b" / name).read_text()
