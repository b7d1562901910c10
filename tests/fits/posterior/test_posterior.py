"""Posterior fits: the shared model function, recovery, MAP = MLE, LOO ranking, diagnostics, CLI."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import make_cell

import bayesobs
from bayesobs.cli import main
from bayesobs.fits.observers import VARIANT_NAMES
from bayesobs.fits.observers.models import mean_padded

jnp = pytest.importorskip("jax.numpy")
posterior = pytest.importorskip("bayesobs.fits.posterior")
QUICK = {"chains": 2, "warmup": 300, "draws": 300}
WIDE = ((0.05, 0.4), (0.2, 0.7), (0.4, 1.0))
PARAMS = {
    "linear": {"w": 0.7, "b": 0.1},
    "static": {"w_prior": 0.35},
    "kalman": {"rho": 0.4},
    "static_gain": {"w_prior": 0.35, "g": 0.8, "delta": 0.05},
    "kalman_gain": {"rho": 0.4, "g": 0.8, "delta": 0.05},
}


@pytest.mark.parametrize("name", VARIANT_NAMES)
def test_jax_and_numpy_evaluate_the_same_model_function(name):
    rng = np.random.default_rng(0)
    z = rng.normal(size=(3, 25))
    zbar = z.mean(1, keepdims=True)
    p = PARAMS[name.replace("_log", "")]
    a = mean_padded(name, p, z, zbar)
    b = np.asarray(
        mean_padded(
            name,
            {k: jnp.asarray(v) for k, v in p.items()},
            jnp.asarray(z),
            jnp.asarray(zbar),
            xp=jnp,
        )
    )
    np.testing.assert_allclose(b, a, rtol=2e-5, atol=2e-6)  # JAX computes in float32


def _kalman_reference(z, rho):
    """Kalman means of every row of ``z`` (float64, the NumPy filter)."""
    from bayesobs.fits.observers import kalman_means

    return kalman_means(np.asarray(z, float), np.asarray(rho, float))


def _central(f, x, h):
    """Central difference of ``f`` at ``x`` with step ``h``."""
    return (f(x + h) - f(x - h)) / (2 * h)


@pytest.mark.parametrize("rho", [1e-3, 0.3, 2.0, 50.0])
def test_kalman_gradients_carried_forward_match_finite_differences(rho):
    # the JAX filter differentiates through rho in forward mode (one loop over time for
    # NUTS's gradients): its derivatives against central differences of the float64 filter
    import jax

    rng = np.random.default_rng(5)
    z = rng.normal(size=(3, 40))
    w = rng.normal(size=(3, 40))
    zj, wj = jnp.asarray(z, jnp.float32), jnp.asarray(w, jnp.float32)

    def objective(log_rho, zz=zj):  # through the model's own mean function
        kal = {"rho": jnp.exp(log_rho)}
        return jnp.sum(wj * mean_padded("kalman", kal, zz, zz.mean(1, keepdims=True), xp=jnp))

    lr, h = np.log(rho), 1e-4
    fd = _central(lambda x: np.sum(w * _kalman_reference(z, np.exp(x))), lr, h)
    value, grad = jax.value_and_grad(objective)(jnp.float32(lr))
    np.testing.assert_allclose(value, np.sum(w * _kalman_reference(z, rho)), rtol=1e-5)
    np.testing.assert_allclose(grad, fd, rtol=1e-4, atol=1e-5)
    # forward mode (jacfwd) and a per-run rho under vmap give the same derivatives
    np.testing.assert_allclose(jax.jacfwd(objective)(jnp.float32(lr)), fd, rtol=1e-4, atol=1e-5)
    rhos = np.array([rho, 2 * rho, rho / 3])
    per_run = jax.vmap(
        jax.grad(lambda r, zr, wr: jnp.sum(wr * mean_padded("kalman", {"rho": r}, zr, zr, xp=jnp)))
    )(jnp.asarray(rhos, jnp.float32), zj, wj)
    fd_run = [
        _central(lambda x, i=i: np.sum(w[i] * _kalman_reference(z[i], x)), r, h * r)
        for i, r in enumerate(rhos)
    ]
    np.testing.assert_allclose(per_run, fd_run, rtol=1e-4, atol=1e-5)
    # the means are linear in z: the gradient in z is the filter's transpose applied to w
    gz = jax.grad(lambda zz: objective(jnp.float32(lr), zz))(zj)
    basis = np.eye(40)
    matrix = np.stack([_kalman_reference(e, rho) for e in basis], axis=1)  # d mu / d z
    np.testing.assert_allclose(gz, w @ matrix, rtol=1e-4, atol=1e-5)


def test_kalman_gradient_runs_one_loop_over_time():
    # what the forward-mode derivative is for: reverse mode of the filter compiles to one
    # loop (the scan carrying the derivative), not a forward and a backward one
    import jax

    z = jnp.ones((3, 40), jnp.float32)

    def objective(log_rho):
        return jnp.sum(mean_padded("kalman", {"rho": jnp.exp(log_rho)}, z, z[:, :1], xp=jnp))

    hlo = jax.jit(jax.value_and_grad(objective)).lower(jnp.float32(0.0)).compile().as_text()
    assert hlo.count(" while(") == 1


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "truth"),
    [("static", {"w_prior": 0.4, "sigma": 0.03}), ("kalman", {"rho": 0.5, "sigma": 0.02})],
)
def test_posterior_recovers_known_parameters(name, truth):
    df = make_cell(np.random.default_rng(3), name, truth, n_per=80, ranges=WIDE)
    summ, _, _, notes = posterior.fit_posterior(df, variants=[name], **QUICK)
    assert not notes
    est = summ.set_index("param")["mean"]
    if name == "static":
        assert abs(est["w_prior"] - 0.4) < 0.05
    else:
        assert abs(np.log(est["rho"]) - np.log(0.5)) < 0.6
    assert abs(est["sigma"] / truth["sigma"] - 1) < 0.15


# every variant in the slow tier (each samples its own model: ~10 s)
SLOW = pytest.mark.slow


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("static", marks=SLOW),
        pytest.param("static_gain", marks=SLOW),
        pytest.param("kalman_gain", marks=SLOW),
        pytest.param("linear_log", marks=SLOW),
    ],
)
def test_posterior_mode_agrees_with_mle(name):
    truth = {
        "static": {"w_prior": 0.4, "sigma": 0.03},
        "static_gain": {"w_prior": 0.3, "g": 0.8, "delta": 0.1, "sigma": 0.02},
        "kalman_gain": {"rho": 0.3, "g": 0.8, "delta": 0.1, "sigma": 0.02},
        "linear_log": {"w": 0.7, "b": -0.2, "sigma": 0.05},
    }[name]
    df = make_cell(np.random.default_rng(4), name, truth, n_per=200, ranges=WIDE)
    fits, _ = bayesobs.fit(df)
    mle = json.loads(fits.set_index("variant").loc[name, "params"])
    mode = posterior.posterior_mode(
        name,
        posterior.prepare(bayesobs.normalize_trials(df), bayesobs.fits.observers.get_variant(name)),
    )
    for k, v in mle.items():
        got = float(np.ravel(mode[k])[0])
        if k == "rho":
            assert abs(np.log(got) - np.log(v)) < 0.1, (k, got, v)
        else:
            assert abs(got - v) < 0.01 * max(1.0, abs(v)) + 0.003, (
                k,
                got,
                v,
            )  # weak priors, n = 600


@pytest.mark.slow  # about 9 minutes under load: it sat in the fast suite
def test_loo_ranks_the_generating_variant_first():
    wins, total = 0, 0
    for seed, (name, p) in enumerate(
        [
            ("static", {"w_prior": 0.5, "sigma": 0.03}),
            ("kalman", {"rho": 0.2, "sigma": 0.02}),
            ("linear", {"w": 0.6, "b": 0.15, "sigma": 0.03}),
            ("static", {"w_prior": 0.3, "sigma": 0.03}),
        ]
    ):
        df = make_cell(np.random.default_rng(10 + seed), name, p, n_per=60, ranges=WIDE)
        _, loo, _, _ = posterior.fit_posterior(df, variants=["linear", "static", "kalman"], **QUICK)
        wins += loo.set_index("variant").loc[name, "rank"] == 1
        total += 1
    assert wins >= 3, f"LOO ranked the generating variant first in {wins}/{total}"


@pytest.mark.slow
def test_hierarchical_fit_pools_subjects():
    rng = np.random.default_rng(5)
    ws = [0.25, 0.35, 0.45, 0.3, 0.4]
    df = pd.concat(
        [
            make_cell(rng, "static", {"w_prior": w, "sigma": 0.04}, n_per=30, subject=f"s{i}")
            for i, w in enumerate(ws)
        ]
    )
    summ, loo, _, _ = posterior.fit_posterior(df, variants=["static"], hierarchical=True, **QUICK)
    w = summ[summ["param"] == "w_prior"].sort_values("subject_cell")["mean"].to_numpy()
    assert len(w) == 5 and np.abs(w - ws).max() < 0.12
    assert len(loo) == 1 and loo["variant"].iat[0] == "static"


@pytest.mark.slow
def test_failed_diagnostics_warn_instead_of_passing_silently():
    df = make_cell(
        np.random.default_rng(6),
        "kalman_gain",
        {"rho": 1.0, "g": 0.9, "delta": 0.0, "sigma": 0.03},
        n_per=15,
    )
    with pytest.warns(RuntimeWarning, match="sampler diagnostics failed"):
        _, _, _, notes = posterior.fit_posterior(
            df, variants=["kalman_gain"], chains=2, warmup=10, draws=30
        )
    assert notes


@pytest.mark.slow
def test_cli_posterior_writes_tables_netcdf_and_bcs(tmp_path):
    import arviz as az

    frames = [
        make_cell(
            np.random.default_rng(7),
            "static",
            {"w_prior": 0.3, "sigma": 0.03},
            modality="image",
            condition="base",
        ),
        make_cell(
            np.random.default_rng(8),
            "static",
            {"w_prior": 0.6, "sigma": 0.03},
            modality="image",
            condition="noise_constant",
        ),
    ]
    pd.concat(frames).to_csv(tmp_path / "t.csv", index=False)
    args = [
        "fit",
        str(tmp_path / "t.csv"),
        "--out",
        str(tmp_path / "o"),
        "--method",
        "posterior",
        "--chains",
        "2",
        "--warmup",
        "300",
        "--draws",
        "400",
        "--no-progress",
        "--variant",
        "static",
        "--variant",
        "linear",
        "--variant",
        "kalman",
    ]
    assert main(args) == 0
    loo = pd.read_csv(tmp_path / "o" / "loo.csv")
    assert len(loo) == 6 and {"elpd_loo", "aic", "delta_aic", "rank"} <= set(loo.columns)
    assert (loo[loo["rank"] == 1]["variant"] == "static").all()
    bcs = pd.read_csv(tmp_path / "o" / "bcs_posterior.csv")
    assert len(bcs) == 1 and bcs["p_w_prior_rose"].iat[0] > 0.99
    (nc,) = (tmp_path / "o" / "posterior").glob("static__*.nc")  # both cells in one file
    post = az.from_netcdf(nc).posterior
    assert post.sizes["cell"] == 2 and "w_prior" in post
    assert len(list((tmp_path / "o" / "figures").glob("ppc_*.png"))) == 2
    assert (tmp_path / "o" / "fits.csv").exists()  # the MLE fits are still written


@pytest.mark.slow
def test_credible_intervals_cover_the_truth_at_nominal_rate():
    import arviz as az

    covered, failed, n = 0, 0, 40
    for seed in range(n):
        w = 0.2 + 0.5 * np.random.default_rng(seed).uniform()
        df = make_cell(
            np.random.default_rng(100 + seed), "static", {"w_prior": w, "sigma": 0.05}, n_per=30
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # counted below instead
            _, _, idatas, notes = posterior.fit_posterior(
                df, variants=["static"], chains=4, warmup=400, draws=400
            )
        failed += bool(notes)
        lo, hi = az.hdi(next(iter(idatas.values())), hdi_prob=0.9)["w_prior"].to_numpy().ravel()
        covered += lo <= w <= hi
    assert 0.78 <= covered / n <= 0.98, f"90% intervals covered the truth in {covered}/{n}"
    assert failed <= 2, f"sampler diagnostics failed in {failed}/{n} fits"


@pytest.mark.slow
def test_warnings_name_their_thresholds_and_high_pareto_k_is_reported():
    """Before: Pareto k warnings were silenced and diagnostics omitted the thresholds."""
    df = make_cell(np.random.default_rng(9), "static", {"w_prior": 0.4, "sigma": 0.02}, n_per=20)
    df.loc[3, "response"] = df["response"].iloc[3] + 1.5  # one wild answer
    with pytest.warns(RuntimeWarning) as rec:
        _, loo, _, notes = posterior.fit_posterior(
            df, variants=["static"], chains=2, warmup=10, draws=30, workers=1
        )
    text = " ".join(str(w.message) for w in rec)
    assert "Pareto k > 0.7" in text and loo["pareto_k_over_0.7"].iat[0] >= 1
    # each failed check carries its threshold
    assert any(
        t in text for t in ("> 1.01", "< 200 (100 per chain x 2 chains)", "transition(s) > 0")
    )
    assert notes
