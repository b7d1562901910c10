"""Issue 13's bugs: the library and the CLI make the same decisions in one place."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import bayesobs
from bayesobs.cli import main
from bayesobs.errors import BayesobsInputError
from bayesobs.testing.fakeserver import FakeChatServer

ROOT = Path(__file__).resolve().parents[1]


def _search_table(n=40):
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {"subject": "p1", "set_size": rng.integers(1, 30, n), "correct": rng.integers(0, 2, n)}
    )


def test_library_fit_refuses_search_trials_like_the_cli(tmp_path, capsys):
    """Before: bayesobs.fit fitted observer models to correctness against set size."""
    table = _search_table()
    with pytest.raises(BayesobsInputError, match="visual-search trials"):
        bayesobs.fit(table)
    path = tmp_path / "s.csv"
    table.to_csv(path, index=False)
    assert main(["fit", str(path), "--out", str(tmp_path / "f")]) == 2
    assert "visual-search trials" in capsys.readouterr().err


def test_library_fit_leaves_search_trials_out_like_the_cli(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.uniform(0.1, 0.9, 60)
    magnitude = pd.DataFrame({"subject": "m", "stimulus": x, "response": x})
    search = _search_table().assign(subject="s", stimulus=np.nan, response=np.nan)
    search["stimulus"] = search["set_size"]
    search["response"] = search["correct"]
    mixed = pd.concat(
        [magnitude.assign(set_size=np.nan, correct=np.nan), search], ignore_index=True
    )
    with pytest.warns(UserWarning, match="40 visual-search trial"):
        fits, _ = bayesobs.fit(mixed)
    assert set(fits["subject"]) == {"m"}
    path = tmp_path / "mixed.csv"
    mixed.to_csv(path, index=False)
    assert main(["fit", str(path), "--out", str(tmp_path / "f")]) == 0
    cli = pd.read_csv(tmp_path / "f" / "fits.csv")
    np.testing.assert_allclose(cli["loglik"], fits["loglik"], rtol=1e-12)


def test_a_cli_sweep_folder_resumes_from_the_library(tmp_path):
    """Before: the CLI and the library built different experiment records."""
    proto = tmp_path / "proto.toml"
    proto.write_text(
        f'[[experiment]]\nspec = "{(ROOT / "tasks" / "line_ratio.toml").as_posix()}"\n'
        'modalities = ["text"]\nconditions = ["base"]\n'
    )
    out = tmp_path / "run"
    with FakeChatServer() as srv:
        args = [
            "sweep",
            str(proto),
            "--subject",
            "openai:m",
            "--trials",
            "2",
            "--out",
            str(out),
            "--base-url",
            srv.url,
            "--api-key",
            "k",
            "--cache",
            str(tmp_path / "c"),
            "--no-progress",
        ]
        assert main(args) == 0
        n = len((out / "trials.jsonl").read_text().splitlines())
        report = bayesobs.sweep(
            proto,
            ["openai:m"],
            out,
            trials=2,
            base_url=srv.url,
            api_key="k",
            cache_dir=str(tmp_path / "c"),
        )
    assert report.done == 0 and report.skipped == n


def test_export_shows_the_steering_text(tmp_path):
    """Before: trials were labelled steer_verbal but showed only the task's instruction."""
    out = tmp_path / "exp"
    assert (
        main(
            [
                "export",
                "jspsych",
                "tasks/line_ratio.toml",
                "--out",
                str(out),
                "--condition",
                "steer_verbal",
                "--trials",
                "2",
            ]
        )
        == 0
    )
    js = (out / "experiment.js").read_text()
    blocks = json.loads(re.search(r"const BLOCKS = (\[.*?\n\]);", js, re.S).group(1))
    items = [it for block in blocks for it in block]
    steer = "behave like a Bayesian observer"
    assert items and all(steer in it["instruction"] for it in items)
    assert all(it["data"]["condition"] == "steer_verbal" for it in items)
    assert not any("Do not explain" in it["instruction"] for it in items)


def test_serve_and_export_show_the_same_instruction(tmp_path):
    from bayesobs.run.plan import load_spec, plan
    from bayesobs.run.presentation import human_instruction

    spec = load_spec("line_ratio")
    sess = plan(spec, ["sim:linear"], ["text"], ["steer_numeric"], 3, 1)[0]
    text = human_instruction(sess, 2)
    assert "For 2 previous observations" in text and "Do not explain" not in text
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert human_instruction(sess, 0).startswith("The given data is noisy")


