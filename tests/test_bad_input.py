"""Bad input of issue 26 (items 3, 6, 7): one line on stderr, exit 2, never a traceback.

Each case goes through :func:`bayesobs.cli.main`, as a user's command line
would, and checks stderr for a single ``bayesobs: error:`` line.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from bayesobs.cli import main

TASKS = Path(__file__).resolve().parents[1] / "tasks"


def _one_line(capsys, argv: list[str], *needles: str) -> str:
    """Run ``argv``; it must exit 2 with exactly one error line holding every needle."""
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("bayesobs: error: "), err
    for n in needles:
        assert n in err, err
    return err


def _trials_csv(path: Path, n: int = 40, **overrides) -> Path:
    """A 40-row stimulus/response CSV; ``overrides`` maps ``"col:row"`` to a cell's text."""
    rng = np.random.default_rng(1)
    s = rng.uniform(1, 5, n)
    r = s + rng.normal(0, 0.3, n)
    rows = [[repr(float(a)), repr(float(b))] for a, b in zip(s, r, strict=True)]
    for key, text in overrides.items():
        col, row = key.split("_")
        rows[int(row)][0 if col == "stimulus" else 1] = text
    path.write_text("stimulus,response\n" + "".join(f"{a},{b}\n" for a, b in rows))
    return path


# ------------------------------------------------------------------ item 3: huge values
@pytest.mark.parametrize("command", ["fit", "score"])
@pytest.mark.parametrize(
    ("cell", "value"),
    [("response_17", "1e308"), ("response_17", "-1e308"), ("stimulus_5", "1e300")],
)
def test_a_huge_value_is_refused_naming_its_row(tmp_path, capsys, command, cell, value):
    path = _trials_csv(tmp_path / "t.csv", **{cell: value})
    col, row = cell.split("_")
    extra = ["--bootstrap", "0", "--no-probe"] if command == "score" else []
    _one_line(
        capsys,
        [command, str(path), "--out", str(tmp_path / "o"), *extra],
        f"row {int(row) + 2}",  # the header is line 1
        f"column {col!r}",
        "magnitude",
    )
    assert not (tmp_path / "o" / "fits.csv").exists()


@pytest.mark.parametrize("command", ["fit", "score"])
def test_values_up_to_the_bound_are_fitted(tmp_path, capsys, command):
    from bayesobs.trials import MAX_MAGNITUDE

    big = repr(MAX_MAGNITUDE)
    path = _trials_csv(tmp_path / "t.csv", response_17=big, stimulus_3=big, response_4="-" + big)
    extra = ["--bootstrap", "2", "--no-probe"] if command == "score" else []
    assert main([command, str(path), "--out", str(tmp_path / "o"), *extra]) == 0
    assert (tmp_path / "o" / "fits.csv").exists()


# ------------------------------------------------------------------ item 6: tracebacks
@pytest.fixture
def experiment(tmp_path):
    """A small experiment folder (run by a simulated subject)."""
    out = tmp_path / "exp"
    argv = ["run", "line_ratio", "--subject", "sim:bayesian", "--out", str(out)]
    assert main([*argv, "--trials", "3", "--modality", "text", "--no-cache"]) == 0
    return out


@pytest.mark.parametrize("content", ["[1, 2]", '"text"', "5", "null"])
def test_an_experiment_manifest_that_is_not_an_object(experiment, tmp_path, capsys, content):
    (experiment / "manifest.json").write_text(content)
    argv = ["run", "line_ratio", "--subject", "sim:bayesian", "--out", str(experiment)]
    _one_line(capsys, [*argv, "--trials", "3", "--modality", "text", "--no-cache"], "manifest")
    _one_line(capsys, ["rescore", str(experiment)], "manifest")
    _one_line(capsys, ["report", str(experiment), "--out", str(tmp_path / "r")], "manifest")


def test_a_score_manifest_that_is_not_an_object(tmp_path, capsys):
    path = _trials_csv(tmp_path / "t.csv")
    assert main(["score", str(path), "--out", str(tmp_path / "s"), "--bootstrap", "0"]) == 0
    capsys.readouterr()
    (tmp_path / "s" / "score_manifest.json").write_text("[1, 2]")
    _one_line(capsys, ["report", str(tmp_path / "s"), "--out", str(tmp_path / "r")], "manifest")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("experiment = 5\n", "experiment"),
        ("experiment = [5]\n", "experiment[0]"),
        ("experiment = 'line_ratio.toml'\n", "experiment"),
        ("[[experiment]]\nspec = 5\n", "spec"),
        ('[[experiment]]\nspec = "line_ratio.toml"\nmodalities = "text"\n', "modalities"),
        ('[[experiment]]\nspec = "line_ratio.toml"\nconditions = []\n', "conditions"),
    ],
)
def test_a_malformed_protocol(tmp_path, capsys, text, needle):
    shutil.copy(TASKS / "line_ratio.toml", tmp_path / "line_ratio.toml")
    proto = tmp_path / "proto.toml"
    proto.write_text(text)
    argv = ["sweep", str(proto), "--subject", "sim:bayesian", "--out", str(tmp_path / "o")]
    _one_line(capsys, [*argv, "--no-cache"], str(proto), needle)


