"""Visual-search tasks end to end: stimuli, answer parsing, simulated searchers, CLI, API subject."""

from __future__ import annotations

import itertools
import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import ndimage

from bayesobs.cli import main
from bayesobs.errors import BayesobsInputError
from bayesobs.run.engine import execute, make_subjects
from bayesobs.run.plan import load_spec, plan
from bayesobs.run.store import ExperimentStore
from bayesobs.search.scores import SEARCH_COLUMNS, set_size_effect
from bayesobs.search.tasks import (
    CIRCLE_GAP,
    DIAGONAL,
    DIGIT_GAP,
    FIELD_RADIUS,
    GLYPH_RADIUS,
    SPHERE_GAP,
    SPHERE_RADIUS,
    TARGET_RADIUS,
    parse_cell,
    parse_point,
)
from bayesobs.stimuli import from_png, get_task
from bayesobs.testing.fakeserver import Answer, FakeChatServer
from bayesobs.trials import read_trials

CASES = (
    [("circle_sizes", c, (0, 49)) for c in ("small", "medium", "large")]
    + [
        ("two_among_five", c, (0, 99))
        for c in ("disjunctive", "shape_conjunctive", "shape_colour_conjunctive")
    ]
    + [("light_priors", c, (2, 17)) for c in ("top", "bottom", "left", "right")]
)


def _rows(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / "trials.jsonl").read_text().splitlines() if x.strip()]


def _radii(task, stim) -> np.ndarray:
    p = stim.params
    if task == "circle_sizes":
        return np.array(p["r"]), CIRCLE_GAP
    if task == "two_among_five":
        return np.full(len(p["x"]), GLYPH_RADIUS), DIGIT_GAP
    return np.full(len(p["x"]), SPHERE_RADIUS), SPHERE_GAP


@pytest.mark.parametrize("task,cond,rng_", CASES)
def test_layouts_are_seeded_non_overlapping_and_keep_the_target_off_the_borders(task, cond, rng_):
    t = get_task(task)
    opts = {"search": cond, "border_margin": 30}
    stims = t.generate(np.random.default_rng(7), *rng_, 25, opts)
    again = t.generate(np.random.default_rng(7), *rng_, 25, opts)
    assert [s.key() for s in stims] == [s.key() for s in again]  # seeded
    sizes = np.array([s.value for s in stims])
    assert sizes.min() >= rng_[0] and sizes.max() <= rng_[1] and len(set(sizes)) > 5
    for s in stims:
        xy = np.column_stack([s.params["x"], s.params["y"]])
        assert len(xy) == s.value + 1  # target + distractors
        radii, gap = _radii(task, s)
        d = np.sqrt(((xy[:, None] - xy[None]) ** 2).sum(-1))
        need = radii[:, None] + radii[None, :] + gap
        np.fill_diagonal(d, np.inf)
        assert (d >= need).all()  # no overlap, with the stated gap between edges
        if task == "light_priors":
            assert (np.hypot(*(xy - 200).T) + radii <= FIELD_RADIUS).all()
        else:
            assert (xy - radii[:, None] >= 0).all() and (xy + radii[:, None] <= 400).all()
        assert (np.abs(xy[0] - 200) >= 30).all()  # human-comparable: off the cell borders
        row, col = (1 + (xy[0, 1] >= 200), 1 + (xy[0, 0] >= 200))
        assert s.params["target_cell"] == f"{row},{col}"


def test_circle_sizes_pixels_show_the_drawn_circles():
    t = get_task("circle_sizes")
    for cond, r_t in TARGET_RADIUS.items():
        for s in t.generate(np.random.default_rng(3), 0, 49, 6, {"search": cond}):
            img = from_png(t.render_png(s))
            ink = (255 - img).max(axis=2) > 128
            labels, n = ndimage.label(ink)
            assert n == s.value + 1  # every circle is a separate blob
            cy, cx = np.array(ndimage.center_of_mass(ink, labels, range(1, n + 1))).T
            area = ndimage.sum(ink, labels, range(1, n + 1))
            j = np.argmin(np.hypot(cx - s.params["x"][0], cy - s.params["y"][0]))
            assert math.hypot(cx[j] - s.params["x"][0], cy[j] - s.params["y"][0]) < 0.2
            assert area[j] == pytest.approx(math.pi * r_t**2, rel=0.02)
            others = np.delete(area, j)
            if len(others):
                assert np.allclose(others, math.pi * 20**2, rtol=0.02) and area[j] > others.max()


