"""``bayesobs compare`` (issue 31 §2): mixed models of per-task scores on model features."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from bayesobs.cli import main
from bayesobs.compare import (
    OUTCOMES,
    compare_models,
    feature_matrix,
    fit_outcome,
    load_folders,
    long_table,
)

TASKS = [f"task{i}" for i in range(8)]
MODALITIES = ("text", "image")
# planted effects: NRMSE falls 0.05 per unit of size; RLHF raises w_prior by 0.1
SIZE_SLOPE = -0.05
RLHF_EFFECT = 0.10


def model_features(n_folders: int = 3, per_folder: int = 4, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = n_folders * per_folder
    return pd.DataFrame(
        {
            "subject": [f"m{i:02d}" for i in range(n)],
            "size": rng.uniform(1, 9, n).round(2),
            "rlhf": np.tile([0, 1], n // 2),
            "family": np.tile(["llama", "gpt", "qwen"], n // 3 + 1)[:n],
        }
    )


def write_score_folder(folder, subjects: pd.DataFrame, task_u, rng) -> None:
    """A score folder's tables, written directly with the planted effects, task intercepts, noise."""
    folder.mkdir(parents=True)
    acc, fits, bcs, board = [], [], [], []
    for r in subjects.itertuples(index=False):
        v = {"nrmse": rng.normal(0, 0.03), "w": rng.normal(0, 0.02)}  # a model's own level
        for task in TASKS:
            for modality in MODALITIES:
                for condition in ("base", "context_long"):
                    shift = 0.0 if condition == "base" else 0.3  # never enters the outcomes
                    nrmse = 0.7 + SIZE_SLOPE * r.size + v["nrmse"] + task_u["nrmse"][task]
                    nrmse += rng.normal(0, 0.02)
                    acc.append((r.subject, task, modality, condition, nrmse + shift))
                    w = (
                        0.3
                        + RLHF_EFFECT * r.rlhf
                        + v["w"]
                        + task_u["w"][task]
                        + rng.normal(0, 0.03)
                    )
                    params = json.dumps({"w_prior": w - shift, "sigma": 0.1})
                    fits.append((r.subject, task, modality, condition, "static", params))
                    fits.append((r.subject, task, modality, condition, "linear", '{"w": 1.0}'))
            b = 2.0 + task_u["bcs"][task] + rng.normal(0, 0.5)
            bcs.append((r.subject, task, 5, b, b / 2))
        board.append((r.subject, 0.8 - 0.01 * r.size, 0.78, 0.82, 0.8, 3.0))
    pd.DataFrame(acc, columns=["subject", "task", "modality", "condition", "nrmse"]).to_csv(
        folder / "accuracy.csv", index=False
    )
    pd.DataFrame(
        fits, columns=["subject", "task", "modality", "condition", "variant", "params"]
    ).to_csv(folder / "fits.csv", index=False)
    pd.DataFrame(bcs, columns=["subject", "task", "n_ablations", "bcs", "bcs_p"]).to_csv(
        folder / "bcs_tasks.csv", index=False
    )
    pd.DataFrame(board, columns=["subject", "S", "S_lo", "S_hi", "S_p", "BCS_p"]).to_csv(
        folder / "bayesbench.csv", index=False
    )


@pytest.fixture
def planted(tmp_path):
    """Three score folders of four models each, and the models' features file."""
    rng = np.random.default_rng(7)
    features = model_features()
    task_u = {
        "nrmse": dict(zip(TASKS, rng.normal(0, 0.15, len(TASKS)), strict=True)),
        "w": dict(zip(TASKS, rng.normal(0, 0.1, len(TASKS)), strict=True)),
        "bcs": dict(zip(TASKS, rng.normal(0, 1.0, len(TASKS)), strict=True)),
    }
    folders = []
    for k in range(3):
        folder = tmp_path / f"scores{k}"
        write_score_folder(folder, features.iloc[4 * k : 4 * k + 4], task_u, rng)
        folders.append(folder)
    path = tmp_path / "models.csv"
    features.to_csv(path, index=False)
    return folders, path, features


def _fit(folders, features):
    long = long_table(load_folders(folders))
    design, terms = feature_matrix(features, sorted(features["subject"]))
    return long, compare_models(long, design, terms)