def test_rescore_rereads_replies_a_parser_fix_would_change(tmp_path, capsys):
    """A log written by an older parser: rescore fixes the numbers without a new run."""
    out = tmp_path / "run"
    assert (
        main(
            [
                "run",
                "line_ratio",
                "--subject",
                "sim:bayesian",
                "--modality",
                "text",
                "--trials",
                "4",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    log = out / "trials.jsonl"
    rows = [json.loads(x) for x in log.read_text().splitlines()]
    # what an older parser logged for tricky replies
    rows[0].update(raw_response="0.4-0.5", response=-0.5, valid=True)
    rows[1].update(raw_response="The answer is 0.45.\n\nConfidence: 80%", response=0.8, valid=True)
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    before = log.read_bytes()
    assert main(["rescore", str(out)]) == 0
    assert "2 response(s) changed" in capsys.readouterr().out
    assert log.read_bytes() == before  # the evidence is never rewritten
    new = [json.loads(x) for x in (out / "rescored.jsonl").read_text().splitlines()]
    assert new[0]["response"] is None and new[0]["invalid_reason"]
    assert new[1]["response"] == pytest.approx(0.45) and new[1]["response_logged"] == 0.8
    np.testing.assert_allclose([r["response"] for r in new[2:]], [r["response"] for r in rows[2:]])
    assert len(bayesobs.read_trials(out / "rescored.jsonl")) == len(rows)  # fit/score read it
    assert main(["rescore", str(out), "--out", str(log)]) == 2


def test_analysis_imports_never_pull_in_the_runner():
    """``import bayesobs`` and the analysis modules load neither the runner nor the API SDK."""
    import subprocess
    import sys

    code = (
        "import sys, bayesobs; import bayesobs.scores, bayesobs.fits.fitting, bayesobs.scores.cue, "
        "bayesobs.search.scores, bayesobs.scores.evidence, bayesobs.bootstrap; "
        "bad = [m for m in ('bayesobs.run.runner', 'openai', 'bayesobs.web') if m in sys.modules]; "
        "assert not bad, bad; "
        "assert callable(bayesobs.report.build_report) and callable(bayesobs.sweep)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_paradigm_column_routes_the_analyses(tmp_path):
    """Runner rows state their paradigm; a stated magnitude row is never taken for search."""
    from bayesobs.search.scores import is_search

    out = tmp_path / "run"
    assert (
        main(
            [
                "run",
                "line_ratio",
                "--subject",
                "sim:linear",
                "--modality",
                "text",
                "--trials",
                "3",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    rows = [json.loads(x) for x in (out / "trials.jsonl").read_text().splitlines()]
    assert {r["paradigm"] for r in rows} == {"magnitude"}
    t = pd.DataFrame(
        {"paradigm": ["magnitude", "search", None], "set_size": [3, 3, 3], "correct": [1, 0, 1]}
    )
    assert is_search(t).tolist() == [False, True, True]


def test_scores_round_trip_through_a_folder(tmp_path):
    """The library writes and reads a score folder; ``report`` and ``score`` share it."""
    from bayesobs.fits.synthetic import bayesbench_design, simulated_trials
    from bayesobs.scores import Scores

    trials = simulated_trials(
        n_subjects=2, trials_per_session=12, seed=1, design=bayesbench_design()[:6]
    )
    res = bayesobs.score(trials, bootstrap=3, seed=0, probe=False)
    written = res.to_folder(tmp_path / "s")
    assert {"fits", "bayesbench", "missing"} <= set(written) and "cue_probe" not in written
    back = Scores.from_folder(tmp_path / "s")
    for name in written:
        a, b = getattr(res, name), getattr(back, name)
        assert list(a.columns) == list(b.columns) and len(a) == len(b), name
    pd.testing.assert_frame_equal(
        back.bayesbench.drop(columns="subject"),
        res.bayesbench.drop(columns="subject"),
        check_dtype=False,
    )
    assert Scores.from_folder(tmp_path) is None
    assert not list((tmp_path / "s").glob("*.part"))


def test_the_docs_library_snippet_runs(tmp_path, monkeypatch):
    """docs/library.md's Python example is executed as written (from a copy of the repo's tasks)."""
    import shutil

    from docs_pages import fenced_blocks, page

    (code,) = fenced_blocks(page("library.md"), "python")
    shutil.copytree(ROOT / "tasks", tmp_path / "tasks")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(code, "docs/library.md", "exec"), namespace)
    w = bayesobs.fits.fitting.decode_params(
        namespace["fits"].set_index("variant").loc["static", "params"]
    )["w_prior"]
    assert w == pytest.approx(0.4, abs=0.06)
    assert (tmp_path / "scores" / "fits.csv").exists()
    assert (tmp_path / "report" / "index.html").exists()


def test_library_fit_outputs_are_the_cli_outputs(tmp_path):
    """`api.write_fit` writes the very tables `bayesobs fit` writes (one path)."""
    from bayesobs.api import fit_result, magnitude_trials, write_fit
    from bayesobs.fits.fitoptions import FitOptions
    from bayesobs.fits.synthetic import simulated_trials
    from bayesobs.trials import read_trials

    trials = simulated_trials(n_subjects=2, trials_per_session=20, seed=3)
    path = tmp_path / "t.csv"
    trials.to_csv(path, index=False)
    assert main(["fit", str(path), "--out", str(tmp_path / "cli"), "--bootstrap", "3"]) == 0
    table, _ = magnitude_trials(read_trials(path))
    summary = write_fit(fit_result(table, FitOptions(bootstrap=3)), tmp_path / "lib")
    assert summary["n_trials"] == len(trials)
    for name in ("fits.csv", "evidence.csv", "cells.csv", "controls.csv"):
        assert (tmp_path / "lib" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes(), (
            name
        )


def test_serve_and_export_practice_the_same_stimulus_of_the_task(tmp_path):
    """One human plan and one practice trial, drawn from the task, for serve and the export."""
    from bayesobs.web.app import ParticipantServer

    out = tmp_path / "exp"
    assert (
        main(["export", "jspsych", "tasks/line_ratio.toml", "--out", str(out), "--trials", "2"])
        == 0
    )
    js = (out / "experiment.js").read_text()
    practice = json.loads(re.search(r"const PRACTICE = (\{.*?\});\n", js).group(1))
    server = ParticipantServer("tasks/line_ratio.toml", tmp_path / "serve", trials=2)
    assert practice["text"] == server.study.practice.text
    assert {s.subject for s in server.study.sessions} == {"human"}  # no stand-in model subject


def _exported_and_run(tmp_path, options):
    """The line_ratio trials the jsPsych export shows and the rows the runner logs, same options."""
    out = tmp_path / "exp"
    assert main(["export", "jspsych", "tasks/line_ratio.toml", "--out", str(out), *options]) == 0
    js = (out / "experiment.js").read_text()
    blocks = json.loads(re.search(r"const BLOCKS = (\[.*?\n\]);", js, re.S).group(1))
    run = tmp_path / "run"
    argv = ["run", "tasks/line_ratio.toml", "--subject", "sim:linear", "--out", str(run)]
    assert main([*argv, *options]) == 0
    rows = [json.loads(line) for line in (run / "trials.jsonl").read_text().splitlines()]
    return [it for block in blocks for it in block], rows


def test_a_person_reads_the_degraded_text_a_model_reads(tmp_path):
    """noise_text: the export shows the very smudged text the runner sent (one stimulus_text)."""
    common = ["--condition", "noise_text", "--modality", "text", "--trials", "2"]
    items, rows = _exported_and_run(tmp_path, common)
    shown = {it["text"] for it in items}
    sent = {r["stimulus_text"] for r in rows}
    assert shown == sent and any("~" in t for t in shown)  # smudged, and the same smudges


def test_a_person_sees_the_blurred_images_a_model_sees(tmp_path):
    """noise_gradual: the export's images are the runner's, byte for byte (one stimulus_images)."""
    common = ["--condition", "noise_gradual", "--modality", "image", "--trials", "3"]
    items, rows = _exported_and_run(tmp_path, common)
    shown = [(tmp_path / "exp" / it["image"]).read_bytes() for it in items]
    sent = [(tmp_path / "run" / r["image"]).read_bytes() for r in rows]
    assert len(shown) == 9 and len({r["blur_sigma"] for r in rows}) == 3  # 3 sessions x 3 blurs
    assert sorted(shown) == sorted(sent)  # the export counterbalances the block order
    assert len(set(sent)) == 9  # each stimulus at its own blur: nine different images


def test_library_writes_the_manifests_the_cli_writes(tmp_path):
    """fit_manifest.json / score_manifest.json come from the library (strict JSON, provenance)."""
    from bayesobs.api import fit_result, magnitude_trials, write_fit
    from bayesobs.fits.synthetic import simulated_trials
    from bayesobs.trials import normalize_trials

    table, _ = magnitude_trials(
        normalize_trials(simulated_trials(n_subjects=1, trials_per_session=20, seed=3))
    )
    write_fit(fit_result(table), tmp_path / "fit", manifest={"bootstrap": 0, "x": np.nan})
    man = json.loads((tmp_path / "fit" / "fit_manifest.json").read_text())
    assert man["command"] == "fit" and man["n_trials"] == len(table) and man["x"] is None
    assert man["git_revision"] is None or len(man["git_revision"]) >= 40
    scores = bayesobs.score(table, probe=False)
    scores.to_folder(tmp_path / "score", trials=table, manifest={"seed": 0})
    man = json.loads((tmp_path / "score" / "score_manifest.json").read_text())
    assert man["command"] == "score" and man["seed"] == 0 and man["n_trials"] == len(table)
