"""The tests mirror the package: every module of ``bayesobs`` has its test file (issue 29).

A module ``bayesobs/<folders>/<name>.py`` is tested in ``tests/<folders>/``, by a file whose
name holds the module's name as whole words: ``test_<name>.py`` or ``test_<x>_<name>_<y>.py``
(``tests/fits/test_levels_optimum.py`` tests ``bayesobs/fits/levels.py``,
``tests/web/test_web_app.py`` tests ``bayesobs/web/app.py``); a package's ``__init__.py`` counts
as a module named after its folder (``tests/scores/test_scores.py``). Ground modules
(``bayesobs/<name>.py``) are tested at the top of ``tests/``, beside the cross-cutting tests (the
CLI end to end, the docs, the layering). A paradigm is tested per folder: everything of a
paradigm folder, and a module named after a paradigm in a shared folder (``scores/search.py``,
``run/subjects/tunnel_sim.py``), is covered by ``tests/<paradigm>/`` or ``tests/test_<paradigm>*.py``.
A module with none of these is listed in ``COVERED_ELSEWHERE`` with the reason and the
test files that cover it; a listed module must still exist, must still lack its own test file
(else the entry goes), and its covering files must exist.
Test basenames are unique across the tree (pytest's default import mode needs that).
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "bayesobs"
TESTS = ROOT / "tests"

# Paradigm folders and the paradigm names that own a module in a shared folder: tested per
# paradigm (tests/<paradigm>/ or tests/test_<paradigm>*.py), not per module.
PARADIGM_FOLDERS = {"stimuli", "tunnel", "perceptv", "hvs", "search", "magnitude", "choice"}
PARADIGM_NAMES = PARADIGM_FOLDERS - {"stimuli"} | {"perception"}

# module -> (why it has no test file of its own, the test files that cover it)
COVERED_ELSEWHERE: dict[str, tuple[str, tuple[str, ...]]] = {
    # the package's front: re-exports of the public functions, used by most tests
    "bayesobs": ("the public facade, re-exports only", ("test_one_path.py",)),
    "bayesobs.adaptive": ("adaptive sweeps through the runner", ("test_adaptive.py",)),
    "bayesobs.stopping": ("the adaptive rule's open questions", ("test_adaptive.py",)),
    "bayesobs.platforms": (
        "JATOS, DataPipe and Pavlovia files as they come",
        ("test_platform_files.py",),
    ),
    "bayesobs.run.budget": ("budgets: stop and resume", ("test_costs.py",)),
    "bayesobs.run.prices": ("the price table, priced usage", ("test_costs.py",)),
    "bayesobs.run.subjects.turns": (
        "a request as data URLs and inspect_ai messages: the requests compared whole",
        ("test_inspect_subject.py", "test_registry_tasks_solver_scorer.py"),
    ),
    "bayesobs.run.subjects.retries": (
        "Retry-After, backoff and pauses of every subject that retries",
        ("test_safety.py", "test_runner_integrity.py", "test_python_subject.py"),
    ),
    "bayesobs.run.subjects.inspect_model": ("inspect: subjects", ("test_inspect_subject.py",)),
    "bayesobs.web.jatos": ("the JATOS archive and saves", ("test_web_platform_saves.py",)),
    "bayesobs.fits.posterior.batching": (
        "batched sampling: the same draws alone or batched, beside per-cell fits",
        ("test_scale.py",),
    ),
    "bayesobs.fits.posterior.summaries": (
        "a slice's summaries and PSIS-LOO against each cell's arviz.summary and arviz.loo",
        ("test_scale.py",),
    ),
    "bayesobs.fits.posterior.jobs": (
        "the tasks of fit_posterior; tested through it",
        ("test_scale.py",),
    ),
    "bayesobs.fits.posterior.pools": (
        "worker processes and the Dask path of fit_posterior; tested through it",
        ("test_scale.py", "test_dask.py"),
    ),
    "bayesobs.fits.posterior.fit": ("fit_posterior", ("test_posterior.py", "test_scale.py")),
    "bayesobs.fits.posterior.model": ("the model and its data", ("test_posterior.py",)),
    "bayesobs.fits.posterior.checks": (
        "predictive checks",
        ("test_posterior.py", "test_calibration.py"),
    ),
    "bayesobs.fits.posterior.bcs": (
        "the posterior BCS of fit --method posterior",
        ("test_posterior.py",),
    ),
    # ground modules
    "bayesobs.api": (
        "the library path that the CLI shares; tested as one path with the CLI",
        ("test_one_path.py", "test_cli_fit.py"),
    ),
    "bayesobs.answers": (
        "the answer dispatcher of Tunnel Vision and Percept-V; tested with their tasks",
        ("test_perception_tasks.py", "test_perceptv_domains.py"),
    ),
    "bayesobs.errors": (
        "the input-error type; every bad-input test checks it",
        ("test_bad_input.py",),
    ),
    "bayesobs.paradigms": (
        "the paradigm registry; tested by a paradigm defined in the tests only",
        ("test_plugin_paradigm.py",),
    ),
    "bayesobs.parse": (
        "number parsing of replies; tested where replies are read",
        ("test_safety.py", "test_magnitude_tasks.py", "test_runner_integrity.py"),
    ),
    "bayesobs.plotting": (
        "the figure helper (an ax, no pyplot state); tested through every figure",
        ("test_report.py", "test_report_perception.py"),
    ),
    "bayesobs.provenance": (
        "manifests of each output folder; checked by the end-to-end runs",
        ("test_runner.py", "test_cli_fit.py"),
    ),
    "bayesobs.trials": (
        "the trial table: its reading and checks are what the bad-input and data tests test",
        ("test_bad_input.py", "test_degenerate.py", "test_real_data.py"),
    ),
    # fit wing
    "bayesobs.fits": ("the wing's package marker", ("test_fitting.py",)),
    "bayesobs.fits.runtable": (
        "the run table the kernel reads; built by every fit",
        ("test_fitting.py", "test_exact_speedups.py"),
    ),
    "bayesobs.fits.fitresults": (
        "the fit tables' encoding; the contract files are checked by the fit tests",
        ("test_cli_fit.py", "test_fitting.py"),
    ),
    "bayesobs.fits.observers.models": (
        "the observers' predictions; tested with the observers and the posterior",
        ("test_observers.py", "test_posterior.py", "test_predictions.py"),
    ),
    "bayesobs.fits.observers.variants": (
        "the table of the ten variants; tested with the observers",
        ("test_observers.py", "test_bootstrap.py"),
    ),
    # run wing
    "bayesobs.run": ("the wing's package marker", ("test_runner.py",)),
    "bayesobs.run.engine": (
        "make_subjects and the run loop; every sweep runs it",
        ("test_runner.py", "test_batch.py", "test_safety.py"),
    ),
    "bayesobs.run.plan": (
        "spec and protocol loading; tested by the sweeps and the bad-input tests",
        ("test_bad_input.py", "test_batch.py", "test_one_path.py"),
    ),
    "bayesobs.run.presentation": (
        "trial presentation; tested by the runs and their one-path check",
        ("test_one_path.py", "test_runner.py"),
    ),
    # the batch APIs: every part runs in the batch runs against the local batch server
    **{
        f"bayesobs.run.batch.{name}": (
            f"the batch APIs' {what}; tested by the batch runs end to end",
            ("test_batch.py", "test_batch_anthropic.py"),
        )
        for name, what in (
            ("openai_batches", "OpenAI provider"),
            ("anthropic_batches", "Anthropic provider"),
            ("provider", "shared provider parts"),
            ("rounds", "round engine"),
            ("options", "options"),
            ("display", "progress lines"),
            ("store", "stand-in store"),
        )
    },
    "bayesobs.chat": (
        "the subject interface; tested with the subjects",
        ("test_subjects.py",),
    ),
    "bayesobs.run.subjects.cache": (
        "the response cache; tested with the runner's integrity and safety",
        ("test_runner_integrity.py", "test_safety.py"),
    ),
    "bayesobs.run.subjects.openai_chat": (
        "the OpenAI-compatible client; tested against the local fake server",
        ("test_safety.py", "test_logprobs.py", "test_runner_integrity.py"),
    ),
    # test doubles, outside the layers
    "bayesobs.testing": ("the test doubles' package marker", ("test_runner_integrity.py",)),
    "bayesobs.testing.fakeserver": (
        "the local fake chat server is itself the tests' instrument",
        ("test_runner_integrity.py", "test_concurrency.py"),
    ),
    "bayesobs.testing.fakebatch": (
        "the local fake batch server is itself the tests' instrument",
        ("test_batch.py", "test_batch_anthropic.py"),
    ),
    # scores
    "bayesobs.scores.bcs": (
        "the Bayesian consistency score; tested with the score tables",
        ("test_scores.py", "test_synthetic.py"),
    ),
    "bayesobs.scores.spread": (
        "response spread per cell; a column of the score tables",
        ("test_scores.py",),
    ),
    "bayesobs.scores.composite": (
        "the BayesBench composite; tested with the score tables",
        ("test_scores.py", "test_synthetic.py"),
    ),
    "bayesobs.scores.degenerate": (
        "constant cells and cells with too few runs; tested with degenerate data",
        ("test_degenerate.py", "test_scores.py"),
    ),
    "bayesobs.scores.results": (
        "the score folder (Scores); written and read back by the score and report tests",
        ("test_scores.py", "test_report_rows.py"),
    ),
    "bayesobs.scores.scoring": (
        "score() itself; every score test runs it",
        ("test_scores.py", "test_bootstrap.py"),
    ),
    # front ends
    # the command line (tests/cli/test_cli.py measures the package): each command is tested end
    # to end through bayesobs.cli.main beside what it runs
    "bayesobs.cli.__main__": (
        "`python -m bayesobs.cli`; run as a process by the CLI tests",
        ("test_cli_fit.py", "test_runner_integrity.py"),
    ),
    "bayesobs.cli.parser": (
        "every command's options and main's exit codes; every CLI test goes through main",
        ("test_bad_input.py", "test_docs_examples.py"),
    ),
    "bayesobs.cli.options": (
        "the trial options of fit and score, and reading trials with them",
        ("test_bad_input.py", "test_exclusions.py"),
    ),
    "bayesobs.cli.fit": ("`bayesobs fit`", ("test_cli_fit.py", "test_one_path.py")),
    "bayesobs.cli.score": ("`bayesobs score`", ("test_scores.py", "test_references.py")),
    "bayesobs.cli.run": (
        "`bayesobs run`, `sweep` and `rescore`; tested with the runner",
        ("test_runner.py", "test_runner_integrity.py"),
    ),
    "bayesobs.cli.report": (
        "`bayesobs report` and `compare`",
        ("test_report.py", "test_compare.py"),
    ),
    "bayesobs.cli.humans": (
        "`bayesobs serve` and `export`; tested with the web app and the data set",
        ("test_web_app.py", "test_export_dataset.py"),
    ),
    "bayesobs.cli.simulation": (
        "`bayesobs simulate`, `design` and `calibrate`",
        ("test_design.py", "test_calibration.py"),
    ),
    "bayesobs.report.html": (
        "the report page; tested by the report tests",
        ("test_report.py", "test_report_layout.py"),
    ),
    "bayesobs.report.figures": (
        "the report's figures; tested by the report tests",
        ("test_report.py", "test_report_layout.py", "test_leaderboard.py"),
    ),
    "bayesobs.report.compare": (
        "the compare page; tested with compare",
        ("test_compare.py",),
    ),
    "bayesobs.report.psychometric": (
        "the psychometric curves; tested with the psychometric scores",
        ("test_psychometric.py",),
    ),
    "bayesobs.web.answers": (
        "the answer checks of serve (numbers, words, taps, catch trials); tested through its routes",
        ("test_web_person.py", "test_web_study.py", "test_web_app.py"),
    ),
    "bayesobs.web.participants": (
        "serve's participant state (sign-in, order, resume, logging); tested through its routes",
        ("test_web_app.py", "test_web_study.py", "test_web_security.py", "test_web_decomposed.py"),
    ),
    "bayesobs.worded": (
        "the jsPsych export's worded answers read back; tested with the export",
        ("test_jspsych_worded.py",),
    ),
}


def modules() -> list[str]:
    """Every module of the package, as a dotted name (a package's ``__init__`` as the package)."""
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def all_test_files() -> list[Path]:
    return sorted(TESTS.rglob("test_*.py"))


def _words(name: str) -> list[str]:
    return name.split("_")


def _holds(words: list[str], part: list[str]) -> bool:
    return any(words[i : i + len(part)] == part for i in range(len(words) - len(part) + 1))


def own_test_files(module: str) -> list[Path]:
    """The test files of ``module`` in the mirrored folder (the rule in the module docstring)."""
    parts = module.split(".")[1:]
    if not parts:
        return []
    package = PACKAGE.joinpath(*parts, "__init__.py").exists()
    folder, name = TESTS.joinpath(*(parts if package else parts[:-1])), parts[-1]
    # (at the top of tests/, a paradigm's files are the paradigm's: test_tunnel_parse.py does
    # not test bayesobs/parse.py)
    files = all_test_files()
    paradigms = {
        f for p in PARADIGM_NAMES | PARADIGM_FOLDERS for f in paradigm_test_files(p, files)
    }
    return [
        f
        for f in files
        if f.parent == folder and f not in paradigms and _holds(_words(f.stem)[1:], _words(name))
    ]


def paradigm_of(module: str) -> str | None:
    """The paradigm that a module belongs to (its folder or its name), else None."""
    parts = module.split(".")[1:]
    if parts and parts[0] in PARADIGM_FOLDERS:
        return parts[0]
    if parts and parts[0] in {"scores", "report", "run"}:
        words = set(_words(parts[-1]))
        owners = sorted(words & PARADIGM_NAMES)
        return owners[0] if owners else None
    return None


def paradigm_test_files(paradigm: str, files: list[Path] | None = None) -> list[Path]:
    return [
        f
        for f in (all_test_files() if files is None else files)
        if f.parent == TESTS / paradigm
        or (f.parent == TESTS and re.fullmatch(rf"test_{paradigm}(_\w+)?\.py", f.name))
    ]


def _find(basename: str) -> list[Path]:
    return sorted(TESTS.rglob(basename))


def test_every_module_has_its_test_file():
    missing = [
        m
        for m in modules()
        if not own_test_files(m)
        and not (paradigm_of(m) and paradigm_test_files(paradigm_of(m)))
        and m not in COVERED_ELSEWHERE
    ]
    assert not missing, (
        "modules without a test file in the mirrored folder (tests/<folders>/test_<name>.py) "
        f"and not listed in COVERED_ELSEWHERE: {missing}"
    )


def test_the_allow_list_is_current():
    present = set(modules())
    for module, (why, files) in COVERED_ELSEWHERE.items():
        assert module in present, f"{module}: listed in COVERED_ELSEWHERE but gone; remove it"
        assert not own_test_files(module), (
            f"{module} now has {[str(f.relative_to(ROOT)) for f in own_test_files(module)]}: "
            "remove it from COVERED_ELSEWHERE"
        )
        assert why and files, module
        for name in files:
            assert len(_find(name)) == 1, f"{module}: its covering test file {name} is not found"


def test_ground_tests_sit_at_the_top_and_folders_mirror_the_package():
    # a folder of tests/ is a package folder or a paradigm's (fixtures aside)
    package_folders = {
        p.relative_to(PACKAGE)
        for p in PACKAGE.rglob("*")
        if p.is_dir() and (p / "__init__.py").exists()
    }
    for folder in sorted(p for p in TESTS.rglob("*") if p.is_dir()):
        rel = folder.relative_to(TESTS)
        if rel.parts[0] in {"fixtures", "__pycache__"} or "__pycache__" in rel.parts:
            continue
        assert rel in package_folders or rel.parts[0] in PARADIGM_FOLDERS | PARADIGM_NAMES, (
            f"tests/{rel} mirrors no package folder"
        )


def test_test_basenames_are_unique():
    counts = Counter(f.name for f in TESTS.rglob("*.py"))
    assert not [n for n, c in counts.items() if c > 1], "duplicate test file names"


def test_the_rule_finds_mirrored_files_and_flags_a_module_without_one(tmp_path, monkeypatch):
    assert [f.relative_to(TESTS).as_posix() for f in own_test_files("bayesobs.fits.levels")] == [
        "fits/test_levels.py",
        "fits/test_levels_optimum.py",
    ]
    assert own_test_files("bayesobs.fits.observers.scale")[0].name == "test_model_scale.py"
    assert (
        own_test_files("bayesobs.scores")[0].relative_to(TESTS).as_posix()
        == "scores/test_scores.py"
    )
    assert paradigm_of("bayesobs.tunnel.subject") == "tunnel"
    assert paradigm_of("bayesobs.scores.evidence") is None
    # a module with no test file and no entry is reported
    pkg = tmp_path / "bayesobs"
    (pkg / "fits").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "fits" / "__init__.py").write_text("")
    (pkg / "fits" / "newthing.py").write_text("")
    (tmp_path / "tests" / "fits").mkdir(parents=True)
    here = sys.modules[__name__]
    monkeypatch.setattr(here, "PACKAGE", pkg)
    monkeypatch.setattr(here, "ROOT", tmp_path)
    monkeypatch.setattr(here, "TESTS", tmp_path / "tests")
    assert modules() == ["bayesobs", "bayesobs.fits", "bayesobs.fits.newthing"]
    assert own_test_files("bayesobs.fits.newthing") == []
    with pytest.raises(AssertionError, match=r"bayesobs\.fits\.newthing"):
        test_every_module_has_its_test_file()
    (tmp_path / "tests" / "fits" / "test_fits_newthing.py").write_text("")
    assert own_test_files("bayesobs.fits.newthing")
