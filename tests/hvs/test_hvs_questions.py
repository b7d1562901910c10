"""HVS fixture round trip, HVSBench-style questions, metrics and simulated subjects."""

from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from bayesobs.hvs import metrics, sims
from bayesobs.hvs.fixture import FIXTURE_NOTE, N_SUBJECTS, SALIENT_THRESHOLD, write_fixture
from bayesobs.hvs.loaders import SCREEN, load_folder
from bayesobs.hvs.multimatch import multimatch
from bayesobs.hvs.questions import (
    FIELDS,
    FIXATION_HINT,
    RANKING_HINT,
    SALIENT_HINT,
    build_questions,
    full_prompt,
    rel_box,
    to_frame,
)
from bayesobs.hvs.standardise import standardise

N_IMAGES = 40


@pytest.fixture(scope="module")
def hvs_dir(tmp_path_factory):
    return write_fixture(tmp_path_factory.mktemp("hvs") / "hvs", seed=3, n_images=N_IMAGES)


@pytest.fixture(scope="module")
def sources(hvs_dir):
    return load_folder(hvs_dir)


@pytest.fixture(scope="module")
def questions(sources):
    return build_questions(sources, seed=5)


def _by_type(questions, qtype):
    return [q for q in questions if q["qtype"] == qtype]


# ---------------------------------------------------------------- fixture
def test_fixture_round_trips_through_the_loaders(hvs_dir, sources):
    assert FIXTURE_NOTE in (hvs_dir / "README.txt").read_text()
    assert "not a benchmark" in FIXTURE_NOTE
    assert len(sources["freeview"]) == N_IMAGES * N_SUBJECTS
    assert len(sources["search"]) == N_IMAGES * N_SUBJECTS
    assert {r["split"] for r in sources["search"]} == {"train", "validation", "test"}
    for r in sources["freeview"] + sources["search"]:
        assert r["length"] == len(r["X"]) == len(r["Y"]) == len(r["T"])
        assert all(0 <= x < SCREEN[0] for x in r["X"]) and all(0 <= y < SCREEN[1] for y in r["Y"])
        # first fixation at the screen centre (centre bias of the simulation)
        assert math.hypot(r["X"][0] - 840, r["Y"][0] - 525) < 100
    for r in sources["search"]:  # target-present scanpaths end on the target box
        x, y, w, h = r["bbox"]
        assert x - 0.5 * w <= r["X"][-1] <= x + 1.5 * w and y - 0.5 * h <= r["Y"][-1] <= y + 1.5 * h
    assert len(sources["ranks"]) == len(sources["sis10k"]) == N_IMAGES
    for name, entry in sources["ranks"].items():
        inst = entry["instances"]
        assert [i["rank"] for i in inst] == list(range(1, len(inst) + 1))
        # the SIS10K salient instances are the leading ranks (salience above a threshold)
        sis = [i["bbox"] for i in sources["sis10k"][name]["instances"]]
        assert sis == [i["bbox"] for i in inst[: len(sis)]]
        assert entry["image"].is_file() and sources["sis10k"][name]["image"].is_file()
    assert SALIENT_THRESHOLD > 0


def test_fixture_is_seeded(tmp_path):
    a = write_fixture(tmp_path / "a", seed=1, n_images=2)
    b = write_fixture(tmp_path / "b", seed=1, n_images=2)
    c = write_fixture(tmp_path / "c", seed=2, n_images=2)
    rel = "coco_freeview/COCOFreeView_fixations_trainval.json"
    assert (a / rel).read_bytes() == (b / rel).read_bytes() != (c / rel).read_bytes()
    png = "sis10k/images/fixture_000.png"
    assert (a / png).read_bytes() == (b / png).read_bytes() != (c / png).read_bytes()


# ---------------------------------------------------------------- questions
def test_question_counts_follow_the_sources(sources, questions):
    n = Counter(q["qtype"] for q in questions)
    assert n["Q2"] == len(sources["ranks"]) + len(sources["sis10k"])
    assert n["Q1"] == sum(len(e["instances"]) >= 2 for e in sources["ranks"].values())
    assert n["Q3"] == sum(len(e["instances"]) >= 3 for e in sources["ranks"].values())
    for q in ("Q8", "Q9", "Q11", "Q12"):
        assert n[q] == N_IMAGES
    assert set(n) == set(FIELDS)
    assert len({q["qid"] for q in questions}) == len(questions)
    for q in questions:
        assert q["field"] == FIELDS[q["qtype"]] and q["system"] == ""


