"""Simulation-based calibration of the posterior fits (Talts et al. 2018)."""

from __future__ import annotations

import math
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from .fits.observers.variants import VARIANT_NAMES, get_variant
from .fits.posterior import Data, model, sample_padded
from .report.calibration import rank_figure
from .run.store import lock_folder
from .trials import write_csv

#: what the check can and cannot see (measured, docs/method.md "Simulation-based calibration")
POWER = (
    "Power (measured, linear and static, seeds 0-2): 100 simulations (the default) catch fit "
    "prior scales 0.3 times the truth in 6 of 6 runs, but 0.5 times only in 2 of 6, and 0.7, "
    "1.5 or 3 times in none; 400 simulations catch 0.5 (sigma p < 2e-6) but not 0.7, 1.5 or 3. "
    "A pass does not rule out prior scales wrong by a factor of 2 (too narrow) or 3 (too wide)."
)
BINS = 10  # rank bins of the chi-square test
ALPHA = 0.05  # family-wise level (Bonferroni over the tested parameters)
THIN = 4  # keep every 4th draw of each chain (Talts et al.: ranks of autocorrelated draws pile up)
RUNS, TRIALS = 2, 24  # the simulated design: session runs and trials per run

#: model site -> reported parameter name (natural names; standardised scale)
SITES = {
    "w": "w",
    "b_std": "b",
    "w_prior": "w_prior",
    "log_rho": "rho",
    "g": "g",
    "delta_std": "delta",
    "sigma_std": "sigma",
}


def sbc_design(runs: int = RUNS, trials: int = TRIALS, seed: int = 0) -> Data:
    """A fixed design of standardised stimuli: ``runs`` runs of ``trials`` uniform magnitudes."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(1.0, 2.0, size=(runs, trials))
    z = (x - x.mean()) / x.std()
    return Data(
        z=z,
        u=None,
        obs=np.ones_like(z, dtype=bool),
        zbar=z.mean(1, keepdims=True),
        subject=np.zeros(runs, dtype=np.int64),
        const=np.zeros_like(z),
        c=np.array([0.0]),
        s=np.array([1.0]),
        subjects=[("sbc",)],
    )


def prior_draws(variant, data: Data, n: int, seed: int = 0, prior_scale: float = 1.0) -> dict:
    """``n`` draws of every site of the variant's model from its priors, responses ``u`` included."""
    import jax  # optional weight: JAX loads only for posterior/calibration work

    # optional weight: NumPyro loads only for posterior/calibration work
    from numpyro.infer import Predictive

    variant = get_variant(variant) if isinstance(variant, str) else variant
    sim = Data(**{**data.__dict__, "u": None})
    pred = Predictive(model, num_samples=n)
    out = pred(jax.random.PRNGKey(seed), variant, sim, False, prior_scale)
    return {k: np.asarray(v) for k, v in out.items()}


