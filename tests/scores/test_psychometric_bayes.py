"""Bayesian psychometric functions at psignifit 4's standard, checked against psignifit itself (issue 54)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import PSIGNIFIT_DEMO_2AFC

from bayesobs.cli import main
from bayesobs.scores.psychometric_bayes import fit_bayes

DEMO_2AFC = PSIGNIFIT_DEMO_2AFC
PSIGNIFIT = {"threshold": "threshold", "width": "width", "lapse": "lambda", "eta": "eta"}


def _overdispersed(rng, eta=0.25, n=40):
    """4AFC counts whose per-level probabilities vary (beta) around a known psychometric function."""
    from bayesobs.scores.psychometric import psi

    x = np.linspace(1.0, 9.0, 9)
    p = psi(x, 5.0, 4.0, 0.02, 0.25, "norm", "increasing")
    nu = 1 / eta**2 - 1
    k = rng.binomial(n, rng.beta(p * nu, (1 - p) * nu))
    return np.column_stack([x, k, np.full(len(x), n)])


def _psignifit(data, guess, sigmoid="norm"):
    psignifit = pytest.importorskip("psignifit")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # psignifit's own notes (bounds, pooling)
        return psignifit.psignifit(
            data, experiment_type=f"{round(1 / guess)}AFC", sigmoid=sigmoid, verbose=False
        )


def _step(ref, name: str) -> float:
    """One step of psignifit's fine grid for ``name`` (``Result.parameter_values``)."""
    return 1.01 * float(np.diff(ref.parameter_values[name]).max())


@pytest.mark.slow  # psignifit and our grid: ~10 s
@pytest.mark.parametrize("case", ["demo_2afc", "overdispersed_4afc"])
def test_estimates_and_credible_intervals_agree_with_psignifit(case):
    """Tolerances: MAP threshold and width within 1% of psignifit's; each 95% interval's ends
    within one step of psignifit's own grid for the parameter (the discretisation: both read
    the percentiles at grid points, and the grids' bounds differ a little)."""
    data, guess = (
        (DEMO_2AFC, 0.5)
        if case == "demo_2afc"
        else (_overdispersed(np.random.default_rng(4)), 0.25)
    )
    ours = fit_bayes(data[:, 0], data[:, 1], data[:, 2], guess, direction="increasing")
    ref = _psignifit(data, guess)
    for name, theirs in PSIGNIFIT.items():
        lo, hi = ref.confidence_intervals[theirs]["0.95"]
        tol = _step(ref, theirs)
        assert ours[f"{name}_lo"] == pytest.approx(lo, abs=tol), name
        assert ours[f"{name}_hi"] == pytest.approx(hi, abs=tol), name
    for name in ("threshold", "width"):
        assert ours[name] == pytest.approx(ref.parameter_estimate[name], rel=0.01), name
    if case == "overdispersed_4afc":  # both see the overdispersion the data were made with
        assert ours["eta_lo"] > 0.05 and ref.confidence_intervals["eta"]["0.95"][0] > 0.05


@pytest.mark.slow  # a decreasing function, as the perception paradigms' are: ~10 s
def test_a_decreasing_function_is_psignifits_fit_of_the_mirrored_levels_and_covers_the_truth():
    """Accuracy falling with the level is psignifit's rising fit of the levels mirrored (x -> -x)."""
    from bayesobs.scores.psychometric import psi

    rng = np.random.default_rng(7)
    x = np.arange(2.0, 26.0, 3.0)  # e.g. set sizes
    k = rng.binomial(60, psi(x, 12.0, 10.0, 0.03, 0.5, "norm", "decreasing"))
    ours = fit_bayes(x, k, np.full(len(x), 60), 0.5, direction="decreasing")
    ref = _psignifit(np.column_stack([-x, k, np.full(len(x), 60)])[::-1], 0.5)
    assert ours["threshold"] == pytest.approx(-ref.parameter_estimate["threshold"], rel=0.01)
    assert ours["width"] == pytest.approx(ref.parameter_estimate["width"], rel=0.02)
    # reading percentiles at grid points moves both ends down by up to a step; mirrored, the
    # move goes the other way: the ends agree within two steps
    lo, hi = ref.confidence_intervals["threshold"]["0.95"]
    assert ours["threshold_lo"] == pytest.approx(-hi, abs=2 * _step(ref, "threshold"))
    assert ours["threshold_hi"] == pytest.approx(-lo, abs=2 * _step(ref, "threshold"))
    assert ours["threshold_lo"] < 12.0 < ours["threshold_hi"]
    assert ours["width_lo"] < 10.0 < ours["width_hi"]


