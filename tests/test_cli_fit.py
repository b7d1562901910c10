"""`bayesobs fit` end to end: formats, mapping, outputs, and every bad-input case."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import make_cell

import bayesobs
from bayesobs.cli import main

FITS_COLUMNS = [
    "subject",
    "task",
    "modality",
    "condition",
    "variant",
    "bayesian",
    "weber",
    "sequential",
    "gain",
    "n",
    "k",
    "loglik",
    "aic",
    "params",
]
EVIDENCE_COLUMNS = ["subject", "task", "modality", "condition", "factor", "p"]
# issue 28: structural bounds, the best Bayesian fit's boundary, the veridical reference
EVIDENCE_EXTRA = [
    "p_floor",
    "p_ceiling",
    "boundary",
    "linear_dAIC",
    "p_veridical",
    "veridical_dAIC",
]


@pytest.fixture
def cell():
    return make_cell(
        np.random.default_rng(0), "static", {"w_prior": 0.4, "sigma": 0.03}, subject="s1"
    )


def test_fit_writes_contract_files(tmp_path, cell, capsys):
    cell.to_csv(tmp_path / "t.csv", index=False)
    assert main(["fit", str(tmp_path / "t.csv"), "--out", str(tmp_path / "o")]) == 0
    fits = pd.read_csv(tmp_path / "o" / "fits.csv")
    ev = pd.read_csv(tmp_path / "o" / "evidence.csv")
    assert list(fits.columns) == FITS_COLUMNS
    assert list(ev.columns) == EVIDENCE_COLUMNS + EVIDENCE_EXTRA
    assert len(fits) == 10 and len(ev) == 4
    for p in fits["params"]:
        assert isinstance(json.loads(p), dict)
    manifest = json.loads((tmp_path / "o" / "fit_manifest.json").read_text())
    assert manifest["format_version"] == 1 and manifest["versions"]["numpy"]
    assert "fitted 1 cell(s), 120 trials" in capsys.readouterr().out


def test_bootstrap_adds_interval_columns(tmp_path, cell):
    cell.to_csv(tmp_path / "t.csv", index=False)
    assert (
        main(["fit", str(tmp_path / "t.csv"), "--out", str(tmp_path / "o"), "--bootstrap", "8"])
        == 0
    )
    ev = pd.read_csv(tmp_path / "o" / "evidence.csv")
    assert list(ev.columns) == [
        *EVIDENCE_COLUMNS,
        "p_mean",
        "p_lo",
        "p_hi",
        *EVIDENCE_EXTRA,
        "interval_note",
    ]
    assert ev["interval_note"].isna().all()  # three runs: resampled
    # the interval is the 16th/84th percentile of the replicates' evidence (METHOD §7)
    from bayesobs.fits.fitting import fit_batch
    from bayesobs.scores.evidence import factor_evidence_array

    batch = fit_batch(bayesobs.read_trials(tmp_path / "t.csv"), bootstrap=8, seed=0)
    reps = factor_evidence_array(batch.aic)[0, 1:, :]  # (B, factors)
    np.testing.assert_allclose(ev["p_lo"], np.nanpercentile(reps, 16, axis=0), rtol=1e-9)
    np.testing.assert_allclose(ev["p_hi"], np.nanpercentile(reps, 84, axis=0), rtol=1e-9)


@pytest.mark.parametrize("fmt", ["csv", "parquet", "jsonl", "folder"])
def test_every_format_gives_the_same_fits(tmp_path, cell, fmt):
    ref, _ = bayesobs.fit(cell)
    path = tmp_path / f"t.{fmt}"
    if fmt == "csv":
        cell.to_csv(path, index=False)
    elif fmt == "parquet":
        cell.to_parquet(path)
    elif fmt == "jsonl":
        bayesobs.write_trials(cell, path)
    else:
        path.mkdir()
        bayesobs.write_trials(cell, path / "trials.jsonl")
    got, _ = bayesobs.fit(bayesobs.read_trials(path))
    np.testing.assert_allclose(got["loglik"], ref["loglik"], rtol=1e-12)


def test_many_files_and_mapping(tmp_path):
    rng = np.random.default_rng(1)
    for s in ("A", "B"):
        d = make_cell(rng, "static", {"w_prior": 0.3, "sigma": 0.02})
        pd.DataFrame(
            {
                "NSub": s,
                "NB": d["session"],
                "dur": d["stimulus"],
                "repDur": d["response"] * 1000,
                "ok": 1,
            }
        ).to_csv(tmp_path / f"{s}.csv", index=False)
    out = tmp_path / "o"
    args = ["fit", str(tmp_path / "A.csv"), str(tmp_path / "B.csv"), "--out", str(out)]
    args += ["--map", "stimulus=dur", "--map", "response=repDur / 1000", "--map", "subject=NSub"]
    args += ["--map", "run=NB", "--where", "ok == 1"]
    assert main(args) == 0
    fits = pd.read_csv(out / "fits.csv")
    assert sorted(fits["subject"].unique()) == ["A", "B"]
    w = fits[fits["variant"] == "static"]["params"].map(lambda p: json.loads(p)["w_prior"])
    assert np.allclose(w, 0.3, atol=0.08)


def test_missing_responses_counted_and_kept(tmp_path, cell, capsys):
    cell.loc[[2, 40], "response"] = np.nan
    cell.to_csv(tmp_path / "t.csv", index=False)
    assert main(["fit", str(tmp_path / "t.csv"), "--out", str(tmp_path / "o")]) == 0
    assert "2 missing response(s)" in capsys.readouterr().out
    assert (pd.read_csv(tmp_path / "o" / "fits.csv")["n"] == 118).all()
    cells = pd.read_csv(tmp_path / "o" / "cells.csv")
    assert cells.loc[0, "n_missing"] == 2 and cells.loc[0, "n_trials"] == 120


def test_missing_where_marks_responses_missing(tmp_path, cell):
    cell["valid"] = 1
    cell.loc[[5, 6], "valid"] = 0
    cell.to_csv(tmp_path / "t.csv", index=False)
    main(
        [
            "fit",
            str(tmp_path / "t.csv"),
            "--out",
            str(tmp_path / "o"),
            "--missing-where",
            "valid == 0",
        ]
    )
    assert (pd.read_csv(tmp_path / "o" / "fits.csv")["n"] == 118).all()


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


BAD = [
    ("empty.csv", "", [], "empty file"),
    ("header.csv", "stimulus,response\n", [], "no trials"),
    ("nostim.csv", "x,response\n1,2\n", [], "missing required column 'stimulus'"),
    ("noresp.csv", "stimulus,y\n1,2\n", [], "missing required column 'response'"),
    (
        "badstim.csv",
        "stimulus,response\n1,2\nabc,3\n",
        [],
        "row 3, column 'stimulus': 'abc' is not a number",
    ),
    (
        "badresp.csv",
        "stimulus,response\n1,2\n2,two\n",
        [],
        "row 3, column 'response': 'two' is not a number",
    ),
    (
        "nostimval.csv",
        "stimulus,response\n1,2\n,3\n",
        [],
        "row 3, column 'stimulus': value is missing",
    ),
    ("dup.csv", "stimulus,response,trial\n1,2,0\n2,3,0\n", [], "duplicate trial"),
    ("ragged.csv", "stimulus,response\n1,2\n3,4,5,6\n", [], "malformed CSV"),
    (
        "bad.jsonl",
        '{"stimulus": 1, "response": 2}\n{"stimulus": 2, "resp\n',
        [],
        "line 2: not valid JSON",
    ),
    ("notes.txt.xyz", "hello", [], "unknown file type"),
    ("ok.csv", "stimulus,response\n1,2\n2,3\n", ["--map", "response"], "expected NEW=OLD"),
    (
        "ok.csv",
        "stimulus,response\n1,2\n2,3\n",
        ["--map", "response=nope"],
        "neither a column nor a valid expression",
    ),
    (
        "ok.csv",
        "stimulus,response\n1,2\n2,3\n",
        ["--where", "valid == 1"],
        "--where 'valid == 1': cannot evaluate",
    ),
    ("ok.csv", "stimulus,response\n1,2\n2,3\n", ["--where", "stimulus > 5"], "no trials left"),
    (
        "ok.csv",
        "stimulus,response\n1,2\n2,3\n",
        ["--bootstrap", "-1"],
        "--bootstrap must be 0 or more",
    ),
]


@pytest.mark.parametrize(("name", "text", "extra", "message"), BAD, ids=[b[3][:30] for b in BAD])
def test_bad_input_exits_2_with_one_line(tmp_path, name, text, extra, message):
    path = _write(tmp_path, name, text)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bayesobs.cli",
            "fit",
            str(path),
            "--out",
            str(tmp_path / "o"),
            *extra,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert message in err
    if (
        name != "notes.txt.xyz"
        and "--map" not in extra
        and "--where" not in extra
        and "--bootstrap" not in extra
    ):
        assert str(path) in err  # names the file
    assert not (tmp_path / "o" / "fits.csv").exists()


def test_missing_file_and_folder_without_log(tmp_path):
    assert main(["fit", str(tmp_path / "nope.csv"), "--out", str(tmp_path / "o")]) == 2
    (tmp_path / "exp").mkdir()
    with pytest.raises(bayesobs.BayesobsInputError, match=r"without trials\.jsonl"):
        bayesobs.read_trials(tmp_path / "exp")


def test_duplicate_across_files_names_both(tmp_path):
    a = _write(tmp_path, "a.csv", "stimulus,response\n1,2\n")
    b = _write(tmp_path, "b.csv", "stimulus,response\n1,2\n")
    with pytest.raises(bayesobs.BayesobsInputError) as err:
        bayesobs.read_trials([a, b])
    assert str(a) in str(err.value) and str(b) in str(err.value)


def test_input_files_are_never_modified(tmp_path, cell):
    path = tmp_path / "t.csv"
    cell.to_csv(path, index=False)
    before = path.read_bytes()
    main(["fit", str(path), "--out", str(tmp_path / "o")])
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    "command",
    ["run", "sweep", "fit", "score", "rescore", "report", "serve", "export", "simulate"],
)
def test_every_command_is_listed_and_has_help(command, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    listing = capsys.readouterr().out
    assert re.search(rf"\b{command}\b", listing.split("positional arguments")[-1])
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0 and "usage: bayesobs " + command in capsys.readouterr().out


def test_version_flag():
    out = subprocess.run(
        [sys.executable, "-m", "bayesobs.cli", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.startswith("bayesobs ")


def test_paths_are_path_objects(tmp_path, cell):
    cell.to_csv(tmp_path / "t.csv", index=False)
    assert len(bayesobs.read_trials(Path(tmp_path / "t.csv"))) == 120


def test_bootstrap_of_one_run_cells_leaves_intervals_empty_and_warns(tmp_path, cell, capsys):
    """Issue 28 item 3: a cell of one run has no resampling, so no interval."""
    one = cell.assign(session="all", subject="one")  # 120 trials in one sitting
    pd.concat([one, cell.assign(subject="three")]).to_csv(tmp_path / "t.csv", index=False)
    out = tmp_path / "o"
    assert main(["fit", str(tmp_path / "t.csv"), "--out", str(out), "--bootstrap", "6"]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "fewer than 2 runs per session type in 2 of 2 cell(s)" in err
    assert "1 cell(s) have a single run, so no resampling" in err
    ev = pd.read_csv(out / "evidence.csv")
    single = ev[ev["subject"] == "one"]
    assert single[["p_mean", "p_lo", "p_hi"]].isna().all().all()
    assert single["p"].notna().all()
    assert single["interval_note"].str.contains("no resampling").all()
    three = ev[ev["subject"] == "three"]
    assert three[["p_mean", "p_lo", "p_hi"]].notna().all().all()
    assert three["interval_note"].isna().all()


def test_fit_names_the_columns_that_formed_runs(tmp_path, cell, capsys):
    """Issue 28 item 10: which columns formed runs, and how many trials each run has."""
    df = cell.rename(columns={"session": "block"}).assign(person="p1")
    df.iloc[:50].assign(person="p2").pipe(lambda a: pd.concat([a, df])).to_csv(
        tmp_path / "t.csv", index=False
    )
    args = ["--map", "run=block", "--map", "subject=person", "--out", str(tmp_path / "o")]
    assert main(["fit", str(tmp_path / "t.csv"), *args]) == 0
    out = capsys.readouterr().out
    assert "runs: subject (<- person) x run (<- block) -> 5 run(s), 10-40 trials each" in out


# ------------------------------------------------------------------ issue 29: one fit path
def _fit_args(tmp_path, cell, *extra):
    from bayesobs.cli import build_parser

    cell.to_csv(tmp_path / "t.csv", index=False)
    return build_parser().parse_args(
        ["fit", str(tmp_path / "t.csv"), "--out", str(tmp_path / "o"), *extra]
    )


def test_cli_fit_refuses_what_the_library_refuses(tmp_path, cell):
    """``cmd_fit`` checks the options as ``bayesobs.fit`` does (it used to skip check_resample)."""
    from bayesobs.cli import cmd_fit
    from bayesobs.errors import BayesobsInputError

    with pytest.raises(BayesobsInputError, match="resample"):
        bayesobs.fit(cell, resample="bogus")
    args = _fit_args(tmp_path, cell)
    args.resample = "bogus"  # a caller that builds its own namespace, past argparse's choices
    with pytest.raises(BayesobsInputError, match="resample"):
        cmd_fit(args)
    assert not (tmp_path / "o" / "fits.csv").exists()


def test_cli_fit_goes_through_the_library_fit(tmp_path, cell, monkeypatch):
    """One path: ``bayesobs fit`` fits with ``bayesobs.api.fit_result``, as ``bayesobs.fit`` does."""
    import bayesobs.api

    calls = []
    real = bayesobs.api.fit_result

    def spy(*a, **k):
        calls.append(k)
        return real(*a, **k)

    monkeypatch.setattr(bayesobs.api, "fit_result", spy)
    assert (
        main(["fit", *map(str, _fit_args(tmp_path, cell).trials), "--out", str(tmp_path / "o")])
        == 0
    )
    bayesobs.fit(cell)
    assert len(calls) == 2


def test_writing_fits_refits_nothing(tmp_path, cell, monkeypatch):
    """``write_fit`` writes the results it is given: no fit (of the controls or else) inside it."""
    import bayesobs.api
    import bayesobs.fits.controls
    import bayesobs.fits.fitting

    result = bayesobs.api.fit_result(cell)
    for mod, name in (
        (bayesobs.fits.controls, "fit_controls"),
        (bayesobs.fits.fitting, "fit_batch"),
    ):
        monkeypatch.setattr(mod, name, lambda *a, **k: pytest.fail("a writer fitted"))
    bayesobs.api.write_fit(result, tmp_path / "o")
    for name in ("fits.csv", "evidence.csv", "cells.csv", "controls.csv", "fit_manifest.json"):
        assert (tmp_path / "o" / name).exists()
