"""Adaptive sweeps (issue 53): the runs asked are the fixed protocol's, a killed sweep resumes to
the same decisions, the manifest holds the rule and every stop, bad options are one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bayesobs.adaptive import AdaptiveOptions, adaptive_sweep
from bayesobs.cli import main
from bayesobs.errors import BayesobsInputError
from bayesobs.run.runner import sweep
from bayesobs.stopping import open_questions, stop_risk

ROOT = Path(__file__).resolve().parents[2]
KEYS = ["subject", "task", "modality", "condition", "session", "run", "trial"]
SAME = [*KEYS, "seed", "stimulus", "response", "raw_response", "stimulus_id", "prompt_id"]
RUNS, TRIALS, RISK = 5, 15, 0.05


def _protocol(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.toml"
    spec = ROOT / "tasks" / "line_ratio.toml"
    path.write_text(
        f'[[experiment]]\nspec = "{spec}"\nmodalities = ["text"]\n'
        'conditions = ["base", "context_short", "context_none"]\n'
    )
    return path


def _rows(folder: Path) -> pd.DataFrame:
    rows = [json.loads(line) for line in (folder / "trials.jsonl").read_text().splitlines()]
    return pd.DataFrame(rows)[SAME].sort_values(KEYS).reset_index(drop=True)


@pytest.fixture(scope="module")
def adaptive_folder(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("adaptive")
    protocol = _protocol(tmp)
    rule = AdaptiveOptions(risk=RISK)  # a cautious rule: three rounds or more
    res = adaptive_sweep(protocol, ["sim:linear"], tmp / "a", rule, trials=TRIALS, runs=RUNS)
    return protocol, tmp, res


@pytest.mark.slow  # three adaptive sweeps of three rounds (about 5 s CPU together)
def test_adaptive_rows_are_the_fixed_protocols_rows(adaptive_folder):
    protocol, tmp, res = adaptive_folder
    sweep(protocol, ["sim:linear"], tmp / "fixed", trials=TRIALS, runs=RUNS)
    fixed, adaptive = _rows(tmp / "fixed"), _rows(tmp / "a")
    assert res.calls == len(adaptive) < res.fixed_calls == len(fixed)  # some cell stopped early
    both = adaptive.merge(fixed, on=KEYS, suffixes=("", "_fixed"), validate="one_to_one")
    assert len(both) == len(adaptive)  # every adaptive row is a fixed protocol's row ...
    for col in SAME[len(KEYS) :]:  # ... with the same stimulus, seed and answer
        assert both[col].astype(str).tolist() == both[f"{col}_fixed"].astype(str).tolist(), col
    # each cell asks whole rounds: runs 0..n-1 of every session type, n >= 2
    runs = adaptive.groupby(["condition", "session"])["run"].agg(["min", "max", "nunique"])
    assert (runs["min"] == 0).all() and (runs["nunique"] == runs["max"] + 1).all()
    assert (runs["nunique"] >= 2).all()


@pytest.mark.slow  # three adaptive sweeps of three rounds (about 5 s CPU together)
def test_manifest_records_the_rule_and_every_stop(adaptive_folder):
    _, tmp, res = adaptive_folder
    manifest = json.loads((tmp / "a" / "manifest.json").read_text())
    rule = manifest["adaptive"]
    assert manifest["experiment"]["adaptive"]["sign_level"] == 0.9  # compared on resume
    assert manifest["experiment"]["adaptive"]["risk"] == RISK
    assert rule["first_runs"] == 2 and rule["evidence_threshold"] == 0.5 and "68%" in rule["rule"]
    cells = {s["cell"] for s in rule["stops"]}
    assert len(cells) == len(rule["stops"]) == 3  # every cell stops once, with its round and reason
    assert rule["stops"] == res.stops
    for s in rule["stops"]:
        assert s["reason"] == "answered" or (
            s["reason"].startswith("cap reached") and s["runs"] == RUNS
        )


@pytest.mark.slow  # three adaptive sweeps of three rounds (about 5 s CPU together)
def test_killed_adaptive_sweep_resumes_to_the_same_decisions(adaptive_folder, tmp_path, capsys):
    protocol, tmp, res = adaptive_folder
    assert len(res.rounds) >= 3, "the fixture needs a sweep of three rounds or more"
    lines = (tmp / "a" / "trials.jsonl").read_bytes().splitlines(keepends=True)
    first = sum(1 for line in lines if json.loads(line)["run"] < 3)  # rounds 1 and 2
    killed = tmp_path / "killed"
    killed.mkdir()
    (killed / "manifest.json").write_bytes((tmp / "a" / "manifest.json").read_bytes())
    # killed during round 3: its first rows logged and a torn line after them; the decisions
    # of rounds 1 and 2 must not read the later rows
    (killed / "trials.jsonl").write_bytes(b"".join(lines[: first + 3]) + lines[first + 3][:40])
    args = ["sweep", str(protocol), "--subject", "sim:linear", "--out", str(killed), "--adaptive"]
    args += ["--risk", str(RISK)]
    assert main([*args, "--trials", str(TRIALS), "--runs", str(RUNS), "--no-progress"]) == 0
    assert f"round {len(res.rounds)}: " in capsys.readouterr().out
    again = json.loads((killed / "manifest.json").read_text())["adaptive"]
    assert again["stops"] == res.stops and again["rounds"] == res.rounds
    pd.testing.assert_frame_equal(_rows(killed), _rows(tmp / "a"))


@pytest.mark.parametrize(
    "distance, fraction, decide", [(0.0, 1 / 3, 1.0), (0.8, 0.5, 1.0), (-0.4, 2 / 3, 1.645)]
)
def test_stop_risk_is_the_chance_the_cap_decides_otherwise(distance, fraction, decide):
    """Brute force: the cap's estimate ~ Normal(d, 1 - f) in current standard errors, its own
    standard error sqrt(f); the risk is that it lands past the cap's decision distance on the
    other side of the threshold (tolerance: 4 Monte Carlo standard errors)."""
    rng = np.random.default_rng(0)
    cap = rng.normal(distance, np.sqrt(1 - fraction), 400_000)
    side = 1 if distance >= 0 else -1
    brute = np.mean(side * cap < -decide * np.sqrt(fraction))
    assert stop_risk(distance, fraction, decide) == pytest.approx(
        brute, abs=4 * np.sqrt(brute / 4e5) + 1e-4
    )
    assert stop_risk(distance, 1.0, decide) == 0.0  # at the cap nothing is left to ask


def test_open_questions_follow_the_risk_and_the_sign_level():
    cell = {"subject": "s", "task": "t", "modality": "multimodal"}

    def factor(condition, name, p, lo, hi):
        return {**cell, "condition": condition, "factor": name, "p": p, "p_lo": lo, "p_hi": hi}

    evidence = pd.DataFrame(
        [
            factor("base", "bayesian", 0.75, 0.6, 0.9),  # 1.7 se (small-sample scaled) above
            factor("base", "gain", 0.45, 0.35, 0.55),  # 0.35 se below 0.5: risky at 2 of 6
            factor("steer_verbal", "gain", 0.5, 0.4, 0.6),  # on the threshold
            factor("context_long", "gain", 0.3, np.nan, np.nan),  # no interval: open
        ]
    )
    bcs = pd.DataFrame(
        [
            {"subject": "s", "task": "t", "ablation": "steer_verbal", "s_p": 0.999},
            {"subject": "s", "task": "t", "ablation": "context_long", "s_p": 0.0},
        ]
    )
    names = [("s", "t", "multimodal", c) for c in ("base", "steer_verbal", "context_long")]
    out = open_questions(evidence, bcs, {c: (2, 6) for c in names}, risk=0.1, sign_level=0.9)
    base, steer, context = (out[c] for c in names)
    assert base == ["factor gain", "sign of delta_w_prior (context_long)"]
    assert steer == ["factor gain"]  # its pair's sign is settled
    assert context == ["factor gain", "sign of delta_w_prior (context_long)"]
    # at 5 of 6 runs the last run cannot carry an estimate near the threshold past the cap's
    # interval on the other side: closed, whatever its side; a cell with no interval stays open
    late = open_questions(evidence, bcs, {c: (5, 6) for c in names}, risk=0.1, sign_level=0.9)
    assert late[names[0]] == late[names[1]] == [] and late[names[2]] == ["factor gain"]
    # the risk of the base gain question, by hand: d = -0.05 / (0.1 * sqrt(2)), f = 1/3
    assert stop_risk(-0.05 / (0.1 * np.sqrt(2)), 1 / 3) > 0.1


@pytest.mark.parametrize(
    "flags, words",
    [
        (["--first-runs", "1"], "adaptive first_runs must be a whole number >= 2"),
        (["--sign-level", "0.4"], "adaptive sign_level must be in (0.5, 1]"),
        (["--risk", "0.6"], "adaptive risk must be in (0, 0.5)"),
        (
            ["--first-runs", "3", "--no-adaptive"],
            "--first-runs, --sign-level, --risk and --place-width set",
        ),
    ],
)
def test_bad_adaptive_options_are_one_line(tmp_path, capsys, flags, words):
    adaptive = [] if "--no-adaptive" in flags else ["--adaptive"]
    flags = [f for f in flags if f != "--no-adaptive"]
    code = main(
        [
            "sweep",
            str(_protocol(tmp_path)),
            "--subject",
            "sim:linear",
            "--out",
            str(tmp_path / "x"),
            *adaptive,
            *flags,
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x" / "trials.jsonl").exists()
    with pytest.raises(BayesobsInputError):
        AdaptiveOptions(step=0)


@pytest.mark.slow  # scores the fixture's folder
def test_score_says_which_numbers_are_adaptive(adaptive_folder, tmp_path, capsys):
    _, tmp, _ = adaptive_folder
    assert (
        main(["score", str(tmp / "a"), "--out", str(tmp_path), "--bootstrap", "10", "--no-probe"])
        == 0
    )
    assert "sim:linear: from an adaptive sweep" in capsys.readouterr().out
    evidence = pd.read_csv(tmp_path / "evidence.csv")
    assert evidence["adaptive"].all()
    manifest = json.loads((tmp_path / "score_manifest.json").read_text())
    assert manifest["adaptive"]["sim:linear"]["stops"] == 3


def test_leaderboard_names_adaptive_subjects():
    from bayesobs.leaderboard import adaptive_note

    board = pd.DataFrame({"subject": ["a", "b"], "adaptive": [True, False]})
    (line,) = adaptive_note(board)
    assert line.startswith("a: from an adaptive sweep") and "manifest.json" in line
    assert adaptive_note(board.assign(adaptive=False)) == []


@pytest.mark.slow  # a fixed and an adaptive sweep, each scored
def test_design_simulates_the_adaptive_rule_before_paying(tmp_path, capsys):
    protocol = _protocol(tmp_path)
    args = ["design", str(protocol), "--out", str(tmp_path / "d"), "--runs", "3"]
    assert main([*args, "--trials", "10", "--bootstrap", "10", "--adaptive", "sim:linear"]) == 0
    out = capsys.readouterr().out
    calls = len(
        (tmp_path / "d" / "sim-linear" / "adaptive" / "trials.jsonl").read_text().splitlines()
    )
    fixed = len((tmp_path / "d" / "sim-linear" / "fixed" / "trials.jsonl").read_text().splitlines())
    assert fixed == 3 * 3 * 3 * 10  # conditions x session types x runs x trials
    assert f"sim:linear: adaptive {calls} of {fixed} calls" in out
    assert "the fixed protocol's decided conclusions reached: " in out and "of all 12: " in out


def test_design_adaptive_refuses_a_paying_subject(tmp_path, capsys):
    args = ["design", str(_protocol(tmp_path)), "--out", str(tmp_path / "d")]
    assert main([*args, "--adaptive", "openai:gpt-4o"]) == 2
    err = capsys.readouterr().err
    assert "design --adaptive simulates sim: subjects" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "d").exists()


def test_adaptive_dry_run_counts_round_one_and_the_cap(tmp_path, capsys):
    args = [
        "sweep",
        str(_protocol(tmp_path)),
        "--subject",
        "sim:linear",
        "--out",
        str(tmp_path / "x"),
    ]
    assert main([*args, "--trials", "5", "--runs", "4", "--adaptive", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "90 call(s) to make" in out  # 3 conditions x 3 session types x 2 first runs x 5 trials
    assert "at most the fixed protocol's 180 call(s)" in out
    assert not (tmp_path / "x" / "trials.jsonl").exists()


@pytest.mark.slow  # rounds of a chat subject against the local server, each scored
def test_a_budget_stops_the_rounds_and_a_larger_one_resumes(tmp_path):
    """--max-total-tokens on an adaptive sweep: round 1 stops at the budget and no round follows;
    the same sweep with a larger budget goes on from the rows logged."""
    from bayesobs.testing.fakeserver import Answer, FakeChatServer

    usage = {"prompt_tokens": 1000, "completion_tokens": 20, "total_tokens": 1020}
    protocol = _protocol(tmp_path)
    with FakeChatServer(lambda b, n: Answer("0.5", usage=usage)) as srv:
        kw = dict(trials=6, runs=3, chat={"base_url": srv.url}, api_key="k", use_cache=False)
        res = adaptive_sweep(
            protocol, ["openai:m"], tmp_path / "a", budget={"max_total_tokens": 20_000}, **kw
        )
        first = srv.count
        assert not res.complete and len(res.reports) == 1 and res.reports[0].budget_reached
        assert first * 1020 <= 20_000 and len(_rows(tmp_path / "a")) == first
        more = adaptive_sweep(
            protocol, ["openai:m"], tmp_path / "a", budget={"max_total_tokens": 10**7}, **kw
        )
    assert more.complete and len(_rows(tmp_path / "a")) == srv.count  # nothing asked twice
