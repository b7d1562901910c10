"""Batched posterior fits: same draws alone or batched, agreement with the per-cell MCMC fits."""

from __future__ import annotations

import os
import signal
import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import make_cell

import bayesobs
import bayesobs.scores
from bayesobs.fits.observers import get_variant

posterior = pytest.importorskip("bayesobs.fits.posterior")
from bayesobs.fits.posterior import batching, pools, summaries  # noqa: E402


def _cells(n, n_per=40, name="static"):
    truth = {"static": {"w_prior": 0.4, "sigma": 0.03}, "kalman": {"rho": 0.5, "sigma": 0.03}}[name]
    return pd.concat(
        [
            make_cell(np.random.default_rng(20 + i), name, truth, n_per=n_per, subject=f"s{i}")
            for i in range(n)
        ]
    )


def test_prepare_cells_gives_the_arrays_of_prepare():
    df = bayesobs.normalize_trials(pd.concat([_cells(2), _cells(1, n_per=23).assign(subject="t")]))
    for name in ("static", "kalman_log_gain"):
        v = get_variant(name)
        for key, d in posterior.prepare_cells(df, v):
            alone = posterior.prepare(df[df["subject"] == key[0]], v)
            for f in ("z", "u", "obs", "zbar", "const", "c", "s", "subject"):
                np.testing.assert_array_equal(getattr(d, f), getattr(alone, f), err_msg=f)
            assert d.subjects == alone.subjects


@pytest.mark.slow
def test_a_cell_gets_the_same_draws_alone_or_batched():
    """Same seed, same draws: the padded shape depends on the cell only (different lengths here)."""
    df = bayesobs.normalize_trials(pd.concat([_cells(3), _cells(1, n_per=29).assign(subject="t")]))
    v = get_variant("kalman")
    datas = [d for _, d in posterior.prepare_cells(df, v)]
    kw = {"chains": 2, "warmup": 60, "draws": 40, "seed": 3}
    together = posterior.sample_batch(v, datas, **kw)
    for i in (1, 3):
        alone = posterior.sample_batch(v, [datas[i]], **kw)[0]
        for k in ("rho", "sigma"):
            np.testing.assert_array_equal(alone.posterior[k], together[i].posterior[k])
        np.testing.assert_array_equal(alone.log_likelihood["y"], together[i].log_likelihood["y"])


@pytest.mark.slow
def test_batched_kernel_is_mcmc_kernel_until_rounding_separates_them():
    """The batched sampler runs NumPyro's NUTS kernel with MCMC's keys: the first
    transitions are the same numbers; later, float32 rounding of the vectorised
    (cells x chains) computation differs in the last bits and chaotic NUTS
    trajectories separate, so long runs agree in distribution, not draw by draw."""
    v = get_variant("static")
    data = posterior.prepare(bayesobs.normalize_trials(_cells(1)), v)
    kw = {"chains": 2, "warmup": 5, "draws": 3, "seed": 0}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        ref = posterior.sample(v, data, **kw)
    got = posterior.sample_batch(v, [data], **kw)[0]
    np.testing.assert_allclose(got.posterior["w_prior"], ref.posterior["w_prior"], rtol=1e-5)


@pytest.mark.slow  # two samplers compiled and run: minutes on a loaded 2-core machine
@pytest.mark.parametrize("name", ["static", "kalman_gain"])
def test_batched_posterior_means_agree_with_per_cell_fits(name):
    """Posterior means within 3 combined Monte Carlo standard errors, diagnostics alike."""
    import arviz as az

    df = _cells(3, name="kalman" if "kalman" in name else "static")
    kw = {"variants": [name], "chains": 4, "warmup": 300, "draws": 300}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        b, bl, bi, _ = posterior.fit_posterior(df, **kw)
        m, ml, mi, _ = posterior.fit_posterior(df, batched=False, workers=1, **kw)
    assert list(b.columns) == list(m.columns) and len(b) == len(m)
    assert list(bl.columns) == list(ml.columns) and bi.keys() == mi.keys()
    for key in bi:
        sb = az.summary(bi[key], round_to="none")
        sm = az.summary(mi[key], round_to="none")
        z = (sb["mean"] - sm["mean"]).abs() / np.hypot(sb["mcse_mean"], sm["mcse_mean"])
        assert (z < 3).all(), (key, sb["mean"], sm["mean"])
    assert (b["divergences"] == 0).all() and (b["r_hat_max"] <= 1.02).all()
    np.testing.assert_allclose(bl["elpd_loo"], ml["elpd_loo"], atol=0.5)


