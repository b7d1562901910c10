"""The report's section on posteriors you can trust: SBC and the prior predictive check."""

from __future__ import annotations

import html
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import BayesobsInputError

SBC = "sbc.csv"
SBC_RANKS = "sbc_ranks.csv"
SBC_FIGURE = Path("figures") / "sbc_ranks.png"
PRIOR_PREDICTIVE = "prior_predictive.csv"
FILES = (SBC, PRIOR_PREDICTIVE)
SBC_COLUMNS = ("variant", "parameter", "n_sims", "draws", "bins", "chi2", "p", "threshold")
PP_COLUMNS = ("variant", "sim_min_q01", "sim_max_q99", "observed_min", "observed_max", "covers")


def holds_diagnostics(folder: Path) -> bool:
    """Whether ``folder`` holds calibration (``sbc.csv``) or prior-predictive output."""
    return folder.is_dir() and any((folder / f).is_file() for f in FILES)


def diagnostics_only(folder: Path) -> bool:
    """A folder with calibration or prior-predictive output and no trials of its own."""
    return holds_diagnostics(folder) and not (folder / "trials.jsonl").exists()


def _read(path: Path, columns) -> pd.DataFrame:
    """A diagnostics CSV with its columns checked; a bad file is one clear error."""
    try:
        table = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BayesobsInputError(f"cannot read {path}: {first}") from None
    gone = [c for c in columns if c not in table.columns]
    if gone:
        raise BayesobsInputError(f"{path} is not as bayesobs writes it: no column {gone[0]!r}")
    return table


def find_diagnostics(paths) -> dict[str, tuple[Path, pd.DataFrame]]:
    """``{"sbc": (folder, table), "prior_predictive": (folder, table)}`` from the given folders."""
    found: dict[str, tuple[Path, pd.DataFrame]] = {}
    for p in paths:
        p = Path(p)
        if not p.is_dir():
            continue
        if "sbc" not in found and (p / SBC).is_file():
            found["sbc"] = (p, _read(p / SBC, SBC_COLUMNS))
        if "prior_predictive" not in found and (p / PRIOR_PREDICTIVE).is_file():
            found["prior_predictive"] = (p, _read(p / PRIOR_PREDICTIVE, PP_COLUMNS))
    return found


def _truth(v) -> bool:
    """A CSV's True/False (read as bool, or as text)."""
    return str(v).strip().lower() in ("true", "1", "1.0")


def sbc_table(sbc: pd.DataFrame) -> pd.DataFrame:
    """The rank-uniformity table as shown: ``result`` pass/fail against ``threshold``."""
    t = sbc.copy()
    t["result"] = [
        "pass" if p >= thr else "fail" for p, thr in zip(t["p"], t["threshold"], strict=True)
    ]
    cols = [c for c in (*SBC_COLUMNS, "result", "divergent_sims", "prior_scale") if c in t.columns]
    return t[cols]


