"""Right/wrong cells of an adaptive sweep (issue 53): placed levels where trials are independent,
the protocol's levels where the context is part of the experiment, the threshold stop, resume."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bayesobs.adaptive import AdaptiveOptions, adaptive_sweep
from bayesobs.cli import main
from bayesobs.errors import BayesobsInputError
from bayesobs.placed import placeable
from bayesobs.run.plan import load_spec, plan
from bayesobs.run.runner import sweep
from bayesobs.scores import psychometric_bayes

KEYS = ["subject", "task", "modality", "condition", "session", "run", "trial"]
SAME = [*KEYS, "seed", "set_size", "correct", "response", "distribution"]
RUNS, TRIALS = 4, 8
SPEC = """description = "tiny search"
task = "circle_sizes"
seed = 601
trials = 8
modalities = ["image"]
conditions = ["base", "context_short"]
[ablations]
context = 0
context_short = 3
[[sessions]]
name = "medium-cell"
range = [0, 40]
search = "medium"
answer = "cell"
"""


def _rows(folder: Path) -> pd.DataFrame:
    rows = [json.loads(line) for line in (folder / "trials.jsonl").read_text().splitlines()]
    return pd.DataFrame(rows)[SAME].sort_values(KEYS).reset_index(drop=True)


@pytest.fixture(scope="module")
def placed_folder(tmp_path_factory):
    mp = pytest.MonkeyPatch()  # the score's grid made small: the placement's cost, not its rule
    mp.setattr(psychometric_bayes, "COARSE", (16, 12, 4, 3))
    mp.setattr(psychometric_bayes, "FINE", (16, 12, 4, 3))
    tmp = tmp_path_factory.mktemp("placed")
    spec = tmp / "search.toml"
    spec.write_text(SPEC)
    sweep(spec, ["sim:serial"], tmp / "fixed", trials=TRIALS, runs=RUNS)
    options = AdaptiveOptions(place_width=0.01)  # never answered: every round up to the cap
    res = adaptive_sweep(spec, ["sim:serial"], tmp / "a", options, trials=TRIALS, runs=RUNS)
    yield spec, tmp, res, options
    mp.undo()


@pytest.mark.slow  # two sweeps of a search task and an adaptive one of three rounds
def test_independent_cells_ask_placed_levels_context_cells_the_protocols(placed_folder):
    _, tmp, res, _ = placed_folder
    fixed, adaptive = _rows(tmp / "fixed"), _rows(tmp / "a")
    assert len(res.rounds) == RUNS - 1  # 2 first runs, then one run per round up to the cap
    context = adaptive["condition"] == "context_short"
    # the context cell's trials are the fixed protocol's: the same set sizes in the same order
    pd.testing.assert_frame_equal(
        adaptive[context].reset_index(drop=True),
        fixed[fixed["condition"] == "context_short"].reset_index(drop=True),
    )
    base = adaptive[~context]
    first, later = base[base["run"] < 2], base[base["run"] >= 2]
    assert (first["distribution"] == "uniform").all() and (later["distribution"] == "placed").all()
    assert first["set_size"].tolist() == fixed.loc[fixed["run"] < 2, "set_size"].tolist()[:16]
    # placed levels gather where the accuracy falls (sim:serial: near its capacity of 8 and up)
    assert later["set_size"].std() < first["set_size"].std()
    stops = {s["cell"]: s for s in res.stops}
    assert stops["sim:serial/circle_sizes/image/base"]["reason"].startswith(
        "cap reached: threshold of medium-cell"
    )
    record = json.loads((tmp / "a" / "manifest.json").read_text())
    assert "QUEST+" in record["experiment"]["adaptive"]["placement"]
    assert record["experiment"]["adaptive"]["place_width"] == 0.01


@pytest.mark.slow  # a killed adaptive sweep resumed (one more round)
def test_killed_placed_sweep_resumes_to_the_same_levels(
    placed_folder, tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(psychometric_bayes, "COARSE", (16, 12, 4, 3))
    monkeypatch.setattr(psychometric_bayes, "FINE", (16, 12, 4, 3))
    spec, tmp, res, _ = placed_folder
    lines = (tmp / "a" / "trials.jsonl").read_bytes().splitlines(keepends=True)
    first = sum(1 for line in lines if json.loads(line)["run"] < 3)  # rounds 1 and 2
    killed = tmp_path / "killed"
    killed.mkdir()
    (killed / "manifest.json").write_bytes((tmp / "a" / "manifest.json").read_bytes())
    (killed / "trials.jsonl").write_bytes(b"".join(lines[: first + 2]))  # killed in round 3
    args = ["sweep", str(spec), "--subject", "sim:serial", "--out", str(killed), "--adaptive"]
    args += ["--place-width", "0.01", "--trials", str(TRIALS), "--runs", str(RUNS)]
    assert main([*args, "--no-progress"]) == 0
    assert "2 cell(s) stopped: cap reached" in capsys.readouterr().out
    assert json.loads((killed / "manifest.json").read_text())["adaptive"]["stops"] == res.stops
    pd.testing.assert_frame_equal(_rows(killed), _rows(tmp / "a"))
    assert np.isin(_rows(killed)["distribution"], ["uniform", "placed"]).all()


def test_place_width_is_checked():
    with pytest.raises(BayesobsInputError, match="place_width must be in"):
        AdaptiveOptions(place_width=0)


def test_place_width_is_one_line_without_adaptive_or_out_of_range(tmp_path, capsys):
    spec = tmp_path / "search.toml"
    spec.write_text(SPEC)
    args = ["sweep", str(spec), "--subject", "sim:serial", "--out", str(tmp_path / "x")]
    assert main([*args, "--place-width", "0.3"]) == 2
    assert main([*args, "--adaptive", "--place-width", "1.5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "bayesobs: error: --first-runs, --sign-level, --risk and --place-width set the rule of "
        "--adaptive; add it",
        "bayesobs: error: adaptive place_width must be in (0, 1], not 1.5",
    ]
    assert not (tmp_path / "x" / "trials.jsonl").exists()


@pytest.mark.slow  # a fixed and an adaptive sweep of a search task, each fitted
def test_design_prints_the_threshold_precision_of_both_designs(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(psychometric_bayes, "COARSE", (16, 12, 4, 3))
    monkeypatch.setattr(psychometric_bayes, "FINE", (16, 12, 4, 3))
    spec = tmp_path / "search.toml"
    spec.write_text(SPEC)
    out = tmp_path / "d"
    args = ["design", str(spec), "--out", str(out), "--runs", str(RUNS), "--trials", str(TRIALS)]
    assert main([*args, "--adaptive", "sim:serial"]) == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if "threshold 95% interval" in x]
    assert len(lines) == 2  # base and context_short: one right/wrong group each
    printed = sorted(float(x.split("interval ")[1].split(" wide")[0]) for x in lines)
    # the widths `bayesobs psychometric` reports for the adaptive sweep's folder
    assert (
        main(["psychometric", str(out / "sim-serial" / "adaptive"), "--out", str(tmp_path / "p")])
        == 0
    )
    table = pd.read_csv(tmp_path / "p" / "psychometric.csv")
    widths = sorted(table["threshold_hi"] - table["threshold_lo"])
    assert printed == pytest.approx(widths, rel=5e-3)  # 3 significant digits: within 0.5%


CHOICE = """task = "table_choice"
seed = 5
trials = 6
[table]
path = "tilt.csv"
question = "Which way is the bar tilted?"
{order}
[ablations]
context = {context}
"""


def _choice(folder: Path, order: str = "", context: int = 0) -> Path:
    """A right/wrong table of levels 1 to 15, three rows each, and its spec (trials independent)."""
    rows = [
        {"level": lv, "text": f"bar {lv} {j}", "answer": "left", "choices": "left|right"}
        for lv in range(1, 16)
        for j in range(3)
    ]
    pd.DataFrame(rows).to_csv(folder / "tilt.csv", index=False)
    (folder / "tilt.toml").write_text(CHOICE.format(order=order, context=context))
    return folder / "tilt.toml"


@pytest.mark.slow  # an adaptive sweep of a choice table, three rounds fitted
def test_a_choice_table_asks_rows_at_placed_levels(tmp_path, monkeypatch):
    monkeypatch.setattr(psychometric_bayes, "COARSE", (16, 12, 4, 3))
    monkeypatch.setattr(psychometric_bayes, "FINE", (16, 12, 4, 3))
    table = pd.read_csv(_choice(tmp_path).parent / "tilt.csv")
    options = AdaptiveOptions(place_width=0.01)  # never answered: every round up to the cap
    res = adaptive_sweep(_choice(tmp_path), ["sim:chooser"], tmp_path / "a", options, runs=RUNS)
    rows = pd.DataFrame(
        [json.loads(x) for x in (tmp_path / "a" / "trials.jsonl").read_text().splitlines()]
    )
    assert len(res.rounds) == RUNS - 1
    later = rows[rows["run"] >= 2]
    assert (later["distribution"] == "placed").all() and len(later) == 6 * (RUNS - 2)
    assert (rows.loc[rows["run"] < 2, "distribution"] == "uniform").all()
    # each placed trial is a row of the table at its level
    row = later["parse_params"].map(lambda p: json.loads(p)["row"])
    assert (table.loc[row, "level"].to_numpy() == later["level"].to_numpy()).all()


def test_a_choice_table_in_its_own_order_or_in_a_rolling_context_is_not_placed(tmp_path):
    def first(spec):
        return plan(load_spec(spec), ["sim:chooser"])[0]

    assert placeable(first(_choice(tmp_path)))
    assert not placeable(first(_choice(tmp_path, 'order = "table"')))
    assert not placeable(first(_choice(tmp_path, context=10)))  # earlier trials in the chat