def test_two_among_five_colour_rules():
    t = get_task("two_among_five")
    for cond in ("disjunctive", "shape_conjunctive", "shape_colour_conjunctive"):
        for s in t.generate(np.random.default_rng(5), 2, 40, 10, {"search": cond}):
            d, c = s.params["digit"], s.params["colour"]
            pairs = list(zip(d[1:], c[1:], strict=True))
            if cond == "disjunctive":
                assert all(dd != d[0] and cc != c[0] for dd, cc in pairs) and len(set(c[1:])) == 1
            elif cond == "shape_conjunctive":
                assert set(c) == {c[0]} and all(dd != d[0] for dd, _ in pairs)
            else:  # every distractor shares exactly one feature with the target
                assert all((dd == d[0]) != (cc == c[0]) for dd, cc in pairs)
                assert f"the {c[0]} '{d[0]}'" in s.prompt
    digits = [s.params["digit"][0] for s in t.generate(np.random.default_rng(1), 0, 9, 60, {})]
    assert 15 < digits.count("2") < 45  # 2 among 5 and 5 among 2


@pytest.mark.parametrize("light", ["top", "bottom", "left", "right"])
def test_light_priors_target_is_lit_from_its_side(light):
    t = get_task("light_priors")
    s = t.generate(np.random.default_rng(2), 2, 17, 1, {"search": light})[0]
    lum = from_png(t.render_png(s)).mean(axis=2)
    direction = {"top": (0, -1), "bottom": (0, 1), "left": (-1, 0), "right": (1, 0)}
    for i, (x, y) in enumerate(zip(s.params["x"], s.params["y"], strict=True)):
        ux, uy = direction[light] if i == 0 else (-direction[light][0], -direction[light][1])
        lit = lum[round(y + 12 * uy), round(x + 12 * ux)]
        dark = lum[round(y - 12 * uy), round(x - 12 * ux)]
        assert lit > 180 and dark < 76  # 128 +/- 100 * 12 / 18


@pytest.mark.parametrize(
    "reply,cell",
    [
        ("Cell (1,2)", "1,2"),
        ("cell(2,1) - I am not sure", "2,1"),
        ("Cell (2,3)", "invalid"),
        ("The target is in the top right.", "1,2"),
        ("Bottom-left", "2,1"),
        ("I cannot see it.", "invalid"),
        ("Cell (1,1), or maybe Cell (2,2)", "1,1"),
        ("", "invalid"),
        ("Cell (0,1)", "invalid"),
    ],
)
def test_parse_cell(reply, cell):
    assert parse_cell(reply) == cell


@pytest.mark.parametrize(
    "reply,point",
    [
        ("(120, 45)", (120, 45)),
        ("(120.5,45) - roughly", (120.5, 45)),
        ("x = 10, y = 20", (10, 20)),
        ("I am unable to give coordinates.", None),
        ("[300, 8]", (300, 8)),
        ("(-20, 450)", (-20, 450)),
    ],
)
def test_parse_point(reply, point):
    assert parse_point(reply) == point


def test_record_scores_cells_points_and_refusals():
    t = get_task("circle_sizes")
    s = t.generate(np.random.default_rng(0), 5, 5, 1, {"search": "large", "answer": "coords"})[0]
    x, y = s.params["x"][0], s.params["y"][0]
    on = t.record(s, f"({x + 20:.0f}, {y:.0f})")
    assert (
        on["correct"] == 1
        and on["valid"]
        and on["error_px"] == pytest.approx(math.hypot(round(x + 20) - x, round(y) - y), abs=1e-4)
    )
    refused = t.record(s, "I can't determine the coordinates.")
    assert refused["error_px"] == pytest.approx(565.685, abs=1e-3) == pytest.approx(DIAGONAL)
    assert (
        refused["correct"] == 0 and not refused["valid"] and refused["response_cell"] == "invalid"
    )
    outside = t.record(s, "(450, -3)")
    assert outside["response_cell"] == "invalid" and outside["valid"] and outside["correct"] == 0
    c = t.generate(np.random.default_rng(0), 5, 5, 1, {"search": "large"})[0]
    assert t.record(c, f"Cell ({c.params['target_cell']})")["correct"] == 1
    bad = t.record(c, "Cell (2,3)")
    assert bad["response_cell"] == "invalid" and bad["correct"] == 0 and bad["response"] == 0.0


