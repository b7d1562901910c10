"""Cross-condition transfer (issue 28 item 9): fit on condition A, predict condition B.

The reference is independent of the engine and of :mod:`bayesobs.fits.transfer`:
``tests/naive.py`` (Python-loop filter, ``scipy.stats.norm.logpdf``) and
``numpy.polyfit`` for the slopes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from naive import naive_loglik, naive_mean

import bayesobs
from bayesobs.cli import main
from bayesobs.fits.fitting import decode_params
from bayesobs.fits.observers import simulate
from bayesobs.fits.transfer import COLUMNS, transfer_table
from bayesobs.trials import normalize_trials

GAIN = ("kalman_gain", "kalman_log_gain", "static_gain", "static_log_gain")


def _kalman_observer(seed=0, n_subjects=6, rho=0.3, sigma=0.04):
    """A plain Kalman observer: a random-walk condition and an i.i.d. condition, 3 runs each."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(n_subjects):
        for cond in ("walk", "iid"):
            for r in range(3):
                if cond == "walk":
                    x = np.clip(0.5 + np.cumsum(rng.normal(0, 0.03, 80)), 0.1, 0.9)
                else:
                    x = rng.uniform(0.1, 0.9, 80)
                y = simulate("kalman", {"rho": rho, "sigma": sigma}, x, None, rng=rng)
                rows.append(
                    pd.DataFrame(
                        {
                            "subject": f"s{s}",
                            "condition": cond,
                            "session": f"r{r}",
                            "stimulus": x,
                            "response": y,
                        }
                    )
                )
    return pd.concat(rows, ignore_index=True)


@pytest.fixture(scope="module")
def observer():
    df = _kalman_observer()
    fits, _ = bayesobs.fit(df)
    return df, fits


@pytest.mark.parametrize(("source", "target"), [("walk", "iid"), ("iid", "walk")])
def test_plain_kalman_transfers_and_its_gain_twins_do_worse(observer, source, target):
    df, fits = observer
    tab = transfer_table(normalize_trials(df), fits, source, target)
    assert list(tab.columns) == list(COLUMNS)
    assert len(tab) == 6 * 10
    k = tab[tab["variant"] == "kalman"]
    # the true model's parameters from A predict B's slope (within 0.06 in every cell)
    assert (k["slope_error"].abs() < 0.06).all(), k[["subject", "slope_error"]]
    ll = tab.groupby("variant")["loglik_target"].sum()
    for v in GAIN:  # every gain variant predicts B's responses less well
        assert ll[v] < ll["kalman"], (v, ll[v], ll["kalman"])
    # the static observer, fitted on A, misses B's slope by far
    st = tab[tab["variant"] == "static"]
    assert st["slope_error"].abs().median() > 0.2


def test_transfer_numbers_match_an_independent_computation(observer):
    df, fits = observer
    tab = transfer_table(normalize_trials(df), fits, "walk", "iid")
    a = df[(df["subject"] == "s2") & (df["condition"] == "walk")]
    b = df[(df["subject"] == "s2") & (df["condition"] == "iid")]
    x, y, run = b["stimulus"].to_numpy(), b["response"].to_numpy(), b["session"].to_numpy()
    eps = 1e-3 * a["stimulus"].max()  # A's log offset
    observed = np.polyfit(x, y, 1)[0]
    for name in ("kalman", "kalman_log_gain", "static", "linear_log"):
        row = tab[(tab["subject"] == "s2") & (tab["variant"] == name)].iloc[0]
        fit = fits[
            (fits["subject"] == "s2") & (fits["condition"] == "walk") & (fits["variant"] == name)
        ]
        p = decode_params(fit["params"].iat[0])
        m = naive_mean(name, p, x, run, eps)
        pred = np.exp(m) - eps if "_log" in name else m
        assert row["slope_observed"] == pytest.approx(observed, rel=1e-9)
        assert row["slope_predicted"] == pytest.approx(np.polyfit(x, pred, 1)[0], rel=1e-9)
        assert row["slope_error"] == pytest.approx(row["slope_predicted"] - observed, abs=1e-12)
        ll = naive_loglik(name, p, x, y, run, eps)
        assert row["loglik_target"] == pytest.approx(ll, rel=1e-9)
        assert row["aic_source"] == pytest.approx(fit["aic"].iat[0], rel=1e-12)
        assert row["n_source"] == 240 and row["n_target"] == 240


def test_cli_writes_transfer_csv(tmp_path, capsys):
    path = tmp_path / "t.csv"
    _kalman_observer(n_subjects=2).to_csv(path, index=False)
    out = tmp_path / "f"
    assert main(["fit", str(path), "--transfer", "walk:iid", "--out", str(out)]) == 0
    tab = pd.read_csv(out / "transfer.csv")
    assert list(tab.columns) == list(COLUMNS)
    assert set(tab["source"]) == {"walk"} and set(tab["target"]) == {"iid"}
    assert len(tab) == 20
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("transfer walk -> iid: 2 cell(s)") and "transfer.csv" in line


@pytest.mark.parametrize(
    ("spec", "extra", "message"),
    [
        ("walk", [], "--transfer walk: give two conditions as SOURCE:TARGET"),
        ("walk:", [], "give two conditions as SOURCE:TARGET"),
        ("walk:walk", [], "source and target are the same condition"),
        ("walk:long", [], "no condition 'long' in the trials (conditions: iid, walk)"),
        ("walk:iid", ["--interleaved", "session"], "--transfer with --interleaved"),
    ],
)
def test_bad_transfer_spec_is_one_line_exit_2(tmp_path, capsys, spec, extra, message):
    path = tmp_path / "t.csv"
    _kalman_observer(n_subjects=1).to_csv(path, index=False)
    out = tmp_path / "f"
    assert main(["fit", str(path), "--transfer", spec, *extra, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (out / "transfer.csv").exists()
