"""Perception foundation and the Tunnel Vision tasks end to end: runner, CLI, score, report.

The simulated subjects look at the PNGs the runner sends (two per
re-identification trial); their signatures are recovered from the scored
tables with reduced trial counts (seeded, so the numbers are fixed).
"""

from __future__ import annotations

import base64
import json
import shutil
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bayesobs import answers
from bayesobs.cli import main
from bayesobs.errors import BayesobsInputError
from bayesobs.run.ablations import condition, system_prompt
from bayesobs.run.subjects import Request, Turn
from bayesobs.run.subjects.openai_chat import ChatOptions, OpenAIChatSubject, to_messages
from bayesobs.stimuli import get_task
from bayesobs.testing.fakeserver import Answer, FakeChatServer
from bayesobs.tunnel.scores import logistic, wilson

NO_REASONING = "Do not explain or reason. Only output the final answer."


def _rows(folder: Path) -> pd.DataFrame:
    lines = (folder / "trials.jsonl").read_text().splitlines()
    return pd.DataFrame([json.loads(x) for x in lines if x.strip()])


# ------------------------------------------------------------------ answer formats
@pytest.mark.parametrize(
    "reply,allowed,fallback,value",
    [
        ("I think {Yes}.", {"yes", "no"}, "word", "yes"),
        ("No, they differ", {"yes", "no"}, "word", "no"),
        ("{red} then {blue}", {"red", "blue"}, "reply", "red"),
        ("  Blue. ", {"red", "blue"}, "reply", "blue"),
        ("the answer is blue", {"red", "blue"}, "reply", None),
        ("{purple}", {"red", "blue"}, "reply", None),
        ("", {"red"}, "reply", None),
        ("blue", {"blue"}, "none", None),
    ],
)
def test_braced_word(reply, allowed, fallback, value):
    got, why = answers.braced_word(reply, allowed, fallback)
    assert got == value and (why is None) == (value is not None)


def test_labels_lists_sets_and_fields():
    assert answers.label("QUADRANT: Top Left", ["top left", "top right"], key="quadrant") == (
        "top left",
        None,
    )
    assert answers.label("I pick B.", ["A", "B", "C"]) == ("B", None)
    assert answers.label("{D}", ["A", "B"])[0] is None
    assert answers.ordered_list("Order: [red, Blue, green]", {"red", "blue", "green"}) == (
        ("red", "blue", "green"),
        None,
    )
    assert (
        answers.ordered_list("[red, pink]", {"red", "blue"})[1] == "'pink' is not an allowed item"
    )
    assert answers.ordered_list("[a, b]", length=3)[1] == "2 items, 3 asked"
    assert answers.unordered_set("{b, a, b}") == (("a", "b"), None)
    assert answers.unordered_set("SET: c; a", key="set") == (("a", "c"), None)
    assert answers.fields("COUNT: 7\nQuadrant: top left\nCOUNT: 9") == {
        "COUNT": "7",
        "QUADRANT": "top left",
    }
    assert answers.number_field("COUNT: 7 ", "count") == (7, None)
    assert answers.number_field("COUNT: seven", "count")[0] is None
    assert answers.number_field("no field", "count") == (None, "no COUNT: field")


# ------------------------------------------------------------------ prompts and requests
def test_reasoning_is_a_task_property_and_magnitude_wording_is_unchanged():
    base = condition("base")
    line = system_prompt(get_task("line_ratio"), base, [], (0.1, 0.9))
    assert line.endswith(" " + NO_REASONING)
    assert line == (
        f"You are a {get_task('line_ratio').role}. {get_task('line_ratio').instruction} "
        + NO_REASONING
    )
    search = system_prompt(get_task("circle_sizes"), base, [], (0, 49))
    assert search.endswith(NO_REASONING)
    for name, budget in (("object_reid", 30), ("scavenger_hunt", 100), ("circuits", 150)):
        task = get_task(name)
        assert NO_REASONING not in system_prompt(task, base, [], (0, 10))
        assert task.allow_reasoning and task.max_tokens == budget
    assert get_task("line_ratio").max_tokens is None