def calibration_sections(found: dict, out: Path, save_figure, table_html) -> list[str]:
    """HTML of the calibration section; empty when no folder holds the files."""
    if not found:
        return []
    body = ["<h2>Posterior calibration</h2>"]
    if "sbc" in found:
        folder, sbc = found["sbc"]
        shown = sbc_table(sbc)
        n_fail = int((shown["result"] == "fail").sum())
        thr = shown["threshold"].astype(float)
        threshold = (
            f"{thr.iloc[0]:.3g}" if thr.nunique() == 1 else f"{thr.min():.3g} to {thr.max():.3g}"
        )
        body += [
            "<h3>Simulation-based calibration (bayesobs calibrate)</h3>",
            f"<p>{len(shown) - n_fail} of {len(shown)} parameter(s) pass: their SBC ranks "
            f"(Talts et al. 2018) are uniform by a chi-square test on the rank bins, pass where "
            f"p &ge; threshold = {html.escape(threshold)} (the family-wise level over the "
            f"parameters tested, Bonferroni); fail otherwise. From {html.escape(str(folder))}.</p>",
            table_html(shown, 4),
        ]
        src = _rank_figure(folder, sbc, out, save_figure)
        if src:
            body.append(f'<a href="{src}"><img src="{src}" alt="SBC rank histograms"></a>')
    if "prior_predictive" in found:
        folder, pp = found["prior_predictive"]
        covers = pp["covers"].map(_truth)
        keys = [c for c in ("subject", "task", "modality", "condition") if c in pp.columns]
        shown = pp[[*keys, *PP_COLUMNS]].assign(covers=covers.map({True: "yes", False: "no"}))
        missed = sorted(set(pp.loc[~covers, "variant"].astype(str)))
        body += [
            "<h3>Prior predictive check (fit --method posterior --prior-predictive)</h3>",
            f"<p>{int(covers.sum())} of {len(pp)} (cell, variant) fit(s) cover the observed "
            "response range: responses drawn from the priors reach below the observed minimum "
            "(1% quantile of the simulated minima) and above the observed maximum (99% quantile "
            "of the simulated maxima)"
            + (f"; not covered: {html.escape(', '.join(missed))}" if missed else "")
            + f". From {html.escape(str(folder))}.</p>",
            table_html(shown, 3),
        ]
    return body


def _rank_figure(folder: Path, sbc: pd.DataFrame, out: Path, save_figure) -> str | None:
    """The rank histograms in the report's figures: copied, or drawn from ``sbc_ranks.csv``."""
    target = out / "figures" / "sbc_ranks.png"
    if (folder / SBC_FIGURE).is_file():
        shutil.copyfile(folder / SBC_FIGURE, target)
        return f"figures/{target.name}"
    if (folder / SBC_RANKS).is_file():
        ranks = _read(folder / SBC_RANKS, ("variant", "parameter", "rank"))
        table = sbc.assign(uniform=sbc["p"] >= sbc["threshold"])
        return save_figure(rank_figure(table, ranks), target)
    return None


def rank_figure(table: pd.DataFrame, ranks: pd.DataFrame):
    """Rank histograms, one panel per (variant, parameter), with the uniform's 99% band."""
    from scipy import stats  # start-up time: this part of SciPy loads only where it is used

    from ..plotting import Figure  # start-up time: matplotlib loads only when a figure is drawn

    names = list(dict.fromkeys(table["variant"]))
    ncol = int(table.groupby("variant").size().max())
    fig = Figure(figsize=(2.2 * ncol, 1.6 * len(names) + 0.4), layout="constrained")
    axes = fig.subplots(len(names), ncol, squeeze=False)
    for i, name in enumerate(names):
        rows = table[table["variant"] == name].reset_index(drop=True)
        for j in range(ncol):
            ax = axes[i][j]
            if j >= len(rows):
                ax.set_axis_off()
                continue
            r = rows.iloc[j]
            rk = ranks[(ranks["variant"] == name) & (ranks["parameter"] == r["parameter"])]["rank"]
            b, m, n = int(r["bins"]), int(r["draws"]), int(r["n_sims"])
            counts = np.bincount(rk.to_numpy() * b // (m + 1), minlength=b)
            lo, hi = stats.binom.ppf([0.005, 0.995], n, 1 / b)
            ax.axhspan(lo, hi, color="0.85")
            ax.bar(np.arange(b), counts, width=0.9, color="C0" if r["uniform"] else "C3")
            ax.set_title(
                f"{name} · {r['parameter']} (p={r['p']:.2g})",
                fontsize=7,
                color="k" if r["uniform"] else "C3",
            )
            ax.set_xticks([])
            ax.tick_params(labelsize=6)
    fig.suptitle(
        "SBC rank histograms (grey: 99% band of a uniform bin count; red: not uniform)", fontsize=8
    )
    return fig


__all__ = [
    "calibration_sections",
    "diagnostics_only",
    "find_diagnostics",
    "holds_diagnostics",
    "rank_figure",
    "sbc_table",
]
