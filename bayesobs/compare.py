"""Comparing many models: mixed-effects regressions of per-task scores on model features."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import BayesobsInputError
from .leaderboard import text_table, wrap
from .report.compare import compare_page
from .run.store import lock_folder
from .scores import NRMSE_MAX, Scores
from .scores.references import subjects_only
from .trials import write_csv

OUTCOMES: tuple[str, ...] = ("accuracy", "nrmse", "w_prior", "bcs", "bcs_p")
COLUMNS: tuple[str, ...] = (
    "outcome",
    "term",
    "feature",
    "kind",
    "scale",
    "estimate",
    "se",
    "t",
    "df",
    "p",
    "ci_lo",
    "ci_hi",
    "n_obs",
    "n_subjects",
    "n_groups",
    "subject_sd",
    "task_sd",
    "resid_sd",
    "converged",
    "warning",
)


# ------------------------------------------------------------------ inputs
def load_folders(folders) -> dict[str, Scores]:
    """Every score folder's tables by the folder's name as given; refuse a folder that is not one."""
    out: dict[str, Scores] = {}
    seen: dict[str, str] = {}
    for folder in folders:
        name = str(folder)
        if not Path(folder).is_dir():
            raise BayesobsInputError(
                f"{name} is not a folder (give `bayesobs score` output folders)"
            )
        if name in out:
            raise BayesobsInputError(f"score folder {name} is given twice")
        res = Scores.from_folder(folder)
        if res is None:
            raise BayesobsInputError(
                f"{name} is not a `bayesobs score` output folder (no bayesbench.csv)"
            )
        for subject in subjects_of(res):
            if subject in seen:
                raise BayesobsInputError(
                    f"subject {subject!r} is in both {seen[subject]} and {name}: subject ids must "
                    "be unique across the compared folders (rename one, or compare one folder)"
                )
            seen[subject] = name
        out[name] = res
    if not out:
        raise BayesobsInputError("give at least one score folder")
    return out


def subjects_of(res: Scores) -> list[str]:
    """The subjects of a score folder's tables (leaderboard and per-task tables)."""
    found: set[str] = set()
    bb = subjects_only(res.bayesbench) if res.bayesbench is not None else None
    for table in (bb, res.accuracy, res.bcs_tasks, res.fits):
        if table is not None and "subject" in table:
            found.update(table["subject"].astype(str))
    return sorted(found)


def read_features(path) -> pd.DataFrame:
    """The features table: ``subject`` plus one column per feature, one row per subject."""
    path = Path(path)
    if not path.is_file():
        raise BayesobsInputError(f"features file {path} not found")
    sep = "\t" if path.suffix.lower() == ".tsv" else ","
    try:
        table = pd.read_csv(path, sep=sep, dtype={"subject": str})
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BayesobsInputError(f"cannot read features file {path}: {first}") from None
    if "subject" not in table.columns:
        raise BayesobsInputError(f"features file {path} has no `subject` column")
    dup = table["subject"][table["subject"].duplicated()]
    if len(dup):
        raise BayesobsInputError(
            f"features file {path} has subject {dup.iloc[0]!r} on more than one row"
        )
    if len(table.columns) < 2:
        raise BayesobsInputError(f"features file {path} has no feature column besides `subject`")
    return table


