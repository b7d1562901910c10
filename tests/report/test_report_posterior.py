"""The posterior writer's sink: each fit's InferenceData written to a netCDF-4 file (issue 32)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from bayesobs.report.posterior import PosteriorFiles


def _idata():
    import arviz as az

    rng = np.random.default_rng(0)
    chains, draws, obs = 4, 50, 30
    return az.from_dict(
        posterior={
            "w_prior": rng.uniform(size=(chains, draws)).astype(np.float32),
            "sigma": rng.gamma(2.0, size=(chains, draws)).astype(np.float32),
        },
        log_likelihood={"y": rng.normal(size=(chains, draws, obs)).astype(np.float32)},
        sample_stats={"diverging": rng.uniform(size=(chains, draws)) < 0.01},
        dims={"y": ["trial"]},
        coords={"trial": np.arange(obs)},
    )


def test_the_file_reads_back_as_arviz_own_writer_leaves_it(tmp_path):
    """PosteriorFiles writes through the netCDF-C library; the file reads back to the same
    arrays, dtypes, coordinates and attributes as ArviZ's default (h5netcdf) writer's."""
    import arviz as az

    idata = _idata()
    sink = PosteriorFiles(tmp_path)
    kept = sink(("P01", "lines/ratio", "text", "base", "static"), idata)
    path = tmp_path / "P01__lines_ratio__text__base__static.nc"
    assert path.is_file() and sorted(p.name for p in tmp_path.iterdir()) == [path.name]
    assert kept.groups() == ["posterior"]  # the draws alone stay in memory
    assert kept.posterior.identical(idata.posterior)
    ours = az.from_netcdf(path)
    idata.to_netcdf(tmp_path / "reference.nc", engine="h5netcdf")
    theirs = az.from_netcdf(tmp_path / "reference.nc")
    assert ours.groups() == theirs.groups() == idata.groups()
    for group in idata.groups():
        a, b = ours[group].load(), theirs[group].load()
        assert a.identical(b), group
        for name, var in idata[group].data_vars.items():
            assert a[name].dtype == var.dtype
            np.testing.assert_array_equal(a[name].values, var.values)


def test_the_sink_goes_to_the_workers():
    """The sink declares that fit_posterior may call it in its worker processes."""
    from bayesobs.fits.posterior import sink_in_workers

    assert sink_in_workers(PosteriorFiles(Path(".")))
    assert not sink_in_workers(lambda key, idata: idata)
    assert not sink_in_workers(None)


def test_only_the_kept_variants_draws_come_back(tmp_path):
    """With ``keep``, a kept variant's draws come back and any other's file path: what
    ``fit --method posterior`` holds in memory while the workers write (issue 32)."""
    import arviz as az

    from bayesobs.report.posterior import KEPT_VARIANTS, kept_fit

    idata = _idata()
    sink = PosteriorFiles(tmp_path, keep=KEPT_VARIANTS)
    kept = sink(("s", "t", "m", "base", "static"), idata)
    other = sink(("s", "t", "m", "base", "kalman"), idata)
    assert kept.groups() == ["posterior"] and kept.posterior.identical(idata.posterior)
    assert other == tmp_path / "s__t__m__base__kalman.nc"
    assert az.from_netcdf(other).posterior.identical(idata.posterior)
    assert kept_fit(kept) is kept  # what the command's figures and the benchmark read
    back = kept_fit(other)
    assert back.groups() == idata.groups() and back.log_likelihood.identical(idata.log_likelihood)


@pytest.mark.slow  # compiles a NumPyro sampler
def test_a_predictive_check_of_a_fit_not_kept_reads_it_back_from_its_file(tmp_path):
    """fit --method posterior keeps only the static draws in memory; the predictive-check
    figure of a best variant that is not static is drawn from the fit's .nc file."""
    from conftest import make_cell

    from bayesobs.cli import main

    df = make_cell(np.random.default_rng(3), "linear", {"w": 0.8, "b": 0.05, "sigma": 0.03})
    df.to_csv(tmp_path / "t.csv", index=False)
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
        "60",
        "--draws",
        "60",
        "--no-progress",
        "--variant",
        "linear",
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # short chains: diagnostics notes
        assert main(args) == 0
    nc = list((tmp_path / "o" / "posterior").glob("*__linear.nc"))
    figures = list((tmp_path / "o" / "figures").glob("ppc_*.png"))
    assert len(nc) == 1 and len(figures) == 1 and figures[0].stat().st_size > 1000


def _layout(path):
    """Every group's attributes, dimensions and variables (dtype, dims, attributes, storage)."""
    import netCDF4

    out = {}
    with netCDF4.Dataset(path) as nc:
        for name, group in nc.groups.items():
            out[name] = (
                {k: group.getncattr(k) for k in group.ncattrs()},
                [(d.name, len(d), d.isunlimited()) for d in group.dimensions.values()],
                [
                    (
                        v.name,
                        str(v.dtype),
                        v.dimensions,
                        repr({k: v.getncattr(k) for k in v.ncattrs()}),
                        v.filters(),
                        v.chunking(),
                    )
                    for v in group.variables.values()
                ],
            )
        assert not nc.variables and not nc.ncattrs()  # nothing at the root
    return out


@pytest.mark.parametrize("extra", [False, True])
def test_write_netcdf_writes_the_file_xarray_writes(tmp_path, extra, monkeypatch):
    """The one-pass writer against xarray's netcdf4 engine on a fit as fit_posterior builds
    it (float32 and float64 draws, string subjects, booleans): the same groups, dimensions,
    variables, dtypes, attributes and storage, read back identical; a variable with
    attributes of its own (``extra``) sends the file to xarray."""
    import arviz as az

    from bayesobs.fits.posterior import _inference_data
    from bayesobs.report.posterior import write_netcdf

    rng = np.random.default_rng(1)
    nat = {
        "w_prior": rng.uniform(size=(4, 50, 1)).astype(np.float32),
        "sigma": rng.gamma(2.0, size=(4, 50, 1)),
    }
    idata = _inference_data(nat, rng.normal(size=(4, 50, 30)), rng.uniform(size=(4, 50)) < 0.1,
                            [("P01", "lines/ratio", "text", "base")])  # fmt: skip
    if extra:
        idata.posterior["sigma"].attrs["units"] = "response SD"
    calls = []
    with monkeypatch.context() as m:  # which writer wrote the file
        m.setattr(type(idata), "to_netcdf", lambda self, *a, **k: calls.append(a))
        write_netcdf(tmp_path / "ours.nc", idata)
    if extra:
        assert len(calls) == 1
        idata.to_netcdf(tmp_path / "ours.nc", compress=False, engine="netcdf4")
    else:
        assert not calls
    idata.to_netcdf(tmp_path / "theirs.nc", compress=False, engine="netcdf4")
    assert _layout(tmp_path / "ours.nc") == _layout(tmp_path / "theirs.nc")
    ours, theirs = az.from_netcdf(tmp_path / "ours.nc"), az.from_netcdf(tmp_path / "theirs.nc")
    assert ours.groups() == theirs.groups() == idata.groups()
    for group in idata.groups():
        a, b = ours[group].load(), theirs[group].load()
        assert a.identical(b) and a.identical(idata[group]), group
        for name in a.variables:
            assert a[name].dtype == b[name].dtype == idata[group][name].dtype, name
    assert ours.posterior.subject.values.tolist() == ["P01/lines/ratio/text/base"]
    assert ours.sample_stats.diverging.dtype == bool
