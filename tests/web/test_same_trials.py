"""People and models on the same trials (issue 54): the same seeds in both folders, paired.

A person served by ``bayesobs serve`` (or given the jsPsych export) and a model run by
``bayesobs run`` on the same spec see the same stimulus sequences: each (session, run)
is drawn from the spec's seed alone, whatever the subject or participant number, and
every row records that seed. ``bayesobs compare-trials`` pairs them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from starlette.testclient import TestClient

import bayesobs
from bayesobs.cli import main
from bayesobs.web import ParticipantServer

SPEC = """\
task = "line_ratio"
seed = 7
trials = 8
modalities = ["text"]
conditions = ["base"]

[[sessions]]
name = "short"
range = [0.1, 0.5]
[[sessions]]
name = "long"
range = [0.5, 0.9]
"""


def _spec(tmp_path) -> Path:
    path = tmp_path / "same.toml"
    path.write_text(SPEC)
    return path


def _serve(spec: Path, folder: Path, strategies) -> None:
    """One participant per strategy through the web app's own endpoints: ``f(stimulus, range)``."""
    server = ParticipantServer(spec, folder)
    with TestClient(server.app(), base_url="http://127.0.0.1") as c:
        for k, answer in enumerate(strategies):
            c.cookies.clear()
            assert c.post("/api/start", json={"consent": True, "pid": f"p{k}"}).status_code == 200
            c.post("/api/practice", json={"response": "0.5"})
            t = c.get("/api/next").json()
            while not t["finished"]:
                sess, i, _ = server.study_of(f"p{k}").where(t["id"])
                said = answer(sess.stimuli[i].value, sess.range)
                r = c.post("/api/answer", json={"id": t["id"], "response": f"{said:.4f}"})
                assert r.status_code == 200, r.text
                t = r.json()


def test_jspsych_export_rows_carry_the_seed_of_the_model_run(tmp_path):
    spec = _spec(tmp_path)
    assert main(["export", "jspsych", str(spec), "--out", str(tmp_path / "js")]) == 0
    js = (tmp_path / "js" / "experiment.js").read_text()
    blocks = json.loads(re.search(r"const BLOCKS = (.*?);\n", js, re.S).group(1))
    data = pd.DataFrame([item["data"] for block in blocks for item in block])
    assert (
        main(
            [
                "run",
                str(spec),
                "--subject",
                "sim:bayesian",
                "--out",
                str(tmp_path / "m"),
                "--no-progress",
            ]
        )
        == 0
    )
    model = bayesobs.read_trials(tmp_path / "m")
    keys = ["session", "run", "trial"]
    both = data.merge(model, on=keys, suffixes=("_person", "_model"))
    assert len(both) == len(model) == 16
    assert (both["seed_person"] == both["seed_model"].astype(str)).all()  # text: JS keeps it
    assert (both["stimulus_person"] == both["stimulus_model"]).all()


