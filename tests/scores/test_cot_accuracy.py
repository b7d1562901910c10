"""Issue 31 section 3: cot's effect on accuracy for the right/wrong paradigms (cot_accuracy.csv)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayesobs.cli import main
from bayesobs.scores.cot_accuracy import COLUMNS, cot_accuracy
from bayesobs.search.tasks import CELLS
from bayesobs.trials import normalize_trials

PLANTED = {"search": (0.55, 0.75), "perception": (0.40, 0.55)}  # accuracy in base, cot
N = 400  # trials per level and condition


def planted_trials(seed: int = 0, n: int = N) -> pd.DataFrame:
    """A searcher and a circuit reader whose accuracy under cot is planted higher at every level."""
    rng = np.random.default_rng(seed)
    N = n  # trials per level and condition here
    rows = []
    for cond in ("base", "cot"):
        p_search = PLANTED["search"][cond == "cot"]
        for size in (4, 8, 16):
            right = rng.uniform(size=N) < p_search
            target = rng.choice(CELLS, N)
            wrong = np.array([CELLS[(CELLS.index(c) + 1) % 4] for c in target])
            rows.append(
                pd.DataFrame(
                    {
                        "paradigm": "search",
                        "subject": "sim:searcher",
                        "task": "circle_sizes",
                        "search_condition": "small",
                        "condition": cond,
                        "modality": "image",
                        "session": "s",
                        "run": size,
                        "trial": np.arange(N),
                        "set_size": size,
                        "stimulus": size,
                        "response": right.astype(float),
                        "target_cell": target,
                        "response_cell": np.where(right, target, wrong),
                        "correct": right.astype(int),
                    }
                )
            )
        p_circ = PLANTED["perception"][cond == "cot"]
        for size in (4, 6, 8):
            right = (rng.uniform(size=N) < p_circ).astype(int)
            rows.append(
                pd.DataFrame(
                    {
                        "paradigm": "perception",
                        "subject": "sim:searcher",
                        "task": "circuits",
                        "variant": "wires",
                        "condition": cond,
                        "modality": "image",
                        "session": "p",
                        "run": size,
                        "trial": np.arange(N),
                        "problem_size": size,
                        "stimulus": size,
                        "response": right.astype(float),
                        "chance": 1 / size,
                        "correct": right,
                        "valid": True,
                        "gold": "1",
                    }
                )
            )
    return pd.concat(rows, ignore_index=True)


def test_the_planted_cot_shift_is_recovered_within_its_interval():
    table = cot_accuracy(normalize_trials(planted_trials()), seed=1)
    assert list(table.columns) == COLUMNS
    pooled = table[table["x"].isna()].set_index("paradigm")
    for paradigm, (base, cot) in PLANTED.items():
        r = pooled.loc[paradigm]
        assert r["n_base"] == r["n_cot"] == 3 * N
        assert r["delta_accuracy"] == pytest.approx(r["accuracy_cot"] - r["accuracy_base"])
        assert r["delta_lo"] <= cot - base <= r["delta_hi"], paradigm
        assert r["delta_lo"] > 0  # the interval excludes no effect
        # a 95% interval of a difference of two proportions over 3N trials each
        se = np.sqrt(base * (1 - base) / (3 * N) + cot * (1 - cot) / (3 * N))
        assert r["delta_hi"] - r["delta_lo"] == pytest.approx(2 * 1.96 * se, rel=0.15)
    levels = table[table["x"].notna()]
    assert sorted(levels.loc[levels["paradigm"] == "search", "x"]) == [4, 8, 16]
    assert (levels["level"].isin(["set_size", "problem_size"])).all()
    for r in levels.itertuples(index=False):
        base, cot = PLANTED[r.paradigm]
        assert abs(r.delta_accuracy - (cot - base)) < 0.12
        assert r.delta_lo < r.delta_accuracy < r.delta_hi


def test_no_cot_no_table():
    t = planted_trials()
    assert cot_accuracy(normalize_trials(t[t["condition"] == "base"])) is None


@pytest.mark.slow  # score and report end to end, with the search and perception figures
def test_score_writes_and_prints_the_shift_and_the_report_shows_it(tmp_path, capsys):
    path = tmp_path / "t.csv"
    planted_trials(n=40).to_csv(path, index=False)
    assert main(["score", str(path), "--out", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    assert "Reasoning (cot) against base" in out
    table = pd.read_csv(tmp_path / "s" / "cot_accuracy.csv")
    pooled = table[table["x"].isna()].set_index("paradigm")
    line = next(ln for ln in out.splitlines() if "circle_sizes" in ln and "[" in ln)
    d = pooled.loc["search"]
    assert f"{d['delta_accuracy']:+.2f} [{d['delta_lo']:+.2f}, {d['delta_hi']:+.2f}]" in line
    assert main(["report", str(tmp_path / "s"), "--out", str(tmp_path / "r")]) == 0
    page = (tmp_path / "r" / "index.html").read_text()
    assert "Reasoning (cot): accuracy on the right/wrong tasks" in page
    assert f"{d['delta_accuracy']:.3f}" in page