@pytest.mark.parametrize("port", ["99999", "-1", "0", "65536"])
def test_serve_refuses_a_port_outside_1_to_65535(tmp_path, capsys, port):
    argv = ["serve", "line_ratio", "--out", str(tmp_path / "o"), "--port", port]
    _one_line(capsys, argv, "--port", "65535")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("expr", ["1 == 1", "stimulus", "'yes'", "stimulus + 1", "2 > 1"])
def test_a_where_that_is_not_a_per_row_condition(tmp_path, capsys, expr):
    path = _trials_csv(tmp_path / "t.csv")
    _one_line(capsys, ["fit", str(path), "--out", str(tmp_path / "o"), "--where", expr], "--where")


def test_a_binary_csv(tmp_path, capsys):
    rng = np.random.default_rng(3)
    for name, blob in (
        ("random.csv", rng.integers(0, 256, 5000, dtype=np.uint8).tobytes()),
        ("image.csv", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 20),
        ("late.csv", b"stimulus,response\n" + b"1,2\n" * 30000 + b"\xff\xfe,\x80\n3,4\n"),
        # a row pyarrow cannot split, and not UTF-8, past the first 64 KiB
        ("ragged.csv", b"stimulus,response\n" + b"1,2\n" * 30000 + b"\xff\xfe,\x80,9\n3,4\n"),
    ):
        path = tmp_path / name
        path.write_bytes(blob)
        _one_line(capsys, ["fit", str(path), "--out", str(tmp_path / "o")], str(path))


def test_a_header_only_csv(tmp_path, capsys):
    path = tmp_path / "h.csv"
    for text in ("stimulus,response\n", "stimulus,response", "stimulus,response\n\n\n"):
        path.write_text(text)
        for _ in range(3):
            _one_line(capsys, ["fit", str(path), "--out", str(tmp_path / "o")], str(path))


# ------------------------------------------------------------------ item 7: spec values
def _spec(tmp_path: Path, name: str, old: str, new: str) -> Path:
    text = (TASKS / f"{name}.toml").read_text()
    assert old in text
    path = tmp_path / f"{name}.toml"
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize(
    ("name", "old", "new", "needles"),
    [
        ("line_ratio", "range = [0.1, 0.5]", "range = [0.1, 1e300]", ("sessions[0]", "[0, 1]")),
        ("marker_location", "range = [0.3, 0.7]", "range = [0.3, 1.5]", ("sessions[1]", "[0, 1]")),
        ("numerosity", "range = [30, 120]", "range = [30, 1000]", ("sessions[2]", "576")),
        ("circle_sizes", "range = [0, 49]", "range = [0, 1e9]", ("sessions[0]", "49")),
        ("maze_distance", "range = [9.0, 18.0]", "range = [9.0, 40.0]", ("sessions[2]",)),
        ("line_ratio", "max_chars = 60", "max_chars = 100000000", ("options.max_chars", "67")),
        ("line_ratio", "min_chars = 30", "min_chars = 0", ("options.min_chars",)),
        ("marker_location", "max_chars = 71", "max_chars = 72", ("options.max_chars", "71")),
        (
            "line_ratio",
            'modalities = ["text", "image", "multimodal"]',
            "modalities = []",
            ("modalities",),
        ),
        (
            "line_ratio",
            'modalities = ["text", "image", "multimodal"]',
            'modalities = "text"',
            ("modalities",),
        ),
        ("line_ratio", 'conditions = ["base"]', "conditions = []", ("conditions",)),
    ],
)
def test_spec_values_that_make_no_sense(tmp_path, capsys, name, old, new, needles):
    spec = _spec(tmp_path, name, old, new)
    argv = ["run", str(spec), "--subject", "sim:bayesian", "--out", str(tmp_path / "o")]
    _one_line(capsys, [*argv, "--trials", "2", "--no-cache"], str(spec), *needles)
    assert not (tmp_path / "o" / "trials.jsonl").exists()


@pytest.mark.parametrize("url", ["ht!tp:/x", "x", "ftp://host/v1", "http://", "https:///v1"])
def test_a_base_url_that_is_not_http(tmp_path, capsys, url):
    argv = ["run", "line_ratio", "--subject", "openai:gpt-4o-mini", "--out", str(tmp_path / "o")]
    argv += ["--base-url", url, "--api-key", "k", "--trials", "2", "--no-cache"]
    _one_line(capsys, argv, "--base-url", "http")
    assert not (tmp_path / "o").exists()


def test_a_base_url_from_the_environment_is_checked_too(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "ht!tp:/x")
    argv = ["run", "line_ratio", "--subject", "openai:gpt-4o-mini", "--out", str(tmp_path / "o")]
    _one_line(capsys, [*argv, "--api-key", "k", "--trials", "2", "--no-cache"], "OPENAI_BASE_URL")


def test_the_bundled_specs_pass_the_checks():
    from bayesobs.run.plan import load_protocol, load_spec

    for path in sorted(TASKS.glob("*.toml")):
        if "[[experiment]]" in path.read_text():
            assert load_protocol(path)
        else:
            assert load_spec(path)["task"]


def test_manifest_json_round_trip_is_unchanged(experiment):
    """The manifest check reads what the store wrote (a JSON object) as before."""
    data = json.loads((experiment / "manifest.json").read_text())
    assert isinstance(data, dict) and "experiment" in data
