"""Issue 31 section 4: the report shows SBC and the prior predictive check when they are there."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pandas as pd
import pytest

from bayesobs.calibration import rank_uniformity, write_calibration
from bayesobs.cli import main
from bayesobs.errors import BayesobsInputError
from bayesobs.report.html import build_report


def tiny_trials(path):
    rng = np.random.default_rng(0)
    rows = []
    for si, (lo, hi) in enumerate(((0.1, 0.5), (0.3, 0.7), (0.5, 0.9))):
        x = rng.uniform(lo, hi, 12)
        y = 0.7 * x + 0.3 * x.mean() + 0.03 * rng.standard_normal(12)
        rows.append(
            pd.DataFrame(
                {
                    "subject": "s1",
                    "task": "line_ratio",
                    "session": f"s{si}",
                    "trial": np.arange(12),
                    "stimulus": x,
                    "response": y,
                }
            )
        )
    pd.concat(rows).to_csv(path, index=False)


@pytest.fixture(scope="module")
def score_dir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cal")
    tiny_trials(tmp / "t.csv")
    assert main(["score", str(tmp / "t.csv"), "--out", str(tmp / "s"), "--bootstrap", "0"]) == 0
    return tmp / "s"


def calibration_folder(out):
    """sbc.csv and the rank histograms of two parameters: one uniform, one not."""
    rng = np.random.default_rng(1)
    draws, n = 99, 200
    ranks = {"w_prior": rng.integers(0, draws + 1, n), "sigma": rng.integers(0, 20, n)}
    rows, long = [], []
    for param, r in ranks.items():
        chi2, p = rank_uniformity(r, draws, 10)
        rows.append({"variant": "static", "parameter": param, "n_sims": n, "draws": draws,
                     "bins": 10, "chi2": chi2, "p": p})  # fmt: skip
        long.append(pd.DataFrame({"variant": "static", "parameter": param,
                                  "sim": np.arange(n), "rank": r}))  # fmt: skip
    table = pd.DataFrame(rows)
    table["threshold"] = 0.05 / len(table)
    table["uniform"] = table["p"] >= table["threshold"]
    out.mkdir(parents=True, exist_ok=True)
    write_calibration(out, table, pd.concat(long, ignore_index=True))
    return table


def test_report_shows_sbc_and_prior_predictive_from_a_given_folder(score_dir, tmp_path):
    cal = tmp_path / "cal"
    table = calibration_folder(cal)
    pd.DataFrame(
        {
            "subject": ["s1", "s1"],
            "task": "line_ratio",
            "modality": "text",
            "condition": "base",
            "variant": ["static", "linear"],
            "sim_min_q01": [-0.5, 0.2],
            "sim_max_q99": [1.5, 0.6],
            "observed_min": [0.1, 0.1],
            "observed_max": [0.9, 0.9],
            "covers": [True, False],
        }
    ).to_csv(cal / "prior_predictive.csv", index=False)
    index = build_report([score_dir, cal], tmp_path / "r", bootstrap=0)
    page = index.read_text()
    assert "<h2>Posterior calibration</h2>" in page
    assert "1 of 2 parameter(s) pass" in page
    assert "threshold = 0.025" in page
    for r in table.itertuples(index=False):
        assert f"{r.p:.4f}" in page and f"{r.chi2:.4f}" in page
    cells = re.findall(r"<td>(pass|fail)</td>", page)
    assert cells == ["pass", "fail"]
    assert (tmp_path / "r" / "figures" / "sbc_ranks.png").is_file()
    assert 'src="figures/sbc_ranks.png"' in page
    assert "1 of 2 (cell, variant) fit(s) cover" in page and "not covered: linear" in page


def test_calibration_found_in_the_score_folder_and_drawn_from_the_ranks(score_dir, tmp_path):
    folder = tmp_path / "s"
    shutil.copytree(score_dir, folder)
    calibration_folder(folder)
    (folder / "figures" / "sbc_ranks.png").unlink()  # drawn again from sbc_ranks.csv
    page = build_report([folder], tmp_path / "r", bootstrap=0).read_text()
    assert "Simulation-based calibration" in page
    assert (tmp_path / "r" / "figures" / "sbc_ranks.png").is_file()
    assert "Prior predictive check" not in page


def test_without_calibration_output_no_section_and_no_error(score_dir, tmp_path):
    page = build_report([score_dir], tmp_path / "r", bootstrap=0).read_text()
    assert "Posterior calibration" not in page


def test_a_broken_sbc_csv_is_one_clear_error(score_dir, tmp_path, capsys):
    cal = tmp_path / "cal"
    cal.mkdir()
    (cal / "sbc.csv").write_text("variant,p\nstatic,0.5\n")
    with pytest.raises(BayesobsInputError, match="no column 'parameter'"):
        build_report([score_dir, cal], tmp_path / "r", bootstrap=0)
    assert main(["report", str(score_dir), str(cal), "--out", str(tmp_path / "r2")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "sbc.csv" in err[0]