def test_recovers_planted_effects(planted):
    folders, _, features = planted
    _, table = _fit(folders, features)
    t = table.set_index(["outcome", "term"])
    size = t.loc[("nrmse", "size")]
    assert size["kind"] == "numeric"
    # the estimate is per SD of size; per unit it is estimate / scale
    per_unit, se_unit = size["estimate"] / size["scale"], size["se"] / size["scale"]
    assert abs(per_unit - SIZE_SLOPE) < 3 * se_unit
    assert se_unit < 0.01  # the effect is resolved, not just within a huge SE
    assert size["p"] < 1e-4 and bool(size["converged"])  # 12 models: t on 7 df
    # accuracy = 1 - NRMSE/2 here (no clipping), so its size slope is -SIZE_SLOPE / 2
    acc = t.loc[("accuracy", "size")]
    assert acc["estimate"] == pytest.approx(-size["estimate"] / 2, rel=1e-4)
    rlhf = t.loc[("w_prior", "rlhf")]
    assert rlhf["kind"] == "binary" and rlhf["scale"] == 1.0
    assert abs(rlhf["estimate"] - RLHF_EFFECT) < 3 * rlhf["se"] and rlhf["se"] < 0.03
    # no planted effect of family on w_prior: its CI holds 0 (3 SE)
    for term in ("family[llama]", "family[qwen]"):
        row = t.loc[("w_prior", term)]
        assert abs(row["estimate"]) < 3 * row["se"]
    assert set(table["n_groups"]) == {len(TASKS)} and set(table["n_subjects"]) == {12}
    assert set(table["n_obs"]) == {12 * len(TASKS)}  # one value per subject and task
    # the 95% interval is Student's t on subjects - terms = 7 df (12 models, 5 terms)
    half = 2.364624251592785 * rlhf["se"]  # scipy.stats.t.ppf(0.975, 7)
    assert (rlhf["ci_lo"], rlhf["ci_hi"]) == pytest.approx(
        (rlhf["estimate"] - half, rlhf["estimate"] + half)
    )


def ours_warning(table: pd.DataFrame, outcome: str) -> str:
    """The warning text compare.csv gives for ``outcome`` (one per outcome)."""
    texts = set(table.loc[table["outcome"] == outcome, "warning"].fillna(""))
    assert len(texts) == 1
    return texts.pop()


