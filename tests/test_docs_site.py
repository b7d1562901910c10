"""The docs site's promises that the code can break: complete docstrings, a complete layout."""

from __future__ import annotations

import re

import pytest
from docs_pages import ROOT, page
from docstring_coverage import PACKAGE, coverage

# modules of the API reference whose every public function has Parameters/Returns; a module
# joins this list once it is complete, and a new function without them fails here
COMPLETE = (
    "ablations.py",
    "answers.py",
    "api.py",
    "batch.py",
    "bcs.py",
    "bootstrap.py",
    "calibration.py",
    "cli.py",
    "compare.py",
    "compile_cache.py",
    "concurrency.py",
    "cot_accuracy.py",
    "cue.py",
    "dataset.py",
    "evidence.py",
    "exclusions.py",
    "expr.py",
    "fakebatch.py",
    "fakeserver.py",
    "hvs/fixture.py",
    "hvs/loaders.py",
    "hvs/logged.py",
    "hvs/metrics.py",
    "hvs/multimatch.py",
    "hvs/questions.py",
    "hvs/sims.py",
    "hvs/standardise.py",
    "imagecost.py",
    "jsonl.py",
    "leaderboard.py",
    "logprobs.py",
    "observers/models.py",
    "observers/scale.py",
    "observers/variants.py",
    "parse.py",
    "perception.py",
    "perceptv/__init__.py",
    "perceptv/common.py",
    "perceptv/domains.py",
    "perceptv/parse.py",
    "perceptv/plots.py",
    "perceptv/published.py",
    "perceptv/score.py",
    "perceptv/sims.py",
    "provenance.py",
    "psychometric.py",
    "reasoning.py",
    "references.py",
    "report/calibration.py",
    "report/compare.py",
    "report/figures.py",
    "report/html.py",
    "report/hvs.py",
    "report/perception.py",
    "report/psychometric.py",
    "rescore.py",
    "scores.py",
    "search.py",
    "stimuli/__init__.py",
    "stimuli/base.py",
    "stimuli/distributions.py",
    "stimuli/duration.py",
    "stimuli/hvs.py",
    "stimuli/lines.py",
    "stimuli/maze.py",
    "stimuli/numerosity.py",
    "stimuli/perception.py",
    "stimuli/perceptv.py",
    "stimuli/search.py",
    "stimuli/tunnel.py",
    "store.py",
    "subjects/__init__.py",
    "subjects/anthropic_messages.py",
    "subjects/base.py",
    "subjects/cache.py",
    "subjects/hvs_sim.py",
    "subjects/openai_chat.py",
    "subjects/perceptv_sim.py",
    "subjects/search_sim.py",
    "subjects/sim.py",
    "subjects/tunnel_sim.py",
    "synthetic.py",
    "transfer.py",
    "trials.py",
    "tunnel/__init__.py",
    "tunnel/circuits.py",
    "tunnel/common.py",
    "tunnel/hunt.py",
    "tunnel/parse.py",
    "tunnel/published.py",
    "tunnel/reid.py",
    "tunnel/sims.py",
    "veridical.py",
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