def sbc_ranks(truth: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """Rank of each true value among its posterior draws: ``#(draws < truth)``, in ``0..M``."""
    truth = np.asarray(truth, dtype=float).reshape(-1)
    draws = np.asarray(draws, dtype=float)
    return (draws < truth[:, None]).sum(axis=1)


def rank_uniformity(ranks: np.ndarray, n_draws: int, bins: int = BINS) -> tuple[float, float]:
    """Chi-square statistic and p-value of ranks in ``0..n_draws`` against the uniform."""
    from scipy import stats  # start-up time: this part of SciPy loads only where it is used

    ranks = np.asarray(ranks, dtype=int)
    if bins < 2 or n_draws + 1 < bins:
        raise ValueError(f"need 2 <= bins <= draws + 1, got bins={bins}, draws={n_draws}")
    if ranks.min() < 0 or ranks.max() > n_draws:
        raise ValueError(f"ranks must lie in 0..{n_draws}")
    which = np.arange(n_draws + 1) * bins // (n_draws + 1)
    width = np.bincount(which, minlength=bins)
    counts = np.bincount(ranks * bins // (n_draws + 1), minlength=bins)
    expected = len(ranks) * width / (n_draws + 1)
    chi2, p = stats.chisquare(counts, expected)
    return float(chi2), float(p)


def _sim_seeds(seed: int, n: int) -> np.ndarray:
    """The sampler's seeds of ``n`` simulations: one each (a shared key makes the ranks dependent)."""
    return np.random.default_rng([seed, 1]).integers(0, 2**31 - 1, n)


def simulate_and_rank(
    variant,
    n_sims: int = 100,
    draws: int = 100,
    chains: int = 2,
    warmup: int = 300,
    thin: int = THIN,
    seed: int = 0,
    prior_scale: float = 1.0,
    design: Data | None = None,
) -> tuple[dict[str, np.ndarray], int]:
    """SBC ranks of one variant: ``{parameter: (n_sims,) ranks in 0..draws}`` and divergent sims."""
    variant = get_variant(variant) if isinstance(variant, str) else variant
    design = design or sbc_design(seed=seed)
    truth = prior_draws(variant, design, n_sims, seed=seed)
    per_chain = math.ceil(draws / chains) * thin
    n = n_sims
    z = np.broadcast_to(design.z, (n, *design.z.shape))
    obs = np.broadcast_to(design.obs, (n, *design.obs.shape))
    zbar = np.broadcast_to(design.zbar, (n, *design.zbar.shape))
    post, div = sample_padded(
        variant,
        z,
        truth["u"],
        obs,
        zbar,
        chains=chains,
        warmup=warmup,
        draws=per_chain,
        seed=_sim_seeds(seed, n),
        prior_scale=prior_scale,
    )
    ranks = {}
    for site, name in SITES.items():
        if site not in post:
            continue
        kept = post[site][:, :, ::thin, 0].reshape(n, -1)[:, :draws]
        ranks[name] = sbc_ranks(truth[site][:, 0], kept)
    return ranks, int(div.any(axis=(1, 2)).sum())


def calibrate(
    variants=None,
    n_sims: int = 100,
    draws: int = 100,
    chains: int = 2,
    warmup: int = 300,
    thin: int = THIN,
    bins: int = BINS,
    alpha: float = ALPHA,
    seed: int = 0,
    prior_scale: float = 1.0,
    progress=None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Simulation-based calibration of each variant: ``(sbc table, ranks)``."""
    names = list(variants or VARIANT_NAMES)
    for v in names:
        get_variant(v)
    if n_sims < 5 * bins:
        raise ValueError(f"need at least 5 simulations per rank bin: n_sims >= {5 * bins}")
    if draws + 1 < bins:
        raise ValueError(f"need draws >= bins - 1 ({bins - 1})")
    if not prior_scale > 0:
        raise ValueError("prior_scale must be positive")
    rows, long = [], []
    for name in names:
        t0 = time.perf_counter()
        ranks, n_div = simulate_and_rank(
            name, n_sims, draws, chains, warmup, thin, seed, prior_scale
        )
        sec = time.perf_counter() - t0
        for param, r in ranks.items():
            chi2, p = rank_uniformity(r, draws, bins)
            rows.append(
                {
                    "variant": name,
                    "parameter": param,
                    "n_sims": n_sims,
                    "draws": draws,
                    "bins": bins,
                    "chi2": chi2,
                    "p": p,
                    "divergent_sims": n_div,
                    "prior_scale": prior_scale,
                    "seconds": round(sec, 2),
                }
            )
            long.append(
                pd.DataFrame(
                    {"variant": name, "parameter": param, "sim": np.arange(len(r)), "rank": r}
                )
            )
        if progress is not None:
            progress(name, sec)
    table = pd.DataFrame(rows)
    table.insert(table.columns.get_loc("p") + 1, "threshold", alpha / len(table))
    table.insert(
        table.columns.get_loc("threshold") + 1, "uniform", table["p"] >= table["threshold"]
    )
    return table, pd.concat(long, ignore_index=True)


def write_calibration(out, table: pd.DataFrame, ranks: pd.DataFrame) -> list:
    """``sbc.csv``, ``sbc_ranks.csv`` and ``figures/sbc_ranks.png`` in ``out`` (holding its lock)."""
    out = Path(out)
    with lock_folder(out, "calibrate"):
        (out / "figures").mkdir(exist_ok=True)
        paths = [write_csv(table, out / "sbc.csv"), write_csv(ranks, out / "sbc_ranks.csv")]
        fig = rank_figure(table, ranks)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # constrained layout on tiny panels
            fig.savefig(out / "figures" / "sbc_ranks.png", dpi=110)
        paths.append(out / "figures" / "sbc_ranks.png")
    return paths


__all__ = [
    "POWER",
    "calibrate",
    "prior_draws",
    "rank_uniformity",
    "sbc_design",
    "sbc_ranks",
    "simulate_and_rank",
    "write_calibration",
]
