"""The real-model tier (``make test-model``): ``inspect eval bayesobs/line_ratio`` on llama.cpp.

docs/inspect.md's line for a local model, run as printed against the tier's llama.cpp server
(SmolLM2-135M through inspect's ``llama-cpp-python`` provider), then its log imported and read
by ``fit``, ``score`` and ``report``. It asserts what holds for any real model.
"""

from __future__ import annotations

import pytest
from docs_pages import commands, fenced_blocks, page, section, shell_argv
from test_inspectai_logs import inspect_cli
from test_real_model import server  # noqa: F401 - the tier's llama.cpp server, module-scoped
from test_registry_tasks_solver_scorer import INSPECT_WARNINGS

from bayesobs.cli import main
from bayesobs.run.store import read_jsonl

pytestmark = [pytest.mark.model, *INSPECT_WARNINGS]
DOCS_URL = "http://127.0.0.1:8080/v1"


def test_the_docs_inspect_eval_on_the_local_model_is_fitted_scored_reported(server, tmp_path, monkeypatch):  # noqa: F811  # fmt: skip
    monkeypatch.chdir(tmp_path)
    text = section(page("inspect.md"), "bayesobs tasks in inspect")
    (block,) = [b for b in fenced_blocks(text, "console") if "llama-cpp-python/" in b]
    evaluate, load = commands(block, "")
    inspect_cli(shell_argv(evaluate.replace(DOCS_URL, server), tmp_path)[1:], monkeypatch)
    assert main(shell_argv(load, tmp_path)[1:]) == 0
    folder = tmp_path / "runs" / "smollm2-inspect"
    rows = read_jsonl(folder / "trials.jsonl")[0]
    assert len(rows) == 3 * 4 and all(r["raw_response"] for r in rows)
    assert {r["subject"] for r in rows} == {"inspect:llama-cpp-python/smollm2"}
    assert all(r["provider"] == "llama-cpp-python" and r["usage"] for r in rows)
    for argv in (
        ["fit", str(folder), "--out", str(tmp_path / "fit"), "--bootstrap", "2"],
        ["score", str(folder), "--out", str(tmp_path / "scores"), "--bootstrap", "2", "--no-probe"],
        ["report", str(tmp_path / "scores"), "--out", str(tmp_path / "report")],
    ):
        assert main(argv) == 0, argv
    assert (tmp_path / "report" / "index.html").is_file()
