"""Issue 47 items 6, 9, 13 and issue 49 item 5: outputs that read more than the data hold.

Ranks without a score, an ideal observer with the simulated subjects' noise beside people,
an empty fit that printed like a fit, sequential models on rows in no presentation order, and
a headline P(bayesian) that favoured observers without a prior.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayesobs.api import fit_result
from bayesobs.cli import main
from bayesobs.fits.observers.models import simulate
from bayesobs.leaderboard import board, leaderboard_text
from bayesobs.scores.evidence import factor_evidence_array


def people(n_subjects=3, n=40, seed=0, prompted=False) -> pd.DataFrame:
    """Base-condition duration reproductions (a static observer, w_prior 0.4), one run each."""
    rng = np.random.default_rng(seed)
    frames = []
    for s in range(n_subjects):
        x = rng.uniform(0.4, 1.6, n)
        y = simulate("static", {"w_prior": 0.4, "sigma": 0.12}, x, rng=rng)
        frame = pd.DataFrame(
            {"subject": f"P{s + 1}", "task": "duration", "trial": np.arange(n)}
            | {"stimulus": x, "response": y}
        )
        if prompted:  # rows `bayesobs run` logged: a model or simulated subject was prompted
            frame["prompt_id"] = "abc123"
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


# --- issue 47 item 6: no rank without a number ranked; no ideal observer with sim noise for people


def test_rows_without_s_are_unranked_and_say_why():
    bb = pd.DataFrame({"subject": ["10", "2", "1"], "A": [0.9, 0.7, 0.8], "S": [np.nan] * 3})
    header, rows = board(bb)
    assert header[:3] == ["rank", "subject", "A"]
    assert [r[0] for r in rows] == ["-"] * 3  # not 1, 2, 3 by subject id
    text = leaderboard_text(bb)
    assert "- = not ranked: no S to rank by" in " ".join(text.split())
    # with some S: those are ranked, the rest are not
    bb["S"] = [0.5, np.nan, 0.6]
    _, rows = board(bb)
    assert [(r[0], r[1]) for r in rows] == [("1", "1"), ("2", "10"), ("-", "2")]


def test_score_of_people_withholds_the_ideal_observer_and_ranks_nobody(tmp_path, capsys):
    t = people()
    t.to_csv(tmp_path / "t.csv", index=False)
    assert main(["score", str(tmp_path / "t.csv"), "--out", str(tmp_path / "s"), "--no-probe"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    bb = pd.read_csv(tmp_path / "s" / "bayesbench.csv").set_index("subject")
    assert bb.loc[["P1", "P2", "P3"], "A"].notna().all()
    # the ideal observer of the simulated subjects' noise is not a reference for people
    assert "reference:ideal" not in bb.index
    assert "reference:ideal withheld" in out and "simulated subjects' noise" in out
    assert "reference:random" in bb.index
    lines = [ln.split() for ln in capsys.readouterr().out.splitlines()]
    assert not any(ln[:1] in (["1"], ["2"], ["3"]) for ln in lines)
    missing = pd.read_csv(tmp_path / "s" / "missing.csv")
    assert (missing["subject"] == "reference:ideal").any()


def test_prompted_subjects_keep_the_ideal_observer(tmp_path, capsys):
    t = people(prompted=True)
    t.to_csv(tmp_path / "t.csv", index=False)
    assert main(["score", str(tmp_path / "t.csv"), "--out", str(tmp_path / "s"), "--no-probe"]) == 0
    bb = pd.read_csv(tmp_path / "s" / "bayesbench.csv").set_index("subject")
    assert np.isfinite(bb.loc["reference:ideal", "A"])
    assert "withheld" not in capsys.readouterr().out


def test_glasauer_shi_people_are_not_ranked_by_id_nor_set_beside_the_sim_ideal(
    shared_data, tmp_path, capsys
):
    """Glasauer & Shi in the base condition: A for each of 14 people, S for none."""
    csv = shared_data / "glasauer_shi_2021_vierordt" / "rep_randwalk_table.csv"
    args = ["score", str(csv), "--out", str(tmp_path / "s"), "--no-probe", "--bootstrap", "0"]
    args += ["--map", "stimulus=dur", "--map", "response=repDur", "--map", "subject=NSub"]
    args += ["--map", "trial=NT", "--map", "run=RandLevel", "--map", "task='duration'"]
    assert main([*args, "--missing-where", "valid == 0"]) == 0
    out = capsys.readouterr().out
    rows = [ln.split() for ln in out.splitlines() if ln.split()[1:2] and ln.split()[1].isdigit()]
    assert len(rows) == 14 and {r[0] for r in rows} == {"-"}
    bb = pd.read_csv(tmp_path / "s" / "bayesbench.csv").set_index("subject")
    assert "reference:ideal" not in bb.index and "reference:ideal withheld" in out


# --- issue 47 item 9: nothing fitted says so


def test_fit_of_no_observed_response_says_nothing_fitted(tmp_path, capsys):
    n = 120
    t = pd.DataFrame({"stimulus": np.linspace(0.1, 0.9, n), "response": np.nan})
    t.to_csv(tmp_path / "t.csv", index=False)
    assert main(["fit", str(tmp_path / "t.csv"), "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "0 observed responses: nothing fitted" in out
    assert "fitted 1 cell(s)" not in out
    assert "can only reach" not in out and ": ;" not in out


# --- issue 49 item 5: the headline leads with the veridical reading where the two disagree


def known_observers(seed=0) -> pd.DataFrame:
    """An unbiased observer (response = stimulus + noise) and a linear one (w 0.8), 3 runs each."""
    rng = np.random.default_rng(seed)
    frames = []
    for name, p in (
        ("unbiased", {"w": 1.0, "b": 0.0, "sigma": 0.03}),
        ("linear", {"w": 0.8, "b": 0.05, "sigma": 0.03}),
    ):
        for run in range(3):
            x = rng.uniform(0.1, 0.9, 60)
            y = simulate("linear", p, x, rng=rng)
            frames.append(
                pd.DataFrame(
                    {"subject": name, "task": "line_ratio", "run": run, "trial": np.arange(60)}
                    | {"stimulus": x, "response": y}
                )
            )
    return pd.concat(frames, ignore_index=True)


def test_null_observers_headline_leads_with_p_veridical(tmp_path, capsys):
    t = known_observers()
    t.to_csv(tmp_path / "t.csv", index=False)
    assert main(["fit", str(tmp_path / "t.csv"), "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    ev = pd.read_csv(tmp_path / "o" / "evidence.csv")
    bayes = ev[ev["factor"] == "bayesian"].set_index("subject")
    # the paper's p is kept: METHOD Part I's AIC weights of the ten variants
    fits = pd.read_csv(tmp_path / "o" / "fits.csv")
    from bayesobs.fits.observers.variants import VARIANT_NAMES

    aic = fits[fits["subject"] == "unbiased"].set_index("variant").loc[list(VARIANT_NAMES), "aic"]
    assert bayes.loc["unbiased", "p"] == pytest.approx(factor_evidence_array(aic.to_numpy())[0])
    # the known truth: no prior; the paper's p says Bayesian, p_veridical does not
    assert bayes.loc["unbiased", "p"] > 0.5 > bayes.loc["unbiased", "p_veridical"]
    notes = [ln for ln in out.splitlines() if ln.startswith("note:")]
    lead = " ".join(" ".join(out.split("note:")[1:2]).split())
    assert notes and "p_veridical" in notes[0], notes
    assert "1 of 2 cell(s)" in lead and "different sides of 0.5" in lead
    assert "unbiased" in lead and "veridical observer" in lead
    # mean P(bayesian) leads with p_veridical, the paper's p beside it
    pv, p = bayes["p_veridical"].mean(), bayes["p"].mean()
    assert f"mean P(bayesian) {pv:.3f} with the veridical observers compared" in lead
    assert f"{p:.3f} by the paper's p" in lead


def test_score_leaderboard_and_report_lead_with_the_veridical_reading(tmp_path, capsys):
    from bayesobs.report import build_report

    t = known_observers()
    t.to_csv(tmp_path / "t.csv", index=False)
    args = ["score", str(tmp_path / "t.csv"), "--out", str(tmp_path / "s"), "--no-probe"]
    assert main([*args, "--bootstrap", "0"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    board_end = out.index("tables ->")
    assert "different sides of 0.5" in out[:board_end]
    page = build_report([tmp_path / "s"], tmp_path / "r", bootstrap=0).read_text()
    lead = page.index("different sides of 0.5")
    assert page.index("<h2>Leaderboard</h2>") < lead < page.index("<h2>Factor evidence")


def test_agreeing_cells_get_no_lead_line():
    t = known_observers()
    ev = fit_result(t[t["subject"] == "linear"]).evidence
    from bayesobs.scores.evidence import veridical_lead

    assert veridical_lead(ev) == []