@pytest.mark.slow
def test_cheaper_cue_probe_keeps_the_out_of_fold_r2_of_the_papers_forest():
    """PROBE_TREES trees give the 100-tree forest's out-of-fold R^2 to 0.01."""
    from bayesobs.fits.synthetic import simulated_trials
    from bayesobs.scores import cue
    from bayesobs.trials import normalize_trials

    t = bayesobs.scores.with_baseline(
        normalize_trials(simulated_trials(n_subjects=2, trials_per_session=30, seed=4))
    )
    paired, _ = cue.paired_trials(t)
    paired = paired[paired["condition"] == "base"]
    r2 = []
    for _, g in paired.groupby(["subject", "task", "condition"]):
        y = g["y_multimodal"].to_numpy()
        ss = ((y - y.mean()) ** 2).sum()
        r2.append(
            [
                1
                - ((y - cue._probe_predictions([g], 0, 5, trees)[0]["random_forest"]) ** 2).sum()
                / ss
                for trees in (cue.PROBE_TREES, 100)
            ]
        )
    r2 = np.array(r2)
    assert len(r2) >= 4
    np.testing.assert_allclose(r2[:, 0], r2[:, 1], atol=0.01)


def test_batched_inference_data_is_built_like_from_dict():
    import arviz as az
    import xarray as xr

    rng = np.random.default_rng(0)
    nat = {
        "w_prior": rng.uniform(size=(2, 7, 1)).astype(np.float32),
        "sigma": rng.uniform(size=(2, 7, 1)),
    }
    ll, div = rng.normal(size=(2, 7, 11)), rng.uniform(size=(2, 7)) < 0.1
    subjects = [("s", "t", "text", "base")]
    got = batching._inference_data(nat, ll, div, subjects)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        ref = az.from_dict(
            posterior=nat,
            log_likelihood={"y": ll},
            sample_stats={"diverging": div},
            coords={"subject": ["s/t/text/base"]},
            dims={k: ["subject"] for k in nat},
        )
    assert got.groups() == ref.groups()
    for g in ref.groups():
        a, b = got[g], ref[g]
        xr.testing.assert_identical(a.drop_attrs(), b.drop_attrs())
        assert set(a.attrs) == set(b.attrs) - {"inference_library"}


# the tolerances of the vectorised summaries (mcmcstats) against ArviZ's own, on tables rounded
# as arviz.summary rounds them: a rounded last digit; R-hat to 0.01 (its rounding); ESS to 15%
# here, where the chains are 2 x 40 draws (NumPyro's ESS leaves out the last autocorrelation
# pair's tail term that ArviZ adds, a larger share of a short chain's sum; 5% at 4 x 500 draws,
# tests/fits/test_mcmcstats.py); PSIS-LOO to rtol 1e-6
SUMMARY_TOLERANCE = {"atol": {"r_hat": 0.011}, "rtol": {"ess_bulk": 0.15, "ess_tail": 0.15}}


def assert_summary_rows_close(got: pd.DataFrame, ref: pd.DataFrame) -> None:
    """Two summary tables equal in their keys, within SUMMARY_TOLERANCE in their numbers."""
    num = [c for c in ref.columns if ref[c].dtype.kind == "f" and c not in ("r_hat_max",)]
    pd.testing.assert_frame_equal(
        got.drop(columns=num + ["r_hat_max"]), ref.drop(columns=num + ["r_hat_max"])
    )
    for c in num:
        rtol = SUMMARY_TOLERANCE["rtol"].get(c.replace("_min", ""), 0.0)
        atol = SUMMARY_TOLERANCE["atol"].get(c, 1.001e-3)
        np.testing.assert_allclose(got[c], ref[c], rtol=rtol, atol=atol, err_msg=c)
    np.testing.assert_allclose(got["r_hat_max"], ref["r_hat_max"], atol=0.011)


