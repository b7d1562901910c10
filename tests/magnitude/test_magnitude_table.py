"""Table tasks (issue 52): the user's own stimuli from a CSV, Parquet or dataset folder.

Bad tables are refused with one line (exit 2, nothing written); simulated observers recover on a
table what they recover on the built-in task it copies; a table of 40 images runs against a
fake chat server and scores.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

import bayesobs
from bayesobs.cli import main
from bayesobs.run.plan import load_spec, plan
from bayesobs.stimuli import from_png
from bayesobs.testing import Answer, FakeChatServer

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "make_table_example", ROOT / "tools" / "make_table_example.py"
)
example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(example)

RATIO_SPEC = """\
task = "table"
seed = 101
trials = 40
runs = 2
modalities = ["text"]
[table]
path = "{path}"
[[sessions]]
name = "short"
range = [0.1, 0.5]
[[sessions]]
name = "medium"
range = [0.3, 0.7]
[[sessions]]
name = "long"
range = [0.5, 0.9]
"""


def _one_error(capsys, needle: str) -> None:
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert "Traceback" not in err
    assert len(lines) == 1 and lines[0].startswith("bayesobs: error: "), err
    assert needle in lines[0], lines[0]


@pytest.fixture(scope="module")
def discs(tmp_path_factory) -> Path:
    """The shipped example: 40 disc images with measured diameters, a CSV and a task file."""
    return example.make(tmp_path_factory.mktemp("discs")).parent


def _bad(tmp_path: Path, csv: str, files=()) -> Path:
    folder = tmp_path / "t"
    (folder / "img").mkdir(parents=True)
    for f in files:
        Image.new("RGB", (8, 8), "white").save(folder / f)
    (folder / "t.csv").write_text(csv)
    (folder / "t.toml").write_text('task = "table"\nseed = 1\n[table]\npath = "t.csv"\n')
    return folder / "t.toml"


@pytest.mark.parametrize(
    ("csv", "files", "needle"),
    [
        ("image,size\nimg/a.png,3\n", ["img/a.png"], "no 'magnitude' column"),
        ("image,magnitude\n../t.toml,3\n", [], "image '../t.toml' is outside the table's folder"),
        ("image,magnitude\nimg/gone.png,3\n", [], "image 'img/gone.png' does not exist"),
        (
            "image,magnitude\nimg/a.png,3\nimg/a.png,big\n",
            ["img/a.png"],
            "row 2: magnitude 'big' is not a finite number",
        ),
        ("image,magnitude\n", [], "the table has no rows"),
        ("image,magnitude\nt.toml,3\n", [], "image 't.toml' is not an image"),
    ],
)
def test_a_bad_table_is_one_line_exit_2_and_nothing_written(tmp_path, capsys, csv, files, needle):
    spec = _bad(tmp_path, csv, files)
    out = tmp_path / "exp"
    rc = main(["run", str(spec), "--subject", "sim:bayesian", "--out", str(out), "--no-progress"])
    assert rc == 2
    _one_error(capsys, needle)
    assert not out.exists()


def test_table_sessions_and_order_follow_the_table(tmp_path):
    rows = pd.DataFrame(
        {"magnitude": [1.0, 2.0, 3.0, 10.0, 20.0], "text": list("abcde"), "session": list("xxxyy")}
    )
    rows.to_parquet(tmp_path / "t.parquet")
    (tmp_path / "t.toml").write_text(
        'task = "table"\nseed = 3\n[table]\npath = "t.parquet"\norder = "table"\nunit = "cm"\n'
    )
    spec = load_spec(tmp_path / "t.toml")
    # one session per value of the session column, its range the session's magnitudes
    assert [(s["name"], s["range"]) for s in spec["sessions"]] == [
        ("x", [1.0, 3.0]),
        ("y", [10.0, 20.0]),
    ]
    sessions = plan(spec, ["sim:bayesian"])
    assert [[st.text for st in s.stimuli] for s in sessions] == [
        list("abc"),
        list("dec")[:2] + ["d"],
    ]
    assert sessions[0].task.unit == "cm" and sessions[0].task.answer_range == (0.0, 39.0)


def test_a_dataset_folder_reads_as_its_csv(tmp_path):
    datasets = pytest.importorskip("datasets")
    rows = pd.DataFrame({"magnitude": [0.2, 0.4, 0.8], "text": ["--", "----", "--------"]})
    datasets.Dataset.from_pandas(rows).save_to_disk(str(tmp_path / "ds"))
    (tmp_path / "t.toml").write_text('task = "table"\nseed = 3\ntrials = 6\n[table]\npath = "ds"\n')
    s = plan(load_spec(tmp_path / "t.toml"), ["sim:bayesian"])[0]
    assert {st.value for st in s.stimuli} <= {0.2, 0.4, 0.8} and s.modality == "text"
    assert {st.text for st in s.stimuli} <= set(rows["text"])


@pytest.mark.parametrize(
    "subject",
    [
        "sim:bayesian",
        *(pytest.param(s, marks=pytest.mark.slow) for s in ("sim:antibayes", "sim:linear")),
    ],
)
def test_observers_recover_on_a_table_what_they_recover_on_line_ratio(tmp_path, subject):
    """A table copying line_ratio (1,001 values from 0 to 1, its sessions): the same fitted w_prior.

    The simulated observers answer a table's row from its magnitude with the noise and priors
    they have on the built-in task, so the static observer's fitted w_prior agrees within 0.03
    (three times its spread over noise seeds at 480 trials, measured: about 0.01); the
    Bayesian observer's is above 0, the anti-Bayesian's far above (it inverts the weight).
    """
    rows = pd.DataFrame({"magnitude": np.round(np.linspace(0, 1, 1001), 3)})
    rows["text"] = ["-" * round(m * 1000) for m in rows["magnitude"]]
    rows.to_csv(tmp_path / "t.csv", index=False)
    (tmp_path / "t.toml").write_text(RATIO_SPEC.format(path="t.csv"))
    w = {}
    for name, spec in (("table", tmp_path / "t.toml"), ("line_ratio", "line_ratio")):
        out = tmp_path / name
        args = ["--modality", "text", "--runs", "4", "--trials", "40", "--no-progress"]
        assert main(["run", str(spec), "--subject", subject, "--out", str(out), *args]) == 0
        fits, _ = bayesobs.fit(bayesobs.read_trials(out))
        w[name] = json.loads(fits.loc[fits["variant"] == "static", "params"].iloc[0])
    assert w["table"]["w_prior"] == pytest.approx(w["line_ratio"]["w_prior"], abs=0.03)
    assert w["table"]["sigma"] == pytest.approx(w["line_ratio"]["sigma"], rel=0.15)
    assert (
        w["table"]["w_prior"]
        > {"sim:bayesian": 0.0, "sim:antibayes": 0.5, "sim:linear": 0.1}[subject]
    )


def test_a_table_image_gets_the_blur_of_the_builtin_tasks(discs):
    spec = load_spec(discs / "discs.toml")
    spec["conditions"] = ["base", "noise_constant"]
    base, blurred = plan(spec, ["sim:bayesian"])[:2]
    stim = base.stimuli[0]
    sharp = from_png(base.task.render_png(stim))
    soft = from_png(base.task.render_png(stim, blurred.blur[0]))
    assert blurred.blur[0] == 3.0 and sharp.shape == (256, 256, 3)
    # a Gaussian blur keeps the ink and lowers the steepest edge
    assert abs(sharp.mean() - soft.mean()) < 0.5
    assert (
        np.abs(np.diff(soft[..., 0], axis=1)).max()
        < 0.5 * np.abs(np.diff(sharp[..., 0], axis=1)).max()
    )


@pytest.mark.slow
def test_forty_images_run_on_a_chat_model_and_score(discs, tmp_path):
    out = tmp_path / "exp"
    with FakeChatServer(lambda b, n: Answer(str(40 + n % 100))) as srv:
        rc = main(
            [
                "run",
                str(discs / "discs.toml"),
                "--subject",
                "openai:m",
                "--out",
                str(out),
                "--base-url",
                srv.url,
                "--api-key",
                "k",
                "--cache",
                str(tmp_path / "cache"),
                "--no-progress",
            ]
        )
        assert rc == 0 and srv.count == 40
        body = srv.requests[0]
    content = body["messages"][-1]["content"]
    assert any(part.get("type") == "image_url" for part in content)  # the row's image was sent
    assert "diameter of the grey disc" in body["messages"][0]["content"]
    t = bayesobs.read_trials(out)
    truth = pd.read_csv(discs / "discs.csv")["magnitude"]
    assert len(t) == 40 and set(t["stimulus"]) <= set(truth) and t["valid"].all()
    assert (
        main(
            [
                "score",
                str(out),
                "--out",
                str(tmp_path / "score"),
                "--bootstrap",
                "0",
                "--no-probe",
                "--no-progress",
            ]
        )
        == 0
    )
    fits = pd.read_csv(tmp_path / "score" / "fits.csv")
    assert set(fits["task"]) == {"table"}


SERVE_DOCS = "bayesobs serve my_table/discs.toml --out study/"


@pytest.mark.slow
def test_the_docs_page_runs_from_a_folder_of_images_to_a_report(tmp_path, monkeypatch):
    """Every command of docs/table-tasks.md, as a user copies it (``serve``: the web test)."""
    from docs_pages import commands, fenced_blocks, page, shell_argv

    monkeypatch.chdir(tmp_path)
    lines = [c for b in fenced_blocks(page("table-tasks.md"), "console") for c in commands(b, "")]
    assert lines[0].startswith("python tools/make_table_example.py") and SERVE_DOCS in lines
    for line in lines:
        argv = shell_argv(line, tmp_path)
        if argv[0] == "python":
            example.make(tmp_path / argv[2])
        elif line != SERVE_DOCS:
            extra = {
                "score": ["--bootstrap", "2", "--no-probe", "--no-progress"],
                "report": ["--bootstrap", "2"],
            }.get(argv[1], [])
            assert main([*argv[1:], *extra]) == 0, line
    assert (tmp_path / "runs" / "discs" / "report" / "index.html").exists()
    assert (tmp_path / "discs-jspsych" / "package.json").exists()
    psy = pd.read_csv(tmp_path / "runs" / "larger" / "scores" / "psychometric.csv")
    assert set(psy["paradigm"]) == {"choice"} and set(psy["guess"]) == {0.5}
    t = bayesobs.read_trials(tmp_path / "runs" / "discs")
    assert set(t["condition"]) == {"base", "noise_constant", "steer_numeric"} and len(t) == 240


def test_rescore_reads_a_table_task_again(discs, tmp_path):
    out = tmp_path / "exp"
    assert (
        main(
            [
                "run",
                str(discs / "discs.toml"),
                "--subject",
                "sim:bayesian",
                "--out",
                str(out),
                "--trials",
                "3",
                "--no-progress",
            ]
        )
        == 0
    )
    assert main(["rescore", str(out)]) == 0
    assert len(bayesobs.read_trials(out)) == 6


def test_a_modality_without_its_column_is_refused(discs, tmp_path, capsys):
    out = tmp_path / "exp"
    args = ["--subject", "sim:bayesian", "--modality", "text", "--out", str(out)]
    assert main(["run", str(discs / "discs.toml"), *args]) == 2
    _one_error(capsys, "task table takes modalities image; 'text' asked")
    assert not out.exists()


def test_a_dataset_with_images_inside_shows_them(tmp_path):
    """A Hugging Face dataset's Image column holds the PNG bytes themselves: shown as they are."""
    datasets = pytest.importorskip("datasets")
    images = [Image.new("RGB", (20, 10), (v, v, v)) for v in (0, 128, 255)]
    ds = datasets.Dataset.from_dict({"magnitude": [0.0, 0.5, 1.0], "image": images})
    ds.cast_column("image", datasets.Image()).save_to_disk(str(tmp_path / "ds"))
    (tmp_path / "t.toml").write_text('task = "table"\nseed = 3\ntrials = 6\n[table]\npath = "ds"\n')
    s = plan(load_spec(tmp_path / "t.toml"), ["sim:bayesian"])[0]
    assert s.modality == "image"
    for st in s.stimuli:
        img = from_png(s.task.render_png(st))
        assert img.shape == (10, 20, 3)
        assert abs(img.mean() - {0.0: 0, 0.5: 128, 1.0: 255}[st.value]) < 1


def test_rows_without_an_image_leave_the_image_modality_out(tmp_path, capsys):
    Image.new("RGB", (8, 8), "white").save(tmp_path / "a.png")
    pd.DataFrame({"magnitude": [1, 2], "image": ["a.png", None], "text": ["x", "y"]}).to_csv(
        tmp_path / "t.csv", index=False
    )
    (tmp_path / "t.toml").write_text(
        'task = "table"\nseed = 1\nmodalities = ["image"]\n[table]\npath = "t.csv"\n'
    )
    out = tmp_path / "exp"
    assert (
        main(["run", str(tmp_path / "t.toml"), "--subject", "sim:bayesian", "--out", str(out)]) == 2
    )
    _one_error(capsys, "modality image needs a text column and an image in every row")
    assert not out.exists()