def _search_spec(task, session, low, high, trials, seed=11):
    spec = load_spec(task)
    spec.update(trials=trials, seed=seed)
    spec["sessions"] = [
        {
            "name": session,
            "range": [low, high],
            "search": session.split("-")[0],
            "answer": session.split("-")[1],
        }
    ]
    return spec


@pytest.mark.slow
@pytest.mark.parametrize(
    "task,session,low,high",
    [
        ("circle_sizes", "large-cell", 0, 49),
        ("two_among_five", "disjunctive-cell", 0, 99),
        ("light_priors", "bottom-cell", 2, 17),
    ],
)
def test_simulated_searchers_are_recovered_from_their_answers(tmp_path, task, session, low, high):
    """sim:parallel flat, sim:serial falling, sim:random at chance without a cell bias: real images."""
    subjects = ["sim:parallel", "sim:serial", "sim:random"]
    sessions = plan(_search_spec(task, session, low, high, 240), subjects)
    store = ExperimentStore(tmp_path / "exp", {"test": task})
    execute(sessions, store, make_subjects(subjects), progress=False)
    t = read_trials(tmp_path / "exp")
    eff = set_size_effect(t).set_index("subject")
    par, ser, rnd = eff.loc["sim:parallel"], eff.loc["sim:serial"], eff.loc["sim:random"]
    assert par["accuracy"] > 0.85 and abs(par["r"]) < 0.15 and par["p_bonferroni"] > 0.05
    assert ser["r"] < -0.25 and ser["p_bonferroni"] < 1e-3 and ser["logistic_slope"] < 0
    assert abs(rnd["accuracy"] - 0.25) < 0.07 and rnd["p_bonferroni"] > 0.05
    from bayesobs.search.scores import response_bias

    bias = response_bias(t).set_index(["subject", "cell"])
    assert (bias.loc["sim:random", "selected"] - 0.25).abs().max() < 0.07
    assert (bias["invalid"] == 0).all()


