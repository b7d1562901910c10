"""Full posterior fits of the ten observer variants with NumPyro (NUTS), ArviZ and PSIS-LOO.

Each variant's mean is :func:`bayesobs.fits.observers.models.mean_padded` — the same
pure function the NumPy observer functions use — evaluated with ``jax.numpy``.

Scales: within a dataset, ``z`` and ``u`` are standardised by the mean and SD
of ``z`` (``z' = (z - c) / s``).  Static and Kalman means are shift- and
scale-equivariant, so ``w_prior`` and ``rho`` are unchanged; ``g`` is
unchanged; ``b``, ``delta`` and ``sigma`` are mapped back to natural units
for reporting.  Log-likelihoods (and so LOO) are on the response scale:
``log p(y) = log p(u') - log s - log(y + eps)`` (the last term for log variants).

Priors (standardised scale, weakly informative): ``w_prior ~ Beta(1.1, 1.1)``,
``log rho ~ Normal(0, 3)``, ``g ~ HalfNormal(2)``, ``delta', b' ~ Normal(0, 2)``,
``w ~ Normal(1, 1)``, ``sigma' ~ HalfNormal(1)``.  Hierarchical models draw
each subject's ``logit w_prior``, ``log rho`` or ``w`` from a population
``Normal(mu, tau)`` with ``tau ~ HalfNormal(1)`` (non-centred).

Single-cell fits are batched (:func:`sample_batch`): one compiled sampler per
variant and cell shape, vectorised over cells and chains, each cell with its
own adaptation and diagnostics; the batches run here, in local worker processes
or on a Dask cluster (:mod:`.pools`, through :mod:`bayesobs.distributed`).

The rooms: :mod:`.model` (data and model), :mod:`.batching` (batched sampling),
:mod:`.summaries` (summaries, diagnostics, PSIS-LOO; :mod:`.mcmcstats`,
:mod:`.psis`), :mod:`.jobs` and :mod:`.pools` (the tasks and where they run),
:mod:`.fit` (:func:`fit_posterior`), :mod:`.checks` (predictive checks),
:mod:`.bcs` (posterior BCS) and :mod:`.files` (the posterior files).
"""

from .batching import canonical_shape, sample_batch, sample_padded
from .bcs import bcs_posterior
from .checks import ppc_table, prior_predictive
from .files import KEPT_VARIANTS, FitFile, PosteriorFiles, kept_fit, read_fit, sink_in_workers
from .fit import fit_posterior
from .model import Data, model, posterior_mode, prepare, prepare_cells, sample
from .summaries import diagnostics

__all__ = [
    "KEPT_VARIANTS",
    "Data",
    "FitFile",
    "PosteriorFiles",
    "bcs_posterior",
    "canonical_shape",
    "diagnostics",
    "fit_posterior",
    "kept_fit",
    "model",
    "posterior_mode",
    "ppc_table",
    "prepare",
    "prepare_cells",
    "prior_predictive",
    "read_fit",
    "sample",
    "sample_batch",
    "sample_padded",
    "sink_in_workers",
]
