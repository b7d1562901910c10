"""The docs site's promises that the code can break: complete docstrings, a complete layout."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import chromium_browser
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
    "fits/posterior/batching.py",
    "fits/posterior/bcs.py",
    "fits/posterior/checks.py",
    "fits/posterior/files.py",
    "fits/posterior/fit.py",
    "fits/posterior/mcmcstats.py",
    "fits/posterior/model.py",
    "fits/posterior/pools.py",
    "fits/posterior/psis.py",
    "fits/posterior/summaries.py",
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
    "scores/accuracy.py",
    "scores/bcs.py",
    "scores/cot_accuracy.py",
    "scores/cue.py",
    "scores/degenerate.py",
    "scores/evidence.py",
    "scores/psychometric.py",
    "scores/references.py",
    "scores/results.py",
    "scores/scoring.py",
    "search/scores.py",
    "search/tasks.py",
    "seeds.py",
    "stimuli/__init__.py",
    "stimuli/base.py",
    "stimuli/distributions.py",
    "stimuli/drawing.py",
    "stimuli/perception.py",
    "testing/fakebatch.py",
    "testing/fakeserver.py",
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


@pytest.mark.slow  # the build renders the API reference: about 15 s
def test_the_built_site_works_opened_from_disk_in_chromium(tmp_path):
    """README: `make docs`, then open site/index.html: every nav link reaches its page, offline."""
    pytest.importorskip("mkdocs", reason="the docs extra (mkdocs) is not installed")
    site = tmp_path / "site"
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "--site-dir", str(site)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, timeout=600)
    outside: list[str] = []
    with chromium_browser() as b:
        page_ = b.new_page()
        page_.route(
            re.compile(r"^(?!file:).*"), lambda r: (outside.append(r.request.url), r.abort())
        )
        page_.goto((site / "index.html").as_uri())
        nav = page_.eval_on_selector_all(
            "nav .wy-menu-vertical a.reference.internal",
            "as => as.map(a => [a.textContent.trim(), a.href])",
        )
        pages_ = [(t, h) for t, h in nav if "#" not in h]
        listed = re.findall(
            r"^\s*- [^:]+: ([\w/.-]+)\.md$", (ROOT / "mkdocs.yml").read_text(), re.M
        )
        want = {(site / f"{md}.html").as_uri() for md in listed} - {(site / "index.html").as_uri()}
        assert {h for _, h in pages_} == want  # every page of mkdocs.yml's nav, once
        for title, href in pages_:
            page_.goto(href)
            assert page_.url.endswith(".html"), (title, page_.url)  # not a directory listing
            assert Path(page_.url.removeprefix("file://")).is_file(), (title, page_.url)
            assert page_.title().startswith(title), (title, page_.title())
            assert page_.locator(".rst-content h1").count() >= 1, (title, page_.url)
        # the links inside the pages reach files too (404.html is for a web server: absolute)
        for html in set(site.rglob("*.html")) - {site / "404.html"}:
            for href in re.findall(r'href="([^"#:]+)(?:#[^"]*)?"', html.read_text()):
                assert (html.parent / href).exists(), (html.relative_to(site), href)
    assert not outside, f"requests left file://: {outside[:5]}"