def test_q1_gold_is_the_rank_one_box(sources, questions):
    box_re = re.compile(r"^\d\.\d\d,\d\.\d\d,\d\.\d\d,\d\.\d\d$")
    for q in _by_type(questions, "Q1"):
        entry = sources["ranks"][q["qid"].split("-", 2)[2]]
        top = rel_box(entry["instances"][0]["bbox"], entry["width"], entry["height"])
        assert q["options"][q["answer"]] == ",".join(f"{v:.2f}" for v in top)
        assert all(box_re.match(v) for v in q["options"].values())
        assert 2 <= q["n_options"] <= 5
        letters = ", ".join(q["options"])
        assert (
            f"Please choose one answer from {letters} without bracket or explanation."
            in q["prompt"]
        )
        assert q["prompt"].startswith(
            "Each option represents the bounding box (relative coordinates of x1, y1, x2, y2) of "
            "an object in the given image."
        )


def test_q3_gold_orders_the_options_by_rank(sources, questions):
    for q in _by_type(questions, "Q3"):
        entry = sources["ranks"][q["qid"].split("-", 2)[2]]
        rank_of = {
            ",".join(f"{v:.2f}" for v in rel_box(i["bbox"], entry["width"], entry["height"])): i[
                "rank"
            ]
            for i in entry["instances"]
        }
        ranks = [rank_of[q["options"][letter]] for letter in q["answer"]]
        assert ranks == sorted(ranks) and sorted(q["answer"]) == list(q["options"])
        assert "(e.g., DCBA)" in q["prompt"]


def test_q2_prompt_is_the_papers(questions):
    q = _by_type(questions, "Q2")[0]
    assert q["prompt"] == (
        "How many salient objects are there in the following image? Please answer with a "
        "positive integer without explanation."
    )
    assert q["kind"] == "count" and q["answer"] >= 1


def test_scanpath_choice_wrong_option_comes_from_another_image(sources, questions):
    for qtype, src in (("Q8", "freeview"), ("Q11", "search")):
        for q in _by_type(questions, qtype):
            name = q["qid"].rsplit("/", 1)[-1].split("-", 2)[-1]
            own = {
                tuple(round(x / SCREEN[0], 6) for x in r["X"])
                for r in sources[src]
                if r["name"] == name
            }
            sps = q["data"]["scanpaths"]
            keys = [tuple(round(x, 6) for x in sp["X"]) for sp in sps]
            right = "AB".index(q["answer"])
            assert keys[right] in own and keys[1 - right] not in own
            assert q["options"][q["answer"]].count(" for ") == len(sps[right]["X"])


def test_scanpath_prediction_lengths(questions):
    for q in _by_type(questions, "Q9"):
        n = q["data"]["n_fix"]
        assert n in {len(h["X"]) for h in q["data"]["humans"]}
        assert f"each containing {n} values" in q["prompt"]
        assert len(q["data"]["humans"]) == N_SUBJECTS
    for q in _by_type(questions, "Q12"):
        assert q["data"]["n_fix"] == 6
        assert "Predict eye fixation points for searching for a " in q["prompt"]
        assert "length 6, sum not exceeding 5 seconds, formatted as integers." in q["prompt"]


def test_longest_fixation_gold(sources, questions):
    for qtype, src in (("Q10", "freeview"), ("Q13", "search")):
        for q in _by_type(questions, qtype):
            name = q["qid"].rsplit("/", 1)[-1].split("-", 2)[-1]
            pts = q["data"]["points"]
            # find the source scanpath holding all four points, brute force
            found = None
            for r in sources[src]:
                if r["name"] != name:
                    continue
                fx = [
                    (x / SCREEN[0], y / SCREEN[1], t)
                    for x, y, t in zip(r["X"], r["Y"], r["T"], strict=True)
                ]
                idx = [
                    next(
                        (
                            k
                            for k, f in enumerate(fx)
                            if abs(f[0] - px) < 1e-12 and abs(f[1] - py) < 1e-12
                        ),
                        None,
                    )
                    for px, py in pts
                ]
                if None not in idx:
                    found = [fx[k][2] for k in idx]
                    assert idx == sorted(idx)  # temporal order kept
                    break
            assert found is not None
            assert q["answer"] == "ABCD"[int(np.argmax(found))]
            assert found.count(max(found)) == 1


