"""The tasks of a posterior fit: one (group, variant) or one slice of cells, and the sink."""

from __future__ import annotations

import warnings

from ...distributed import (
    trim_memory,
)
from ..observers.variants import get_variant
from .batching import (
    _dispatch,
)
from .model import prepare, sample
from .summaries import (
    _cell_results,
    slice_results,
)


def _fit_one(job):
    """Fit one (group, variant): InferenceData, summary rows, LOO row, or a note. Runs in a worker."""
    g, group_keys, key, name, hierarchical, chains, warmup, draws, seed, progress = job
    v = get_variant(name)
    label = "/".join(map(str, key))
    try:
        data = prepare(g, v)
    except ValueError as exc:
        return key, name, None, [], None, f"{label}: {exc}"
    idata = sample(v, data, hierarchical, chains, warmup, draws, seed, progress)
    return (key, name, idata, *_cell_results(group_keys, key, name, idata, chains))


def _dispatch_job(job):
    name, items, chains, warmup, draws, seed, size = job
    return _dispatch(get_variant(name), [d for _, d in items], chains, warmup, draws, seed, size)


def _finish_job(job, raw, sink=None) -> list:
    name, items, chains, _, _, seed, _ = job
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # arviz's import-time announcement
        return slice_results(get_variant(name), items, raw, chains, sink, seed)


def _fit_batch_job(job, sink=None) -> list:
    """Fit one variant for a slice of same-shape cells (one task: here, or on a worker)."""
    out = _finish_job(job, _dispatch_job(job), sink)
    trim_memory()  # the slice's arrays are freed: their pages go back to the system
    return out
