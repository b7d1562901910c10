"""``bayesobs export dataset``: an experiment folder as a data set that Hugging Face's ``datasets`` loads."""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest

from bayesobs.cli import main
from bayesobs.dataset import secret_in, split_paradigms
from bayesobs.run.store import FolderLock
from bayesobs.trials import read_trials

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # local folders only: never the Hub

PROTOCOL = """
[[experiment]]
spec = "{root}/tasks/two_among_five.toml"

[[experiment]]
spec = "{root}/tasks/percept_v_small.toml"
"""


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    """A sweep of sim:random on a search and a perception task (image stimuli), and its scores."""
    from pathlib import Path

    tmp = tmp_path_factory.mktemp("exp")
    root = Path(__file__).resolve().parents[1]
    proto = tmp / "proto.toml"
    proto.write_text(PROTOCOL.format(root=root))
    folder = tmp / "exp"
    argv = ["sweep", str(proto), "--subject", "sim:random", "--trials", "4", "--out", str(folder)]
    assert main([*argv, "--no-cache", "--no-progress"]) == 0
    assert main(["score", str(folder), "--out", str(folder / "scores")]) == 0
    return folder


def _load(*args, tmp_path, **kwargs):
    # imported here, not at collection: ~0.8 s of CPU that only the loading tests need
    datasets = pytest.importorskip("datasets")
    ds = datasets.load_dataset(*args, cache_dir=str(tmp_path / "hf"), **kwargs)
    return ds["train"].to_pandas()


def test_export_loads_with_datasets(experiment, tmp_path, capsys):
    out = tmp_path / "ds"
    assert main(["export", "dataset", str(experiment), "--out", str(out)]) == 0
    assert "search 24" in capsys.readouterr().out
    table = read_trials(experiment, keep_catch=True)
    table = table.dropna(axis=1, how="all")
    parts = split_paradigms(table)
    assert sorted(parts) == ["perception", "search"]
    for name, part in parts.items():
        got = _load(str(out), name=name, tmp_path=tmp_path)
        assert len(got) == len(part) > 0
        assert list(got.columns) == list(table.columns)
        assert (got["paradigm"] == name).all()
        assert got["raw_response"].tolist() == part["raw_response"].tolist()
        assert got["response"].equals(part["response"].astype(float).reset_index(drop=True))
    whole = _load("parquet", data_dir=str(out), tmp_path=tmp_path)
    assert len(whole) == len(table) and list(whole.columns) == list(table.columns)
    card = (out / "README.md").read_text()
    assert card.startswith("---\n") and "config_name: search" in card
    for needle in ("## Schema", "| raw_response |", "## Protocol", "two_among_five", "sim:random"):
        assert needle in card
    assert json.loads((out / "manifest.json").read_text()) == json.loads(
        (experiment / "manifest.json").read_text()
    )
    # the score tables come along as CSV, read back unchanged
    shipped = sorted(p.name for p in (out / "scores").glob("*.csv"))
    assert "search_accuracy.csv" in shipped
    assert shipped == sorted(p.name for p in (experiment / "scores").glob("*.csv"))
    a = pd.read_csv(out / "scores" / "search_accuracy.csv")
    assert a.equals(pd.read_csv(experiment / "scores" / "search_accuracy.csv"))
    # images are paths into the experiment folder by default, not copied
    assert not (out / "stimuli").exists()
    assert (experiment / whole["image"].dropna().iloc[0]).is_file()


def test_images_copy_and_omit(experiment, tmp_path):
    out = tmp_path / "copy"
    assert main(["export", "dataset", str(experiment), "--out", str(out), "--images", "copy"]) == 0
    paths = pd.read_parquet(out / "data" / "search" / "train.parquet")["image"].dropna()
    assert len(paths) and all((out / p).is_file() for p in paths)
    out = tmp_path / "omit"
    assert main(["export", "dataset", str(experiment), "--out", str(out), "--images", "omit"]) == 0
    assert "image" not in pd.read_parquet(out / "data" / "search" / "train.parquet").columns


def _one_line(capsys, argv, *needles):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in err, err


def test_bad_input_is_one_line(experiment, tmp_path, capsys):
    _one_line(
        capsys,
        ["export", "dataset", str(experiment / "scores"), "--out", str(tmp_path / "a")],
        "not an experiment folder",
    )
    assert not (tmp_path / "a").exists()
    full = tmp_path / "full"
    full.mkdir()
    (full / "mine.txt").write_text("keep")
    _one_line(capsys, ["export", "dataset", str(experiment), "--out", str(full)], "not empty")
    assert sorted(p.name for p in full.iterdir()) == ["mine.txt"]
    argv = ["export", "dataset", str(experiment), "--out", str(tmp_path / "b")]
    _one_line(capsys, [*argv, "--scores", str(tmp_path / "nowhere")], "no such score folder")
    _one_line(capsys, [*argv, "--license", "a b"], "--license")


def test_the_writer_holds_the_lock(experiment, tmp_path, capsys):
    out = tmp_path / "held"
    out.mkdir()
    with FolderLock(out, "someone"):
        _one_line(capsys, ["export", "dataset", str(experiment), "--out", str(out)], "in use")
    assert [p.name for p in out.iterdir()] == [".lock"]
    assert main(["export", "dataset", str(experiment), "--out", str(out)]) == 0


def test_api_keys_are_never_exported(experiment, tmp_path, capsys, monkeypatch):
    assert secret_in({"chat": {"model": "m", "api_key": "abc"}}) == "chat.api_key"
    assert secret_in({"chat": {"api_key": None}}) is None
    assert secret_in(["x", "Bearer sk-" + "a1" * 16]) == "[1]"
    assert secret_in({"a": "hunter2-hunter2"}, env={"OPENAI_API_KEY": "hunter2-hunter2"}) == "a"
    assert secret_in({"specs": [{"task": "x", "seed": 1}], "subjects": ["sim:random"]}) is None
    # a key in the manifest
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "trials.jsonl").write_bytes((experiment / "trials.jsonl").read_bytes())
    manifest = json.loads((experiment / "manifest.json").read_text())
    manifest["experiment"]["chat"] = {"model": "m", "api_key": "not-a-real-key-123"}
    (bad / "manifest.json").write_text(json.dumps(manifest))
    out = tmp_path / "o1"
    _one_line(capsys, ["export", "dataset", str(bad), "--out", str(out)], "api_key")
    assert not (out / "data").exists()
    # the key of the environment, echoed in a reply
    (bad / "manifest.json").write_text((experiment / "manifest.json").read_text())
    rows = (experiment / "trials.jsonl").read_text().splitlines()
    rec = json.loads(rows[0])
    rec["raw_response"] = "my key is zz-secret-value-42"
    (bad / "trials.jsonl").write_text("\n".join([json.dumps(rec), *rows[1:]]) + "\n")
    monkeypatch.setenv("OPENAI_API_KEY", "zz-secret-value-42")
    out = tmp_path / "o2"
    _one_line(capsys, ["export", "dataset", str(bad), "--out", str(out)], "raw_response")
    assert not (out / "data").exists()
    monkeypatch.delenv("OPENAI_API_KEY")
    assert main(["export", "dataset", str(bad), "--out", str(out)]) == 0