def test_cli_run_score_report_with_blur_and_context_ablations(tmp_path, capsys):
    out = tmp_path / "exp"
    code = main(
        [
            "run",
            "circle_sizes",
            "--subject",
            "sim:parallel",
            "--subject",
            "sim:random",
            "--trials",
            "4",
            "--condition",
            "base",
            "--condition",
            "noise_constant",
            "--condition",
            "context_long",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert code == 0
    rows = pd.DataFrame(_rows(out))
    assert len(rows) == 2 * 3 * 6 * 4  # subjects x conditions x sessions x trials
    assert set(rows["modality"]) == {"image"}
    blur = rows.groupby("condition")["blur_sigma"].agg(["min", "max"])
    assert blur.loc["noise_constant"].tolist() == [3.0, 3.0] and blur.loc["base", "max"] == 0
    ctx = rows.groupby("condition")["context_trials"].apply(lambda c: max(len(x) for x in c))
    assert ctx["base"] == 0 and ctx["context_long"] == 3  # earlier trials ride along in the chat
    # the blurred image is a different picture of the same stimulus
    one = rows[
        (rows["trial"] == 0) & (rows["session"] == "large-cell") & (rows["subject"] == "sim:random")
    ]
    by = one.set_index("condition")
    assert by.loc["base", "stimulus_id"] == by.loc["noise_constant", "stimulus_id"]
    assert by.loc["base", "image"] != by.loc["noise_constant", "image"]
    assert {"set_size", "correct", "target_cell", "response_cell", "error_px"} <= set(rows.columns)

    assert main(["score", str(out), "--out", str(tmp_path / "sc"), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "Visual search" in printed
    search = pd.read_csv(tmp_path / "sc" / "search.csv")
    assert list(search.columns[: len(SEARCH_COLUMNS)]) == SEARCH_COLUMNS
    assert set(search["condition"]) == {"small", "medium", "large"}
    assert set(search["ablation"]) == {"base", "noise_constant", "context_long"}
    bias = pd.read_csv(tmp_path / "sc" / "search_bias.csv", dtype={"cell": str})
    assert list(bias.columns[:7]) == [
        "subject",
        "task",
        "cell",
        "precision",
        "recall",
        "selected",
        "invalid",
    ]
    assert not (tmp_path / "sc" / "fits.csv").exists()  # no magnitude trials, no observer fits

    assert main(["report", str(tmp_path / "sc"), "--out", str(tmp_path / "rep")]) == 0
    page = (tmp_path / "rep" / "index.html").read_text()
    assert "figures/search_circle_sizes.png" in page and "figures/search_bias.png" in page
    assert (tmp_path / "rep" / "figures" / "search_circle_sizes.png").stat().st_size > 10_000

    # resume: a rerun logs nothing new
    before = (out / "trials.jsonl").read_bytes()
    assert (
        main(
            [
                "run",
                "circle_sizes",
                "--subject",
                "sim:parallel",
                "--subject",
                "sim:random",
                "--trials",
                "4",
                "--condition",
                "base",
                "--condition",
                "noise_constant",
                "--condition",
                "context_long",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    assert (out / "trials.jsonl").read_bytes() == before


def test_fit_refuses_search_trials_and_subjects_refuse_the_wrong_task(tmp_path, capsys):
    out = tmp_path / "exp"
    assert (
        main(
            [
                "run",
                "light_priors",
                "--subject",
                "sim:serial",
                "--trials",
                "2",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    assert main(["fit", str(out), "--out", str(tmp_path / "f")]) == 2
    assert "bayesobs score" in capsys.readouterr().err
    assert (
        main(
            [
                "run",
                "light_priors",
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
    assert "sim:parallel" in capsys.readouterr().err
    assert (
        main(
            [
                "run",
                "circle_sizes",
                "--subject",
                "sim:parallel",
                "--modality",
                "text",
                "--out",
                str(tmp_path / "c"),
                "--no-progress",
            ]
        )
        == 2
    )
    assert "takes modalities image" in capsys.readouterr().err


def test_openai_subject_runs_a_search_task_over_http(tmp_path):
    """The same API subject: the question and the PNG go in the request, cells and points come back."""

    asked = {"cell": itertools.count(), "coords": itertools.count()}  # sessions run at once

    def script(body, n):
        question = body["messages"][-1]["content"][0]["text"]
        if "Cell (i,j)" in question:
            i = next(asked["cell"])
            return Answer("Cell (2,1)\nI am fairly confident." if i % 3 else "Cell (2,3)")
        i = next(asked["coords"])
        return Answer("(210, 95) is my estimate" if i % 4 else "I cannot give coordinates.")

    with FakeChatServer(script) as srv:
        code = main(
            [
                "run",
                "two_among_five",
                "--subject",
                "openai:vision-model",
                "--trials",
                "3",
                "--condition",
                "base",
                "--condition",
                "context_short",
                "--out",
                str(tmp_path / "o"),
                "--base-url",
                srv.url,
                "--api-key",
                "k",
                "--no-cache",
                "--no-progress",
            ]
        )
        requests = list(srv.requests)
    assert code == 0
    rows = pd.DataFrame(_rows(tmp_path / "o"))
    assert len(rows) == 2 * 6 * 3
    user = requests[0]["messages"][-1]["content"]
    assert user[0]["type"] == "text" and (
        "2x2 grid" in user[0]["text"] or "400x400" in user[0]["text"]
    )
    assert user[1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert (
        max(len(b["messages"]) for b in requests) == 1 + 2 * 2 + 1
    )  # context_short of 3 at trial 2
    cells = rows[rows["answer"] == "cell"]
    assert (
        set(cells["response_cell"]) <= {"2,1", "invalid"}
        and (cells["response_cell"] == "invalid").any()
    )
    pts = rows[rows["answer"] == "coords"]
    refused = pts[pts["response_x"].isna()]
    assert len(refused) and np.allclose(refused["error_px"], DIAGONAL, atol=1e-3)
    ok = pts[pts["response_x"].notna()]
    assert np.allclose(
        ok["error_px"], np.hypot(210 - ok["target_x"], 95 - ok["target_y"]), atol=1e-3
    )


def test_score_reads_a_human_search_file_without_stimulus_or_response(tmp_path, capsys):
    """A plain search CSV (condition = search condition) goes straight into `bayesobs score`."""
    rng = np.random.default_rng(4)
    n = 400
    k = rng.integers(0, 50, n)
    target = rng.choice(["1,1", "1,2", "2,1", "2,2"], n)
    found = rng.uniform(size=n) < np.where(np.arange(n) % 2, 0.95, np.minimum(1, 6 / (k + 1)))
    resp = np.where(found, target, rng.choice(["1,1", "1,2", "2,1", "2,2", "Cell (3,1)"], n))
    df = pd.DataFrame(
        {
            "participant": "p01",
            "condition": np.where(np.arange(n) % 2, "large", "small"),
            "set_size": k,
            "target_cell": target,
            "response_cell": resp,
            "correct": (resp == target).astype(int),
        }
    )
    df.to_csv(tmp_path / "humans.csv", index=False)
    assert (
        main(
            [
                "score",
                str(tmp_path / "humans.csv"),
                "--map",
                "subject=participant",
                "--out",
                str(tmp_path / "sc"),
            ]
        )
        == 0
    )
    s = pd.read_csv(tmp_path / "sc" / "search.csv").set_index("condition")
    assert list(s.index) == ["large", "small"] and (s["subject"] == "p01").all()
    assert abs(s.loc["large", "r"]) < 0.15 and s.loc["small", "r"] < -0.3
    bias = pd.read_csv(tmp_path / "sc" / "search_bias.csv")
    assert bias["invalid"].iloc[0] == pytest.approx(
        (~df["response_cell"].isin(["1,1", "1,2", "2,1", "2,2"])).mean()
    )


@pytest.mark.parametrize(
    "options,message",
    [
        ({"search": "huge"}, "unknown search condition 'huge'"),
        ({"answer": "coord"}, "unknown answer mode"),
        ({"answr": "coords"}, "unknown option(s) answr"),
        ({"border_margin": 120}, "border_margin"),
    ],
)
def test_bad_search_options_fail_before_any_call(tmp_path, options, message):
    spec = _search_spec("circle_sizes", "large-cell", 0, 9, 2)
    spec["sessions"][0].update(options)
    with pytest.raises(BayesobsInputError, match=re.escape(message)):
        plan(spec, ["sim:parallel"])


@pytest.mark.slow  # 600 rendered search trials, fitted
@pytest.mark.parametrize("kind", ["graded", "steep"])
def test_graded_searcher_has_the_psychometric_function_it_states(tmp_path, kind):
    """``sim:graded`` and ``sim:steep`` find the target with probability Phi((24 - distractors) / SD),
    SD 6 and 2: the threshold `bayesobs psychometric` fits to their answers is 24 and its width
    2 * 1.645 * SD (each search condition and answer mode, 100 trials over 0-49 distractors; 95%
    intervals)."""
    from bayesobs.search.subject import GRADED_SD, GRADED_THRESHOLD

    out = tmp_path / "g"
    args = ["run", "circle_sizes", "--subject", f"sim:{kind}", "--trials", "100"]
    assert main([*args, "--condition", "base", "--out", str(out), "--no-progress"]) == 0
    assert main(["psychometric", str(out), "--out", str(tmp_path / "p")]) == 0
    table = pd.read_csv(tmp_path / "p" / "psychometric.csv")
    assert len(table) == 6
    for name, truth in (("threshold", GRADED_THRESHOLD), ("width", 2 * 1.645 * GRADED_SD[kind])):
        covers = (table[f"{name}_lo"] <= truth) & (truth <= table[f"{name}_hi"])
        assert covers.sum() >= 5, name  # six 95% intervals: one may miss
    assert abs(table["threshold"].median() - GRADED_THRESHOLD) < 3