def feature_matrix(features: pd.DataFrame, subjects, use=None) -> tuple[pd.DataFrame, list[dict]]:
    """The fixed-effect design of each subject and a description of each term."""
    cols = [c for c in features.columns if c != "subject"] if not use else list(use)
    unknown = [c for c in cols if c not in features.columns or c == "subject"]
    if unknown:
        raise BayesobsInputError(f"no feature column {unknown[0]!r} in the features file")
    table = features.set_index("subject")
    absent = [s for s in subjects if s not in table.index]
    if absent:
        more = f" (and {len(absent) - 1} more)" if len(absent) > 1 else ""
        raise BayesobsInputError(f"subject {absent[0]!r}{more} has no row in the features file")
    table = table.loc[list(subjects), cols]
    design = pd.DataFrame({"Intercept": 1.0}, index=table.index)
    terms = [{"term": "Intercept", "feature": "", "kind": "intercept", "scale": 1.0}]
    for col in cols:
        x = table[col]
        if x.isna().any():
            raise BayesobsInputError(
                f"feature {col!r} has no value for subject {x.index[x.isna()][0]!r}"
            )
        if x.nunique() < 2:
            raise BayesobsInputError(
                f"feature {col!r} is constant ({x.iloc[0]!r}) across the {len(x)} compared "
                "subjects: its effect cannot be estimated (drop the column or use --feature)"
            )
        if pd.api.types.is_numeric_dtype(x) and not pd.api.types.is_bool_dtype(x):
            x = x.astype(float)
            if set(x.unique()) <= {0.0, 1.0}:
                design[col] = x
                terms.append({"term": col, "feature": col, "kind": "binary", "scale": 1.0})
            else:
                sd = float(x.std(ddof=1))
                design[col] = (x - x.mean()) / sd
                terms.append({"term": col, "feature": col, "kind": "numeric", "scale": sd})
        else:
            text = x.astype(str)
            levels = sorted(text.unique())
            for level in levels[1:]:
                name = f"{col}[{level}]"
                design[name] = (text == level).astype(float)
                terms.append({"term": name, "feature": col, "kind": "categorical", "scale": 1.0})
    rank = np.linalg.matrix_rank(design.to_numpy())
    if rank < design.shape[1]:
        raise BayesobsInputError(
            f"the {design.shape[1] - 1} feature term(s) are collinear or too many for the "
            f"{len(design)} compared subjects (rank {rank} of {design.shape[1]} with the "
            "intercept): drop features"
        )
    return design, terms


# ------------------------------------------------------------------ outcomes
def _base_task_mean(table: pd.DataFrame, column: str, name: str) -> pd.DataFrame:
    base = table[table["condition"].astype(str) == "base"]
    g = base.groupby(["subject", "task"], sort=True)[column].mean()
    return g.rename(name).reset_index()


def static_w_prior(fits: pd.DataFrame) -> pd.DataFrame:
    """``subject, task, modality, condition, w_prior`` of the static variant from ``fits.csv``."""
    if fits is None or fits.empty or "variant" not in fits:
        return pd.DataFrame(columns=["subject", "task", "modality", "condition", "w_prior"])
    rows = fits[fits["variant"] == "static"].copy()

    def w(text) -> float:
        try:
            value = json.loads(text).get("w_prior") if isinstance(text, str) else None
        except (ValueError, AttributeError):
            return math.nan
        return float(value) if isinstance(value, (int, float)) else math.nan

    rows["w_prior"] = rows["params"].map(w) if "params" in rows else math.nan
    return rows[["subject", "task", "modality", "condition", "w_prior"]]


def outcome_table(res: Scores) -> pd.DataFrame:
    """One row per subject and task: every outcome of :data:`OUTCOMES` this folder has."""
    parts = []
    acc = res.accuracy
    if acc is not None and len(acc) and "nrmse" in acc:
        acc = acc.assign(
            _a=np.clip(1 - acc["nrmse"].astype(float) / NRMSE_MAX, 0, 1),
            nrmse=acc["nrmse"].astype(float),
        )
        parts.append(_base_task_mean(acc, "_a", "accuracy"))
        parts.append(_base_task_mean(acc, "nrmse", "nrmse"))
    w = static_w_prior(res.fits)
    if len(w):
        parts.append(_base_task_mean(w, "w_prior", "w_prior"))
    bt = res.bcs_tasks
    if bt is not None and len(bt) and "bcs" in bt:
        keep = ["subject", "task", "bcs", *(["bcs_p"] if "bcs_p" in bt else [])]
        parts.append(bt[keep].astype({"bcs": float}))
    out = pd.DataFrame({"subject": pd.Series(dtype=str), "task": pd.Series(dtype=str)})
    for part in parts:
        part = part.astype({"subject": str, "task": str})
        out = out.merge(part, on=["subject", "task"], how="outer")
    for name in OUTCOMES:
        if name not in out:
            out[name] = np.nan
    return out[["subject", "task", *OUTCOMES]]