@pytest.mark.slow
def test_slice_results_agree_with_the_per_cell_arviz_summaries_and_loo():
    """Vectorised summaries (mcmcstats) and PSIS-LOO per slice: each cell's own arviz.summary
    and arviz.loo within SUMMARY_TOLERANCE (LOO to rtol 1e-6), the same draws and LL."""
    from bayesobs.trials import CELL_KEYS

    df = bayesobs.normalize_trials(pd.concat([_cells(3), _cells(1, n_per=23).assign(subject="t")]))
    v = get_variant("kalman")  # compiled as in test_a_cell_gets_the_same_draws_alone_or_batched
    items = [(k, d) for k, d in posterior.prepare_cells(df, v) if k[0] != "t"]
    raw = batching._dispatch(v, [d for _, d in items], 2, 60, 40, 5, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        got = summaries.slice_results(v, items, raw, 2)
        idatas = batching._collect(v, [d for _, d in items], raw)
        ref = [
            summaries._cell_results(list(CELL_KEYS), k, v.name, idata, 2)
            for (k, _), idata in zip(items, idatas, strict=True)
        ]
    for (key, name, idata, rows, loo_row, _), (rows0, loo0, _), idata0 in zip(
        got, ref, idatas, strict=True
    ):
        assert (key, name) in {(k, v.name) for k, _ in items}
        assert_summary_rows_close(pd.DataFrame(rows), pd.DataFrame(rows0))
        for c in ("elpd_loo", "se", "p_loo"):
            np.testing.assert_allclose(loo_row[c], loo0[c], rtol=1e-6, err_msg=c)
        assert loo_row["pareto_k_over_0.7"] == loo0["pareto_k_over_0.7"]
        for g in ("posterior", "log_likelihood", "sample_stats"):
            for var in idata0[g].data_vars:
                np.testing.assert_array_equal(idata[g][var], idata0[g][var])


@pytest.mark.slow  # about 12 s: fits of several cells at scale (the fast suite's 5-minute budget)
def test_slice_results_hold_a_few_cells_log_likelihoods_at_once():
    """A worker's peak memory: the float64 log-likelihoods of a slice's cells are made a few
    cells at a time (PSIS-LOO's chunks, then each cell's InferenceData), never all at once,
    so that twice the cells take no more memory at the peak (the sink drops each fit, as
    the workers' sink keeps only the draws)."""
    import tracemalloc

    df = bayesobs.normalize_trials(_cells(3))
    v = get_variant("kalman")  # compiled as in test_slice_results_are_the_per_cell_...
    items = posterior.prepare_cells(df, v)
    post, div, ll = batching._dispatch(v, [d for _, d in items], 2, 60, 40, 5, 3)
    post = {k: np.asarray(a) for k, a in post.items()}
    div, ll = np.asarray(div), np.asarray(ll)

    def peak(copies: int) -> int:  # the three cells' draws repeated: 3 x copies cells
        raw = (
            {k: np.tile(a, (copies,) + (1,) * (a.ndim - 1)) for k, a in post.items()},
            np.tile(div, (copies, 1, 1)),
            np.tile(ll, (copies, 1, 1, 1, 1)),
        )
        tracemalloc.start()
        try:
            got = summaries.slice_results(
                v, items * copies, raw, 2, sink=lambda fits: [None] * len(fits)
            )
            assert len(got) == 3 * copies
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        peak(1)  # the first call imports ArviZ and xarray
        small, large = peak(40), peak(80)
    obs = sum(int(d.obs.sum()) for _, d in items)
    added = 8 * ll.shape[1] * ll.shape[2] * obs * 40  # the 120 more cells' float64 copies
    assert added > 8e6
    assert large - small < added / 4, (small, large, added)


@pytest.mark.slow  # two samplers compiled per variant: a minute or more on a loaded 2-core machine
@pytest.mark.parametrize("name, site", [("kalman", "rho"), ("static_log_gain", "w_prior")])
def test_a_cell_gets_the_same_draws_alone_or_in_a_larger_call(name, site):
    """Every chain of every cell steps on its own in the one loop of a call (fits/nuts.py):
    a cell sampled with 8 others, or in a call padded to 16, gets the draws it gets alone."""
    df = bayesobs.normalize_trials(_cells(9, n_per=20))
    v = get_variant(name)
    assert batching._slice_size(9) == 9 and batching._slice_size(200) == 100
    datas = [d for _, d in posterior.prepare_cells(df, v)]
    kw = {"chains": 2, "warmup": 30, "draws": 20, "seed": 2}
    big = posterior.sample_batch(v, datas, **kw)
    padded = posterior.sample_batch(v, datas, pad_to=16, **kw)
    for i in (0, 6):
        alone = posterior.sample_batch(v, [datas[i]], **kw)[0]
        for other in (big[i], padded[i]):
            np.testing.assert_array_equal(other.posterior[site], alone.posterior[site])
            np.testing.assert_array_equal(other.posterior["sigma"], alone.posterior["sigma"])
            np.testing.assert_array_equal(other.log_likelihood["y"], alone.log_likelihood["y"])


def test_jobs_are_dealt_out_so_that_workers_start_on_different_variants():
    jobs = [("static", 0), ("static", 1), ("static", 2), ("kalman", 0), ("kalman", 1)]
    assert pools.interleaved(jobs, 2) == [jobs[0], jobs[3], jobs[1], jobs[4], jobs[2]]
    assert pools.interleaved(jobs, 1) == jobs
    assert sorted(pools.interleaved(jobs, 3)) == sorted(jobs)
    with pytest.raises(ValueError, match="workers"):
        posterior.fit_posterior(_cells(1), variants=["static"], workers=0)


@pytest.mark.slow  # spawned processes, each loading JAX and compiling its sampler
def test_two_worker_processes_give_the_tables_of_one_process(tmp_path):
    """The batched fit over two processes (each on its own core) gives byte-identical tables;
    the report's sink writes the .nc files in the workers, and only the draws come back."""

    from bayesobs.fits.posterior import PosteriorFiles, read_fit

    df = _cells(3, n_per=20)
    kw = {"variants": ["static", "kalman"], "chains": 2, "warmup": 40, "draws": 30}
    seen = []

    def here(fits):  # a plain closure: called in this process
        seen.extend((key, os.getpid()) for key, _ in fits)
        return [idata for _, idata in fits]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # short chains: diagnostics notes
        s1, l1, i1, n1 = posterior.fit_posterior(df, workers=1, **kw)
        s2, l2, i2, n2 = posterior.fit_posterior(df, workers=2, sink=here, **kw)
        files = PosteriorFiles(tmp_path)
        assert posterior.sink_in_workers(files) and not posterior.sink_in_workers(here)
        s3, l3, i3, n3 = posterior.fit_posterior(df, workers=2, sink=files, **kw)
    pd.testing.assert_frame_equal(s1, s2, check_exact=True)
    pd.testing.assert_frame_equal(l1, l2, check_exact=True)
    assert n1 == n2 and list(i1) == list(i2)
    assert sorted(k for k, _ in seen) == sorted(i1) and {p for _, p in seen} == {os.getpid()}
    for k in i1:
        np.testing.assert_array_equal(i1[k].log_likelihood["y"], i2[k].log_likelihood["y"])
    pd.testing.assert_frame_equal(s1, s3, check_exact=True)
    pd.testing.assert_frame_equal(l1, l3, check_exact=True)
    assert n1 == n3 and list(i1) == list(i3)
    files = sorted(tmp_path.glob("*.nc"))
    assert 2 <= len(files) < len(i1)  # several cells to a file, one variant each
    for k in i1:
        assert i3[k].groups() == ["posterior"]  # the log-likelihoods stayed in the workers
        (path,) = [f for f in files if f.name.startswith(k[-1] + "__")]
        back = read_fit(path, "/".join(map(str, k[:-1])))
        for g in ("posterior", "log_likelihood", "sample_stats"):
            for var in i1[k][g].data_vars:
                np.testing.assert_array_equal(back[g][var], i1[k][g][var])


class _KillsItsFirstWorker:
    """A sink called in the workers that kills the first one it runs in (as the OOM killer would)."""

    runs_in_workers = True

    def __init__(self, marker, caller):
        self.marker, self.caller = str(marker), caller

    def __call__(self, fits):
        if os.getpid() != self.caller and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        return [idata for _, idata in fits]


@pytest.mark.slow  # worker processes, each loading JAX and compiling its sampler
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="workers start only with two cores")
def test_a_worker_killed_in_a_posterior_fit_loses_nothing(tmp_path):
    """Issue 50: a worker killed mid-fit: its slices run again here, with one warning; same tables."""
    df = _cells(3, n_per=20)
    kw = {"variants": ["static", "kalman"], "chains": 2, "warmup": 40, "draws": 30}
    sink = _KillsItsFirstWorker(tmp_path / "killed", os.getpid())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s1, l1, _, n1 = posterior.fit_posterior(df, workers=1, **kw)
        s2, l2, _, n2 = posterior.fit_posterior(df, workers=2, sink=sink, **kw)
    assert (tmp_path / "killed").exists()  # a worker was killed
    ended = [str(w.message) for w in caught if "worker process ended" in str(w.message)]
    assert ended and all("runs again in this process" in m for m in ended)
    pd.testing.assert_frame_equal(s1, s2, check_exact=True)
    pd.testing.assert_frame_equal(l1, l2, check_exact=True)
    assert n1 == n2
