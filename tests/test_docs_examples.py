"""Every command and code example that README.md and docs/ show is run by a test.

Each fenced ``bayesobs ...`` line, ``python -c``/``python -m`` line and ``python`` block of
README.md and docs/**/*.md is either run here (as bash reads the line, in a fresh folder
laid out like a checkout: the repo's ``tasks/``, ``../shared`` beside it; with simulated
subjects or the local fake chat server, a few trials and a small bootstrap) or listed in ``ELSEWHERE`` with the test that runs it (usage lines with
placeholders, commands that need a key, a server, a cluster or the shared human data). A new
example that is neither fails here; so does a listed one that is gone from the docs, and a
documented ``--option`` that its command does not have.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from docs_pages import ROOT, checkout, commands, fenced_blocks, page, pages, shell_argv

from bayesobs.cli import build_parser, main
from bayesobs.testing.fakeserver import Answer, FakeChatServer

# an example -> the test that runs it ("file::test"); commands as `commands()` joins them,
# python blocks by their first line
ELSEWHERE = {
    # usage lines (placeholders): the test that runs the command through the CLI
    "bayesobs run TASK --subject SUBJECT [--modality M ...] [--condition C ...] [--trials N] [--runs R] [--out DIR]": "test_cli_fit.py::test_every_command_is_listed_and_has_help",
    "bayesobs sweep tasks/bayesbench.toml --subject SUBJECT [--subject ...] --out DIR": "test_batch.py::test_batch_sweep_of_the_full_bayesbench_protocol_matches_live",
    "bayesobs serve tasks/line_ratio.toml --out DIR [--host 127.0.0.1] [--port 8000] [--condition base --condition noise_constant ...] [--order counterbalanced|fixed] [--minutes M] [--catch-every N] [--allow-host NAME ...]": "test_safety.py::test_two_writers_on_one_folder_are_refused_for_every_pair",
    "bayesobs export jspsych tasks/line_ratio.toml --out DIR --platform jatos|pavlovia|cognition|prolific|local [--order counterbalanced|fixed] [--break-every N] [--completion-code CODE] [--prolific-code CODE] [--datapipe ID] [--minutes M] [--catch-every N] [--no-build]": "test_web_study.py::test_platform_export_saves_the_data_where_fit_and_score_read_it",
    # issue 52: platform files and JATOS's archive (npm and Chromium; files the checkout lacks)
    "bayesobs export jspsych tasks/line_ratio.toml --out jatos --platform jatos --trials 10 --modality text --order fixed": "test_web_platform_saves.py::test_jatos_keeps_every_answer_of_a_participant_who_quits_at_17_of_30",
    "bayesobs fit jatos_results_20261128.jrzip --out fit": "test_platform_files.py::test_jatos_jrzip_reads_every_result_folder",
    'bayesobs fit jatos_results_data.txt --out fit --participants prolific_export.csv --exclude "Age < 18"': "test_demographics.py::test_fit_excludes_by_a_demographic_column",
    "bayesobs fit TRIALS... --out DIR [--bootstrap 30] [--seed 0] [--resample pooled|stratified] [--map NEW=OLD ...] [--where EXPR] [--missing-where EXPR] [--columns NAME,...] [--interleaved COL] [--lapse] [--exclude RULE ...] [--transfer A:B]": "test_cli_fit.py::test_fit_writes_contract_files",
    "bayesobs fit TRIALS... --out DIR --method posterior [--hierarchical] [--chains 4 --warmup 500 --draws 500] [--variant static ...]": "test_posterior.py::test_cli_posterior_writes_tables_netcdf_and_bcs",
    "bayesobs score TRIALS... --out DIR [--bootstrap 30] [--seed 0] [--resample pooled|stratified] [--non-oracle response|error] [--no-probe] [--interleaved COL] [--lapse] [--no-references] [--humans PATTERN]... (and the trial options of fit)": "test_scores.py::test_score_cli_writes_contract_tables_and_leaderboard",
    "bayesobs compare SCOREDIR... --features models.csv --out DIR [--feature COLUMN]... [--report]": "test_compare.py::test_cli_writes_tables_summary_and_page",
    "bayesobs export dataset DIR --out OUT [--scores SCOREDIR] [--images paths|copy|omit] [--license ID]": "test_export_dataset.py::test_export_loads_with_datasets",
    "bayesobs report DIR_OR_TRIALS... --out DIR [--bootstrap 30] [--seed 0]": "test_report.py::test_report_from_a_run_folder_is_offline_and_complete",
    # a table of the user's: the command on psignifit's demo counts
    "bayesobs psychometric counts.csv --guess 0.5 --out psy": "test_psychometric_bayes.py::test_the_command_writes_the_table_and_figure_of_a_users_counts",
    # batch APIs: against the local batch server (bayesobs.testing.fakebatch)
    "bayesobs sweep tasks/bayesbench.toml --subject openai:MODEL --out DIR --batch [--poll-max 60]": "test_batch.py::test_batch_sweep_logs_exactly_the_trials_of_a_live_run",
    "bayesobs sweep tasks/bayesbench.toml --subject anthropic:MODEL --out DIR --batch": "test_batch_anthropic.py::test_anthropic_batch_run_logs_exactly_the_trials_of_a_live_run",
    # a real model on llama.cpp's server (make test-model)
    "python -m llama_cpp.server --model": "test_real_model.py::test_the_docs_local_model_command_runs",
    "bayesobs run line_ratio --modality text --subject openai:smollm2 --base-url http://127.0.0.1:8080/v1 --trials 4 --out runs/smollm2": "test_real_model.py::test_the_docs_local_model_command_runs",
    # Claude: against the local Messages server, read from docs/llm-runs.md
    "bayesobs run line_ratio --modality text --modality image --subject anthropic:claude-sonnet-4-5 --out runs/claude": "test_anthropic_messages.py::test_the_docs_claude_commands_run_against_the_local_messages_server",
    "bayesobs sweep tasks/bayesbench.toml --subject anthropic:claude-sonnet-4-5 --out runs/bayesbench-claude --dry-run": "test_anthropic_messages.py::test_the_docs_claude_commands_run_against_the_local_messages_server",
    # Gemini: Google's endpoint and a key file; the key-file path against the local server
    "bayesobs sweep tasks/bayesbench.toml --subject openai:gemini-2.5-flash --base-url https://generativelanguage.googleapis.com/v1beta/openai/ --api-key-file ~/.gemini-key --out runs/bayesbench-gemini": "test_safety.py::test_a_key_echoed_by_the_server_is_written_nowhere",
    # a participant server runs until stopped: served studies are driven through its app
    "bayesobs serve tasks/line_ratio.toml --out study/ --catch-every 10": "test_readme_recipes.py::test_the_readme_study_pair_runs_on_a_study_served_to_two_people_in_chromium",
    'bayesobs score study/ --out scores --exclude "catch_error_rate > 0.2" --exclude "rt_client_s < 0.2"': "test_readme_recipes.py::test_the_readme_study_pair_runs_on_a_study_served_to_two_people_in_chromium",
    # HVSBench-style on the public sources (--hvs DIR): the same sweep on the synthetic fixture
    "bayesobs sweep tasks/hvs.toml --hvs DIR --subject openai:MODEL --out runs/hvs": "test_hvs_run.py::test_hvs_csv_has_the_table3_layout_and_the_fixture_label",
    "bayesobs score runs/hvs --out runs/hvs/scores": "test_hvs_run.py::test_hvs_csv_has_the_table3_layout_and_the_fixture_label",
    "bayesobs report runs/hvs/scores --out runs/hvs/report": "test_hvs_run.py::test_hvs_csv_has_the_table3_layout_and_the_fixture_label",
    # the human-data recipes: on the shared data sets, read from docs/human-data.md, as
    # printed from a checkout with ../shared beside it (slow: fit, score and report each)
    'bayesobs fit ../shared/data/glasauer_shi_2021_vierordt/rep_randwalk_table.csv --out fit --map stimulus=dur --map response=repDur --map subject=NSub --map trial=NT --map condition=RandLevel --missing-where "valid == 0"': "test_readme_recipes.py::test_docs_recipe_runs_fit_score_report",
    'bayesobs fit ../shared/data/qu_shi_precision_weighting/raw_psychopy_csv/experiment2/*.csv --out fit --map stimulus=TimeDur --map "response=keyDuration / 1000" --map subject=participant --interleaved Coherence1 --where "TrialType == \'Time\'" --missing-where "keyDuration >= 9999"': "test_readme_recipes.py::test_docs_recipe_runs_fit_score_report",
    'bayesobs fit ../shared/data/gong_bayesneg_line_bisection/EP32_NC_VN.csv --out fit --wide "NC*,VN*" --map "stimulus=(L + R) / 2" --no-order': "test_order.py::test_gong_line_bisection_wide_and_without_order",
    'bayesobs fit ../shared/data/vul_numerosity_estimation/numexpt-fb/*.csv --out fit --columns part,num_dots,answer,feedback,a,fbnum,points,time --map stimulus=num_dots --map response=answer --map subject=@file --where "feedback == 0"': "test_readme_recipes.py::test_docs_recipe_runs_fit_score_report",
    "bayesobs fit ../shared/data/vul_numerosity_estimation/numexpt/*.csv --out fit --map stimulus=num_dots --map response=answer1 --map subject=@file --map \"task='numerosity'\" --map run=1": "test_readme_recipes.py::test_docs_recipe_runs_fit_score_report",
    # Percept-V's paper protocol is stratified over 20 sizes in 30 domains (6,000 trials a
    # subject; 20 a session at the least): the same commands on tasks/percept_v_small.toml
    "bayesobs sweep tasks/percept_v.toml --subject sim:perceiver --subject sim:guesser --out runs/pv": "test_perceptv_run.py::test_small_protocol_sweep_score_report",
    "bayesobs score runs/pv --out runs/pv/scores": "test_perceptv_run.py::test_small_protocol_sweep_score_report",
    "bayesobs report runs/pv/scores --out runs/pv/report": "test_perceptv_run.py::test_small_protocol_sweep_score_report",
    # the Python library example: executed as written
    "import numpy as np": "test_one_path.py::test_the_docs_library_snippet_runs",
    # a SLURM cluster cannot run in the suite: the --scheduler commands it serves run on a
    # local Dask cluster instead
    "# start_cluster.py: keep it running while you work": "test_dask.py::test_cli_scheduler_option_writes_the_same_fits",
    # scaling a SLURM cluster submits jobs: no scheduler here; its job script is checked
    "cluster.scale(jobs=10)  # 10 SLURM jobs, 20 Dask workers": "test_distributed.py::test_docs_slurm_recipe_builds_a_job_script_with_the_caps",
    # posterior fits on the capped local cluster (slow: each worker compiles the sampler)
    "from bayesobs.distributed import local_cluster": "test_dask.py::test_batched_posterior_is_identical_on_the_cluster",
    "python start_cluster.py &": "test_dask.py::test_cli_scheduler_option_writes_the_same_fits",
    "bayesobs fit study/ --out fits --method posterior --scheduler tcp://10.0.0.5:8786": "test_dask.py::test_cli_scheduler_option_writes_the_same_fits",
    "bayesobs score study/ --out scores --bootstrap 200 --scheduler tcp://10.0.0.5:8786": "test_dask.py::test_cli_scheduler_option_writes_the_same_fits",
    # an lm-eval-harness samples file, written by the test under the docs' name
    'bayesobs fit samples_line_ratio.jsonl --out fit --map stimulus=doc.ratio --map "response=filtered_resps[0]"': "test_nested_map.py::test_the_docs_lm_eval_command_runs_as_written",
    # a python: subject's module is written where the user runs bayesobs (docs/custom-subjects.md)
    "# mylab/observers.py": "test_python_subject.py::test_the_docs_custom_subject_page_runs_as_written",
    "bayesobs run line_ratio --modality text --subject python:mylab.observers:ratio --out runs/mine": "test_python_subject.py::test_the_docs_custom_subject_page_runs_as_written",
    "bayesobs run line_ratio --modality text --subject python:mylab.observers:Observer --out runs/class": "test_python_subject.py::test_the_docs_custom_subject_page_runs_as_written",
    "bayesobs score runs/mine --out runs/mine/scores": "test_python_subject.py::test_the_docs_custom_subject_page_runs_as_written",
    # docs/inspect.md: one sequence with inspect's own commands (inspect eval, eval-set, view)
    "bayesobs run line_ratio --subject sim:bayesian --modality text --modality image --trials 3 --out runs/sim": "test_inspectai_logs.py::test_the_docs_commands_run_and_the_viewer_lists_the_samples",
    "bayesobs export inspect runs/sim --out logs/sim": "test_inspectai_logs.py::test_the_docs_commands_run_and_the_viewer_lists_the_samples",
    "bayesobs import inspect logs/*.eval logs/sim/*.eval --out runs/inspect": "test_inspectai_logs.py::test_the_docs_commands_run_and_the_viewer_lists_the_samples",
    "bayesobs fit runs/inspect --out runs/inspect/fit": "test_inspectai_logs.py::test_the_docs_commands_run_and_the_viewer_lists_the_samples",
    "bayesobs import inspect logs/smollm2/*.eval --out runs/smollm2-inspect": "test_inspect_real_model.py::test_the_docs_inspect_eval_on_the_local_model_is_fitted_scored_reported",
    # table tasks (docs/table-tasks.md): the example folder is made by tools/make_table_example.py
    "python tools/make_table_example.py my_table": "test_magnitude_table.py::test_the_docs_page_runs_from_a_folder_of_images_to_a_report",
    "bayesobs run my_table/discs.toml --subject sim:bayesian --subject sim:linear --condition base --condition noise_constant --condition steer_numeric --out runs/discs": "test_magnitude_table.py::test_the_docs_page_runs_from_a_folder_of_images_to_a_report",
    "bayesobs score runs/discs --out runs/discs/scores": "test_magnitude_table.py::test_the_docs_page_runs_from_a_folder_of_images_to_a_report",
    "bayesobs report runs/discs --out runs/discs/report": "test_magnitude_table.py::test_the_docs_page_runs_from_a_folder_of_images_to_a_report",
    "bayesobs run my_table/discs.toml --subject openai:gpt-4o --out runs/discs-gpt --dry-run": "test_magnitude_table.py::test_the_docs_page_runs_from_a_folder_of_images_to_a_report",
    "bayesobs export jspsych my_table/discs.toml --out discs-jspsych --platform jatos": "test_magnitude_table.py::test_the_docs_page_runs_from_a_folder_of_images_to_a_report",
    "bayesobs run my_table/larger.toml --subject sim:chooser --subject sim:random --out runs/larger": "test_magnitude_table.py::test_the_docs_page_runs_from_a_folder_of_images_to_a_report",
    "bayesobs score runs/larger --out runs/larger/scores": "test_magnitude_table.py::test_the_docs_page_runs_from_a_folder_of_images_to_a_report",
    "bayesobs serve my_table/discs.toml --out study/": "test_magnitude_table_web.py::test_a_person_on_a_phone_answers_a_table_of_images",
    # inspect: subjects (docs/inspect.md): mockllm offline, the servers at the local fake one
    "bayesobs run line_ratio --modality text --subject inspect:mockllm/model --trials 4 --out runs/mock": "test_inspect_subject.py::test_the_docs_inspect_subject_commands_run",
    "bayesobs run line_ratio --modality text --subject inspect:ollama/llama3.2 --out runs/llama": "test_inspect_subject.py::test_the_docs_inspect_subject_commands_run",
    "bayesobs run line_ratio --modality text --subject inspect:openai-api/llamacpp/smollm2 --base-url http://127.0.0.1:8080/v1 --api-key local --out runs/smollm2": "test_inspect_subject.py::test_the_docs_inspect_subject_commands_run",
    "bayesobs sweep tasks/bayesbench.toml --subject inspect:google/gemini-2.5-pro --out runs/gemini --dry-run": "test_inspect_subject.py::test_the_docs_inspect_subject_commands_run",
    # people in the browser (Chromium), then paired with a model as printed
    "bayesobs serve tasks/line_ratio.toml --out study/": "test_same_trials.py::test_the_docs_commands_pair_people_in_chromium_with_a_model",
    "bayesobs compare-trials study/ model/ --out agreement/": "test_same_trials.py::test_the_docs_commands_pair_people_in_chromium_with_a_model",
    "bayesobs compare-trials A B --out DIR [--bootstrap 200] [--seed 0] [--human-range]": "test_agreement.py::test_a_member_of_the_population_is_within_the_human_range_and_a_linear_observer_is_not",
    # adaptive sweeps (issue 53): a whole BayesBench sweep each; the same commands on a tiny protocol
    "bayesobs sweep tasks/bayesbench.toml --subject SUBJECT --out DIR --runs 6 --adaptive [--first-runs 2] [--sign-level 0.9] [--risk 0.1]": "test_adaptive.py::test_killed_adaptive_sweep_resumes_to_the_same_decisions",
    "bayesobs design tasks/bayesbench.toml --out design-adaptive --runs 6 --trials 20 --adaptive sim:bayesian": "test_adaptive.py::test_design_simulates_the_adaptive_rule_before_paying",
    # placed levels (issue 53): the same command on a tiny search spec, killed and resumed
    "bayesobs sweep tasks/visual_search.toml --subject SUBJECT --out DIR --runs 10 --adaptive [--place-width 0.2]": "test_placed.py::test_killed_placed_sweep_resumes_to_the_same_levels",
}

# what each command gets appended when it runs here: a few trials, a small bootstrap
SPEED = {
    "run": ["--trials", "1", "--no-progress", "--no-cache"],
    "sweep": ["--trials", "1", "--no-progress", "--no-cache"],
    "score": ["--bootstrap", "2", "--no-probe", "--no-progress"],
    "report": ["--bootstrap", "2"],
    "design": ["--reps", "2", "--trials", "20"],
    "fit": ["--bootstrap", "2"],
}
# examples that take 10 s or more here, even at one trial per session
SLOW = {("README.md", 2), ("search.md", 0), ("tunnel.md", 0)}


def examples() -> list[tuple[str, int, str]]:
    """(page, block number, example) of every command line and python block of the docs."""
    out = []
    for name in pages():
        for i, block in enumerate(fenced_blocks(page(name))):
            if _is_python(name, block):
                out.append((name, i, "python:" + block.splitlines()[0]))
            else:
                out += [(name, i, c) for c in _in_order(block)]
    return out


def _is_python(name: str, block: str) -> bool:
    return block in fenced_blocks(page(name), "python")


def _in_order(block: str) -> list[str]:
    """The block's `bayesobs` and `python` command lines, in the block's order."""
    return [c for c in commands(block, "") if c.startswith(("bayesobs ", "python "))]


def key(example: str) -> str:
    """The ELSEWHERE key of an example (python blocks by their first line)."""
    if example.startswith("python:"):
        return example[len("python:") :]
    if example.startswith("python -m llama_cpp.server "):
        return "python -m llama_cpp.server --model"
    return example


EXAMPLES = examples()
HERE = sorted({(n, i) for n, i, e in EXAMPLES if key(e) not in ELSEWHERE})


def test_every_listed_example_is_in_the_docs_and_its_test_exists():
    shown = {key(e) for _, _, e in EXAMPLES}
    assert not set(ELSEWHERE) - shown, "listed but gone from the docs"
    for where in set(ELSEWHERE.values()):
        file, name = where.split("::")
        # test files live in folders that mirror the package; their basenames are unique
        found = sorted((ROOT / "tests").rglob(file))
        assert len(found) == 1, f"{where}: {len(found)} test files named {file}"
        assert re.search(rf"^def {name}\(", found[0].read_text(), re.M), where


def _subcommand(argv: list[str]) -> tuple[list[str], argparse.ArgumentParser]:
    parser, path = build_parser(), []
    while True:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or not argv or argv[0] not in subs[0].choices:
            return path, parser
        path.append(argv[0])
        parser = subs[0].choices[argv.pop(0)]


@pytest.mark.parametrize(
    "example", sorted({e for _, _, e in EXAMPLES if e.startswith("bayesobs ")})
)
def test_every_documented_option_exists(example):
    argv = example.split()[1:]
    path, parser = _subcommand(argv)
    assert path or argv[0].startswith("--"), f"{example}: no such command"  # or `--help`
    known = set(parser._option_string_actions)
    for opt in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", example):
        assert opt in known, f"{example}: `bayesobs {' '.join(path)}` has no {opt}"


def _run_block(name: str, i: int, folder: Path, url: str) -> None:
    block = fenced_blocks(page(name))[i]
    if _is_python(name, block):  # e.g. docs/hvs.md: DIR is a synthetic fixture folder
        from bayesobs import hvs

        hvs.write_fixture(folder / "hvs_dir")
        exec(compile(block, f"docs/{name}", "exec"), {"DIR": str(folder / "hvs_dir")})
        return
    lines = [c for c in _in_order(block) if key(c) not in ELSEWHERE]
    assert lines, f"{name} block {i}: nothing to run"
    for line in lines:
        argv = shell_argv(line, folder)  # as bash reads it: quotes, globs
        if argv[:2] == ["python", "-c"]:
            exec(compile(argv[2], f"{name} block {i}", "exec"), {})
            continue
        assert argv[0] == "bayesobs", line
        extra = list(SPEED.get(argv[1], []))
        if any(a.startswith(("--subject=openai:", "openai:")) for a in argv):
            extra += ["--base-url", url]
        try:
            code = main([*argv[1:], *extra])
        except SystemExit as stop:  # `bayesobs --help`: argparse prints and exits
            code = stop.code
        assert code == 0, line


@pytest.mark.parametrize(
    "where",
    [pytest.param(w, marks=[pytest.mark.slow] if w in SLOW else []) for w in HERE],
    ids=[f"{n}#{i}" for n, i in HERE],
)
def test_the_example_runs(where, tmp_path, monkeypatch):
    name, i = where
    cwd = checkout(tmp_path)  # a user's checkout root, ../shared beside it
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-docs-test")
    with FakeChatServer(lambda b, n: Answer("0.42")) as srv:
        _run_block(name, i, cwd, srv.url)