def test_gold_answers_survive_the_standardiser(questions):
    for q in questions:
        if q["kind"] != "scanpath":
            assert standardise(q["kind"], str(q["answer"])) == q["answer"]


def test_questions_are_seeded(sources, questions):
    again = build_questions(sources, seed=5)
    other = build_questions(sources, seed=6)
    assert [q["prompt"] for q in again] == [q["prompt"] for q in questions]
    assert [q["prompt"] for q in other] != [q["prompt"] for q in questions]


def test_hint_ablation(sources, questions):
    hinted = build_questions(sources, seed=5, hint=True)
    hints = {"Q1": SALIENT_HINT, "Q2": SALIENT_HINT, "Q3": RANKING_HINT, "Q7": RANKING_HINT}
    hints |= {"Q8": FIXATION_HINT, "Q13": FIXATION_HINT}
    for plain, h in zip(questions, hinted, strict=True):
        assert plain["prompt"] == h["prompt"]
        if h["qtype"] in hints:
            assert h["system"] == hints[h["qtype"]]
        assert full_prompt(h) == f"{h['system']}\n\n{h['prompt']}"
        assert full_prompt(plain) == plain["prompt"]
    assert FIXATION_HINT.endswith("The scanpath often begins at the center of the image.")
    with pytest.raises(ValueError, match="unknown question type"):
        build_questions(sources, types=("Q14",))
    df = to_frame(build_questions(sources, seed=5, types=("Q1", "Q8")))
    assert set(df["qtype"]) == {"Q1", "Q8"}


# ---------------------------------------------------------------- metrics
def test_count_metrics_by_hand():
    m = metrics.count_metrics([1, 2, 3], [1, 4, 0])
    assert m == pytest.approx({"acc": 1 / 3, "mae": 5 / 3, "rmse": math.sqrt(13 / 3)}, rel=1e-12)


def test_scanpath_score_cuts_to_six_and_scales_to_the_screen():
    human = {"X": [0.5, 0.2, 0.8, 0.3], "Y": [0.5, 0.4, 0.6, 0.9], "T": [200, 300, 250, 400]}
    pred = {
        "X": [0.5, 0.25, 0.7, 0.3, 0.6, 0.1, 0.99, 0.01],
        "Y": [0.5, 0.45, 0.5, 0.8, 0.2, 0.3, 0.99, 0.01],
        "T": [100, 200, 300, 200, 100, 200, 900, 900],
    }
    got = metrics.scanpath_score(pred, [human, human])
    px = [
        (x * 1680, y * 1050, t)
        for x, y, t in zip(pred["X"][:6], pred["Y"][:6], pred["T"][:6], strict=True)
    ]
    hx = [
        (x * 1680, y * 1050, t) for x, y, t in zip(human["X"], human["Y"], human["T"], strict=True)
    ]
    ref = multimatch(px, hx, (1680, 1050))
    assert got == pytest.approx({"m_dir": ref["direction"], "m_pos": ref["position"]}, abs=1e-12)
    assert metrics.scanpath_score(human, [human]) == pytest.approx({"m_dir": 1.0, "m_pos": 1.0})
    # an empty prediction is the default central fixation
    empty = metrics.scanpath_score({"X": [], "Y": [], "T": []}, [human])
    default = metrics.scanpath_score({"X": [0.5], "Y": [0.5], "T": [0]}, [human])
    assert empty == default
    negative = metrics.scanpath_score({"X": [0.5, 0.2], "Y": [0.5, 0.4], "T": [-5, 200]}, [human])
    zero = metrics.scanpath_score({"X": [0.5, 0.2], "Y": [0.5, 0.4], "T": [0, 200]}, [human])
    assert negative == zero


