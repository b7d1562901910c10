"""``bayesobs compare-trials`` (issue 54): error consistency and paired correlations of two tables.

Error consistency is checked against Geirhos et al.'s (2020) formula written out here, the
correlations against pandas' ``.corr()`` on the paired rows, and the w_prior difference
against simulated static observers with known w_prior.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import bayesobs
from bayesobs.api import predictions
from bayesobs.cli import main
from bayesobs.fits.observers import simulate

KEYS = ["task", "modality", "condition", "session", "run", "trial"]


def _search(rng, subject: str, correct) -> pd.DataFrame:
    n = len(correct)
    sizes = np.random.default_rng(1).integers(3, 9, n)  # the same trials on both sides
    return pd.DataFrame(
        dict(
            subject=subject,
            task="two_among_five",
            modality="image",
            condition="base",
            session="s",
            run=0,
            trial=range(n),
            stimulus=sizes,
            response=0.0,
            set_size=sizes,
            correct=correct,
            paradigm="search",
        )
    )


def _magnitude(subject: str, w_prior: float, seed: int, runs: int = 6) -> pd.DataFrame:
    """A static observer with a known w_prior on one shared sequence (2 sessions x ``runs`` runs)."""
    x_rng, rng, parts = np.random.default_rng(0), np.random.default_rng(seed), []
    for session, (lo, hi) in (("short", (0.1, 0.5)), ("long", (0.5, 0.9))):
        for r in range(runs):
            x = x_rng.uniform(lo, hi, 20)
            y = simulate("static", {"w_prior": w_prior, "sigma": 0.03}, x, rng=rng)
            parts.append(
                pd.DataFrame(
                    dict(
                        subject=subject,
                        task="line_ratio",
                        modality="text",
                        condition="base",
                        session=session,
                        run=r,
                        trial=range(20),
                        stimulus=x,
                        response=y,
                        range_low=lo,
                        range_high=hi,
                    )
                )
            )
    return pd.concat(parts, ignore_index=True)


def _compare(tmp_path, a: pd.DataFrame, b: pd.DataFrame, replicates: int = 40) -> pd.DataFrame:
    a.to_csv(tmp_path / "a.csv", index=False)
    b.to_csv(tmp_path / "b.csv", index=False)
    out = tmp_path / "out"
    args = [str(tmp_path / "a.csv"), str(tmp_path / "b.csv"), "--out", str(out)]
    assert main(["compare-trials", *args, "--bootstrap", str(replicates)]) == 0
    return pd.read_csv(out / "agreement.csv")


def test_error_consistency_equals_the_direct_formula(tmp_path):
    rng = np.random.default_rng(3)
    right = rng.random(80) < 0.7
    other = np.where(rng.random(80) < 0.6, right, rng.random(80) < 0.5)  # agrees beyond chance
    row = _compare(tmp_path, _search(rng, "person", right), _search(rng, "model", other)).iloc[0]
    # Geirhos et al. (2020), from the two tables directly
    c_obs = np.mean(right == other)
    p1, p2 = right.mean(), other.mean()
    c_exp = p1 * p2 + (1 - p1) * (1 - p2)
    assert row["kind"] == "right/wrong" and row["n_pairs"] == 80
    assert row["kappa"] == pytest.approx((c_obs - c_exp) / (1 - c_exp), abs=1e-12)
    assert row["kappa_lo"] < row["kappa"] < row["kappa_hi"]


def test_magnitude_correlations_equal_pandas_and_w_prior_difference_is_recovered(tmp_path):
    a, b = _magnitude("person", 0.6, 1), _magnitude("model", 0.1, 2)
    row = _compare(tmp_path, a, b, replicates=10).iloc[0]
    paired = a.merge(b, on=KEYS, suffixes=("_a", "_b"))
    assert row["n_pairs"] == len(paired) == 240 and row["n_runs"] == 12
    assert row["r_response"] == pytest.approx(paired["response_a"].corr(paired["response_b"]))
    # residuals after each side's lowest-AIC variant, from the public fit and predictions
    resid, w = {}, {}
    for s, t in (("a", a), ("b", b)):
        fits, _ = bayesobs.fit(t)
        w[s] = json.loads(fits.loc[fits["variant"] == "static", "params"].iloc[0])["w_prior"]
        best = fits.loc[fits["aic"].idxmin(), "variant"]
        p = predictions(t, fits, variants=(best,))
        resid[s] = p["response"] - p[f"pred_{best}"]
        assert row[f"best_{s}"] == best
    assert row["r_residual"] == pytest.approx(resid["a"].corr(resid["b"]), abs=1e-9)
    assert row["d_w_prior"] == pytest.approx(w["a"] - w["b"], abs=1e-6)  # the package's fits
    assert row["d_w_prior"] == pytest.approx(0.5, abs=0.1)  # 0.6 - 0.1, simulated
    assert row["d_w_prior_lo"] < row["d_w_prior"] < row["d_w_prior_hi"]
    assert row["r_response_lo"] <= row["r_response"] <= row["r_response_hi"]
    assert 0 <= row["kalman_gain_a"] <= 1 and 0 <= row["kalman_gain_b"] <= 1


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"task": "ellipse_ratio"}, "tasks differ"),
        ({"session": "_other"}, "sessions differ"),
        ({"seed": 9}, "seeds differ"),
        ({"stimulus": 0.99}, "different stimuli"),
    ],
)
def test_nothing_pairs_is_one_line_naming_what_differs(tmp_path, capsys, change, named):
    a, b = _magnitude("person", 0.6, 1, runs=1), _magnitude("model", 0.1, 2, runs=1)
    a["seed"] = b["seed"] = 5
    b = b.assign(**{k: b[k] + v if k == "session" else v for k, v in change.items()})
    a.to_csv(tmp_path / "a.csv", index=False)
    b.to_csv(tmp_path / "b.csv", index=False)
    assert (
        main(
            [
                "compare-trials",
                str(tmp_path / "a.csv"),
                str(tmp_path / "b.csv"),
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert named in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o" / "agreement.csv").exists()


@pytest.mark.slow
def test_a_member_of_the_population_is_within_the_human_range_and_a_linear_observer_is_not(
    tmp_path, capsys
):
    pytest.importorskip("numpyro")
    rng = np.random.default_rng(4)
    ws = 1 / (1 + np.exp(-(0.0 + 0.3 * rng.standard_normal(6))))  # logit w ~ Normal(0, 0.3)
    people = pd.concat([_magnitude(f"p{i}", w, i, runs=2) for i, w in enumerate(ws)])
    member = _magnitude("member", 0.5, 10, runs=2)  # drawn as a person would be
    copier = _magnitude("linear", 0.5, 11, runs=2)
    copier["response"] = copier["stimulus"] + np.random.default_rng(1).normal(0, 0.03, len(copier))
    people.to_csv(tmp_path / "people.csv", index=False)
    pd.concat([member, copier]).to_csv(tmp_path / "models.csv", index=False)
    argv = ["compare-trials", str(tmp_path / "people.csv"), str(tmp_path / "models.csv")]
    assert main([*argv, "--out", str(tmp_path / "o"), "--bootstrap", "2", "--human-range"]) == 0
    table = pd.read_csv(tmp_path / "o" / "human_range.csv").set_index("subject")
    assert table.loc["member", "within"] and not table.loc["linear", "within"]
    assert (table["n_people"] == 6).all() and table["people"].iat[0] == "p0;p1;p2;p3;p4;p5"
    assert table.loc["member", "person_lo"] < 0.5 < table.loc["member", "person_hi"]
    out = capsys.readouterr().out
    assert "member on line_ratio/text/base" in out and "within the range" in out
    assert "outside the range" in out and "p0, p1, p2, p3, p4, p5" in out
