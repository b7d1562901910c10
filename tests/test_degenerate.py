"""METHOD §8 (constant responders, response quantum), ragged CSVs and strict-JSON params."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from conftest import RTOL, make_cell

import bayesobs
from bayesobs.cli import main
from bayesobs.fits.fitting import decode_params, fit_batch, response_quantum
from bayesobs.fits.observers import VARIANT_NAMES
from bayesobs.trials import normalize_trials


def _brute_quantum(y):
    """The definition: largest 10**k, k in [-9, 9], every y a multiple of it.

    A non-zero y must be a non-zero multiple (otherwise 0.45 would count as a
    multiple of 1e9 within the 1e-6 tolerance).
    """
    for k in range(9, -10, -1):
        q = [v / 10.0**k for v in y]
        if all(
            abs(a - round(a)) < 1e-6 and (round(a) != 0 or v == 0)
            for a, v in zip(q, y, strict=True)
        ):
            return 10.0**k
    return 0.0


@pytest.mark.parametrize(
    "y",
    [
        [0.45, 0.5, 0.12],
        [1200.0, 300.0],
        [0.0, 0.0],
        [3.0, 7.0, 12.0],
        [0.123456789, 0.5],
        [math.pi, 1.0],
        [-0.25, 0.75],
        [2e9, 4e9],
        [0.0, 0.5],
    ],
)
def test_response_quantum_matches_its_definition(y):
    got = response_quantum(np.array(y), np.zeros(len(y), dtype=int), 1)[0]
    assert got == pytest.approx(_brute_quantum(y), rel=1e-12)


def test_response_quantum_of_everyday_answers():
    q = response_quantum(np.array([0.45, 0.5, 120.0, 300.0, 0.3]), np.array([0, 0, 1, 1, 2]), 4)
    np.testing.assert_allclose(q, [0.01, 10.0, 0.1, 0.0])


def _constant_cell():
    rng = np.random.default_rng(0)
    df = make_cell(rng, "static", {"w_prior": 0.4, "sigma": 0.03}, n_per=30)
    df["response"] = 0.5  # an LLM that always answers 0.5
    return df


def test_constant_responder_is_skipped_not_fitted():
    """Before: static_gain/linear fitted exactly (sigma 1e-157, loglik 2e+302) and won."""
    fits, evidence = bayesobs.fit(_constant_cell())
    assert (
        fits["params"].map(lambda p: json.loads(p).get("skipped")) == "constant responses"
    ).all()
    assert fits["loglik"].isna().all() and fits["aic"].isna().all()
    assert evidence["p"].isna().all()


def test_constant_cell_beside_a_normal_one_leaves_the_normal_one_alone():
    rng = np.random.default_rng(1)
    good = make_cell(rng, "static", {"w_prior": 0.4, "sigma": 0.03}, n_per=30, subject="ok")
    bad = _constant_cell().assign(subject="stuck")
    fits, evidence = bayesobs.fit(pd.concat([good, bad], ignore_index=True))
    alone, _ = bayesobs.fit(good)
    got = fits[fits["subject"] == "ok"].set_index("variant")["loglik"]
    ref = alone.set_index("variant")["loglik"]
    np.testing.assert_allclose(got[ref.index], ref, rtol=RTOL)
    assert evidence[evidence["subject"] == "ok"]["p"].notna().all()


def _exact_rounded_cell():
    """Stimuli on a 0.01 grid and a veridical observer answering them to 0.01."""
    rng = np.random.default_rng(2)
    x = np.round(rng.uniform(0.1, 0.9, 90), 2)
    runs = np.repeat(["short", "medium", "long"], 30)
    return pd.DataFrame({"session": runs, "stimulus": x, "response": x.copy()})


def test_rounded_exact_answers_get_the_sheppard_floor():
    """Before: linear fitted RSS = 0 exactly, sigma ~1e-13, an absurd log-likelihood."""
    df = _exact_rounded_cell()
    batch = fit_batch(normalize_trials(df))
    assert batch.cells["delta"].iat[0] == pytest.approx(0.01)
    fits, _ = bayesobs.fit(df)
    row = fits.set_index("variant").loc["linear"]
    sigma2 = 0.01**2 / 12
    # closed form at the floor with RSS = 0: LL = -n/2 log(2 pi sigma^2)
    assert json.loads(row["params"])["sigma"] == pytest.approx(math.sqrt(sigma2), rel=1e-9)
    assert row["loglik"] == pytest.approx(-0.5 * 90 * math.log(2 * math.pi * sigma2), rel=1e-9)
    # every variant respects the floor on its own scale
    for v in VARIANT_NAMES:
        p = decode_params(fits.set_index("variant").loc[v, "params"])
        if v.endswith(("_log", "_log_gain")):
            eps = 1e-3 * df["stimulus"].max()
            floor = (0.01 / (np.median(df["response"]) + eps)) ** 2 / 12
        else:
            floor = sigma2
        assert p["sigma"] ** 2 >= floor * (1 - 1e-9), v


def test_floor_uses_the_same_rss_in_the_likelihood():
    """With the floor active, LL = -n/2 log(2 pi s2) - RSS / (2 s2) with the floored s2."""
    rng = np.random.default_rng(5)
    x = np.round(rng.uniform(0.1, 0.9, 60), 1)
    y = np.round(0.3 * x.mean() + 0.7 * x + rng.normal(0, 0.004, 60), 1)  # answers to 0.1
    df = pd.DataFrame({"stimulus": x, "response": y})
    fits, _ = bayesobs.fit(df)
    row = fits.set_index("variant").loc["linear"]
    w, b = np.polyfit(x, y, 1)
    rss = float(np.sum((y - (w * x + b)) ** 2))
    s2 = max(rss / 60, 0.1**2 / 12)
    ll = -30 * math.log(2 * math.pi * s2) - rss / (2 * s2)
    assert row["loglik"] == pytest.approx(ll, rel=1e-9)


def test_cells_csv_reports_delta(tmp_path):
    path = tmp_path / "t.csv"
    _exact_rounded_cell().to_csv(path, index=False)
    assert main(["fit", str(path), "--out", str(tmp_path / "f")]) == 0
    cells = pd.read_csv(tmp_path / "f" / "cells.csv")
    assert cells["delta"].iat[0] == pytest.approx(0.01)


# ------------------------------------------------------------------ ragged CSV
def _ragged(tmp_path):
    path = tmp_path / "ragged.csv"
    path.write_text(
        "part,num_dots,answer,feedback,a,points,time\n"
        "1,19,20,0,0.000000,0,0,4.82\n"
        "1,26,24,0,0.000000,0,0,8.28\n"
        "1,40,35,0,0.000000,0,0,3.10\n"
    )
    return path


def test_ragged_csv_is_an_error_naming_file_and_line(tmp_path, capsys):
    """Before: pandas took the first field as the index and every column shifted by one."""
    path = _ragged(tmp_path)
    code = main(
        [
            "fit",
            str(path),
            "--out",
            str(tmp_path / "f"),
            "--map",
            "stimulus=num_dots",
            "--map",
            "response=answer",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert f"{path}: malformed CSV: line 2 has 8 field(s) but the header names 7" in err
    assert "--columns" in err and "Traceback" not in err


def test_short_row_is_an_error_too(tmp_path, capsys):
    path = tmp_path / "short.csv"
    path.write_text("stimulus,response,extra\n0.2,0.3,a\n0.4,0.5\n")
    assert main(["fit", str(path), "--out", str(tmp_path / "f")]) == 2
    assert "line 3 has 2 field(s) but the header names 3" in capsys.readouterr().err


def test_columns_option_names_every_field(tmp_path):
    path = _ragged(tmp_path)
    names = "part,num_dots,answer,feedback,a,fbnum,points,time"
    t = bayesobs.read_trials(
        path, mapping={"stimulus": "num_dots", "response": "answer"}, columns=names.split(",")
    )
    assert t["stimulus"].tolist() == [19, 26, 40]
    assert t["response"].tolist() == [20, 24, 35]
    assert t["time"].tolist() == [4.82, 8.28, 3.10]


def test_quoted_separators_are_not_fields(tmp_path):
    path = tmp_path / "q.csv"
    path.write_text('stimulus,response,note\n0.2,0.3,"a, b"\n0.4,0.5,c\n')
    t = bayesobs.read_trials(path)
    assert t["note"].tolist() == ["a, b", "c"]


def test_vul_feedback_files_are_refused_then_read_with_columns(shared_data, tmp_path, capsys):
    files = sorted((shared_data / "vul_numerosity_estimation" / "numexpt-fb").glob("*.csv"))[:2]
    args = [
        "fit",
        *map(str, files),
        "--out",
        str(tmp_path / "f"),
        "--map",
        "stimulus=num_dots",
        "--map",
        "response=answer",
        "--map",
        "subject=@file",
    ]
    assert main(args) == 2
    assert "has 8 field(s) but the header names 7" in capsys.readouterr().err
    names = "part,num_dots,answer,feedback,a,fbnum,points,time"
    assert main([*args, "--columns", names, "--where", "feedback == 0"]) == 0
    t = bayesobs.read_trials(
        files[0], columns=names.split(","), mapping={"stimulus": "num_dots", "response": "answer"}
    )
    raw = pd.read_csv(files[0], header=None, skiprows=1)
    np.testing.assert_array_equal(t["stimulus"].to_numpy(), raw[1].to_numpy())
    np.testing.assert_array_equal(t["response"].to_numpy(), raw[2].to_numpy())


# ------------------------------------------------------------------ strict JSON
def test_params_are_strict_json_with_a_limit_flag(tmp_path):
    """Before: rho = inf was written as the bare token Infinity, which R and JS reject."""
    rng = np.random.default_rng(3)
    x = rng.uniform(0.1, 0.9, 60)
    df = pd.DataFrame({"stimulus": x, "response": x + rng.normal(0, 0.01, 60)})
    path = tmp_path / "t.csv"
    df.to_csv(path, index=False)
    assert main(["fit", str(path), "--out", str(tmp_path / "f")]) == 0
    text = (tmp_path / "f" / "fits.csv").read_text()
    assert "Infinity" not in text
    fits = pd.read_csv(tmp_path / "f" / "fits.csv")
    for p in fits["params"]:
        json.loads(p, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    kal = json.loads(fits.set_index("variant").loc["kalman", "params"])
    assert kal["rho"] is None and kal["rho_limit"] == "inf"
    assert decode_params(fits.set_index("variant").loc["kalman", "params"])["rho"] == math.inf


def test_messages_show_plain_values_not_numpy_reprs(tmp_path, capsys):
    path = tmp_path / "dup.csv"
    path.write_text("stimulus,response,trial,run\n1,2,0,3\n2,3,0,3\n")
    assert main(["fit", str(path), "--out", str(tmp_path / "f")]) == 2
    err = capsys.readouterr().err
    assert "duplicate trial" in err and "run=3" in err and "np." not in err


@pytest.mark.slow
def test_two_million_rows_fit_in_under_a_gigabyte(tmp_path):
    """Before: 2.0 GB peak (every CSV cell held as a Python string, all runs in one chunk); now ~0.7 GB."""
    import subprocess
    import sys

    from bayesobs.fits.synthetic import simulated_trials

    base = simulated_trials(n_subjects=9, trials_per_session=40, seed=0)
    frames = [base.assign(subject=base["subject"] + f"_r{i}") for i in range(22)]
    big = pd.concat(frames, ignore_index=True)
    assert len(big) > 2_000_000
    path = tmp_path / "big.csv"
    big.to_csv(path, index=False)
    del big, frames
    # The child reports its own peak from /proc/self/status (VmHWM): its
    # ru_maxrss starts at the parent's peak when subprocess spawns by vfork,
    # so it would measure this test's 2-million-row frame instead.
    code = (
        "import sys; from bayesobs.cli import main; "
        f"rc = main(['fit', {str(path)!r}, '--out', {str(tmp_path / 'f')!r}]); "
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]; "
        "print('peak_kib', hwm.split()[1]); sys.exit(rc)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    peak_mib = int(proc.stdout.split("peak_kib")[-1]) / 1024
    assert peak_mib < 1024, f"peak {peak_mib:.0f} MiB"


def test_bootstrap_draws_of_runs_without_any_response_do_not_fail(tmp_path):
    """A real model left two of three runs unanswered: some pooled draws hold no response.

    Seen with SmolLM2-135M through llama.cpp (`make test-model`): `score` stopped
    with a RuntimeWarning (0/0) in the Kalman moments.
    """
    import numpy as np
    import pandas as pd

    from bayesobs.cli import main

    rng = np.random.default_rng(3)
    rows = []
    for s, (lo, hi) in enumerate(((0.1, 0.5), (0.3, 0.7), (0.5, 0.9))):
        x = rng.uniform(lo, hi, 8)
        y = x + rng.normal(0, 0.05, 8) if s == 0 else np.full(8, np.nan)
        rows.append(pd.DataFrame({"session": f"s{s}", "stimulus": x, "response": y}))
    pd.concat(rows).to_csv(tmp_path / "t.csv", index=False)
    out = tmp_path / "o"
    assert main(["fit", str(tmp_path / "t.csv"), "--out", str(out), "--bootstrap", "30"]) == 0
    ev = pd.read_csv(out / "evidence.csv")
    assert ev["p"].notna().all()
    scores = tmp_path / "s"
    args = ["score", str(tmp_path / "t.csv"), "--out", str(scores), "--bootstrap", "30"]
    assert main([*args, "--no-probe"]) == 0
    acc = pd.read_csv(scores / "bayesbench.csv")
    assert acc["A"].notna().all()


def _exact_veridical_cell(levels=False):
    """A veridical observer answering every stimulus exactly (no rounding: quantum 0)."""
    rng = np.random.default_rng(11)
    x = rng.uniform(0.1, 0.9, 120)
    df = pd.DataFrame({"session": np.repeat(["a", "b"], 60), "stimulus": x, "response": x.copy()})
    if levels:
        df["coh"] = rng.integers(0, 2, 120)
    return df


def _floor_maximum(df, log, level=None):
    """Closed form of the largest LL the variance floor allows: RSS = 0 at sigma^2 = floor.

    ``floor = 1e-12 * var(u)`` (the response quantum is 0 here), so
    ``LL_max = -n/2 log(2 pi floor) - sum J`` with ``J = log(y + eps)`` for
    log variants.  With ``level``, the sum of each level's own maximum.
    """
    eps = 1e-3 * df["stimulus"].max()
    groups = [df] if level is None else [g for _, g in df.groupby(level)]
    total = 0.0
    for g in groups:
        y = g["response"].to_numpy()
        u = np.log(y + eps) if log else y
        floor = 1e-12 * u.var()
        total += -0.5 * len(u) * math.log(2 * math.pi * floor) - (u.sum() if log else 0.0)
    return total


@pytest.mark.parametrize("mode", ["plain", "interleaved", "lapse"])
def test_exact_veridical_cell_no_variant_beats_the_floor(mode):
    """Before: kalman and kalman_gain reported LL above the floor's maximum (RSS < 0 by rounding)."""
    df = _exact_veridical_cell(levels=mode == "interleaved")
    kw = {"interleaved": "coh"} if mode == "interleaved" else {"lapse": mode == "lapse"}
    fits, _ = bayesobs.fit(df, **kw)
    fits = fits.drop_duplicates("variant").set_index("variant")
    level = "coh" if mode == "interleaved" else None
    for log in (False, True):
        top = _floor_maximum(df, log, level)
        names = [v for v in VARIANT_NAMES if ("_log" in v) == log]
        for v in names:
            assert fits.loc[v, "loglik"] <= top + 1e-9 * abs(top), (v, fits.loc[v, "loglik"], top)
        # the exact fits (linear and the Kalman filter at rho = inf) reach it
        assert fits.loc["linear_log" if log else "linear", "loglik"] == pytest.approx(top, rel=1e-9)
        # the filter at rho = inf copies the stimulus; its RSS, from sums, carries a rounding
        # error of ~1e-16 sum(u^2) against a floor of 1e-12 var(u): within ~1e-4 n of the top
        k = "kalman_log" if log else "kalman"
        assert top - 1e-3 * len(df) < fits.loc[k, "loglik"] <= top + 1e-9 * abs(top)
