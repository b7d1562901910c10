"""Simulation-based calibration of the posterior fits (Talts et al. 2018).

For each observer variant: draw ``n_sims`` parameter vectors from the
variant's priors and a run of trials from its own generative model
(:func:`bayesobs.fits.posterior.model` with the responses unobserved, on a fixed
design of stimuli), fit every simulated data set with the same NUTS sampler
``fit --method posterior`` uses (:func:`bayesobs.fits.posterior.sample_padded`,
all simulations in one vectorised call, each with its own sampler seed), and
record the rank of each true parameter among ``draws`` thinned posterior draws.  If the fits are
calibrated, every rank is uniform on ``0..draws``.

Uniformity is tested per (variant, parameter) with a chi-square test on the
ranks binned into :data:`BINS` equal-width bins (expected counts from the
number of rank values in each bin); a parameter fails when its p-value is
below ``alpha / n_tests`` (Bonferroni over every (variant, parameter) tested
in the run; ``alpha`` = :data:`ALPHA` by default).

Parameters are compared on the model's standardised scale (the design's
stimuli have mean 0 and SD 1), where the priors are stated; ``rho`` is
ranked as drawn (``log rho``: ranks are unchanged by a monotone transform).
On that scale a log (Weber) variant's likelihood is its linear-space twin's
(the log transform and its Jacobian act on the data only), so the two rows
test the same sampler on different compiled programs.
"""

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
    """A fixed design of standardised stimuli: ``runs`` runs of ``trials`` uniform magnitudes.

    The responses (``u``) are left ``None``: :func:`bayesobs.fits.posterior.model`
    then draws them.

    Parameters
    ----------
    runs : int
        Number of session runs.
    trials : int
        Trials per run.
    seed : int
        Seed of the stimuli (uniform on [1, 2] before standardising).

    Returns
    -------
    Data
        One subject's padded data: stimuli ``z`` of shape ``(runs, trials)``
        with mean 0 and SD 1, every trial present, ``u`` None.
    """
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
    """``n`` draws of every site of the variant's model from its priors, responses ``u`` included.

    Returns numpy arrays: parameters ``(n, 1)`` (one subject), ``u`` ``(n, runs, T)``.

    Parameters
    ----------
    variant : Variant or str
        The observer variant.
    data : Data
        The design (:func:`sbc_design`); its responses are ignored.
    n : int
        Number of draws.
    seed : int
        Seed of the JAX random key.
    prior_scale : float
        Factor on the prior scales.

    Returns
    -------
    dict of str to numpy.ndarray
        Every sample site of the model by name.
    """
    import jax  # optional weight: JAX loads only for posterior/calibration work

    # optional weight: NumPyro loads only for posterior/calibration work
    from numpyro.infer import Predictive

    variant = get_variant(variant) if isinstance(variant, str) else variant
    sim = Data(**{**data.__dict__, "u": None})
    pred = Predictive(model, num_samples=n)
    out = pred(jax.random.PRNGKey(seed), variant, sim, False, prior_scale)
    return {k: np.asarray(v) for k, v in out.items()}


