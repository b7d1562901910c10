"""Issue 50: a paradigm and a subject kind of an installed package (entry points) run through sweep, score and report.

The package is ``tests/fixtures/plugin_example``, installed by pip into a temporary folder (never into
the venv) and put on the path of the CLI's processes only.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "tests" / "fixtures" / "plugin_example"
SPEC = """\
task = "parity"
seed = 3
trials = 20
runs = 1
modalities = ["text"]
conditions = ["base"]

[[sessions]]
name = "small"
range = [1, 40]
"""
BROKEN = (
    "bayesobs: skipped entry point bayesobs.paradigms: broken = bayesobs_parity.absent:PARADIGM "
    "of bayesobs-parity 0.1: ModuleNotFoundError: No module named 'bayesobs_parity.absent'"
)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The example package, installed by pip into a folder of its own."""
    target = tmp_path_factory.mktemp("site")
    pip = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation"]
    pip += ["--no-index", "--quiet", "--disable-pip-version-check", "--target", str(target)]
    subprocess.run([*pip, str(EXAMPLE)], check=True, capture_output=True, cwd=target)
    return target


def bayesobs(site, *args):
    """The CLI in a process that sees the installed example."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(site)])}
    env["BAYESOBS_CACHE"] = str(site / "cache")  # the kinds that opt in are cached: not in $HOME
    code = "import sys; from bayesobs.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *map(str, args)], env=env, capture_output=True, text=True
    )


def test_an_installed_paradigm_and_subject_kind_run_through_sweep_score_and_report(site, tmp_path):
    spec = tmp_path / "parity.toml"
    spec.write_text(SPEC)
    run, scores, report = tmp_path / "run", tmp_path / "scores", tmp_path / "report"
    done = bayesobs(
        site, "sweep", spec, "--subject", "sim:even", "--subject", "oracle:x", "--out", run
    )
    assert done.returncode == 0, done.stderr
    # the broken entry point of the same package: one line naming it, no traceback, the rest works
    assert done.stderr.strip() == BROKEN
    trials = pd.read_json(run / "trials.jsonl", lines=True)
    assert set(trials["paradigm"]) == {"parity"} and len(trials) == 40
    by = trials.groupby("subject")
    assert set(by.get_group("sim:even")["raw_response"].astype(str)) == {"1"}
    truth = (trials["stimulus"] % 2 == 0).astype(int)
    assert (trials["parity_correct"] == (trials["response"] == truth)).all()

    done = bayesobs(site, "score", run, "--out", scores)
    assert done.returncode == 0, done.stderr
    table = pd.read_csv(scores / "parity.csv").set_index("subject")["accuracy"]
    even = (by.get_group("sim:even")["stimulus"] % 2 == 0).mean()
    assert table["oracle:x"] == 1.0 and table["sim:even"] == pytest.approx(even)
    assert f"Parity: sim:even {even:.3f}" in done.stdout and "Parity: oracle:x 1.000" in done.stdout

    done = bayesobs(site, "report", scores, "--out", report)
    assert done.returncode == 0, done.stderr
    page = (report / "index.html").read_text()
    assert "<h2>Parity</h2>" in page and "oracle:x" in page


def test_an_unknown_subject_kind_names_the_installed_ones(site, tmp_path):
    spec = tmp_path / "parity.toml"
    spec.write_text(SPEC)
    done = bayesobs(site, "sweep", spec, "--subject", "nope:x", "--out", tmp_path / "run")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "unknown subject 'nope:x'" in done.stderr and "oracle:<name>" in done.stderr


@pytest.mark.slow
def test_an_installed_kind_that_opts_in_is_replayed_from_the_cache(site, tmp_path):
    """Issue 51: ``cacheable = True`` on the factory's object: the second run calls nothing."""
    spec = tmp_path / "parity.toml"
    spec.write_text(SPEC)
    run = tmp_path / "run"
    for cached in (False, True):
        done = bayesobs(site, "sweep", spec, "--subject", "oracle:y", "--out", run)
        assert done.returncode == 0, done.stderr
        trials = pd.read_json(run / "trials.jsonl", lines=True)
        assert len(trials) == 20 and (trials["cached"] == cached).all()
        assert (trials["parity_correct"] == 1).all()
        (run / "trials.jsonl").unlink()  # the same folder again: every reply from the cache
