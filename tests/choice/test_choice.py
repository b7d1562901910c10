"""Right/wrong tables (paradigm ``choice``, issue 52): accuracy by level and psychometric fits.

A simulated psychometric observer with a known threshold and width (``sim:chooser``: threshold
mid-levels, width the levels' span, lapse 0.02) is recovered by ``bayesobs score``'s
psychometric fit; a bad right/wrong table is one line, exit 2, nothing written.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import bayesobs
from bayesobs.choice.subject import p_right
from bayesobs.choice.tasks import TableChoice
from bayesobs.cli import main
from bayesobs.run.plan import load_spec, plan

SPEC = 'task = "table_choice"\nseed = 5\ntrials = 90\n[table]\npath = "tilt.csv"\nquestion = "Which way is the bar tilted?"\n'


def _table(folder: Path, answer=None) -> Path:
    rows = [
        {
            "level": lv,
            "text": f"a bar tilted {10 - lv} degrees {('left', 'right')[j % 2]}",
            "answer": answer or ("left", "right")[j % 2],
            "choices": "left|right",
        }
        for lv in range(1, 10)
        for j in range(6)
    ]
    pd.DataFrame(rows).to_csv(folder / "tilt.csv", index=False)
    (folder / "tilt.toml").write_text(SPEC)
    return folder / "tilt.toml"


def test_replies_are_read_as_one_of_the_choices(tmp_path):
    s = plan(load_spec(_table(tmp_path)), ["sim:chooser"])[0]
    stim, task = s.stimuli[0], s.task
    assert stim.prompt.endswith("Answer one of: left, right.") and stim.value in range(1, 10)
    gold, other = stim.params["gold"], {"left": "right", "right": "left"}[stim.params["gold"]]
    for reply, correct in [
        (gold, 1),
        (f" {gold.upper()}.", 1),
        (f"I think so.\nAnswer: {other}", 0),
    ]:
        row = task.record(stim, reply)
        assert row["valid"] and row["correct"] == correct and row["level"] == stim.value, reply
    for reply in ("left or right", "up", None):
        row = task.record(stim, reply)
        assert (
            not row["valid"]
            and row["correct"] is None
            and "none of the choices" in row["invalid_reason"]
        )


def test_an_answer_outside_its_choices_is_one_line_exit_2(tmp_path, capsys):
    spec = _table(tmp_path, answer="up")
    assert main(["run", str(spec), "--subject", "sim:chooser", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "row 1: answer 'up' is not one of two or more choices" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_the_psychometric_fit_recovers_the_simulated_observer(tmp_path):
    """Truth: threshold 5, width 8 (levels 1 to 9), lapse 0.02, guess 0.5; 1,080 trials."""
    spec = _table(tmp_path)
    out = tmp_path / "run"
    args = ["--subject", "sim:chooser", "--subject", "sim:random", "--runs", "12", "--no-progress"]
    assert main(["run", str(spec), *args, "--out", str(out)]) == 0
    s = tmp_path / "s"
    assert main(["score", str(out), "--out", str(s), "--bootstrap", "20", "--no-progress"]) == 0
    psy = pd.read_csv(s / "psychometric.csv").set_index("subject")
    fit = psy.loc["sim:chooser"]
    assert fit["paradigm"] == "choice" and fit["guess"] == 0.5 and fit["n_levels"] == 9
    assert fit["threshold_lo"] - 0.1 <= 5 <= fit["threshold_hi"] + 0.1
    assert fit["width_lo"] <= 8 <= fit["width_hi"] and fit["lapse_lo"] <= 0.02 <= fit["lapse_hi"]
    acc = pd.read_csv(s / "choice.csv")
    rand = acc[acc["subject"] == "sim:random"]
    assert rand["k"].sum() / rand["n"].sum() == pytest.approx(0.5, abs=0.06)  # chance
    chooser = acc[acc["subject"] == "sim:chooser"].set_index("level")
    truth = np.array([p_right(lv, (1.0, 9.0), 0.5) for lv in chooser.index])  # 0.956 ... 0.524
    se = np.sqrt(truth * (1 - truth) / chooser["n"])
    assert (np.abs(chooser["accuracy"] - truth) < 3 * se).all()  # every level within 3 SE
    t = bayesobs.read_trials(out)
    assert set(t["paradigm"]) == {"choice"} and TableChoice.worded()


def test_a_person_answers_a_right_wrong_table_in_serve(tmp_path):
    """``serve``: the choices are asked, a word outside them is refused, right and wrong are logged."""
    import json

    import httpx

    from bayesobs.web import ParticipantServer, running

    server = ParticipantServer(_table(tmp_path), tmp_path / "e", ["text"], ["base"], 4)
    with running(server) as url, httpx.Client(base_url=url) as c:
        c.post("/api/start", json={"consent": True, "pid": "p1"})
        t = c.get("/api/next").json()
        assert t["answer"] == "text" and "Answer one of: left, right." in t["question"]
        r = c.post("/api/answer", json={"id": t["id"], "response": "up"})
        assert r.status_code == 400 and "left, right" in r.json()["error"]
        said = []
        while not t["finished"]:
            said.append(("left", "Right")[len(said) % 2])
            t = c.post("/api/answer", json={"id": t["id"], "response": said[-1]}).json()
    rows = [json.loads(x) for x in (tmp_path / "e" / "trials.jsonl").read_text().splitlines()]
    assert [r["response_value"] for r in rows] == [s.lower() for s in said] and len(rows) == 4
    assert all(r["correct"] == int(r["response_value"] == r["gold"]) for r in rows)
    assert {r["paradigm"] for r in rows} == {"choice"}
