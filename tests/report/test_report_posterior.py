"""What ``fit --method posterior`` writes: the predictive-check figures read fits back from their files."""

from __future__ import annotations

import warnings

import numpy as np
import pytest


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
    nc = list((tmp_path / "o" / "posterior").glob("linear__*.nc"))
    figures = list((tmp_path / "o" / "figures").glob("ppc_*.png"))
    assert len(nc) == 1 and len(figures) == 1 and figures[0].stat().st_size > 1000
