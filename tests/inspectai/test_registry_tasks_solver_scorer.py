"""bayesobs tasks inside inspect_ai: the entry point's tasks, one sample per run, every trial scored.

``inspect eval bayesobs/line_ratio`` runs through inspect's own ``eval()`` on the ``mockllm``
provider, whose replies here come from a line-length observer (it measures the two lines of a
text trial); the requests it receives are compared with those ``bayesobs run`` sends an
OpenAI-compatible server (the local fake server) for the same plan and the same replies.
"""

from __future__ import annotations

import gc
import re

import pandas as pd
import pytest
from inspect_ai import eval as inspect_eval
from inspect_ai.model import ModelOutput, ModelUsage, get_model

from bayesobs.cli import main
from bayesobs.run.store import read_jsonl
from bayesobs.testing.fakeserver import Answer, FakeChatServer

TRIALS = 3
# inspect_ai's own warnings, not ours: its eval leaves anyio streams to the garbage collector,
# and its retries call tenacity with a parameter tenacity deprecates
INSPECT_WARNINGS = [
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <function MemoryObject:pytest.PytestUnraisableExceptionWarning"
    ),
    pytest.mark.filterwarnings("ignore:Unclosed <MemoryObject:ResourceWarning"),
    pytest.mark.filterwarnings("ignore:The 'initial' parameter is deprecated:DeprecationWarning"),
]


def run_eval(*args, **kwargs):
    """inspect's ``eval()``; its leftovers collected here, where the filters above apply."""
    logs = inspect_eval(*args, display="none", **kwargs)
    gc.collect()
    return logs


pytestmark = INSPECT_WARNINGS


def measured(text: str) -> str:
    """A line-length observer: the ratio of the two lines of the last trial shown."""
    a, b = (len(m) for m in re.findall(r"^[AB]: (-+)$", text, flags=re.M)[-2:])
    return f"{min(a, b) / max(a, b):.3f}"


def mock_model(asked: list):
    """inspect's mockllm provider answering as :func:`measured`; ``asked`` gets each input."""

    def reply(messages, tools, tool_choice, config):
        asked.append([(m.role, m.text) for m in messages])
        out = ModelOutput.from_content(model="mockllm", content=measured(messages[-1].text))
        out.usage = ModelUsage(input_tokens=10, output_tokens=2, total_tokens=12)
        return out

    return get_model("mockllm/model", custom_outputs=reply)


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    """``inspect eval bayesobs/line_ratio -T trials=3 -T modality=text``, through ``eval()``."""
    logs = tmp_path_factory.mktemp("logs")
    asked: list = []
    (log,) = run_eval(
        "bayesobs/line_ratio",
        model=mock_model(asked),
        task_args={"trials": TRIALS, "modality": "text"},
        log_dir=str(logs),
    )
    return log, asked


def test_one_sample_per_session_run_with_every_trial_in_its_score(evaluated):
    log, _ = evaluated
    assert log.status == "success" and log.eval.task == "bayesobs/line_ratio"
    ids = sorted(s.id for s in log.samples)
    assert ids == [f"line_ratio/text/base/{s}/0" for s in ("long", "medium", "short")]
    for sample in log.samples:
        (score,) = sample.scores.values()
        trials = score.metadata["trials"]
        assert [t["trial"] for t in trials] == list(range(TRIALS))
        for t in trials:  # the observer measures exactly: response = gold = stimulus (3 digits)
            assert t["valid"] and t["invalid_reason"] is None
            assert t["gold"] == t["stimulus"]
            assert t["response"] == pytest.approx(t["stimulus"], abs=5e-4)
        assert score.value == 1.0


def test_the_requests_are_those_bayesobs_run_sends(evaluated, tmp_path):
    _, asked = evaluated

    def script(body, n):
        return Answer(measured(body["messages"][-1]["content"]))

    with FakeChatServer(script) as srv:
        code = main(
            ["run", "line_ratio", "--subject", "openai:m", "--base-url", srv.url, "--api-key",
             "x", "--trials", str(TRIALS), "--modality", "text", "--out", str(tmp_path / "run"),
             "--no-cache"]
        )  # fmt: skip
        sent = [[(m["role"], m["content"]) for m in r["messages"]] for r in srv.requests]
    assert code == 0
    assert len(asked) == 3 * TRIALS
    assert sorted(asked) == sorted(sent)  # system prompt, rolling context, stimulus: identical
    assert any(len(a) > 2 for a in asked)  # the rolling context was there


def test_the_imported_log_is_fitted(evaluated, tmp_path, capsys):
    log, _ = evaluated
    out = tmp_path / "imported"
    assert main(["import", "inspect", log.location, "--out", str(out)]) == 0
    rows = read_jsonl(out / "trials.jsonl")[0]
    assert len(rows) == 3 * TRIALS and {r["subject"] for r in rows} == {"inspect:mockllm/model"}
    assert all(r["provider"] == "mockllm" and r["usage"]["total_tokens"] == 12 for r in rows)
    assert main(["fit", str(out), "--out", str(tmp_path / "fit"), "--bootstrap", "0"]) == 0
    fits = pd.read_csv(tmp_path / "fit" / "fits.csv")
    assert set(fits["subject"]) == {"inspect:mockllm/model"} and len(fits) > 0
