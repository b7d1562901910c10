"""The worded tasks in the jsPsych export (issue 52): asked as ``serve`` asks them, read as it reads them.

Fast tests check each paradigm's exported trial list and read back the data the page
writes (a trial's ``data`` with the form's answer, built here as the page builds it) against
the rows ``serve`` logs for the same answers.  The Chromium tests (slow) answer the built
bundle in a browser, one at phone width.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pandas as pd
import pytest
from conftest import chromium_browser

import bayesobs
from bayesobs.cli import main
from bayesobs.stimuli import TASKS
from bayesobs.stimuli.base import Stimulus, choice_key
from bayesobs.tunnel.subject import grid_from_text
from bayesobs.web import ParticipantServer, running

ROOT = Path(__file__).resolve().parents[2]
NPM = shutil.which("npm")
HUNT = """\
task = "scavenger_hunt"
seed = 23
trials = 2
modalities = ["text"]
conditions = ["base"]

[[sessions]]
name = "decomposed"
range = [2, 4]
variant = "decomposed"

[ablations]
context = 0
"""
# a paradigm each: search (taps: cells and points), Tunnel Vision (words; two images), Percept-V
SPECS = {
    "two_among_five": ["--trials", "1"],
    "object_reid": ["--trials", "2"],
    "circuits": ["--trials", "2"],
    "percept_v_small": ["--trials", "4"],
}
# the columns a worded trial's answer gives (``Task.record``), compared with serve's rows
ANSWER_COLUMNS = ("response", "valid", "correct", "raw_response", "stimulus_id", "gold")


def _blocks(out: Path) -> list[list[dict]]:
    js = (out / "experiment.js").read_text()
    return json.loads(re.search(r"const BLOCKS = (\[.*?\n\]);", js, re.S).group(1))


def _export(spec: Path, out: Path, *args: str) -> list[list[dict]]:
    argv = ["export", "jspsych", str(spec), "--out", str(out), "--order", "fixed", *args]
    assert main(argv) == 0
    return _blocks(out)


def _answer(task, stim: Stimulus, others=(), wrong: bool = False) -> dict:
    """What a person sends: a tap on (or beside) the target, else the right answer (or another
    trial's right answer of the same format that is wrong here: readable, scored wrong)."""
    p = stim.params
    if task.tap_area(stim) is not None:
        x = p["x"][0] + (150 if wrong and p["x"][0] < 200 else -150 if wrong else 0)
        return {"x": x, "y": p["y"][0], "display_w": 345, "display_h": 345}
    right = task.human_answer(stim)
    if wrong:
        same = [task.human_answer(o) for o in others if o.params["format"] == p["format"]]
        choices = list(task.answer_choices(stim) or ()) + same
        other = [c for c in choices if choice_key(c) != choice_key(right)]
        return {"response": other[0] if other else right}
    return {"response": right}


def _page_rows(blocks, answers, pid="p1") -> list[dict]:
    """The data rows the page writes: each trial's data, the asked step's, the form's answer."""
    rows, last = [], None
    for t, said in zip([t for b in blocks for t in b], answers, strict=False):
        data = dict(t["data"])
        if t.get("follow"):  # the step the previous answer picks (worded.js: preamble)
            f = t["follow"][last]
            stim = {**data["bayesobs_stimulus"], **f["data"]["bayesobs_stimulus"]}
            data.update(f["data"], bayesobs_stimulus=stim)
        if "response" in said:
            last = choice_key(said["response"])
        form = {k: str(v) for k, v in said.items()}  # a form's fields are text
        rows.append({**data, "trial_type": "survey-html-form", "response": form, "rt": 900})
        rows[-1]["subject"] = pid
    return rows


def _values(col: pd.Series) -> list:
    """A column's values, a missing one as None (NaN is never equal to itself)."""
    return [None if pd.isna(v) else v for v in col.astype(object)]


def _served(spec: Path, folder: Path, answers, args: dict) -> pd.DataFrame:
    server = ParticipantServer(spec, folder, order="fixed", **args)
    with running(server) as url, httpx.Client(base_url=url) as c:
        assert c.post("/api/start", json={"consent": True, "pid": "p1"}).status_code == 200
        t = c.get("/api/next").json()
        for said in answers:
            t = c.post("/api/answer", json={"id": t["id"], **said}).json()
    return bayesobs.read_trials(folder)


@pytest.mark.parametrize("name", list(SPECS))
def test_the_export_lists_each_worded_trial_as_serve_asks_it(name, tmp_path):
    """Each trial: the answer kind, the person's question and the stimulus serve asks."""
    spec = ROOT / "tasks" / f"{name}.toml"
    blocks = _export(spec, tmp_path / "x", *SPECS[name])
    server = ParticipantServer(spec, tmp_path / "e", order="fixed", **_args(SPECS[name]))
    sessions = server.study_of("p").sessions
    assert len(blocks) == len(sessions)
    for block, sess in zip(blocks, sessions, strict=True):
        assert [t["data"]["stimulus_id"] for t in block] == [s.key() for s in sess.stimuli]
        for t, stim in zip(block, sess.stimuli, strict=True):
            assert t["answer"] == ("tap" if sess.task.tap_area(stim) else "text")
            assert t["question"] == sess.task.human_question(stim) and "{" not in t["question"]
            assert Stimulus(**t["data"]["bayesobs_stimulus"]).key() == stim.key()
            shown = t["images"] or [t["image"]]
            assert all((tmp_path / "x" / p).is_file() for p in shown)
            assert len(shown) == len(TASKS[sess.task.name]().render_pngs(stim)) or (
                sess.modality == "text"
            )


def _args(argv: list[str]) -> dict:
    """``serve``'s arguments for the export's options in ``argv``."""
    out: dict = {}
    if "--trials" in argv:
        out["trials"] = int(argv[argv.index("--trials") + 1])
    return out


@pytest.mark.parametrize("name", list(SPECS))
def test_answers_read_back_from_the_export_equal_serves_rows(name, tmp_path):
    """The same answers, right and wrong, given in the export's page and to serve: the same rows."""
    spec = ROOT / "tasks" / f"{name}.toml"
    argv = SPECS[name]
    blocks = _export(spec, tmp_path / "x", *argv)
    server = ParticipantServer(spec, tmp_path / "plan", order="fixed", **_args(argv))
    stims = [s for sess in server.study_of("p").sessions for s in sess.stimuli]
    task = server.task
    answers = [_answer(task, s, stims, wrong=i % 2 == 1) for i, s in enumerate(stims)]
    answers = answers[: sum(map(len, blocks))]
    data = tmp_path / "data.json"
    data.write_text(json.dumps(_page_rows(blocks, answers)))
    got = bayesobs.read_trials(data)
    want = _served(spec, tmp_path / "e", answers, _args(argv))
    assert len(got) == len(want) == len(answers) and len(got) >= 2
    assert set(got["correct"].astype(int)) == {0, 1}  # right and wrong answers both read
    cols = [c for c in ANSWER_COLUMNS if c in want.columns]
    extra = [c for c in want.columns if c.startswith(("tap_", "response_", "step", "error_px"))]
    for col in cols + extra:
        assert _values(got[col]) == _values(want[col]), col


def test_the_decomposed_hunt_asks_each_step_from_the_previous_answer(tmp_path):
    """A wrong step 1: step 2 starts where the participant said, as serve asks it, and scores alike."""
    spec = tmp_path / "hunt.toml"
    spec.write_text(HUNT)
    (block,) = _export(spec, tmp_path / "x")
    server = ParticipantServer(spec, tmp_path / "plan", order="fixed")
    stims = server.study_of("p").sessions[0].stimuli
    assert [bool(t.get("follow")) for t in block] == [False, True, True] * 2
    cells = {f"{c['colour']} {c['shape']}": c for c in grid_from_text(stims[0].text)}
    right = cells[stims[0].params["columns"]["step_start"]]["label"]
    said = next(k for k, c in cells.items() if k != right and c["label"] in cells)
    first = {"response": "{" + said.upper() + "}"}  # braces and capitals: read as serve reads them
    step2 = block[1]["follow"][said]
    assert step2["question"].startswith(f"Starting at the {said}, follow the label for 1 step.")
    # the rest answered right from where the participant stands
    answers = [first]
    for i in range(1, 6):
        rows = _page_rows([block], [*answers, {"response": "x"}])
        stim = Stimulus(**rows[i]["bayesobs_stimulus"])
        answers.append({"response": server.task.human_answer(stim)})
    data = tmp_path / "data.json"
    data.write_text(json.dumps(_page_rows([block], answers)))
    got = bayesobs.read_trials(data)
    want = _served(spec, tmp_path / "e", answers, {})
    for col in ("correct", "valid", "step_start", "step_start_from", "gold", "stimulus_id"):
        assert _values(got[col]) == _values(want[col]), col
    assert got["correct"].astype(int).tolist() == [0, 1, 1, 1, 1, 1]
    assert got["step_start"].iloc[1] == said


def test_a_tapped_task_with_attention_checks_is_refused_in_one_line(tmp_path, capsys):
    """What the export cannot carry: one line on stderr, exit 2, nothing written."""
    argv = ["export", "jspsych", str(ROOT / "tasks" / "two_among_five.toml"), "--trials", "1"]
    assert main([*argv, "--out", str(tmp_path / "a"), "--catch-every", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--catch-every" in err
    assert not (tmp_path / "a" / "experiment.js").exists()