@pytest.mark.slow  # the whole command: ~8 s
def test_the_command_writes_the_table_and_figure_of_a_users_counts(tmp_path, capsys):
    pd.DataFrame(DEMO_2AFC, columns=["level", "correct", "total"]).to_csv(
        tmp_path / "counts.csv", index=False
    )
    out = tmp_path / "psy"
    assert (
        main(["psychometric", str(tmp_path / "counts.csv"), "--guess", "0.5", "--out", str(out)])
        == 0
    )
    table = pd.read_csv(out / "psychometric.csv")
    direct = fit_bayes(
        DEMO_2AFC[:, 0], DEMO_2AFC[:, 1], DEMO_2AFC[:, 2], 0.5, direction="increasing"
    )
    for name in ("threshold", "width", "lapse", "eta"):
        for s in ("", "_lo", "_hi"):
            assert table[f"{name}{s}"].iloc[0] == pytest.approx(
                direct[f"{name}{s}"], rel=1e-9, abs=1e-12
            )
    assert {"threshold_ml", "threshold_ml_lo", "lapse_ml"} <= set(table.columns)
    assert (out / "figures" / "psychometric.png").stat().st_size > 1000
    assert "threshold 0.004648 [0.004251, 0.004932]" in capsys.readouterr().out
    # trial rows (one per trial, correct 0/1) give the same fit as their counts
    rows = [(lv, int(i < k)) for lv, k, n in DEMO_2AFC for i in range(int(n))]
    pd.DataFrame(rows, columns=["level", "correct"]).to_csv(tmp_path / "trials.csv", index=False)
    assert (
        main(
            [
                "psychometric",
                str(tmp_path / "trials.csv"),
                "--guess",
                "0.5",
                "--out",
                str(tmp_path / "t"),
            ]
        )
        == 0
    )
    again = pd.read_csv(tmp_path / "t" / "psychometric.csv")
    assert again["threshold"].iloc[0] == pytest.approx(table["threshold"].iloc[0], rel=1e-9)


@pytest.mark.parametrize(
    "csv, args, message",
    [
        ("level,total\n1,10\n2,10\n3,10\n", [], "needs columns level, correct"),
        (
            "level,correct,total\n1,5,10\n2,x,10\n3,9,10\n",
            [],
            "column correct, line 3: not a number",
        ),
        ("level,correct,total\n1,5,10\n2,11,10\n3,9,10\n", [], "0 <= correct <= total"),
        (
            "level,correct,total\n1,5,10\n2,7,10\n3,9,10\n",
            ["--guess", "1.5"],
            "--guess must lie in [0, 1)",
        ),
        ("level,correct,total\n1,5,10\n2,7,10\n", [], "needs at least 3"),
        (
            "level,correct,total\n1,5,10\n2,7,10\n3,9,10\n",
            ["--guess", "0.5", "--by", "x"],
            "needs columns",
        ),
        (
            "level,correct,total\n1,5,10\n2,7,10\n3,9,10\n",
            ["--sigmoid", "norm"],
            "a table needs --guess",
        ),
    ],
)
def test_a_bad_table_is_one_line_and_exit_2_and_writes_nothing(
    tmp_path, capsys, csv, args, message
):
    (tmp_path / "t.csv").write_text(csv)
    argv = ["psychometric", str(tmp_path / "t.csv"), "--out", str(tmp_path / "o")]
    assert main([*argv, *(args or ["--guess", "0.5"])]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "o").exists()


@pytest.mark.slow  # a right/wrong paradigm's own levels (the table example, sim:chooser): ~15 s
def test_a_right_wrong_paradigms_levels_agree_with_psignifit(tmp_path):
    """The choice paradigm's accuracy by level (as `score` tabulates it), fitted by us and by
    psignifit (its rising fit of the mirrored levels): maxima within 2%, interval ends within
    two steps of psignifit's grid."""
    import subprocess
    import sys
    from pathlib import Path

    from bayesobs.scores.psychometric import psychometric_levels
    from bayesobs.trials import read_trials

    root = Path(__file__).resolve().parents[2]
    subprocess.run(
        [sys.executable, str(root / "tools" / "make_table_example.py"), str(tmp_path / "ex")],
        check=True,
    )
    argv = [
        "run",
        str(tmp_path / "ex" / "larger.toml"),
        "--subject",
        "sim:chooser",
        "--trials",
        "480",
    ]
    assert main([*argv, "--out", str(tmp_path / "run"), "--no-progress"]) == 0
    lv = psychometric_levels(read_trials([tmp_path / "run"]))
    x, k, n = (lv[c].to_numpy(float) for c in ("x", "k", "n"))
    ours = fit_bayes(x, k, n, 0.5, direction="decreasing")
    # the command on the experiment folder fits the same levels, at the paradigm's chance
    assert main(["psychometric", str(tmp_path / "run"), "--out", str(tmp_path / "psy")]) == 0
    table = pd.read_csv(tmp_path / "psy" / "psychometric.csv")
    assert table["threshold"].iloc[0] == pytest.approx(ours["threshold"], rel=1e-9)
    assert table["direction"].iloc[0] == "decreasing" and table["paradigm"].iloc[0] == "choice"
    ref = _psignifit(np.column_stack([-x, k, n])[::-1], 0.5)
    assert ours["threshold"] == pytest.approx(-ref.parameter_estimate["threshold"], rel=0.02)
    assert ours["width"] == pytest.approx(ref.parameter_estimate["width"], rel=0.02)
    for name, theirs in (("threshold", "threshold"), ("width", "width")):
        lo, hi = ref.confidence_intervals[theirs]["0.95"]
        ends = (-hi, -lo) if name == "threshold" else (lo, hi)
        assert ours[f"{name}_lo"] == pytest.approx(ends[0], abs=2 * _step(ref, theirs)), name
        assert ours[f"{name}_hi"] == pytest.approx(ends[1], abs=2 * _step(ref, theirs)), name