def test_people_served_and_a_model_run_on_the_same_spec_are_paired(tmp_path, capsys):
    """Three people with known strategies through ``serve``'s endpoints (each its own block
    order), a simulated model through ``bayesobs run``: ``compare-trials`` pairs all 16 trials
    of each person with the model's, the correlations are pandas' on the paired rows, and the
    person who leans on the prior gets the larger w_prior."""
    spec = _spec(tmp_path)
    rng = np.random.default_rng(0)

    def veridical(x, _range):
        return x + rng.normal(0, 0.01)

    def prior(x, range_):  # halfway to the session's mean
        return 0.5 * x + 0.5 * sum(range_) / 2 + rng.normal(0, 0.01)

    _serve(spec, tmp_path / "people", [veridical, prior, prior])
    assert (
        main(
            [
                "run",
                str(spec),
                "--subject",
                "sim:bayesian",
                "--out",
                str(tmp_path / "m"),
                "--no-progress",
            ]
        )
        == 0
    )
    out = tmp_path / "agree"
    assert (
        main(
            [
                "compare-trials",
                str(tmp_path / "people"),
                str(tmp_path / "m"),
                "--out",
                str(out),
                "--bootstrap",
                "10",
            ]
        )
        == 0
    )
    table = pd.read_csv(out / "agreement.csv").set_index("subject_a")
    assert sorted(table.index) == ["p0", "p1", "p2"] and (table["n_pairs"] == 16).all()
    people = bayesobs.read_trials(tmp_path / "people")
    model = bayesobs.read_trials(tmp_path / "m")
    assert people.groupby("subject")["block_position"].first().nunique() == 2  # counterbalanced
    for pid, g in people.groupby("subject"):
        paired = g.merge(model, on=["session", "run", "trial", "seed"], suffixes=("_p", "_m"))
        r = paired["response_p"].corr(paired["response_m"])
        assert table.loc[pid, "r_response"] == pytest.approx(r, abs=1e-12)
    assert table.loc["p1", "w_prior_a"] > table.loc["p0", "w_prior_a"] + 0.2
    assert "too few to trust" in capsys.readouterr().err  # 2 runs behind each interval


@pytest.mark.slow
def test_the_docs_commands_pair_people_in_chromium_with_a_model(tmp_path, monkeypatch):
    """docs/human-studies.md "People and models on the same trials", as printed (one modality,
    four trials a session): two people in Chromium, one copying each ratio, one pulled halfway
    to the session's mean; a simulated model run; compare-trials pairs every trial."""
    from conftest import chromium_browser
    from docs_pages import checkout, commands, fenced_blocks, page, section, shell_argv

    from bayesobs.web import running

    block = fenced_blocks(section(page("human-studies.md"), "People and models on the same trials"))
    serve, run, compare = commands(block[0])
    cwd = checkout(tmp_path)
    monkeypatch.chdir(cwd)
    argv = shell_argv(serve, cwd)
    assert argv[1:3] == ["serve", "tasks/line_ratio.toml"] and argv[3] == "--out"
    server = ParticipantServer(cwd / argv[2], cwd / argv[4], ["text"], None, 4)
    strategies = {"alice": lambda x, r: x, "bob": lambda x, r: 0.5 * x + 0.25 * sum(r)}
    with running(server) as url, chromium_browser() as browser:
        for pid, answer in strategies.items():
            p = browser.new_page()
            p.goto(f"{url}/?pid={pid}")
            p.get_by_role("button", name="I agree").click()
            p.get_by_role("button", name="Start the practice trial").click()
            p.fill("input[name=response]", "0.5")
            p.keyboard.press("Enter")
            p.get_by_role("button", name="Start the study").click()
            for i in range(12):
                p.wait_for_selector(f"text=Trial {i + 1} of 12")
                sess, t, _ = server.study_of(pid).where(i)
                p.fill("input[name=response]", f"{answer(sess.stimuli[t].value, sess.range):.3f}")
                p.keyboard.press("Enter")
            p.wait_for_selector("#thanks:not([hidden])")
            p.close()
    small = ["--modality", "text", "--trials", "4", "--no-progress"]
    assert main([*shell_argv(run, cwd)[1:], *small]) == 0
    assert main([*shell_argv(compare, cwd)[1:], "--bootstrap", "5"]) == 0
    table = pd.read_csv(cwd / "agreement" / "agreement.csv").set_index("subject_a")
    assert sorted(table.index) == ["alice", "bob"] and (table["n_pairs"] == 12).all()
    assert table.loc["bob", "w_prior_a"] > table.loc["alice", "w_prior_a"] + 0.3
    people = bayesobs.read_trials(cwd / "study")
    model = bayesobs.read_trials(cwd / "model")
    paired = people[people["subject"] == "bob"].merge(model, on=["session", "run", "trial", "seed"])
    assert table.loc["bob", "r_response"] == pytest.approx(
        paired["response_x"].corr(paired["response_y"]), abs=1e-12
    )
