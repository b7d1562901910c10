"""Caps of issue 48 item 6: trials, runs, rows, columns and bootstrap replicates.

Each refusal is one ``bayesobs: error:`` line naming the cap and its environment
variable, before anything is allocated (the peak memory and time of each refused
command are measured in the issue's report, not here: no timed tests).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bayesobs.cli import main
from bayesobs.errors import BayesobsInputError

TASKS = Path(__file__).resolve().parents[1] / "tasks"


def _one_line(capsys, argv: list[str], *needles: str) -> str:
    """Run ``argv``; it must exit 2 with exactly one error line holding every needle."""
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith("bayesobs: error: "), err
    for n in needles:
        assert n in err, err
    return err


def _csv(path: Path, n: int = 40, extra: int = 0) -> Path:
    """``n`` rows of stimulus, response (and ``extra`` empty columns)."""
    rng = np.random.default_rng(1)
    s = rng.uniform(1, 5, n)
    r = s + rng.normal(0, 0.3, n)
    head = ",".join(["stimulus", "response", *(f"c{i}" for i in range(extra))])
    tail = "," * extra
    path.write_text(
        head
        + "\n"
        + "".join(f"{float(a)!r},{float(b)!r}{tail}\n" for a, b in zip(s, r, strict=True))
    )
    return path


# ------------------------------------------------------------------ planned trials (and runs)
def test_a_billion_trials_is_refused_before_planning(tmp_path, capsys):
    argv = ["run", "line_ratio", "--subject", "sim:bayesian", "--out", str(tmp_path / "o")]
    _one_line(capsys, [*argv, "--trials", "1000000000", "--dry-run"], "BAYESOBS_MAX_TRIALS")
    assert not (tmp_path / "o").exists()


def test_a_spec_of_a_hundred_million_runs_is_refused(tmp_path, capsys):
    spec = tmp_path / "lr.toml"
    text = (TASKS / "line_ratio.toml").read_text()
    assert "runs = 1 " in text
    spec.write_text(text.replace("runs = 1 ", "runs = 100000000 ", 1))
    argv = ["run", str(spec), "--subject", "sim:bayesian", "--out", str(tmp_path / "o")]
    _one_line(capsys, [*argv, "--dry-run"], "runs", "BAYESOBS_MAX_TRIALS")


def test_the_trials_cap_is_set_by_its_environment_variable(tmp_path, capsys, monkeypatch):
    argv = ["run", "line_ratio", "--subject", "sim:bayesian", "--out", str(tmp_path / "o")]
    argv += ["--modality", "text", "--no-cache"]
    monkeypatch.setenv("BAYESOBS_MAX_TRIALS", "30")  # line_ratio: 3 sessions
    _one_line(capsys, [*argv, "--trials", "11"], "33 trials", "cap of 30")
    assert main([*argv, "--trials", "10"]) == 0
    monkeypatch.setenv("BAYESOBS_MAX_TRIALS", "lots")
    _one_line(capsys, [*argv, "--trials", "10"], "BAYESOBS_MAX_TRIALS", "whole number")


def test_simulate_is_capped_too(tmp_path, capsys):
    argv = ["simulate", "--out", str(tmp_path / "t.csv"), "--subjects", "100000"]
    _one_line(capsys, [*argv, "--trials", "100000"], "BAYESOBS_MAX_TRIALS")


# ------------------------------------------------------------------ rows and columns
@pytest.mark.parametrize("kind", ["csv", "parquet", "jsonl"])
def test_rows_over_the_cap_are_refused(tmp_path, capsys, monkeypatch, kind):
    table = pd.read_csv(_csv(tmp_path / "t.csv", n=101))
    path = tmp_path / f"t.{kind}"
    if kind == "parquet":
        table.to_parquet(path)
    elif kind == "jsonl":
        table.to_json(path, orient="records", lines=True)
    monkeypatch.setenv("BAYESOBS_MAX_ROWS", "100")
    _one_line(capsys, ["fit", str(path), "--out", str(tmp_path / "o")], "BAYESOBS_MAX_ROWS")
    monkeypatch.setenv("BAYESOBS_MAX_ROWS", "101")
    assert main(["fit", str(path), "--out", str(tmp_path / "o")]) == 0


def test_files_together_over_the_rows_cap(tmp_path, capsys, monkeypatch):
    a, b = _csv(tmp_path / "a.csv", n=30), _csv(tmp_path / "b.csv", n=30)
    monkeypatch.setenv("BAYESOBS_MAX_ROWS", "50")
    _one_line(capsys, ["fit", str(a), str(b), "--out", str(tmp_path / "o")], "60 rows")


def test_a_csv_of_24000_empty_columns_is_refused_from_its_header(tmp_path, capsys):
    path = _csv(tmp_path / "wide.csv", extra=24_000)
    _one_line(capsys, ["fit", str(path), "--out", str(tmp_path / "o")], "BAYESOBS_MAX_COLUMNS")


def test_a_parquet_file_over_the_column_cap(tmp_path, capsys, monkeypatch):
    table = pd.read_csv(_csv(tmp_path / "t.csv", extra=20))
    table.to_parquet(tmp_path / "t.parquet")
    monkeypatch.setenv("BAYESOBS_MAX_COLUMNS", "21")
    argv = ["fit", str(tmp_path / "t.parquet"), "--out", str(tmp_path / "o")]
    _one_line(capsys, argv, "22 columns", "BAYESOBS_MAX_COLUMNS")


def test_normalize_trials_takes_the_columns_in_linear_time(monkeypatch):
    """Columns are not deleted one by one from the table (each deletion costs all the columns)."""
    from bayesobs.trials import normalize_trials

    deleted = []
    original = pd.DataFrame.__delitem__
    monkeypatch.setattr(
        pd.DataFrame, "__delitem__", lambda self, key: deleted.append(key) or original(self, key)
    )
    rng = np.random.default_rng(0)
    widths = {}
    for width in (5, 400):
        frame = pd.DataFrame({"stimulus": rng.uniform(1, 5, 40), "response": rng.uniform(1, 5, 40)})
        frame = pd.concat(
            [frame, pd.DataFrame(np.zeros((40, width)), columns=range(width))], axis=1
        )
        frame.columns = frame.columns.astype(str)
        deleted.clear()
        out = normalize_trials(frame)
        assert out.shape[1] >= width + 2
        widths[width] = len(deleted)
    assert widths[400] == widths[5], widths


# ------------------------------------------------------------------ bootstrap replicates
def test_a_trillion_bootstrap_replicates_are_refused(tmp_path, capsys):
    path = _csv(tmp_path / "t.csv")
    argv = ["fit", str(path), "--out", str(tmp_path / "o"), "--bootstrap", "1000000000000"]
    _one_line(capsys, argv, "--bootstrap", "BAYESOBS_MAX_BOOTSTRAP")
    assert not (tmp_path / "o").exists()
    argv = ["design", "line_ratio", "--out", str(tmp_path / "d"), "--bootstrap", "10000000"]
    _one_line(capsys, argv, "--bootstrap", "BAYESOBS_MAX_BOOTSTRAP")
    argv = ["report", str(path), "--out", str(tmp_path / "r"), "--bootstrap", "10000000"]
    _one_line(capsys, argv, "--bootstrap", "BAYESOBS_MAX_BOOTSTRAP")


def test_the_library_options_are_capped_too():
    from bayesobs.fits.fitoptions import FitOptions

    with pytest.raises(BayesobsInputError, match="BAYESOBS_MAX_BOOTSTRAP"):
        FitOptions(bootstrap=10**12)
    assert FitOptions(bootstrap=100_000).bootstrap == 100_000


# ------------------------------------------------------------------ the expression evaluator
@pytest.mark.parametrize("digits", ["2147483647", "-2147483647", "101"])
def test_round_digits_are_bounded(tmp_path, capsys, digits):
    from bayesobs.expr import ExpressionError, evaluate

    frame = pd.DataFrame({"stimulus": [1.23456, 2.5]})
    with pytest.raises(ExpressionError, match="digits must be from -100 to 100"):
        evaluate(f"round(stimulus, {digits})", frame)
    path = _csv(tmp_path / "t.csv")
    argv = ["fit", str(path), "--out", str(tmp_path / "o"), "--where"]
    _one_line(capsys, [*argv, f"round(stimulus, {digits}) > 1"], "digits")


def test_round_within_the_bound_is_numpy_round():
    from bayesobs.expr import evaluate

    frame = pd.DataFrame({"stimulus": [1.23456, 2.5e40, -7.5]})
    for d in (-100, -2, 0, 3, 100):
        got = evaluate(f"round(stimulus, {d})", frame).to_numpy()
        np.testing.assert_array_equal(got, np.round(frame["stimulus"].to_numpy(), d))


def test_an_integer_literal_beyond_float_range(tmp_path, capsys):
    path = _csv(tmp_path / "t.csv")
    big = "1" + "0" * 310
    argv = ["fit", str(path), "--out", str(tmp_path / "o"), "--where", f"stimulus < {big}"]
    _one_line(capsys, argv, "--where", "too large")
    # one that fits a float is read as one
    assert main([*argv[:-1], f"stimulus < 1{'0' * 300}"]) == 0
