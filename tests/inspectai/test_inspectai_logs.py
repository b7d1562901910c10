"""docs/inspect.md as printed: ``inspect eval``/``eval-set`` of bayesobs tasks, the logs both ways,
and ``inspect view`` of an exported folder in Chromium, listing its samples (slow: inspect's CLI).

The mockllm provider counts tokens with tiktoken's ``o200k_base``, which tiktoken fetches from
the web on first use; where it cannot (no network here), a whitespace count stands in.
"""

from __future__ import annotations

import gc
import os
import socket
import subprocess
import sys
import time
from importlib.metadata import entry_points
from pathlib import Path

import httpx
import pandas as pd
import pytest
import tiktoken
from conftest import chromium_browser
from docs_pages import checkout, commands, fenced_blocks, page, section, shell_argv
from inspect_ai.log import read_eval_log
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from test_registry_tasks_solver_scorer import INSPECT_WARNINGS, run_eval

from bayesobs.cli import main
from bayesobs.run.store import read_jsonl

pytestmark = [pytest.mark.slow, *INSPECT_WARNINGS]
SECTIONS = ("bayesobs tasks in inspect", "Logs both ways and the per-trial viewer")
REAL_MODEL = "--model-base-url"  # the line of the real-model tier (test_inspect_real_model.py)


class _Words:
    """A whitespace token count, for tiktoken's encoding where it cannot be fetched."""

    def encode(self, text, **kw):
        return text.split()


@pytest.fixture
def offline_tokens(monkeypatch):
    try:
        tiktoken.get_encoding("o200k_base")
    except Exception:  # no network: the encoding file cannot be fetched
        monkeypatch.setattr(tiktoken, "get_encoding", lambda name: _Words())


def inspect_cli(argv: list[str], monkeypatch) -> None:
    """inspect's own command line (its console script), in this process; it must exit 0."""
    (script,) = entry_points(group="console_scripts", name="inspect")
    monkeypatch.setattr(sys, "argv", ["inspect", *argv])
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)  # the script sets its own
    with pytest.raises(SystemExit) as done:
        script.load()()
    assert done.value.code in (0, None), argv


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def view_lists_samples(argv: list[str], cwd: Path, samples: list[str]) -> None:
    """Start ``inspect view`` on a free port; Chromium loads its page and finds every sample."""
    port = _free_port()
    argv = [str(Path(sys.executable).parent / "inspect"), *argv[1:]]
    argv[argv.index("--port") + 1] = str(port)
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/"
        for _ in range(120):
            try:
                if httpx.get(url, timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.5)
        with chromium_browser() as browser:
            tab = browser.new_page()
            tab.goto(url)
            for sample in samples:
                tab.wait_for_selector(f"text={sample}", timeout=60_000)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_docs_commands_run_and_the_viewer_lists_the_samples(tmp_path, monkeypatch, offline_tokens):  # fmt: skip
    cwd = checkout(tmp_path)
    monkeypatch.chdir(cwd)
    lines = [
        line
        for title in SECTIONS
        for block in fenced_blocks(section(page("inspect.md"), title), "console")
        for line in commands(block, "")
        if REAL_MODEL not in line and "logs/smollm2" not in line
    ]
    assert len(lines) == 7, lines
    for line in lines:
        argv = shell_argv(line, cwd)
        if argv[:2] == ["inspect", "view"]:
            view_lists_samples(argv, cwd, ["line_ratio/text/base/short/0", "line_ratio/image/base/long/0"])  # fmt: skip
        elif argv[0] == "inspect":
            inspect_cli(argv[1:], monkeypatch)
        else:
            assert main(argv[1:]) == 0, line
    gc.collect()  # inspect's leftovers, while its warnings are filtered
    (bench,) = (cwd / "logs" / "bayesbench").glob("*.eval")
    log = read_eval_log(str(bench))
    assert log.status == "success" and log.eval.task == "bayesobs/bayesbench"
    assert {s.id.split("/")[0] for s in log.samples} == {
        "line_ratio", "marker_location", "maze_distance", "duration"
    }  # fmt: skip
    rows = pd.DataFrame(read_jsonl(cwd / "runs" / "inspect" / "trials.jsonl")[0])
    mock = rows[rows["subject"] == "inspect:mockllm/model"]
    assert len(mock) == 9 and not mock["valid"].any()  # mockllm answers no number
    assert set(mock["invalid_reason"]) == {"no number"}
    sim = rows[rows["subject"] == "sim:bayesian"].drop(columns=["provider", "model"], errors="ignore")  # fmt: skip
    assert len(sim) == 18 and sim["valid"].all()
    fits = pd.read_csv(cwd / "runs" / "inspect" / "fit" / "fits.csv")
    assert "sim:bayesian" in set(fits["subject"])
    assert os.path.getsize(cwd / "runs" / "inspect" / "manifest.json") > 0


def test_a_failed_model_call_keeps_the_trials_asked_before_it(tmp_path, capsys):
    """The model fails on one run's third trial: that sample ends in an error, its first two
    trials are in the log and imported; the other runs are whole."""
    failed = []

    def reply(messages, tools, tool_choice, config):
        if len(messages) == 6 and not failed:  # system, two earlier trials, the third
            failed.append(messages[-1].text)
            raise RuntimeError("the provider is down")
        out = ModelOutput.from_content(model="mockllm", content="0.5")
        out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        return out

    (log,) = run_eval(
        "bayesobs/line_ratio",
        model=get_model("mockllm/model", custom_outputs=reply),
        task_args={"trials": 3, "modality": "text"},
        log_dir=str(tmp_path / "logs"),
        fail_on_error=False,
    )
    assert failed and len(log.samples) == 3
    (broken,) = [s for s in log.samples if s.error is not None]
    assert "the provider is down" in broken.error.message
    assert [r["trial"] for r in broken.store["bayesobs_trials"]] == [0, 1]
    assert main(["import", "inspect", log.location, "--out", str(tmp_path / "f")]) == 0
    assert "1 sample(s) ended in an error" in capsys.readouterr().out
    assert len(read_jsonl(tmp_path / "f" / "trials.jsonl")[0]) == 3 + 3 + 2