def test_gold_replies_score_perfectly(questions):
    replies = [
        str(q["answer"])
        if q["kind"] != "scanpath"
        else "X = [{}] Y = [{}] T = [{}]".format(
            *(", ".join(str(v) for v in q["data"]["humans"][0][k]) for k in ("X", "Y", "T"))
        )
        for q in questions
    ]
    scored = metrics.score_replies(questions, replies)
    assert scored.loc[scored["kind"] != "scanpath", "correct"].all()
    table = metrics.hvs_table(scored, "gold")
    assert list(table.columns) == list(metrics.TABLE_COLUMNS)
    assert table.loc["gold", "Overall Acc"] == 1.0
    assert table.loc["gold", "Subitizing Q2 MAE"] == 0.0
    by_type = metrics.accuracy_by_type(scored)
    assert list(by_type.index) == list(metrics.ACC_TYPES) and (by_type == 1.0).all()
    # the first human scanpath matches itself, so the mean over humans exceeds 1/N
    assert table.loc["gold", "Free-viewing Q9 M-Pos"] > 1 / N_SUBJECTS


def test_hvs_table_pools_questions_by_hand():
    scored = pd.DataFrame(
        {
            "qtype": ["Q1", "Q1", "Q3", "Q4", "Q4", "Q4", "Q2", "Q2", "Q9", "Q10"],
            "gold": [None] * 6 + [3, 1, None, None],
            "pred": [None] * 6 + [2, 1, None, None],
            "correct": [1, 0, 0, 1, 1, 1, 0, 1, np.nan, 0],
            "m_dir": [np.nan] * 8 + [0.6, np.nan],
            "m_pos": [np.nan] * 8 + [0.8, np.nan],
        }
    )
    t = metrics.hvs_table(scored, "x").loc["x"]
    assert t["Overall Acc"] == pytest.approx(5 / 9)  # 9 accuracy-scored questions, 5 right
    assert t["Prioritizing Q3-Q7 Acc"] == pytest.approx(3 / 4)  # pooled, not (0 + 1) / 2
    assert t["Prominence Q1 Acc"] == 0.5 and t["Subitizing Q2 Acc"] == 0.5
    assert t["Subitizing Q2 MAE"] == 0.5 and t["Subitizing Q2 RMSE"] == pytest.approx(
        math.sqrt(0.5)
    )
    assert t["Free-viewing Q8,Q10 Acc"] == 0.0 and t["Free-viewing Q9 M-Dir"] == 0.6
    assert np.isnan(t["Searching Q11,Q13 Acc"])


def test_random_baselines_by_hand(questions, tmp_path):
    scored = metrics.random_baseline_scores(questions, seed=0)
    counts = np.array([q["answer"] for q in questions if q["qtype"] == "Q2"], dtype=float)
    p_hit = sum((np.sum(counts == c) / counts.size) ** 2 for c in np.unique(counts))
    q2 = scored[scored["qtype"] == "Q2"]
    assert q2["correct"].iloc[0] == pytest.approx(p_hit, rel=1e-12)
    table = metrics.hvs_table(scored, "random")
    assert table.loc["random", "Subitizing Q2 MAE"] == pytest.approx(
        np.mean(np.abs(counts - counts.mean())), rel=1e-12
    )
    assert table.loc["random", "Subitizing Q2 RMSE"] == pytest.approx(counts.std(), rel=1e-12)
    q1 = _by_type(questions, "Q1")
    assert table.loc["random", "Prominence Q1 Acc"] == pytest.approx(
        np.mean([1 / q["n_options"] for q in q1]), rel=1e-12
    )
    q3 = scored[scored["qtype"] == "Q3"]
    assert set(q3["correct"]) <= {1 / 6, 1 / 24}
    sp = scored[scored["qtype"].isin(["Q9", "Q12"])]
    assert sp["m_dir"].between(0, 1).all() and sp["m_pos"].between(0, 1).all()
    metrics.write_hvs_csv(table, tmp_path / "hvs.csv")
    back = pd.read_csv(tmp_path / "hvs.csv", index_col=0)
    assert list(back.columns) == ["benchmark", *metrics.TABLE_COLUMNS]
    assert (back["benchmark"] == "HVSBench-style (questions recreated from public data)").all()
    assert back.loc["random", "Prominence Q1 Acc"] == pytest.approx(
        table.loc["random", "Prominence Q1 Acc"], abs=5e-5
    )


