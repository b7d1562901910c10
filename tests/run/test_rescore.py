"""Issue 50: a logged trial row carries what its parser needs, so rescore re-parses without re-planning."""

from __future__ import annotations

import json

import pandas as pd
import PIL.Image
import pytest

from bayesobs import hvs
from bayesobs.cli import main
from bayesobs.run import rescore

RUNS = {  # a task of each parser: a number, a cell, a Percept-V answer, a Tunnel Vision answer
    "line_ratio": [
        "--subject",
        "sim:bayesian",
        "--modality",
        "text",
        "--modality",
        "image",
        "--trials",
        "4",
    ],
    "circle_sizes": ["--subject", "sim:parallel", "--modality", "image", "--trials", "4"],
    "percept_v_small": ["--subject", "sim:perceiver", "--condition", "cot", "--trials", "4"],
    "object_reid": ["--subject", "sim:matcher", "--modality", "image", "--trials", "4"],
    "hvs_small": ["--subject", "sim:saliency", "--trials", "6", "--hvs", "HVS"],  # a folder's data
}


def boom(*args, **kwargs):
    """Stands in for the planner and the drawing: rescore of a new log must call neither."""
    raise AssertionError("rescore re-planned or drew a stimulus")


@pytest.mark.parametrize("task", list(RUNS))
def test_rescore_of_a_new_log_neither_plans_nor_draws_and_agrees_with_replanning(
    task, tmp_path, monkeypatch, capsys
):
    out = tmp_path / "run"
    fixture = str(hvs.write_fixture(tmp_path / "hvs")) if "HVS" in RUNS[task] else ""
    args = [a.replace("HVS", fixture) for a in RUNS[task]]
    args = ["run", task, *args, "--out", str(out), "--no-progress"]
    assert main(args) == 0
    log = out / "trials.jsonl"
    rows = [json.loads(x) for x in log.read_text().splitlines()]
    assert all(isinstance(r.get("parse_params"), str) for r in rows)
    # a parser fix to come: the replies read again must give what the runner read
    expected = pd.DataFrame(rows)
    # an old log, without the field, goes the old way: re-planned from the manifest
    old = tmp_path / "old"
    old.mkdir()
    (old / "manifest.json").write_text((out / "manifest.json").read_text())
    (old / "trials.jsonl").write_text(
        "".join(
            json.dumps({k: v for k, v in r.items() if k != "parse_params"}) + "\n" for r in rows
        )
    )
    replanned = rescore.rescore_folder(old)
    with monkeypatch.context() as m:
        m.setattr(rescore, "plan", boom)
        m.setattr(PIL.Image, "new", boom)
        fresh = rescore.rescore_folder(out)
    assert not fresh["rescored_changed"].any() and not replanned["rescored_changed"].any()
    pd.testing.assert_series_equal(fresh["response"], expected["response"])
    cols = [c for c in replanned.columns if c != "parse_params"]
    pd.testing.assert_frame_equal(fresh[cols], replanned[cols])


def test_a_parse_params_that_is_not_a_json_object_is_one_line(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["run", "line_ratio", "--subject", "sim:linear", "--modality", "text", "--trials", "2"]
    assert main([*args, "--out", str(out), "--no-progress"]) == 0
    log = out / "trials.jsonl"
    rows = [json.loads(x) for x in log.read_text().splitlines()]
    rows[1]["parse_params"] = "[1, 2"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    capsys.readouterr()
    assert main(["rescore", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "line 2: parse_params is not a JSON object" in err
    assert not (out / "rescored.jsonl").exists()
