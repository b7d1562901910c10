"""Task hvs end to end: --hvs DIR, the runner, sims, the hint condition, hvs.csv and the report."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bayesobs import hvs
from bayesobs.cli import main
from bayesobs.errors import BayesobsInputError
from bayesobs.hvs.fixture import FIXTURE_NOTE
from bayesobs.hvs.logged import BASELINE
from bayesobs.hvs.metrics import TABLE_COLUMNS
from bayesobs.hvs.questions import HINTS
from bayesobs.run.plan import load_spec, plan
from bayesobs.run.subjects import Request, Turn
from bayesobs.run.subjects.openai_chat import ChatOptions, OpenAIChatSubject
from bayesobs.stimuli import from_png
from bayesobs.testing.fakeserver import Answer, FakeChatServer

SMALL = str(Path(__file__).resolve().parents[2] / "tasks" / "hvs_small.toml")
N_IMAGES = 20  # enough questions to tell the sims apart (the default fixture has 6 images)
SUBJECTS = ["sim:saliency", "sim:random", "sim:center"]
ACC = ("Q1", "Q2", "Q3", "Q4", "Q5", "Q6", "Q7", "Q8", "Q10", "Q11", "Q13")


def _rows(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / "trials.jsonl").read_text().splitlines() if x]


@pytest.fixture(scope="module")
def fixture_dir(tmp_path_factory):
    return hvs.write_fixture(tmp_path_factory.mktemp("hvs") / "fx", n_images=N_IMAGES)


@pytest.fixture(scope="module")
def questions(fixture_dir):
    return hvs.build_questions(hvs.load_folder(fixture_dir), seed=0)


@pytest.fixture(scope="module")
def swept(fixture_dir, questions, tmp_path_factory):
    """The done-when commands: sweep (every question once per condition), score, report."""
    root = tmp_path_factory.mktemp("run")
    out = root / "exp"
    n = len(questions)
    assert (
        main(
            [
                "sweep",
                SMALL,
                "--hvs",
                str(fixture_dir),
                *[a for s in SUBJECTS for a in ("--subject", s)],
                "--trials",
                str(n),
                "--runs",
                "1",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    assert main(["score", str(out), "--out", str(root / "sc"), "--no-progress"]) == 0
    assert main(["report", str(root / "sc"), "--out", str(root / "rep")]) == 0
    table = pd.read_csv(root / "sc" / "hvs.csv")
    return {"out": out, "root": root, "rows": pd.DataFrame(_rows(out)), "table": table}


def _row(table, model, condition="base") -> pd.Series:
    sel = (table["model"] == model) & (table["condition"] == condition)
    assert sel.sum() == 1, (model, condition)
    return table[sel].iloc[0]


@pytest.mark.slow  # the swept fixture: ~18 s of sweep, score and report
def test_every_question_is_asked_and_logged_with_what_scoring_needs(swept, questions):
    rows = swept["rows"]
    assert len(rows) == len(questions) * 2 * len(SUBJECTS)
    assert set(rows["paradigm"]) == {"hvs"} and set(rows["condition"]) == {"base", "hint"}
    one = rows[(rows["subject"] == "sim:saliency") & (rows["condition"] == "base")]
    assert sorted(one["qid"]) == sorted(q["qid"] for q in questions)  # without replacement
    assert (one["repeat"] == 0).all() and set(one["hvs_data"]) == {"fixture"}
    by_qid = {q["qid"]: q for q in questions}
    for r in one.itertuples():
        q = by_qid[r.qid]
        assert r.stimulus_text == q["prompt"] and r.qtype == q["qtype"] and r.kind == q["kind"]
        if q["kind"] == "scanpath":
            assert math.isnan(r.correct) and 0 <= r.m_dir <= 1 and 0 <= r.m_pos <= 1
        else:
            assert r.correct in (0, 1) and r.response == r.correct
    # the image goes at its own size (1680 x 1050 on the fixture), the same file for each question of it
    png = (swept["out"] / one["image"].iloc[0]).read_bytes()
    assert from_png(png).shape == (1050, 1680, 3)
    # the logged scores are the library's: score_replies on the same replies
    recs = [by_qid[q] for q in one["qid"]]
    lib = hvs.score_replies(recs, list(one["raw_response"]))
    np.testing.assert_array_equal(lib["correct"].astype(float), one["correct"].astype(float))
    np.testing.assert_allclose(lib["m_dir"].astype(float), one["m_dir"].astype(float), atol=1e-6)
    np.testing.assert_allclose(lib["m_pos"].astype(float), one["m_pos"].astype(float), atol=1e-6)


@pytest.mark.slow  # the swept fixture: ~18 s of sweep, score and report
def test_hvs_csv_has_the_table3_layout_and_the_fixture_label(swept, capsys):
    t = swept["table"]
    assert list(t.columns) == [
        "benchmark",
        "model",
        "subject",
        "condition",
        "n_trials",
        "invalid",
        *TABLE_COLUMNS,
    ]
    assert set(t["model"]) == {*SUBJECTS, BASELINE} and len(t) == 2 * (len(SUBJECTS) + 1)
    # fixture numbers are never labelled as a benchmark score
    assert set(t["benchmark"]) == {FIXTURE_NOTE}
    page = (swept["root"] / "rep" / "index.html").read_text()
    assert "HVSBench-style perception questions (task hvs)" in page and FIXTURE_NOTE in page
    assert "HVSBench results" not in page
    for name in ("hvs_fields.png", "hvs_scanpaths.png"):
        assert (swept["root"] / "rep" / "figures" / name).stat().st_size > 10_000
        assert f"figures/{name}" in page
    assert not (swept["root"] / "sc" / "fits.csv").exists()  # no magnitude fits of hvs trials


@pytest.mark.slow  # the swept fixture: ~18 s of sweep, score and report
def test_baseline_row_is_the_librarys_random_baseline(swept, questions):
    lib = hvs.hvs_table(hvs.random_baseline_scores(questions, seed=0), BASELINE).iloc[0]
    for cond in ("base", "hint"):
        got = _row(swept["table"], BASELINE, cond)
        for col in TABLE_COLUMNS:
            assert got[col] == pytest.approx(lib[col], abs=1e-5), col


@pytest.mark.slow  # the swept fixture: ~18 s of sweep, score and report
def test_sim_random_reproduces_the_random_baseline_within_sampling_error(swept):
    rows = swept["rows"]
    r = rows[(rows["subject"] == "sim:random") & rows["qtype"].isin(ACC)]
    groups = {
        "Prominence": ["Q1"],
        "Subitizing": ["Q2"],
        "Prioritizing": ["Q3", "Q4", "Q5", "Q6", "Q7"],
        "Free-viewing": ["Q8", "Q10"],
        "Searching": ["Q11", "Q13"],
        "all": list(ACC),
    }
    for name, types in groups.items():
        g = r[r["qtype"].isin(types)]
        p = g["chance_correct"].to_numpy(float)
        se = math.sqrt(np.sum(p * (1 - p))) / len(p)
        assert abs(g["correct"].mean() - p.mean()) < 4 * se, name
    # scanpaths: another image's human scanpath, as the baseline draws it (no closed form)
    s = rows[(rows["subject"] == "sim:random") & rows["qtype"].isin(["Q9", "Q12"])]
    for col in ("m_dir", "m_pos"):
        diff = s[col].to_numpy(float) - s[f"chance_{col}"].to_numpy(float)
        assert abs(diff.mean()) < 4 * diff.std(ddof=1) / math.sqrt(len(diff)), col


@pytest.mark.slow  # the swept fixture: ~18 s of sweep, score and report
def test_saliency_beats_random_on_prominence_and_free_viewing(swept):
    """Above the expected baseline by 1.5 SE, and above sim:random's own scores (both conditions)."""
    t = swept["table"]
    rows = swept["rows"]
    random = t[t["model"] == "sim:random"]  # pooled over base and hint: twice the draws
    for cond in ("base", "hint"):
        sal, base = _row(t, "sim:saliency", cond), _row(t, BASELINE, cond)
        for col, types in (
            ("Prominence Q1 Acc", ["Q1"]),
            ("Free-viewing Q8,Q10 Acc", ["Q8", "Q10"]),
        ):
            p = rows[
                (rows["subject"] == "sim:saliency")
                & (rows["condition"] == cond)
                & rows["qtype"].isin(types)
            ]["chance_correct"].to_numpy(float)
            se = math.sqrt(np.sum(p * (1 - p))) / len(p)
            assert sal[col] > base[col] + 1.5 * se and sal[col] > random[col].mean(), (col, cond)
        for col in ("Free-viewing Q9 M-Dir", "Free-viewing Q9 M-Pos"):
            assert sal[col] > base[col] and sal[col] > random[col].mean(), (col, cond)


