"""Issue 31 section 3: the ``cot`` condition through sweep, score and report."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import bayesobs
from bayesobs.testing.fakeserver import FakeChatServer

ROOT = Path(__file__).resolve().parents[1]


def _protocol(tmp_path, conditions=("base", "cot"), modalities=("text",)):
    proto = tmp_path / "proto.toml"
    proto.write_text(
        f'[[experiment]]\nspec = "{(ROOT / "tasks" / "line_ratio.toml").as_posix()}"\n'
        f"modalities = {json.dumps(list(modalities))}\nconditions = {json.dumps(list(conditions))}\n"
    )
    return proto


@pytest.fixture(scope="module")
def cot_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cot")
    out = tmp / "run"
    bayesobs.sweep(_protocol(tmp), ["sim:bayesian"], out, trials=30)
    trials = bayesobs.read_trials(out / "trials.jsonl")
    res = bayesobs.score(trials)
    return tmp, out, trials, res


def test_cot_trials_keep_the_reasoning_and_read_the_labelled_answer(cot_run):
    _, out, _, _ = cot_run
    rows = [json.loads(x) for x in (out / "trials.jsonl").read_text().splitlines()]
    cot = [r for r in rows if r["condition"] == "cot"]
    base = [r for r in rows if r["condition"] == "base"]
    assert len(cot) == len(base) == 90
    for r in cot:
        assert r["raw_response"].startswith("Step 1:") and r["valid"]
        assert r["response"] == pytest.approx(float(r["raw_response"].rsplit("Answer:", 1)[1]))
    assert all("Step" not in r["raw_response"] for r in base)


def test_cot_is_an_extra_ablation_outside_the_bcs(cot_run):
    _, _, _, res = cot_run
    assert "cot" not in set(res.bcs["ablation"])
    row = res.bcs_extra[res.bcs_extra["ablation"] == "cot"]
    assert len(row) == 1 and row["modality"].iloc[0] == "text"
    # sim:bayesian trusts its prior less when it reasons: w_prior falls
    assert row["delta_w"].iloc[0] < 0 and row["s"].iloc[0] == -1
    assert row["delta_nrmse"].iloc[0] == pytest.approx(
        row["nrmse_ablation"].iloc[0] - row["nrmse_base"].iloc[0]
    )
    assert {"s_cot", "s_p_cot"} <= set(res.bcs_tasks.columns)


def test_the_report_shows_the_cot_effect(cot_run):
    from bayesobs.report import build_report

    tmp, out, _, _ = cot_run
    page = build_report([out], tmp / "report", bootstrap=0).read_text()
    assert "Ablations outside the BCS" in page
    section = page.split("Ablations outside the BCS", 1)[1]
    assert "cot" in section and "delta_w" in section and "delta_nrmse" in section


def test_cot_asks_an_api_subject_with_a_reasoning_sized_budget(tmp_path):
    out = tmp_path / "run"
    with FakeChatServer() as srv:
        bayesobs.sweep(
            _protocol(tmp_path),
            ["openai:m"],
            out,
            trials=2,
            base_url=srv.url,
            api_key="k",
            use_cache=False,
            max_tokens=50,
            reasoning_budget=1000,
        )
        bodies = list(srv.requests)
    budgets = {}
    for b in bodies:
        system = b["messages"][0]["content"]
        kind = "cot" if "step by step" in system else "base"
        budgets.setdefault(kind, set()).add(b.get("max_completion_tokens", b.get("max_tokens")))
    assert budgets == {"base": {50}, "cot": {1050}}
    rows = pd.read_json(out / "trials.jsonl", lines=True)
    assert set(rows["condition"]) == {"base", "cot"}
