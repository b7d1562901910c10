"""The posterior files: fits written several to a netCDF-4 file along ``cell`` (issues 32, 50)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("arviz")

from bayesobs.fits.posterior import PosteriorFiles


def _fit(seed: int, obs: int, subjects=("s",)):
    """A fit as the batched sampler builds it: ``subject`` dimension, ``obs`` observations."""
    from bayesobs.fits.posterior.batching import _inference_data

    rng = np.random.default_rng(seed)
    chains, draws, n = 4, 50, len(subjects)
    nat = {
        "w_prior": rng.uniform(size=(chains, draws, n)).astype(np.float32),
        "sigma": rng.gamma(2.0, size=(chains, draws, n)),
    }
    ll, div = rng.normal(size=(chains, draws, obs)), rng.uniform(size=(chains, draws)) < 0.05
    return _inference_data(nat, ll, div, [(s, "t", "text", "base") for s in subjects])


def test_several_fits_share_a_file_and_read_back_as_they_were(tmp_path):
    """PosteriorFiles writes the fits it is given to one file along ``cell`` (through
    ``to_netcdf``); read_fit gives each back: same arrays, dtypes and coordinates, the
    log-likelihood's padding and the subjects' padding removed."""
    from bayesobs.fits.posterior import kept_fit, read_fit

    keys = [("P01", "lines/ratio", "text", "base", "static"), ("P02", "t", "m", "c", "static")]
    keys.append(("t", "m", "c", "static"))  # a hierarchical group: three subjects
    fits = [_fit(0, 11), _fit(1, 7), _fit(2, 9, subjects=("a", "b", "c"))]
    kept = PosteriorFiles(tmp_path)(list(zip(keys, fits, strict=True)))
    path = tmp_path / "static__P01__lines_ratio__text__base.nc"
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]
    for key, idata, k in zip(keys, fits, kept, strict=True):
        assert k.groups() == ["posterior"] and k.posterior.identical(idata.posterior)
        assert kept_fit(k) is k
        back = read_fit(path, "/".join(key[:-1]))
        assert back.groups() == idata.groups()
        for group in idata.groups():
            a, b = back[group], idata[group]
            assert dict(a.sizes) == dict(b.sizes), group
            for name, var in b.variables.items():
                assert a[name].dtype == var.dtype or var.dtype.kind in "OU", (group, name)
                np.testing.assert_array_equal(a[name].values, var.values)


def test_the_sink_goes_to_the_workers():
    """The sink declares that fit_posterior may call it in its worker processes."""
    from bayesobs.fits.posterior import sink_in_workers

    assert sink_in_workers(PosteriorFiles(Path(".")))
    assert not sink_in_workers(lambda fits: fits)
    assert not sink_in_workers(None)


def test_only_the_kept_variants_draws_come_back(tmp_path):
    """With ``keep``, a kept variant's draws come back and any other's file: what
    ``fit --method posterior`` holds in memory while the workers write (issue 32)."""
    from bayesobs.fits.posterior import KEPT_VARIANTS, FitFile, kept_fit

    idata = _fit(0, 11)
    sink = PosteriorFiles(tmp_path, keep=KEPT_VARIANTS)
    (kept,) = sink([(("s", "t", "m", "base", "static"), idata)])
    (other,) = sink([(("s", "t", "m", "base", "kalman"), idata)])
    assert kept.groups() == ["posterior"] and kept.posterior.identical(idata.posterior)
    assert other == FitFile(tmp_path / "kalman__s__t__m__base.nc", "s/t/m/base")
    assert kept_fit(kept) is kept  # what the command's figures and the benchmark read
    back = kept_fit(other)
    assert back.groups() == idata.groups()
    np.testing.assert_array_equal(back.log_likelihood["y"], idata.log_likelihood["y"])