def sbc_ranks(truth: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """Rank of each true value among its posterior draws: ``#(draws < truth)``, in ``0..M``.

    ``truth``: ``(n,)``; ``draws``: ``(n, M)``.

    Parameters
    ----------
    truth : array_like
        The true values, flattened to ``(n,)``.
    draws : array_like
        Posterior draws, ``(n, M)``.

    Returns
    -------
    numpy.ndarray
        Integer ranks, shape ``(n,)``.
    """
    truth = np.asarray(truth, dtype=float).reshape(-1)
    draws = np.asarray(draws, dtype=float)
    return (draws < truth[:, None]).sum(axis=1)


def rank_uniformity(ranks: np.ndarray, n_draws: int, bins: int = BINS) -> tuple[float, float]:
    """Chi-square statistic and p-value of ranks in ``0..n_draws`` against the uniform.

    Ranks go into ``bins`` bins of equal width on ``0..n_draws``
    (``floor(rank * bins / (n_draws + 1))``); each bin's expected count is
    ``n * (rank values in the bin) / (n_draws + 1)``; ``bins - 1`` degrees
    of freedom.

    Parameters
    ----------
    ranks : array_like
        Integer ranks in ``0..n_draws``.
    n_draws : int
        Number of posterior draws behind each rank.
    bins : int
        Number of bins, from 2 to ``n_draws + 1``.

    Returns
    -------
    chi2 : float
        The chi-square statistic.
    p : float
        Its p-value.

    Raises
    ------
    ValueError
        When ``bins`` is out of range or a rank is outside ``0..n_draws``.
    """
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
    """SBC ranks of one variant: ``{parameter: (n_sims,) ranks in 0..draws}`` and divergent sims.

    The data are simulated from the variant's own priors; the fits use
    ``prior_scale`` times its prior scales (1: the real fit; anything else
    a deliberately miscalibrated one).

    Parameters
    ----------
    variant : Variant or str
        The observer variant.
    n_sims : int
        Number of simulated data sets.
    draws : int
        Posterior draws kept per simulation (after thinning).
    chains : int
        NUTS chains per simulation.
    warmup : int
        Warm-up steps per chain.
    thin : int
        Keep every ``thin``-th draw of each chain.
    seed : int
        Seed of the design, the prior draws and the sampler's seeds
        (one per simulation).
    prior_scale : float
        Factor on the fits' prior scales.
    design : Data, optional
        The design; :func:`sbc_design` with ``seed`` by default.

    Returns
    -------
    ranks : dict of str to numpy.ndarray
        The ranks of each parameter the variant has (names of :data:`SITES`).
    divergent : int
        Number of simulations whose fit had a divergent transition.
    """
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
    """Simulation-based calibration of each variant: ``(sbc table, ranks)``.

    The table has one row per (variant, parameter): ``n_sims``, ``draws``,
    ``bins``, ``chi2``, ``p``, ``threshold`` (``alpha`` over the number of
    rows), ``uniform`` (``p >= threshold``), ``divergent_sims`` (simulations
    whose fit had a divergent transition), ``prior_scale`` and ``seconds``
    (wall time of the variant).  ``ranks`` is long: variant, parameter, sim,
    rank.  ``progress(variant, seconds)`` is called after each variant.

    Parameters
    ----------
    variants : sequence of str, optional
        Variant names (default: all ten).
    n_sims : int
        Simulations per variant; at least ``5 * bins``.
    draws : int
        Posterior draws kept per simulation; at least ``bins - 1``.
    chains : int
        NUTS chains per simulation.
    warmup : int
        Warm-up steps per chain.
    thin : int
        Keep every ``thin``-th draw of each chain.
    bins : int
        Rank bins of the chi-square test.
    alpha : float
        Family-wise level of the tests.
    seed : int
        Seed of each variant's simulations and fits.
    prior_scale : float
        Factor on the fits' prior scales (positive).
    progress : callable, optional
        ``progress(variant, seconds)``.

    Returns
    -------
    table : DataFrame
        The ``sbc.csv`` rows described above.
    ranks : DataFrame
        ``variant, parameter, sim, rank``.

    Raises
    ------
    ValueError
        An unknown variant, or ``n_sims``, ``draws`` or ``prior_scale`` out of range.
    """
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
    """``sbc.csv``, ``sbc_ranks.csv`` and ``figures/sbc_ranks.png`` in ``out`` (holding its lock).

    Parameters
    ----------
    out : str or Path
        The output folder.
    table : DataFrame
        :func:`calibrate`'s table.
    ranks : DataFrame
        :func:`calibrate`'s ranks.

    Returns
    -------
    list of Path
        The three paths written.
    """
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
