"""Answer distributions from logprobs (issue 27, section 3).

The distribution's rules are in :mod:`bayesobs.logprobs`; here a crafted
``top_logprobs`` reply is weighed by hand, then the same reply goes through
the runner from a local server (``--logprobs``), rescore, ``fit --response
expected`` and ``score``'s ``answer_spread`` table.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bayesobs.cli import main
from bayesobs.logprobs import answer_distribution, compact, reply_distribution
from bayesobs.testing.fakeserver import Answer, FakeChatServer, openai_error

ROOT = Path(__file__).resolve().parents[1]
SPEC = str(ROOT / "tasks" / "line_ratio.toml")

REPLY = "The answer is 0.62"


def _item(token: str, p: float, alts: list[tuple[str, float]]) -> dict:
    return {
        "token": token,
        "logprob": math.log(p),
        "bytes": list(token.encode()),
        "top_logprobs": [
            {"token": a, "logprob": math.log(q), "bytes": list(a.encode())} for a, q in alts
        ],
    }


# the API's choices[0].logprobs.content for REPLY: one token per digit, as SmolLM2 writes them
CONTENT = [
    _item("The", 0.7, [("The", 0.7), ("I", 0.2)]),
    _item(" answer", 0.9, [(" answer", 0.9)]),
    _item(" is", 0.95, [(" is", 0.95)]),
    _item(" ", 0.99, [(" ", 0.99)]),
    _item("0", 0.9, [("0", 0.9), ("1", 0.05), (" ", 0.05)]),
    _item(".", 0.8, [(".", 0.8), ("\n", 0.15), (",", 0.05)]),
    _item("6", 0.5, [("6", 0.5), ("5", 0.3), ("7", 0.2)]),
    _item("2", 0.6, [("2", 0.6), ("0", 0.3), ("%", 0.1)]),
]

# By hand: the tokens before the number are given; the walk starts at "0".
#   "0":  "1" -> "1.62", outside line_ratio's [0, 1]: no answer; " " before the number: unknown
#   ".":  "\n" ends the whole number "0" -> 0 (mass .9*.15); "," carries it on: unknown
#   "6":  "5" -> 0.52 (.9*.8*.3), "7" -> 0.72 (.9*.8*.2)
#   "2":  "0" -> 0.60 (.9*.8*.5*.3), "%" ends "0.6" as "0.6%" -> 0.006 (.9*.8*.5*.1)
#   the sampled 0.62 keeps .9*.8*.5*.6
LEAVES = {
    0.0: 0.9 * 0.15,
    0.52: 0.9 * 0.8 * 0.3,
    0.72: 0.9 * 0.8 * 0.2,
    0.60: 0.9 * 0.8 * 0.5 * 0.3,
    0.006: 0.9 * 0.8 * 0.5 * 0.1,
    0.62: 0.9 * 0.8 * 0.5 * 0.6,
}
MASS = sum(LEAVES.values())  # 0.855
MEAN = sum(v * m for v, m in LEAVES.items()) / MASS
SD = math.sqrt(sum(m * (v - MEAN) ** 2 for v, m in LEAVES.items()) / MASS)


def test_the_crafted_reply_weighs_as_computed_by_hand():
    cols = reply_distribution(compact(CONTENT), REPLY, fraction=True, answer_range=(0.0, 1.0))
    assert cols["response_dist_note"] is None
    assert cols["response_mass"] == pytest.approx(0.855, abs=1e-6)
    assert cols["response_expected"] == pytest.approx(MEAN, abs=1e-6)
    assert cols["response_sd"] == pytest.approx(SD, abs=1e-6)
    top = cols["response_top"]
    assert [v for v, _ in top] == [0.52, 0.62, 0.72, 0.0, 0.6]  # 0.52 and 0.62 tie: lower first
    assert top[0][1] == pytest.approx(LEAVES[0.52] / MASS, abs=1e-6)


def test_without_an_answer_range_the_branch_outside_it_counts():
    cols = reply_distribution(compact(CONTENT), REPLY, fraction=True)
    assert cols["response_mass"] == pytest.approx(0.855 + 0.05, abs=1e-6)  # "1.62" now parses
    assert 1.62 in [v for v, _ in cols["response_top"]] or len(cols["response_top"]) == 5


def test_a_reply_the_tokens_do_not_spell_or_without_a_number_gets_a_reason():
    tokens = compact(CONTENT)
    assert reply_distribution(tokens, REPLY + "!", True)["response_dist_note"] == (
        "the tokens do not spell the reply"
    )
    assert reply_distribution(tokens, "no idea", True)["response_expected"] is None
    assert reply_distribution(None, REPLY, True)["response_dist_note"] == "no logprobs in the reply"
    # one token with no alternatives: all mass on the sampled answer
    cols, why = answer_distribution([["0.5", -0.1, []]], "0.5", lambda t: float(t), (0, 3))
    assert why == "" and cols["response_sd"] == 0 and cols["response_expected"] == 0.5
    assert cols["response_mass"] == pytest.approx(math.exp(-0.1))


@pytest.mark.parametrize(
    "content",
    [None, [], "x", [{"token": 3, "logprob": -1}], [{"token": "a", "logprob": 0.5}], [1]],
)
def test_malformed_logprobs_are_not_read(content):
    assert compact(content) is None


def _script(refuse: bool = False, omit: bool = False):
    def script(body: dict, n: int) -> Answer:
        if refuse and "logprobs" in body:
            return openai_error(
                "logprobs is not supported with this model.", "logprobs", "unsupported_parameter"
            )
        lp = {"content": CONTENT} if body.get("logprobs") and not omit else None
        return Answer(REPLY, logprobs=lp)

    return script


def _argv(url: str, out: Path, *extra: str) -> list[str]:
    return [
        "run",
        SPEC,
        "--modality",
        "text",
        "--subject",
        "openai:lp-fake",
        "--base-url",
        url,
        "--api-key",
        "k",
        "--trials",
        "4",
        "--out",
        str(out),
        "--no-progress",
        "--no-cache",
        *extra,
    ]


def _rows(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / "trials.jsonl").read_text().splitlines() if x]


@pytest.fixture
def logged(tmp_path):
    out = tmp_path / "o"
    with FakeChatServer(_script()) as srv:
        assert main(_argv(srv.url, out, "--logprobs", "3")) == 0
    assert all(b["logprobs"] is True and b["top_logprobs"] == 3 for b in srv.requests)
    return out


def test_the_runner_logs_each_trials_distribution(logged):
    rows = _rows(logged)
    assert len(rows) == 12 and all(r["response"] == 0.62 for r in rows)
    for r in rows:
        assert r["response_expected"] == pytest.approx(MEAN, abs=1e-6)
        assert r["response_sd"] == pytest.approx(SD, abs=1e-6)
        assert r["response_mass"] == pytest.approx(MASS, abs=1e-6)
        assert len(r["logprobs"]) == len(CONTENT)  # the tokens, for rescore
    manifest = json.loads((logged / "manifest.json").read_text())
    assert manifest["requests"]["openai:lp-fake"]["logprobs_effective"] == 3


def test_rescore_recomputes_the_distribution_from_the_log(logged, tmp_path):
    target = tmp_path / "re.jsonl"
    assert main(["rescore", str(logged), "--out", str(target)]) == 0
    again = [json.loads(x) for x in target.read_text().splitlines() if x]
    assert [r["response_expected"] for r in again] == [
        r["response_expected"] for r in _rows(logged)
    ]


@pytest.mark.parametrize("refuse", [True, False])
def test_a_server_without_logprobs_gets_one_note_and_the_run_goes_on(tmp_path, capsys, refuse):
    out = tmp_path / "o"
    with FakeChatServer(_script(refuse=refuse, omit=not refuse)) as srv:
        assert main(_argv(srv.url, out, "--logprobs", "5")) == 0
    rows = _rows(out)
    assert len(rows) == 12 and all(r["valid"] for r in rows)
    assert all(r.get("response_expected") is None for r in rows)
    notes = [x for x in capsys.readouterr().err.splitlines() if "logprobs" in x]
    assert len(notes) == 1 and "--logprobs" in notes[0] and "goes on" in notes[0]
    if refuse:  # asked once with logprobs, then never again
        assert sum("logprobs" in b for b in srv.requests) == 1
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["requests"]["openai:lp-fake"]["logprobs_effective"] is None


@pytest.mark.parametrize("k", ["21", "-1"])
def test_an_impossible_k_is_one_line_and_exit_2(tmp_path, capsys, k):
    assert main(_argv("http://127.0.0.1:9/v1", tmp_path / "o", "--logprobs", k)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--logprobs" in err[0] and "20" in err[0]


def test_fit_on_expected_values_and_the_answer_spread_in_score(tmp_path, capsys):
    rng = np.random.default_rng(3)
    n = 60
    x = rng.uniform(0.1, 0.9, n)
    sampled = x + rng.normal(0, 0.05, n)
    expected = x + rng.normal(0, 0.02, n)
    trials = pd.DataFrame(
        {
            "subject": "m",
            "task": "line_ratio",
            "session": "s",
            "run": np.repeat([0, 1], n // 2),
            "trial": np.tile(np.arange(n // 2), 2),
            "stimulus": x,
            "response": sampled,
            "response_expected": expected,
            "response_sd": np.full(n, 0.03),
        }
    )
    trials.loc[5, ["response_expected", "response_sd"]] = np.nan  # no distribution there
    path = tmp_path / "t.csv"
    trials.to_csv(path, index=False)
    a, b = tmp_path / "fa", tmp_path / "fb"
    assert main(["fit", str(path), "--out", str(a), "--no-progress"]) == 0
    assert main(["fit", str(path), "--out", str(b), "--response", "expected", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "response_expected" in out and "1 trial(s) without" in out
    fa, fb = pd.read_csv(a / "fits.csv"), pd.read_csv(b / "fits.csv")
    # the linear fit's residual variance follows the column fitted
    lin_a = fa[fa["variant"] == "linear"]["loglik"].iat[0]
    lin_b = fb[fb["variant"] == "linear"]["loglik"].iat[0]
    assert lin_b > lin_a  # less noise in the expected values
    s = tmp_path / "s"
    assert main(["score", str(path), "--out", str(s), "--bootstrap", "0", "--no-progress"]) == 0
    spread = pd.read_csv(s / "answer_spread.csv")
    row = spread.iloc[0]
    assert row["n_with_distribution"] == n - 1
    assert row["within_sd_mean"] == pytest.approx(0.03)
    assert 0.035 < row["residual_sd"] < 0.065  # the sampled answers' noise (sd 0.05) around the fit
    # the same residual from the best variant's predictions, computed here
    from bayesobs.api import predictions

    fits = pd.read_csv(s / "fits.csv")
    pred = predictions(trials, fits, variants=(row["best_variant"],))
    r = pred["response"] - pred[f"pred_{row['best_variant']}"]
    assert row["residual_sd"] == pytest.approx(float(np.sqrt(np.mean(r**2))))
    best = fits.loc[fits["aic"].idxmin(), "variant"]
    assert row["best_variant"] == best


def test_fit_response_expected_without_the_column_is_one_line(tmp_path, capsys):
    path = tmp_path / "t.csv"
    pd.DataFrame({"stimulus": [0.1, 0.5, 0.9], "response": [0.2, 0.5, 0.8]}).to_csv(path)
    assert main(["fit", str(path), "--out", str(tmp_path / "f"), "--response", "expected"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--logprobs" in err[0] and "response_expected" in err[0]


def test_a_cot_reply_is_weighed_on_its_final_answer_and_rescored_alike(tmp_path):
    """Under cot the answer (and its distribution) is read after the last "Answer:" label."""
    from bayesobs.testing.fakeserver import token_logprobs

    reply = "Step 1: the lines are about 3 and 5 units.\nStep 2: 3/5 is 0.6.\nAnswer: 0.62"

    def script(body: dict, n: int) -> Answer:
        return Answer(reply, logprobs=token_logprobs(reply, 5))

    out = tmp_path / "o"
    with FakeChatServer(script) as srv:
        assert main(_argv(srv.url, out, "--logprobs", "5", "--condition", "cot")) == 0
    rows = _rows(out)
    # the same number alone, with the same per-character alternatives
    alone = reply_distribution(compact(token_logprobs("0.62", 5)["content"]), "0.62", True, (0, 1))
    assert alone["response_mass"] > 0.1
    for r in rows:
        assert r["condition"] == "cot" and r["response"] == 0.62
        assert r["response_expected"] == pytest.approx(alone["response_expected"], abs=1e-9)
        assert r["response_mass"] == pytest.approx(alone["response_mass"], abs=1e-9)
    target = tmp_path / "re.jsonl"
    assert main(["rescore", str(out), "--out", str(target)]) == 0
    again = [json.loads(x) for x in target.read_text().splitlines() if x]
    assert not any(r["rescored_changed"] for r in again)
    assert [r["response_expected"] for r in again] == [r["response_expected"] for r in rows]