def long_table(folders: dict[str, Scores]) -> pd.DataFrame:
    """``folder, subject, task`` and every outcome, over all folders."""
    parts = [outcome_table(res).assign(folder=name) for name, res in folders.items()]
    table = pd.concat(parts, ignore_index=True)
    return table[["folder", "subject", "task", *OUTCOMES]]


# ------------------------------------------------------------------ the fits
def _skipped(outcome: str, terms, n_obs, n_subj, n_groups, why: str) -> list[dict]:
    return [
        {
            "outcome": outcome,
            **t,
            "estimate": math.nan,
            "se": math.nan,
            "t": math.nan,
            "df": math.nan,
            "p": math.nan,
            "ci_lo": math.nan,
            "ci_hi": math.nan,
            "n_obs": n_obs,
            "n_subjects": n_subj,
            "n_groups": n_groups,
            "subject_sd": math.nan,
            "task_sd": math.nan,
            "resid_sd": math.nan,
            "converged": False,
            "warning": why,
        }
        for t in terms
    ]


def fit_outcome(
    y: np.ndarray, exog: np.ndarray, tasks: np.ndarray, subjects: np.ndarray, reml: bool = True
) -> tuple[object | None, list[str]]:
    """Fit ``MixedLM`` with crossed random intercepts of subject and task (REML), catching warnings."""
    # start-up time: statsmodels loads only for its regressions
    from statsmodels.regression.mixed_linear_model import MixedLM, VCSpec

    mats = [pd.get_dummies(pd.Series(k).astype(str), dtype=float) for k in (subjects, tasks)]
    vc = VCSpec(
        ["subject", "task"], [[list(m.columns)] for m in mats], [[m.to_numpy()] for m in mats]
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            model = MixedLM(y, exog, groups=np.zeros(len(y)), exog_vc=vc)
            result = model.fit(reml=reml)
        except (np.linalg.LinAlgError, ValueError) as exc:
            return None, [f"{type(exc).__name__}: {exc}"]
    texts: list[str] = []
    for w in caught:
        text = f"{w.category.__name__}: {str(w.message).strip().splitlines()[0]}"
        if text not in texts:
            texts.append(text)
    return result, texts


def compare_models(long: pd.DataFrame, design: pd.DataFrame, terms: list[dict]) -> pd.DataFrame:
    """``compare.csv``: one row per outcome x term (:data:`COLUMNS`)."""
    rows: list[dict] = []
    for outcome in OUTCOMES:
        data = long[["subject", "task", outcome]].dropna()
        data = data[data["subject"].isin(design.index)].sort_values(["task", "subject"])
        n_obs, n_subj, n_groups = len(data), data["subject"].nunique(), data["task"].nunique()
        if n_obs == 0:
            rows += _skipped(outcome, terms, 0, 0, 0, "no values in any folder")
            continue
        X = design.loc[data["subject"]].to_numpy()
        if n_groups < 2:
            rows += _skipped(
                outcome, terms, n_obs, n_subj, n_groups, f"needs 2+ tasks, has {n_groups}"
            )
            continue
        if n_subj <= len(terms) or np.linalg.matrix_rank(X) < X.shape[1]:
            why = f"{n_subj} subject(s) with values cannot support {len(terms)} term(s)"
            rows += _skipped(outcome, terms, n_obs, n_subj, n_groups, why)
            continue
        y = data[outcome].to_numpy(float)
        # fitted on the outcome over its SD, then scaled back: the same REML fit (it is
        # scale-equivariant), but statsmodels' boundary check (variance < 0.01) becomes relative
        sd_y = float(np.std(y, ddof=1)) or 1.0
        result, texts = fit_outcome(
            y / sd_y, X, data["task"].to_numpy(), data["subject"].to_numpy(), reml=True
        )
        if result is None:
            rows += _skipped(outcome, terms, n_obs, n_subj, n_groups, "; ".join(texts))
            continue
        est = np.asarray(result.fe_params, float) * sd_y
        se = np.asarray(result.bse_fe, float) * sd_y
        with np.errstate(divide="ignore", invalid="ignore"):
            tval = est / se
        # start-up time: this part of SciPy loads only where it is used
        from scipy.stats import t as student

        df = n_subj - len(terms)
        p, q = 2 * student.sf(np.abs(tval), df), float(student.ppf(0.975, df))
        sd = np.sqrt(np.maximum(result.vcomp, 0.0)) * sd_y
        sds = dict(zip(result.model.exog_vc.names, sd, strict=True))
        for i, t in enumerate(terms):
            rows.append(
                {
                    "outcome": outcome,
                    **t,
                    "estimate": est[i],
                    "se": se[i],
                    "t": tval[i],
                    "df": df,
                    "p": p[i],
                    "ci_lo": est[i] - q * se[i],
                    "ci_hi": est[i] + q * se[i],
                    "n_obs": n_obs,
                    "n_subjects": n_subj,
                    "n_groups": n_groups,
                    "subject_sd": sds["subject"],
                    "task_sd": sds["task"],
                    "resid_sd": float(np.sqrt(result.scale)) * sd_y,
                    "converged": bool(result.converged),
                    "warning": "; ".join(texts),
                }
            )
    return pd.DataFrame(rows, columns=list(COLUMNS))


def cross_leaderboard(folders: dict[str, Scores]) -> pd.DataFrame:
    """``compare_leaderboard.csv``: every subject of every folder with its composite."""
    parts = []
    for name, res in folders.items():
        bb = res.bayesbench
        if bb is not None and len(bb.columns):
            bb = subjects_only(bb)  # reference rows: each folder's own, not a model to rank
        if bb is not None and len(bb.columns) and len(bb):
            parts.append(bb.assign(folder=name))
        else:  # a folder with only search/perception tables: its subjects, without a composite
            subjects = subjects_of(res)
            if subjects:
                parts.append(pd.DataFrame({"subject": subjects, "folder": name}))
    if not parts:
        return pd.DataFrame(columns=["rank", "folder", "subject"])
    table = pd.concat(parts, ignore_index=True)
    keys = [c for c in ("S", "S_p") if c in table]
    if keys:
        table = table.sort_values(keys, ascending=False, na_position="last", kind="stable")
    table = table.reset_index(drop=True)
    table.insert(0, "rank", np.arange(1, len(table) + 1))
    front = ["rank", "folder", "subject"]
    return table[front + [c for c in table.columns if c not in front]]


# ------------------------------------------------------------------ terminal
def _fmt(v, digits: int = 3) -> str:
    return (
        "n/a" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:.{digits}f}"
    )