# ---------------------------------------------------------------- simulated subjects
def test_random_subject_reproduces_the_analytic_baselines(questions):
    """Pooled over R seeds, each accuracy lies within 4 binomial SEs of its expectation.

    For a type with per-question chances p_i over n questions and R replicates, the
    number right is a sum of independent Bernoullis: SE of the mean is
    sqrt(R * sum p_i (1 - p_i)) / (R * n).
    """
    ctx = sims.sim_context(questions)
    scored_qs = [q for q in questions if q["kind"] != "scanpath"]
    base = metrics.random_baseline_scores(scored_qs)
    reps = 30
    hits = []
    for seed in range(reps):
        scored = metrics.score_replies(scored_qs, sims.run("random", scored_qs, seed, ctx))
        hits.append(scored["correct"].to_numpy(dtype=float))
    hits = np.array(hits)
    p = base["correct"].to_numpy(dtype=float)
    qtype = base["qtype"].to_numpy()
    for t in ("Q1", "Q2", "Q3", "Q4", "Q5", "Q6", "Q7", "Q8", "Q10", "Q11", "Q13", "all"):
        mask = ~np.isnan(p) if t == "all" else qtype == t
        n = mask.sum()
        se = math.sqrt(reps * np.sum(p[mask] * (1 - p[mask]))) / (reps * n)
        assert abs(hits[:, mask].mean() - p[mask].mean()) < 4 * se, t


def test_saliency_beats_random_on_prominence_and_free_viewing(questions):
    scored = metrics.score_replies(questions, sims.run("saliency", questions, seed=0))
    base = metrics.random_baseline_scores(questions)
    for types in (("Q1",), ("Q8", "Q10")):
        mask = scored["qtype"].isin(types)
        p = base.loc[mask, "correct"].to_numpy(dtype=float)
        se = math.sqrt(np.sum(p * (1 - p))) / p.size
        assert scored.loc[mask, "correct"].mean() > p.mean() + 2 * se, types
    table = metrics.hvs_table(scored, "saliency").loc["saliency"]
    rand = metrics.hvs_table(base, "random").loc["random"]
    assert table["Free-viewing Q9 M-Dir"] > rand["Free-viewing Q9 M-Dir"]


@pytest.mark.parametrize("sim", sims.SIMS)
def test_sim_replies_are_readable_and_seeded(sim, questions):
    ctx = sims.sim_context(questions)
    sub = questions[::3]
    replies = sims.run(sim, sub, seed=4, context=ctx)
    assert replies == sims.run(sim, sub, seed=4, context=ctx)
    for q, r in zip(sub, replies, strict=True):
        got = standardise(q["kind"], r)
        if q["kind"] == "choice":
            assert got in q["options"]
        elif q["kind"] == "ranking":
            assert sorted(got) == sorted(q["options"])
        elif q["kind"] == "count":
            assert isinstance(got, int) and got >= 1
        else:
            want = q["data"]["n_fix"] if sim != "random" else len(got["X"])
            assert len(got["X"]) == len(got["Y"]) == len(got["T"]) == want >= 1
            assert all(0 <= v <= 1 for v in got["X"] + got["Y"])
    with pytest.raises(ValueError, match="allowed center, saliency, largest, random"):
        sims.answer("oracle", questions[0])


def test_spectral_residual_finds_a_lone_square():
    img = np.full((210, 336, 3), 128, dtype=np.uint8)
    assert not sims.spectral_residual(img).any()  # a flat image has no saliency
    img[40:70, 250:280] = (230, 40, 40)
    sal = sims.spectral_residual(img)
    assert sal.max() == pytest.approx(1.0)
    square = (250 / 336, 40 / 210, 280 / 336, 70 / 210)
    mass = sims.box_saliency(sal, square)
    for dx, dy in ((-0.5, 0), (-0.3, 0.4), (-0.6, 0.5), (0, 0.5)):
        other = (square[0] + dx, square[1] + dy, square[2] + dx, square[3] + dy)
        assert mass > 3 * sims.box_saliency(sal, other)
    assert len(sims.salient_blobs(sal)) == 1