def test_several_images_one_part_each_in_order_and_in_the_cache_key():
    a, b, c = b"\x89PNG-a", b"\x89PNG-b", b"\x89PNG-c"
    req = Request("sys", (Turn("user", text="q", png=a, images=(a, b)),), {"trial": 0})
    parts = to_messages(req)[1]["content"]
    assert [p["type"] for p in parts] == ["text", "image_url", "image_url"]
    urls = [p["image_url"]["url"] for p in parts[1:]]
    assert [base64.b64decode(u.split(",", 1)[1]) for u in urls] == [a, b]
    one = to_messages(Request("sys", (Turn("user", text="q", png=a),)))[1]["content"]
    assert len(one) == 2 and one[1]["image_url"]["url"] == urls[0]  # one image: as before
    subj = OpenAIChatSubject(ChatOptions(model="m", base_url="http://127.0.0.1:9"), api_key="k")
    other = Request("sys", (Turn("user", text="q", png=a, images=(a, c)),), {"trial": 0})
    body, body2 = subj.payload(req), subj.payload(other)
    assert subj.cache_key(body, req) != subj.cache_key(body2, other)
    assert body["max_completion_tokens"] == 64  # the subject's budget unless the task sets one
    assert subj.payload(Request("sys", req.turns, {}, max_tokens=30))["max_completion_tokens"] == 30


# ------------------------------------------------------------------ generation and options
@pytest.mark.slow
def test_stratified_sizes_and_session_trials():
    task = get_task("object_reid")
    stims = task.generate(np.random.default_rng(3), 2, 5, 8, {"stratified": True})
    assert sorted(s.value for s in stims) == [2, 2, 3, 3, 4, 4, 5, 5]
    narrow = task.generate(np.random.default_rng(3), 3, 4, 6, {"variant": "unconnected"})
    assert {s.value for s in narrow} <= {3, 4}
    hunt = get_task("scavenger_hunt").generate(
        np.random.default_rng(0), 2, 4, 2, {"variant": "decomposed"}
    )
    assert len(hunt) == 6 and [s.params["columns"]["step"] for s in hunt] == [1, 2, 3, 1, 2, 3]
    assert [s.params["format"] for s in hunt[:3]] == ["hunt_cell", "hunt_cell", "hunt_colour"]


