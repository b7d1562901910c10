"""The psychometric fit reaches the maximum of its likelihood (issue 49 item 3).

Reference, sharing no code with the fit: the same model and borders written out here, a dense
grid over (threshold, log width, lapse) and scipy's L-BFGS-B from the grid's ten best points.
Before, on 80 such groups the fit was short of the reference by more than 1e-3 in 9 (up to 1.39),
one reported as a step at its width border where the maximum is a graded curve.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize, special

from bayesobs.scores.psychometric import fit_many, psi

Z95 = 2 * special.ndtri(0.95)  # width: distance between F = 0.05 and F = 0.95


def ref_nll(theta, x, k, n, g):
    """Binomial NLL (no coefficients) of ``g + (1 - g - lapse)(1 - Phi)``: theta (..., 3)."""
    theta = np.asarray(theta, float)
    m, lw, lam = (theta[..., i, None] for i in range(3))
    F = special.ndtr(-Z95 * (x - m) / np.exp(lw))  # decreasing
    p = np.clip(g + (1 - g - lam) * F, 1e-12, 1 - 1e-12)
    return -np.sum(special.xlogy(k, p) + special.xlogy(n - k, 1 - p), axis=-1)


def ref_fit(x, k, n, g) -> float:
    """Dense grid (81 x 61 x 26) inside the borders, then L-BFGS-B from its ten best points."""
    span = x.max() - x.min()
    lo = np.array([x.min() - span / 2, np.log(np.diff(x).min()), 0.0])
    hi = np.array([x.max() + span / 2, np.log(3 * span), min(0.5, 1 - g.max() - 1e-9)])
    axes = [np.linspace(lo[i], hi[i], m) for i, m in enumerate((81, 61, 26))]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)
    vals = ref_nll(grid, x, k, n, g)
    best = float(vals.min())
    for start in grid[np.argsort(vals)[:10]]:
        r = optimize.minimize(
            lambda t: float(ref_nll(t, x, k, n, g)),
            start,
            method="L-BFGS-B",
            bounds=list(zip(lo, hi, strict=True)),
        )
        best = min(best, float(r.fun))
    return best


def simulated_groups(seed: int, count: int = 80, truth: bool = False) -> list[tuple]:
    """3-8 levels out of 1..40, 5-40 trials each, chance 1/2 to 1/33, lapse 0 to 0.1.

    With ``truth``, each group comes with its (threshold, width, lapse).
    """
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        L = rng.integers(3, 9)
        x = np.sort(rng.choice(np.arange(1, 41), L, replace=False)).astype(float)
        n = rng.integers(5, 41, L).astype(float)
        g = np.full(L, rng.choice([0.5, 0.25, 1 / 11, 1 / 33]))
        m = rng.uniform(x.min(), x.max())
        w = rng.uniform(0.2, 1.5) * (x.max() - x.min())
        lam = rng.choice([0.0, 0.03, 0.1])
        group = (x, rng.binomial(n.astype(int), psi(x, m, w, lam, g)).astype(float), n, g)
        out.append((group, (m, w, lam)) if truth else group)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fits_reach_the_dense_grid_and_multistart_maximum(seed):
    groups = simulated_groups(seed)
    fits = fit_many(groups, bootstrap=0)
    short = []
    for (x, k, n, g), r in zip(groups, fits, strict=True):
        ours = float(ref_nll([r["threshold"], np.log(r["width"]), r["lapse"]], x, k, n, g))
        gap = ours - ref_fit(x, k, n, g)
        if gap > 1e-3:
            short.append((round(gap, 4), r["threshold"], r["width"], r["at_bound"]))
    assert not short, f"{len(short)} of 80 groups short of the reference: {short}"


@pytest.mark.slow
def test_bootstrap_interval_coverage_is_what_the_docs_say():
    """docs/method.md reports the measured coverage of the nominal 95% percentile intervals.

    400 simulated groups with known parameters, B = 200: threshold 0.88, width 0.8575, lapse
    0.93 (the seed is fixed, so the numbers are reproduced exactly; 0.03 leaves room for a
    change that moves a few groups).  Below 95%: the intervals are named for what they are.
    """
    data = simulated_groups(11, 400, truth=True)
    fits = fit_many([d for d, _ in data], bootstrap=200, seed=11)
    for j, (name, documented) in enumerate(
        (("threshold", 0.88), ("width", 0.8575), ("lapse", 0.93))
    ):
        covered = np.mean(
            [
                r[f"{name}_lo"] <= t[j] <= r[f"{name}_hi"]
                for r, (_, t) in zip(fits, data, strict=True)
            ]
        )
        assert covered == pytest.approx(documented, abs=0.03), name