def _not_fitted(table: pd.DataFrame) -> dict[str, str]:
    """The outcomes of :func:`compare_models` rows without estimates, each with its reason."""
    rows = table[~np.isfinite(table["estimate"].to_numpy(float))]
    return dict(zip(rows["outcome"], rows["warning"].fillna(""), strict=True))


def summary_text(table: pd.DataFrame, board: pd.DataFrame, width: int = 100) -> str:
    """The terminal summary: the coefficients, then the leaderboard, within ``width`` columns."""
    head = "Mixed models: outcome ~ features + (1 | subject) + (1 | task); estimate (SE), 95% CI"
    out = [wrap(f"{head} and p from t on n_subjects - terms df", width)]
    fitted = np.isfinite(table["estimate"].to_numpy(float))
    shown = table[(table["term"] != "Intercept") & fitted]
    coef = pd.DataFrame(
        {
            "outcome": shown["outcome"],
            "term": shown["term"],
            "estimate": [_fmt(v) for v in shown["estimate"]],
            "se": [_fmt(v) for v in shown["se"]],
            "95% CI": [
                f"[{_fmt(a)}, {_fmt(b)}]"
                for a, b in zip(shown["ci_lo"], shown["ci_hi"], strict=True)
            ],
            "p": [_fmt(v, 4) for v in shown["p"]],
            "n": [f"{a}/{b}" for a, b in zip(shown["n_subjects"], shown["n_groups"], strict=True)],
            "ok": [
                "yes" if c and not w else "NO" if not c else "warn"
                for c, w in zip(shown["converged"], shown["warning"].fillna(""), strict=True)
            ],
        }
    )
    out.append(text_table(coef, width))
    out.append(
        wrap(
            "n = subjects/tasks; numeric features per SD (compare.csv `scale`); ok: NO = not "
            "converged or not fitted, warn = a warning (compare.csv `warning`)",
            width,
        )
    )
    out += [wrap(f"not fitted: {o} ({why})", width) for o, why in _not_fitted(table).items()]
    out.append("")
    out.append("Leaderboard across folders (S, 68% bootstrap interval where scored)")
    lb = pd.DataFrame(
        {
            "rank": board["rank"],
            "folder": board["folder"],
            "subject": board["subject"],
            "S": [_fmt(v) for v in board.get("S", pd.Series(math.nan, index=board.index))],
        }
    )
    if "S_lo" in board:
        lb["S [68%]"] = [
            f"[{_fmt(a)}, {_fmt(b)}]" for a, b in zip(board["S_lo"], board["S_hi"], strict=True)
        ]
    if "BCS_p" in board:
        lb["BCS_p"] = [_fmt(v, 1) for v in board["BCS_p"]]
    out.append(text_table(lb, width))
    return "\n".join(out)


