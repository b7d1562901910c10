"""``bayesobs export inspect`` and ``bayesobs import inspect``: a folder there and back, bad logs."""

from __future__ import annotations

import pytest
from inspect_ai.log import (
    EvalConfig,
    EvalDataset,
    EvalError,
    EvalLog,
    EvalSample,
    EvalSpec,
    read_eval_log,
    resolve_sample_attachments,
    write_eval_log,
)

from bayesobs.cli import main
from bayesobs.run.store import read_jsonl


def _rows(folder):
    key = ("subject", "task", "modality", "condition", "session", "run", "trial")
    return sorted(read_jsonl(folder / "trials.jsonl")[0], key=lambda r: tuple(map(str, (r[k] for k in key))))  # fmt: skip


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    """A small simulated run: text and image, two trials a run, two subjects."""
    folder = tmp_path_factory.mktemp("run")
    argv = ["run", "line_ratio", "--subject", "sim:bayesian", "--subject", "sim:random",
            "--modality", "text", "--modality", "image", "--trials", "2", "--out", str(folder)]  # fmt: skip
    assert main(argv) == 0
    return folder


def test_export_then_import_gives_back_the_same_trials_and_images(run_folder, tmp_path, capsys):
    logs = tmp_path / "logs"
    assert main(["export", "inspect", str(run_folder), "--out", str(logs)]) == 0
    assert "2 inspect log(s)" in capsys.readouterr().out
    files = sorted(logs.glob("*.eval"))
    assert [f.name for f in files] == ["line_ratio_sim-bayesian.eval", "line_ratio_sim-random.eval"]
    log = read_eval_log(str(files[0]))  # inspect's own reader: what inspect view shows
    assert log.eval.task == "bayesobs/line_ratio" and log.eval.model == "sim/bayesian"
    assert len(log.samples) == 6  # 3 sessions x 2 modalities, one sample per run
    sample = next(s for s in log.samples if s.id == "line_ratio/image/base/short/0")
    sample = resolve_sample_attachments(sample)  # inspect keeps an image once, as an attachment
    trials = sample.scores["trial_scorer"].metadata["trials"]
    assert [t["trial"] for t in trials] == [0, 1]
    assert all(t["gold"] == t["stimulus"] and t["response"] is not None for t in trials)
    shown = sample.messages[0].content  # the first trial: its image, then the reply
    assert [c.type for c in shown] == ["image"] and shown[0].image.startswith("data:image/png")
    assert sample.messages[1].role == "assistant"
    # the .json form of the same log (inspect writes either) imports alike
    write_eval_log(read_eval_log(str(files[1])), str(tmp_path / "random.json"))
    back = tmp_path / "back"
    assert main(["import", "inspect", str(files[0]), str(tmp_path / "random.json"),
                 "--out", str(back)]) == 0  # fmt: skip
    assert "imported 24 trial(s) of 12 sample(s)" in capsys.readouterr().out
    assert _rows(back) == _rows(run_folder)
    assert sorted(p.name for p in (back / "stimuli").iterdir()) == sorted(
        p.name for p in (run_folder / "stimuli").iterdir()
    )
    for png in (back / "stimuli").iterdir():
        assert png.read_bytes() == (run_folder / "stimuli" / png.name).read_bytes()
    # imported again: nothing doubled
    assert main(["import", "inspect", str(files[0]), "--out", str(back)]) == 0
    assert "imported 0 trial(s) of 6 sample(s)" in capsys.readouterr().out
    assert len(_rows(back)) == 24


def test_a_log_of_another_task_is_one_line_and_exit_2(tmp_path, capsys):
    spec = EvalSpec(
        created="2026-01-01T00:00:00+00:00",
        task="popularity",
        dataset=EvalDataset(name="popularity"),
        model="mockllm/model",
        config=EvalConfig(),
    )
    log = EvalLog(eval=spec, samples=[EvalSample(id=1, epoch=1, input="Hi", target="yes")])
    write_eval_log(log, str(tmp_path / "other.json"))
    out = tmp_path / "folder"
    assert main(["import", "inspect", str(tmp_path / "other.json"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'popularity', not of a bayesobs task" in err
    assert not out.exists()  # nothing written
    (tmp_path / "junk.json").write_text('{"not": "a log"}')
    assert main(["import", "inspect", str(tmp_path / "junk.json"), "--out", str(out)]) == 2
    assert "not an inspect eval log" in capsys.readouterr().err
    assert main(["export", "inspect", str(tmp_path), "--out", str(tmp_path / "logs")]) == 2
    assert "no trials.jsonl" in capsys.readouterr().err


def test_a_sample_that_failed_before_its_first_trial_is_counted_not_refused(tmp_path, capsys):
    spec = EvalSpec(
        created="2026-01-01T00:00:00+00:00",
        task="bayesobs/line_ratio",
        dataset=EvalDataset(name="line_ratio"),
        model="mockllm/model",
        config=EvalConfig(),
    )
    error = EvalError(message="the provider is down", traceback="", traceback_ansi="")
    sample = EvalSample(
        id="line_ratio/text/base/short/0", epoch=1, input="", target="", error=error
    )
    write_eval_log(EvalLog(eval=spec, samples=[sample]), str(tmp_path / "failed.json"))
    assert (
        main(["import", "inspect", str(tmp_path / "failed.json"), "--out", str(tmp_path / "f")])
        == 0
    )
    out = capsys.readouterr().out
    assert "imported 0 trial(s) of 1 sample(s)" in out and "1 sample(s) ended in an error" in out