@pytest.mark.parametrize(
    "options,message",
    [
        ({"variant": "rainbow"}, "unknown variant 'rainbow'"),
        ({"colour": "red"}, "unknown option(s) colour"),
        ({"stratified": "yes"}, "stratified must be true or false"),
        ({"stratified": True}, "multiple of the 4 problem sizes"),
    ],
)
def test_bad_options_fail_before_any_call(tmp_path, capsys, options, message):
    task = get_task("object_reid")
    with pytest.raises(BayesobsInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        task.generate(np.random.default_rng(0), 2, 5, 3, options)
    lines = ['task = "object_reid"', "seed = 1", "trials = 3", "[options]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in options.items()]
    lines += ["[[sessions]]", 'name = "a"', "range = [2, 5]"]
    spec = tmp_path / "bad.toml"
    spec.write_text("\n".join(lines) + "\n")
    out = tmp_path / "o"
    code = main(["run", str(spec), "--subject", "sim:matcher", "--out", str(out), "--no-progress"])
    assert code == 2 and message in capsys.readouterr().err
    assert not (out / "trials.jsonl").exists()


def test_specialists_answer_other_tunnel_tasks_at_random_and_refuse_other_paradigms(
    tmp_path, capsys
):
    code = main(
        [
            "run",
            "line_ratio",
            "--subject",
            "sim:matcher",
            "--trials",
            "2",
            "--modality",
            "text",
            "--out",
            str(tmp_path / "o"),
            "--no-progress",
        ]
    )
    assert code != 0 and "sim:matcher answers the Tunnel Vision tasks" in capsys.readouterr().err


def test_random_answers_every_paradigm_in_its_format(tmp_path):
    out = tmp_path / "o"
    code = main(
        [
            "run",
            "line_ratio",
            "--subject",
            "sim:random",
            "--trials",
            "20",
            "--modality",
            "text",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert code == 0
    rows = _rows(out)
    assert rows.valid.all() and rows.response.between(rows.range_low, rows.range_high).all()
    assert rows.response.nunique() > 10  # drawn, not constant
    assert (
        main(
            [
                "run",
                "circle_sizes",
                "--subject",
                "sim:random",
                "--trials",
                "2",
                "--out",
                str(tmp_path / "s"),
                "--no-progress",
            ]
        )
        == 0
    )
    assert _rows(tmp_path / "s").response_cell.str.match(r"^\d,\d$|^invalid$").all()


# ------------------------------------------------------------------ statistics
def test_wilson_and_logistic_against_known_values():
    lo, hi = wilson(np.array([0, 5, 10]), np.array([10, 10, 10]))
    assert np.allclose(lo, [0.0, 0.2366, 0.7225], atol=1e-4)
    assert np.allclose(hi, [0.2775, 0.7634, 1.0], atol=1e-4)
    rng = np.random.default_rng(0)
    x = rng.normal(size=4000)
    y = (rng.random(4000) < 1 / (1 + np.exp(-(0.5 - 1.2 * x)))).astype(float)
    (fit,) = logistic(y, x)
    assert abs(fit["coef"] + 1.2) < 3 * fit["se"] and fit["p"] < 1e-10
    assert abs(fit["intercept"] - 0.5) < 0.15
    assert logistic(y, np.ones_like(x))[0]["note"] == "covariate constant"
    assert logistic(np.ones(10), np.arange(10.0))[0]["note"] == "all correct"


# ------------------------------------------------------------------ signatures through the CLI
# (folder, task, sessions (None: all), trials per session, subjects, extra CLI arguments);
# each circuit subject runs only the colour modes its test reads
RUNS = [
    ("object_reid", "object_reid", None, 40, ["sim:matcher", "sim:yes", "sim:random"], []),
    ("scavenger_hunt", "scavenger_hunt", None, 250, ["sim:chainer"], ["--modality", "image"]),
    ("circuits", "circuits", ["single", "unique"], 100, ["sim:tracer", "sim:colourcue"], []),
    ("circuits_nearest", "circuits", ["standard"], 100, ["sim:nearest"], []),
]
SPECS = Path(__file__).resolve().parents[2] / "tasks"


def _subset_spec(folder: Path, task: str, sessions: list[str]) -> Path:
    """The shipped spec of ``task`` with only ``sessions`` (same seeds, so the same trials)."""
    spec = tomllib.loads((SPECS / f"{task}.toml").read_text())
    lines = [
        f'task = "{task}"',
        f"seed = {spec['seed']}",
        f"trials = {spec['trials']}",
        'modalities = ["image"]',
        "[ablations]",
        "context = 0",
    ]
    for sess in spec["sessions"]:
        if sess["name"] in sessions:
            lines += [
                "[[sessions]]",
                f'name = "{sess["name"]}"',
                f"range = {sess['range']}",
                f'variant = "{sess["variant"]}"',
            ]
    path = folder / f"{task}-{'-'.join(sessions)}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """Each task run through the CLI with reduced counts, scored and reported together."""
    root = tmp_path_factory.mktemp("tunnel")
    for folder, task, sessions, n, subjects, extra in RUNS:
        spec = task if sessions is None else str(_subset_spec(root, task, sessions))
        args = [
            "run",
            spec,
            "--trials",
            str(n),
            "--out",
            str(root / folder),
            "--no-progress",
            *extra,
        ]
        for s in subjects:
            args += ["--subject", s]
        assert main(args) == 0
    folders = [str(root / r[0]) for r in RUNS]
    assert main(["score", *folders, "--out", str(root / "scores")]) == 0
    assert main(["report", str(root / "scores"), "--out", str(root / "report")]) == 0
    tables = {
        n: pd.read_csv(root / "scores" / f"{n}.csv")
        for n in (
            "perception",
            "perception_size",
            "perception_effects",
            "perception_f1",
            "perception_chain",
        )
    }
    return root, tables


def _acc(tables, subject, task, variant, modality="image"):
    t = tables["perception"]
    row = t[
        (t.subject == subject)
        & (t.task == task)
        & (t.variant == variant)
        & (t.modality == modality)
    ]
    assert len(row) == 1
    return row.iloc[0]


@pytest.mark.slow
def test_reidentification_signatures(scored):
    root, tables = scored
    for variant in ("standard", "unconnected", "pixel_perfect"):
        assert _acc(tables, "sim:matcher", "object_reid", variant).accuracy >= 0.95
    rnd = tables["perception"].query("subject == 'sim:random' and task == 'object_reid'")
    assert abs(rnd.n_correct.sum() / rnd.n.sum() - 0.5) <= 0.07  # pooled over the three variants
    assert (rnd.chance == 0.5).all() and (rnd.invalid_rate == 0).all()
    f1 = tables["perception_f1"]
    yes = f1[f1.subject == "sim:yes"]
    assert (yes[yes["class"] == "no"].f1 == 0).all() and (yes[yes["class"] == "yes"].f1 > 0.6).all()
    assert (f1[f1.subject == "sim:matcher"].f1 >= 0.9).all()
    rows = _rows(root / "object_reid")
    assert (rows.paradigm == "perception").all() and rows.images.map(len).eq(2).all()
    assert set(rows.columns) >= {
        "problem_size",
        "correct",
        "gold",
        "n_shapes",
        "positive",
        "n_changed",
        "n_distractors",
        "demos",
        "trial_seed",
    }
    assert all([x["answer"] for x in d] == ["{yes}", "{no}"] for d in rows.demos)
    for paths in rows.images.head(3):
        assert all((root / "object_reid" / p).exists() for p in paths)


@pytest.mark.slow
def test_scavenger_hunt_compounds_as_one_minus_e_to_the_l(scored):
    root, tables = scored
    chain = tables["perception_chain"]
    rows = _rows(root / "scavenger_hunt")
    for modality in ("image",):
        c = chain[(chain.subject == "sim:chainer") & (chain.modality == modality)].sort_values("L")
        assert list(c.L) == [2, 3, 4]
        assert c.accuracy.iloc[0] > c.accuracy.iloc[2]
        chains = rows[(rows.modality == modality) & (rows.variant != "decomposed")]
        (slope,) = logistic(chains.correct.to_numpy(float), chains.problem_size.to_numpy(float))
        assert slope["coef"] < 0 and slope["p"] < 0.05  # accuracy falls with L
        assert c.within.all()  # s^L + (1 - s^L) g inside each L's 95% interval
        # e conditional on the first two steps right (Table 1), each step asked from the last answer
        assert 0.05 < c.final_step_error.iloc[0] < 0.35 and (c.final_step_n > 100).all()
        dec = _acc(tables, "sim:chainer", "scavenger_hunt", "decomposed", modality)
        assert dec.sequence_n == 250 and c.final_step_n.iloc[0] == dec.final_step_n
        assert abs(dec.sequence_accuracy - 0.8**3) < 0.1  # every step right, p = 0.2 per step


def test_the_text_table_is_read_like_the_pixels():
    """Scavenger hunt in the text modality: the subject reads the table and answers as from the image."""
    from bayesobs.tunnel import hunt
    from bayesobs.tunnel.subject import TunnelSubject, grid_from_text

    task = get_task("scavenger_hunt")
    stims = task.generate(np.random.default_rng(5), 2, 4, 12, {"variant": "L3"})
    subject = TunnelSubject("chainer")
    for stim in stims:
        meta = {
            "task": "scavenger_hunt",
            "session": "s",
            "run": 0,
            "condition": "base",
            "modality": "image",
            "trial": 0,
        }
        image = Turn("user", text=stim.prompt, png=task.render_png(stim))
        text = Turn("user", text=f"{stim.text}\n\n{stim.prompt}")
        assert (
            hunt.render(grid_from_text(stim.text)).tobytes()
            == hunt.make_trial("L3", stim.params["seed"], with_demos=False).images[0].tobytes()
        )
        same = (
            subject.answer(Request("", (text,), meta)),
            subject.answer(Request("", (image,), meta)),
        )
        assert same[0] == same[1]
    demo = task.demos(stims[0], "text")[0]
    assert demo.images == () and "row | column | shape | colour | label" in demo.text


@pytest.mark.slow
def test_circuit_signatures_and_table2_regressions(scored):
    root, tables = scored
    eff = tables["perception_effects"]

    def coef(subject, variant, covariate, model="univariate"):
        r = eff[
            (eff.subject == subject)
            & (eff.variant == variant)
            & (eff.covariate == covariate)
            & (eff.model == model)
        ]
        assert len(r) == 1
        return r.iloc[0]

    joint = "distance_px + crossings"
    tr = coef("sim:tracer", "single", "crossings")
    assert tr.coef < 0 and tr.p < 0.01
    assert coef("sim:tracer", "single", "crossings", joint).p < 0.01
    assert coef("sim:tracer", "single", "distance_px", joint).p > 0.05
    nd = coef("sim:nearest", "standard", "distance_px")
    assert nd.coef < 0 and nd.p < 0.01
    assert coef("sim:nearest", "standard", "distance_px", joint).p < 0.01
    assert coef("sim:nearest", "standard", "crossings", joint).p > 0.05
    assert _acc(tables, "sim:colourcue", "circuits", "unique").accuracy >= 0.9
    single = _acc(tables, "sim:colourcue", "circuits", "single")
    assert abs(single.accuracy - single.chance) <= 0.1
    rows = _rows(root / "circuits")
    assert set(rows.columns) >= {
        "distance_px",
        "path_length",
        "crossings",
        "crossings_earlier",
        "colour_mode",
        "wire_colour",
        "n_components",
    }
    assert np.allclose(rows.chance, 1 / rows.n_components)


@pytest.mark.slow
def test_report_draws_every_perception_figure(scored):
    root, _ = scored
    figs = {p.name for p in (root / "report" / "figures").iterdir()}
    assert {
        "perception_object_reid_image.png",
        "perception_scavenger_hunt_image.png",
        "perception_f1_object_reid.png",
        "perception_chain_image.png",
        "perception_effect_crossings.png",
        "perception_effect_distance_px.png",
        "perception_size_circuits.png",
    } <= figs
    page = (root / "report" / "index.html").read_text()
    assert "Circuits: Table 2 regressions" in page and "compounding error" in page
    # the decomposed hunt beside Table 1 on the same metric; both chance levels, defined
    assert "against the paper&#x27;s Table 1" in page or "against the paper's Table 1" in page
    assert "paper: o4-mini" in page and "accuracy_per_sequence" in page
    assert "chance_paper" in page and "1/7 = 1/E[n]" in page


# ------------------------------------------------------------------ the protocol and resuming
def _paths(rec: dict) -> list[str]:
    """Every stored image a trial record names (its images and its demonstrations')."""
    out = [rec["image"]] if rec.get("image") else []
    out += rec.get("images") or []
    return out + [p for d in rec.get("demos") or [] for p in d["images"]]


@pytest.mark.slow
def test_protocol_sweep_resumes_byte_identically(tmp_path, capsys):
    subjects = ["sim:matcher", "sim:chainer", "sim:tracer", "sim:random"]
    args = [
        "sweep",
        "tasks/tunnel_vision.toml",
        "--trials",
        "2",
        "--no-progress",
        "--concurrency",
        "1",
    ]
    for s in subjects:
        args += ["--subject", s]
    full = tmp_path / "full"
    assert main([*args, "--out", str(full)]) == 0
    lines = (full / "trials.jsonl").read_bytes().splitlines(keepends=True)
    # 3 reid + 3 circuits sessions + hunt (3 chains + 3-question decomposed) x 2 modalities
    assert len(lines) == len(subjects) * (2 * 3 + 2 * 3 + 2 * (2 * 3 + 6))
    part = tmp_path / "part"
    (part / "stimuli").mkdir(parents=True)
    shutil.copy(full / "manifest.json", part / "manifest.json")
    (part / "trials.jsonl").write_bytes(b"".join(lines[:37]))  # stopped part way
    for p in {p for x in lines[:37] for p in _paths(json.loads(x))}:  # with its images
        shutil.copy(full / p, part / p)
    assert main([*args, "--out", str(part)]) == 0
    assert "37" in capsys.readouterr().out  # the logged trials were skipped

    def strip(raw):  # the clock is the only thing that may differ
        rec = json.loads(raw)
        return {k: v for k, v in rec.items() if k not in ("timestamp", "latency_s")}

    again = (part / "trials.jsonl").read_bytes().splitlines(keepends=True)
    assert again[:37] == lines[:37]
    assert [strip(x) for x in again] == [strip(x) for x in lines]
    assert [json.dumps(strip(x)) for x in again] == [json.dumps(strip(x)) for x in lines]
    used = {p for x in again for p in _paths(json.loads(x))}
    assert used == {f"stimuli/{p.name}" for p in (part / "stimuli").iterdir()}
    for p in used:
        assert (part / p).read_bytes() == (full / p).read_bytes()
    assert main(["score", str(full), "--out", str(tmp_path / "s")]) == 0
    acc = pd.read_csv(tmp_path / "s" / "perception.csv")
    assert set(acc.subject) == set(subjects) and set(acc.task) == {
        "object_reid",
        "scavenger_hunt",
        "circuits",
    }


# ------------------------------------------------------------------ an API model over HTTP
def test_openai_subject_gets_two_images_and_the_demos_in_order(tmp_path):
    with FakeChatServer(lambda body, n: Answer("Same object, same layout. {yes}")) as srv:
        code = main(
            [
                "run",
                "object_reid",
                "--subject",
                "openai:vision",
                "--trials",
                "1",
                "--out",
                str(tmp_path / "o"),
                "--base-url",
                srv.url,
                "--api-key",
                "k",
                "--no-cache",
                "--no-progress",
                "--concurrency",
                "1",
            ]
        )
        requests = list(srv.requests)
    assert code == 0 and len(requests) == 3
    rows = _rows(tmp_path / "o")
    body = requests[0]
    row = rows[(rows.session == "standard")].iloc[0]
    assert body["max_completion_tokens"] == 30
    msgs = body["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert NO_REASONING not in msgs[0]["content"]
    assert msgs[2]["content"] == "{yes}" and msgs[4]["content"] == "{no}"
    assert msgs[3]["content"][0]["text"].startswith("That is correct. ")
    assert msgs[5]["content"][0]["text"].startswith("Yes, that is correct. ")

    def pngs(msg):
        return [
            base64.b64decode(p["image_url"]["url"].split(",", 1)[1])
            for p in msg["content"]
            if p["type"] == "image_url"
        ]

    folder = tmp_path / "o"
    for k, m in enumerate((msgs[1], msgs[3])):  # each demo: its two images, in order
        assert pngs(m) == [(folder / p).read_bytes() for p in row.demos[k]["images"]]
    assert pngs(msgs[5]) == [(folder / p).read_bytes() for p in row.images]
    assert pngs(msgs[5])[0] != pngs(msgs[5])[1]
    assert (rows.response_value == "yes").all() and rows.valid.all()