def run_compare(folders, features, out, use=None, report: bool = False) -> dict:
    """Everything ``bayesobs compare`` does; returns the tables and the paths written."""
    loaded = load_folders(folders)
    table = features if isinstance(features, pd.DataFrame) else read_features(features)
    long = long_table(loaded)
    subjects = sorted(
        set(long["subject"]) | set().union(*(subjects_of(r) for r in loaded.values()))
    )
    if long[list(OUTCOMES)].notna().sum().sum() == 0:
        raise BayesobsInputError(
            "no per-task magnitude scores (accuracy, fits, bcs_tasks) in any of the folders"
        )
    design, terms = feature_matrix(table, subjects, use)
    result = compare_models(long, design, terms)
    skipped = _not_fitted(result)
    if len(skipped) == len(OUTCOMES):
        why = "; ".join(f"{o}: {w}" for o, w in skipped.items())
        raise BayesobsInputError(f"nothing could be compared (no outcome fitted): {why}")
    board = cross_leaderboard(loaded)
    out = Path(out)
    written = []
    with lock_folder(out, "compare"):
        written.append(write_csv(result, out / "compare.csv"))
        written.append(write_csv(board, out / "compare_leaderboard.csv"))
        written.append(write_csv(long, out / "compare_long.csv"))
        if report:
            written.append(compare_page(result, board, out / "report"))
    return {"compare": result, "leaderboard": board, "long": long, "written": written}


__all__ = [
    "COLUMNS",
    "OUTCOMES",
    "compare_models",
    "cross_leaderboard",
    "feature_matrix",
    "fit_outcome",
    "load_folders",
    "long_table",
    "outcome_table",
    "read_features",
    "run_compare",
    "static_w_prior",
    "subjects_of",
    "summary_text",
]
