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

import pandas as pd
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


def _serve(spec: Path, folder: Path, answer, n: int) -> None:
    """``n`` participants through the web app's own endpoints, answering ``answer(stimulus, k)``."""
    server = ParticipantServer(spec, folder)
    with TestClient(server.app(), base_url="http://127.0.0.1") as c:
        for k in range(n):
            c.cookies.clear()
            assert c.post("/api/start", json={"consent": True, "pid": f"p{k}"}).status_code == 200
            c.post("/api/practice", json={"response": "0.5"})
            t = c.get("/api/next").json()
            while not t["finished"]:
                stim = server.study_of(f"p{k}").where(t["id"])
                value = stim[0].stimuli[stim[2]].value
                r = c.post(
                    "/api/answer", json={"id": t["id"], "response": f"{answer(value, k):.4f}"}
                )
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
    assert (both["seed_person"] == both["seed_model"]).all()
    assert (both["stimulus_person"] == both["stimulus_model"]).all()