def test_matches_statsmodels_crossed_formula_fit(planted):
    """statsmodels' formula interface, crossed subject and task components, gives the same numbers."""
    import statsmodels.formula.api as smf
    from scipy import stats

    folders, _, features = planted
    long, table = _fit(folders, features)
    f = features.copy()
    f["size_z"] = (f["size"] - f["size"].mean()) / f["size"].std(ddof=1)
    cols = ["nrmse", "w_prior", "size_z", "rlhf", "family", "task", "subject"]
    data = long.merge(f, on="subject")[cols].assign(one=1)
    vcf = {"subject": "0 + C(subject)", "task": "0 + C(task)"}
    df = 12 - 5  # subjects - terms: the features vary between subjects only
    for outcome in ("nrmse", "w_prior"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ref = smf.mixedlm(
                f"{outcome} ~ size_z + rlhf + C(family)", data, groups="one", vc_formula=vcf
            ).fit(reml=True)
        del caught  # statsmodels' boundary note is absolute (variance < 0.01): w_prior's
        # SDs of 0.02-0.1 trip it on the raw scale; compare fits on the outcome over its SD
        assert ours_warning(table, outcome) == ""
        ours = table[table["outcome"] == outcome].set_index("term")
        names = {
            "Intercept": "Intercept",
            "size": "size_z",
            "rlhf": "rlhf",
            "family[llama]": "C(family)[T.llama]",
            "family[qwen]": "C(family)[T.qwen]",
        }
        for term, ref_name in names.items():
            assert ours.loc[term, "estimate"] == pytest.approx(ref.fe_params[ref_name], rel=1e-5)
            assert ours.loc[term, "se"] == pytest.approx(ref.bse_fe[ref_name], rel=1e-4)
            p = 2 * stats.t.sf(abs(ref.tvalues[ref_name]), df)
            assert ours.loc[term, "p"] == pytest.approx(p, rel=1e-3, abs=1e-12)
            assert ours.loc[term, "df"] == df
        sds = dict(zip(ref.model.exog_vc.names, np.sqrt(ref.vcomp), strict=True))
        assert ours["task_sd"].iloc[0] == pytest.approx(sds["task"], rel=1e-3)
        assert ours["subject_sd"].iloc[0] == pytest.approx(sds["subject"], rel=1e-3)


def null_long(rng, n_subj=12, n_task=4, sd=1.0):
    """One outcome with subject, task and residual SDs all ``sd``, and a feature with no effect."""
    subj = np.repeat(np.arange(n_subj), n_task)
    task = np.tile(np.arange(n_task), n_subj)
    y = rng.normal(0, sd, n_subj)[subj] + rng.normal(0, sd, n_task)[task]
    long = pd.DataFrame({"subject": [f"s{i:02d}" for i in subj], "task": [f"t{i}" for i in task]})
    long = long.assign(**{o: np.nan for o in OUTCOMES})
    long["accuracy"] = y + rng.normal(0, sd, len(y))
    feats = pd.DataFrame({"subject": [f"s{i:02d}" for i in range(n_subj)]})
    feats["x"] = rng.normal(size=n_subj)
    return long, feats


def test_feature_test_matches_ols_on_subject_means():
    """Balanced data: the crossed model's feature test is OLS on subject means (issue 49 §1)."""
    import statsmodels.api as sm

    long, feats = null_long(np.random.default_rng(5))
    design, terms = feature_matrix(feats, sorted(feats["subject"]))
    row = compare_models(long, design, terms).set_index(["outcome", "term"]).loc[("accuracy", "x")]
    means = long.groupby("subject")["accuracy"].mean()
    ref = sm.OLS(means.to_numpy(), design.loc[means.index].to_numpy()).fit()
    assert row["subject_sd"] > 0.1  # not on the boundary, where the two would differ
    assert row["estimate"] == pytest.approx(ref.params[1], rel=1e-5)
    assert row["se"] == pytest.approx(ref.bse[1], rel=1e-3)
    assert row["p"] == pytest.approx(ref.pvalues[1], rel=1e-3)
    assert row["df"] == ref.df_resid == 10
    lo, hi = ref.conf_int()[1]
    assert (row["ci_lo"], row["ci_hi"]) == (
        pytest.approx(lo, rel=1e-3),
        pytest.approx(hi, rel=1e-3),
    )


@pytest.mark.slow
def test_no_effect_is_rejected_at_its_nominal_rate():
    """12 subjects x 4 tasks, subject = task = residual SD, no effect: p < .05 in 3-7% (issue 49 §1)."""
    rng = np.random.default_rng(49)
    ps = []
    for _ in range(1000):
        long, feats = null_long(rng)
        design, terms = feature_matrix(feats, sorted(feats["subject"]))
        table = compare_models(long, design, terms).set_index(["outcome", "term"])
        ps.append(table.loc[("accuracy", "x"), "p"])
    rate = np.mean(np.array(ps) < 0.05)
    assert 0.03 <= rate <= 0.07, rate


def test_convergence_warning_is_reported_not_raised():
    """No subject or task variance at all: statsmodels warns (boundary); the table carries it."""
    rng = np.random.default_rng(3)
    n_subj, n_task = 10, 6
    subj = np.repeat(np.arange(n_subj), n_task)
    x = rng.normal(size=n_subj)
    y = 0.5 * x[subj] + rng.normal(0, 1, len(subj))
    exog = np.column_stack([np.ones(len(subj)), x[subj]])
    result, texts = fit_outcome(y, exog, np.tile(np.arange(n_task), n_subj), subj)
    assert result is not None
    assert any("ConvergenceWarning" in t for t in texts), texts
    # through compare_models: the text lands in the table's `warning` column
    long = pd.DataFrame(
        {"subject": [f"s{i}" for i in subj], "task": np.tile(np.arange(n_task), n_subj)}
    )
    long = long.assign(**{o: np.nan for o in OUTCOMES}).astype({"task": str})
    long["nrmse"] = y
    feats = pd.DataFrame({"subject": [f"s{i}" for i in range(n_subj)], "x": x})
    design, terms = feature_matrix(feats, sorted(feats["subject"]))
    table = compare_models(long, design, terms)
    nrmse = table[table["outcome"] == "nrmse"]
    assert nrmse["warning"].str.contains("ConvergenceWarning").all()
    assert np.isfinite(nrmse["estimate"]).all()
    skipped = table[table["outcome"] == "bcs"]  # no values: reported, not fitted
    assert (skipped["warning"] == "no values in any folder").all() and not skipped[
        "converged"
    ].any()


def test_cli_writes_tables_summary_and_page(planted, tmp_path, capsys):
    folders, path, _ = planted
    out = tmp_path / "cmp"
    argv = ["compare", *map(str, folders), "--features", str(path), "--out", str(out)]
    code = main([*argv, "--report"])
    assert code == 0
    table = pd.read_csv(out / "compare.csv")
    assert set(table["outcome"]) == {"accuracy", "nrmse", "w_prior", "bcs", "bcs_p"}
    assert {"estimate", "se", "t", "df", "p", "ci_lo", "ci_hi", "converged", "warning"} <= set(
        table
    )
    board = pd.read_csv(out / "compare_leaderboard.csv")
    assert len(board) == 12 and list(board.columns[:3]) == ["rank", "folder", "subject"]
    assert set(board["folder"]) == {str(f) for f in folders}
    assert board["S"].is_monotonic_decreasing
    assert (out / "report" / "index.html").exists() and (
        out / "report" / "coefficients.png"
    ).exists()
    text = capsys.readouterr().out
    assert "size" in text and "Leaderboard" in text
    assert max(len(line) for line in text.splitlines()) <= 100


def _one_line_exit_2(capsys, argv, needle):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err, err


def test_bad_inputs_exit_2_with_one_line(planted, tmp_path, capsys):
    folders, path, features = planted
    out = str(tmp_path / "cmp")
    base = ["compare", *map(str, folders), "--out", out, "--features"]
    # not a score folder
    empty = tmp_path / "empty"
    empty.mkdir()
    _one_line_exit_2(
        capsys, ["compare", str(empty), "--features", str(path), "--out", out], "not a `bayesobs"
    )
    # no subject column
    bad = tmp_path / "nosubject.csv"
    features.rename(columns={"subject": "model"}).to_csv(bad, index=False)
    _one_line_exit_2(capsys, [*base, str(bad)], "no `subject` column")
    # a subject without a row
    bad = tmp_path / "short.csv"
    features.iloc[1:].to_csv(bad, index=False)
    _one_line_exit_2(capsys, [*base, str(bad)], "'m00' has no row")
    # a feature constant across the models
    bad = tmp_path / "constant.csv"
    features.assign(vision_encoder="vit").to_csv(bad, index=False)
    _one_line_exit_2(capsys, [*base, str(bad)], "'vision_encoder' is constant")
    # the same subject in two folders
    _one_line_exit_2(
        capsys,
        ["compare", str(folders[0]), str(folders[0]), "--features", str(path), "--out", out],
        "given twice",
    )
    twin = tmp_path / "twin"
    twin.mkdir()
    for name in ("accuracy", "fits", "bcs_tasks", "bayesbench"):
        (twin / f"{name}.csv").write_text((folders[0] / f"{name}.csv").read_text())
    _one_line_exit_2(
        capsys,
        ["compare", str(folders[0]), str(twin), "--features", str(path), "--out", out],
        "is in both",
    )
    # a missing features file, and collinear features
    _one_line_exit_2(capsys, [*base, str(tmp_path / "nope.csv")], "not found")
    bad = tmp_path / "collinear.csv"
    features.assign(size2=features["size"] * 2).to_csv(bad, index=False)
    _one_line_exit_2(capsys, [*base, str(bad)], "collinear")
    assert not (tmp_path / "cmp" / "compare.csv").exists()  # nothing written on bad input


def test_a_one_task_study_exits_2_with_the_reason(tmp_path, capsys):
    """Nothing can be compared with one task: the reasons on stderr, exit 2 (issue 47 §14)."""
    features = model_features(1, 4)
    task_u = {k: dict.fromkeys(TASKS, 0.0) for k in ("nrmse", "w", "bcs")}
    folder = tmp_path / "s"
    write_score_folder(folder, features, task_u, np.random.default_rng(0))
    for name in ("accuracy", "fits", "bcs_tasks"):  # keep one task
        t = pd.read_csv(folder / f"{name}.csv")
        t[t["task"] == TASKS[0]].to_csv(folder / f"{name}.csv", index=False)
    features[["subject", "size"]].to_csv(tmp_path / "m.csv", index=False)
    argv = ["compare", str(folder), "--features", str(tmp_path / "m.csv"), "--out"]
    _one_line_exit_2(capsys, [*argv, str(tmp_path / "o")], "accuracy: needs 2+ tasks, has 1")
    assert not (tmp_path / "o" / "compare.csv").exists()


def test_an_outcome_not_fitted_says_why_on_the_console(planted, tmp_path, capsys):
    folders, path, _ = planted
    for f in folders:
        (f / "bcs_tasks.csv").unlink()
    assert (
        main(["compare", *map(str, folders), "--features", str(path), "--out", str(tmp_path)]) == 0
    )
    out = capsys.readouterr().out
    assert "not fitted: bcs (no values in any folder)" in out
    assert "not fitted: bcs_p (no values in any folder)" in out
