"""The docs site's promises that the code can break: complete docstrings, a complete layout."""

from __future__ import annotations

import importlib.util
import re

import pytest
from docs_pages import ROOT, page
from docstring_coverage import PACKAGE, coverage

# modules of the API reference whose every public function has Parameters/Returns; a module
# joins this list once it is complete, and a new function without them fails here
COMPLETE = (
    "answers.py",
    "api.py",
    "bootstrap.py",
    "calibration.py",
    "cli.py",
    "compare.py",
    "compile_cache.py",
    "dataset.py",
    "design.py",
    "distributed.py",
    "exclusions.py",
    "expr.py",
    "fits/controls.py",
    "fits/fitoptions.py",
    "fits/fitresults.py",
    "fits/kernel.py",
    "fits/lapse.py",
    "fits/levels.py",
    "fits/observers/models.py",
    "fits/observers/scale.py",
    "fits/observers/variants.py",
    "fits/posterior.py",
    "fits/psis.py",
    "fits/runtable.py",
    "fits/synthetic.py",
    "fits/transfer.py",
    "fits/veridical.py",
    "hvs/fixture.py",
    "hvs/loaders.py",
    "hvs/logged.py",
    "hvs/metrics.py",
    "hvs/multimatch.py",
    "hvs/questions.py",
    "hvs/report.py",
    "hvs/sims.py",
    "hvs/standardise.py",
    "hvs/tasks.py",
    "jsonl.py",
    "leaderboard.py",
    "logprobs.py",
    "magnitude/duration.py",
    "magnitude/lines.py",
    "magnitude/maze.py",
    "magnitude/numerosity.py",
    "paradigms.py",
    "parse.py",
    "perceptv/__init__.py",
    "perceptv/common.py",
    "perceptv/domains.py",
    "perceptv/parse.py",
    "perceptv/plots.py",
    "perceptv/published.py",
    "perceptv/score.py",
    "perceptv/sims.py",
    "perceptv/tasks.py",
    "provenance.py",
    "report/calibration.py",
    "report/compare.py",
    "report/figures.py",
    "report/html.py",
    "report/perception.py",
    "report/psychometric.py",
    "run/ablations.py",
    "run/batch.py",
    "run/concurrency.py",
    "run/engine.py",
    "run/fakebatch.py",
    "run/fakeserver.py",
    "run/imagecost.py",
    "run/plan.py",
    "run/presentation.py",
    "run/reasoning.py",
    "run/rescore.py",
    "run/runner.py",
    "run/store.py",
    "run/subjects/__init__.py",
    "run/subjects/anthropic_messages.py",
    "chat.py",
    "run/subjects/cache.py",
    "hvs/subject.py",
    "run/subjects/openai_chat.py",
    "perceptv/subject.py",
    "search/subject.py",
    "magnitude/subject.py",
    "tunnel/subject.py",
    "scores/__init__.py",
    "scores/bcs.py",
    "scores/cot_accuracy.py",
    "scores/cue.py",
    "scores/evidence.py",
    "scores/psychometric.py",
    "scores/references.py",
    "search/scores.py",
    "search/tasks.py",
    "seeds.py",
    "stimuli/__init__.py",
    "stimuli/base.py",
    "stimuli/distributions.py",
    "stimuli/perception.py",
    "trials.py",
    "tunnel/__init__.py",
    "tunnel/circuits.py",
    "tunnel/common.py",
    "tunnel/hunt.py",
    "tunnel/parse.py",
    "tunnel/published.py",
    "tunnel/reid.py",
    "tunnel/scores.py",
    "tunnel/sims.py",
    "tunnel/tasks.py",
    "web/__init__.py",
    "web/app.py",
    "web/jspsych.py",
    "web/study.py",
)


@pytest.mark.parametrize("module", COMPLETE)
def test_every_public_function_has_parameters_and_returns(module):
    ((_, (done, total, gaps)),) = coverage([PACKAGE / module]).items()
    assert not gaps, f"{module}: {gaps}"
    assert done == total > 0


def test_the_architecture_page_places_every_module():
    text = page("architecture.md")
    names = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"}
    names |= {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    placed = set(re.findall(r"`(\w+)/?`", text))
    assert not names - placed, (
        f"modules missing from docs/architecture.md: {sorted(names - placed)}"
    )


def test_the_api_reference_names_only_modules_that_exist():
    for ref in (ROOT / "docs" / "api").glob("*.md"):
        for module in re.findall(r"^::: ([\w.]+)$", ref.read_text(), re.M):
            parts = module.split(".")[1:]
            path = PACKAGE.joinpath(*parts)
            assert path.with_suffix(".py").exists() or (path / "__init__.py").exists(), module


def _tables_tool():
    spec = importlib.util.spec_from_file_location(
        "architecture_tables", ROOT / "tools" / "architecture_tables.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_architecture_tables_are_drawn_from_the_code_as_it_is():
    # after moving a module or changing its imports: python tools/architecture_tables.py
    tool = _tables_tool()
    text = page("architecture.md")
    stale = [
        t.splitlines()[2] for t in tool.tables(PACKAGE, ROOT / "pyproject.toml") if t not in text
    ]
    assert not stale, f"docs/architecture.md: tables out of date, first rows: {stale}"


def test_the_table_check_notices_a_changed_import(tmp_path, capsys):
    tool = _tables_tool()
    page_path = tmp_path / "architecture.md"
    good = (ROOT / "docs" / "architecture.md").read_text()
    page_path.write_text(good)
    assert tool.main([str(PACKAGE), "--check", str(page_path)]) == 0
    row = next(line for line in good.splitlines() if line.startswith("| `fits.lapse` |"))
    page_path.write_text(good.replace(row, row.replace("fits.kernel, ", "")))
    assert tool.main([str(PACKAGE), "--check", str(page_path)]) == 1
    assert "out of date" in capsys.readouterr().err