@pytest.mark.slow  # the swept fixture: ~18 s of sweep, score and report
def test_a_resumed_run_logs_the_same_trials(swept, fixture_dir, tmp_path):
    out = tmp_path / "o"
    args = [
        "sweep",
        SMALL,
        "--hvs",
        str(fixture_dir),
        "--subject",
        "sim:saliency",
        "--subject",
        "sim:random",
        "--trials",
        "15",
        "--runs",
        "1",
        "--out",
        str(out),
        "--no-progress",
    ]
    assert main(args) == 0
    full = (out / "trials.jsonl").read_bytes()
    assert main(args) == 0  # a complete folder: nothing redone, the log byte-identical
    assert (out / "trials.jsonl").read_bytes() == full
    lines = full.splitlines(keepends=True)
    (out / "trials.jsonl").write_bytes(b"".join(lines[: len(lines) // 3]))  # as if killed
    assert main(args) == 0

    def strip(blob):  # the wall-clock time of logging is the only thing a rerun may change
        out = []
        for line in blob.splitlines():
            rec = json.loads(line)
            assert rec.pop("timestamp")
            out.append(json.dumps(rec))
        return sorted(out)

    resumed = (out / "trials.jsonl").read_bytes()
    assert len(resumed.splitlines()) == len(lines) and strip(resumed) == strip(full)


def test_without_hvs_or_with_an_incomplete_folder_nothing_is_called(fixture_dir, tmp_path, capsys):
    with FakeChatServer(lambda body, n: Answer("A")) as srv:
        code = main(
            [
                "run",
                SMALL,
                "--subject",
                "openai:m",
                "--base-url",
                srv.url,
                "--api-key",
                "k",
                "--no-cache",
                "--out",
                str(tmp_path / "a"),
                "--no-progress",
            ]
        )
        err = capsys.readouterr().err
        assert code == 2 and "needs --hvs DIR" in err
        for name in (
            "coco_search18_fixations_TP_train.json",
            "COCOFreeView_fixations_trainval.json",
            "saliency_ranks/ranks.csv",
            "sites.google.com/view/cocosearch",
        ):
            assert name in err, name
        broken = tmp_path / "broken"
        shutil.copytree(fixture_dir, broken)
        (broken / "saliency_ranks" / "ranks.csv").unlink()
        code = main(
            [
                "run",
                SMALL,
                "--hvs",
                str(broken),
                "--subject",
                "openai:m",
                "--base-url",
                srv.url,
                "--api-key",
                "k",
                "--no-cache",
                "--out",
                str(tmp_path / "b"),
                "--no-progress",
            ]
        )
        err = capsys.readouterr().err
        assert code == 2 and f"missing file {broken / 'saliency_ranks' / 'ranks.csv'}" in err
        assert "coco_search18" not in err.split("Expected layout")[0]  # only what is missing
        assert not srv.requests
    assert not (tmp_path / "a" / "trials.jsonl").exists()
    assert not (tmp_path / "b" / "trials.jsonl").exists()


def test_hint_puts_the_field_hint_in_the_system_prompt_of_exactly_the_hint_trials(
    fixture_dir, tmp_path
):
    def script(body, n):  # a valid answer of each kind
        q = body["messages"][-1]["content"][0]["text"]
        if "X = [" in q:
            return Answer("X = [0.5, 0.4] Y = [0.5, 0.6] T = [200, 300]")
        if "positive integer" in q:
            return Answer("3")
        letters = re.findall(r"\[([A-Z])\]", q)
        return Answer("".join(reversed(letters)) if "rank the saliency" in q else letters[0])

    out = tmp_path / "o"
    with FakeChatServer(script) as srv:
        assert (
            main(
                [
                    "run",
                    SMALL,
                    "--hvs",
                    str(fixture_dir),
                    "--subject",
                    "openai:vision",
                    "--trials",
                    "40",
                    "--runs",
                    "1",
                    "--base-url",
                    srv.url,
                    "--api-key",
                    "k",
                    "--no-cache",
                    "--out",
                    str(out),
                    "--max-attempts",
                    "1",
                    "--timeout",
                    "30",
                    "--no-progress",
                ]
            )
            == 0
        )
        requests = list(srv.requests)
    rows = pd.DataFrame(_rows(out))
    assert len(requests) == len(rows) == 80
    hint_text = set(HINTS.values())
    by_prompt = {(r.condition, r.stimulus_text): r for r in rows.itertuples()}
    base_system = None
    seen = {"base": 0, "hint": 0}
    for body in requests:
        system = body["messages"][0]["content"]
        user = body["messages"][-1]["content"]
        assert len(body["messages"]) == 2  # context 0: each question alone
        assert user[1]["image_url"]["url"].startswith("data:image/png;base64,")
        hints = [h for h in hint_text if h in system]
        cond = "hint" if hints else "base"
        seen[cond] += 1
        row = by_prompt[(cond, user[0]["text"])]  # the question text, options included
        if cond == "hint":
            assert hints == [HINTS[row.qtype]]
            assert system.endswith(" " + HINTS[row.qtype])
        else:
            base_system = base_system or system
            assert system == base_system  # one system prompt for every base trial
        # the question record (gold answer, scanpaths) is never sent
        blob = json.dumps(body)
        assert row.qid not in blob and '"humans"' not in blob and '"answer"' not in blob
    assert seen == {"base": 40, "hint": 40}
    assert rows.groupby("condition")["prompt_id"].nunique().to_dict()["base"] == 1
    assert rows["valid"].all()


def test_the_api_subjects_cache_key_ignores_the_question_record(tmp_path):
    subj = OpenAIChatSubject(ChatOptions(model="m", base_url="http://127.0.0.1:9"), api_key="k")
    meta = {
        "subject": "openai:m",
        "task": "hvs",
        "modality": "image",
        "condition": "base",
        "session": "all",
        "run": 0,
        "trial": 3,
        "seed": 1,
    }
    req = Request("sys", (Turn("user", text="q"),), meta)
    with_q = Request(
        "sys",
        (Turn("user", text="q"),),
        {**meta, "question": {"qid": "Q1-x"}, "hvs_context": {"counts": [1]}},
    )
    assert subj.payload(req) == subj.payload(with_q)
    assert subj.cache_key(subj.payload(req), req) == subj.cache_key(subj.payload(with_q), with_q)


def test_options_repeats_and_wrong_subjects(fixture_dir, tmp_path, capsys):
    spec = load_spec(SMALL)
    spec["sessions"] = [{"name": "q1", "range": [1, 13], "questions": ["Q1"]}]
    with pytest.warns(UserWarning, match=f"only {N_IMAGES} question"):
        sess = plan(spec, ["sim:center"], trials=N_IMAGES + 5, hvs=str(fixture_dir))
    stims = sess[0].stimuli
    reps = [s.params["repeat"] for s in stims]
    assert reps.count(0) == N_IMAGES and reps.count(1) == 5  # each once before any again
    assert len({s.params["record"]["qid"] for s in stims[:N_IMAGES]}) == N_IMAGES
    spec["sessions"] = [{"name": "x", "range": [1, 13], "questions": ["Q14"]}]
    with pytest.raises(BayesobsInputError, match="unknown question type"):
        plan(spec, ["sim:center"], hvs=str(fixture_dir))
    assert (
        main(
            [
                "run",
                "line_ratio",
                "--subject",
                "sim:bayesian",
                "--condition",
                "hint",
                "--out",
                str(tmp_path / "l"),
                "--no-progress",
            ]
        )
        == 2
    )
    assert "condition hint is for task hvs" in capsys.readouterr().err
    assert (
        main(
            [
                "run",
                "line_ratio",
                "--subject",
                "sim:saliency",
                "--modality",
                "text",
                "--trials",
                "2",
                "--out",
                str(tmp_path / "s"),
                "--no-progress",
            ]
        )
        != 0
    )
    assert "task hvs" in capsys.readouterr().err
    assert (
        main(
            [
                "run",
                SMALL,
                "--hvs",
                str(fixture_dir),
                "--subject",
                "sim:bayesian",
                "--trials",
                "2",
                "--out",
                str(tmp_path / "b"),
                "--no-progress",
            ]
        )
        != 0
    )


def test_fit_refuses_hvs_trials_instead_of_fitting_magnitude_models(tmp_path, capsys):
    # HVS questions have right or wrong answers: `bayesobs fit` used to fit the observer models
    # to them as if they were magnitudes; now it says so, as for search and perception trials
    rows = [
        {
            "subject": "sim:center",
            "task": "hvs",
            "paradigm": "hvs",
            "session": "all",
            "run": 0,
            "trial": i,
            "stimulus": float(i % 3),
            "response": float(i % 2),
            "correct": i % 2,
        }
        for i in range(12)
    ]
    path = tmp_path / "trials.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    assert main(["fit", str(path), "--out", str(tmp_path / "fits")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "paradigm hvs" in err and "magnitudes" in err
    assert not (tmp_path / "fits").exists()
