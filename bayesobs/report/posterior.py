"""What ``bayesobs fit --method posterior`` writes: tables, InferenceData files and figures."""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd

from ..fits.posterior import (
    KEPT_VARIANTS,
    PosteriorFiles,
    bcs_posterior,
    fit_posterior,
    kept_fit,
    ppc_table,
)
from ..scores.bcs import BCS_ABLATIONS
from ..trials import CELL_KEYS
from ..trials import write_csv as _csv
from . import figures as F


def write_outputs(
    trials: pd.DataFrame,
    fits: pd.DataFrame,
    out,
    variants=None,
    hierarchical=False,
    chains=4,
    warmup=500,
    draws=500,
    seed=0,
    progress=False,
    workers: int | None = None,
) -> tuple[pd.DataFrame, list[str]]:
    """Posterior fits written to a folder: what ``bayesobs fit --method posterior`` does."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "posterior").mkdir(exist_ok=True)
    sink = PosteriorFiles(out / "posterior", keep=KEPT_VARIANTS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # arviz announces its refactor on import
        # failed diagnostics and high Pareto k come back as notes (returned to the caller)
        warnings.filterwarnings(
            "ignore", message=".*(sampler diagnostics failed|Pareto k)", category=RuntimeWarning
        )
        summary, loo, idatas, notes = fit_posterior(
            trials,
            variants=variants,
            hierarchical=hierarchical,
            chains=chains,
            warmup=warmup,
            draws=draws,
            seed=seed,
            progress=progress,
            workers=workers,
            sink=sink,
        )
    keys = ["task", "modality", "condition"] if hierarchical else list(CELL_KEYS)
    if not hierarchical and len(loo):
        loo = loo.merge(fits[[*keys, "variant", "aic"]], on=[*keys, "variant"], how="left")
        loo["delta_aic"] = loo["aic"] - loo.groupby(keys)["aic"].transform("min")
    _csv(summary, out / "posterior.csv")
    _csv(loo, out / "loo.csv")
    rows = []
    if not hierarchical:
        for subj, task, mod, cond, variant in idatas:
            if variant != "static" or cond not in BCS_ABLATIONS or BCS_ABLATIONS[cond] != mod:
                continue
            if (subj, task, mod, "base", "static") in idatas:
                p = bcs_posterior(idatas, (subj, task, mod, "base"), (subj, task, mod, cond))
                rows.append({"subject": subj, "task": task, "ablation": cond, "p_w_prior_rose": p})
    _csv(
        pd.DataFrame(rows, columns=["subject", "task", "ablation", "p_w_prior_rose"]),
        out / "bcs_posterior.csv",
    )
    if not hierarchical and len(loo):
        (out / "figures").mkdir(exist_ok=True)
        best = loo[loo["rank"] == 1]
        for r in best.head(12).itertuples(index=False):
            key = (r.subject, r.task, r.modality, r.condition)
            cell = trials[(trials[list(keys)] == list(key)).all(axis=1)]
            fig = F.posterior_predictive(
                ppc_table(cell, r.variant, kept_fit(idatas[(*key, r.variant)]), seed=seed),
                title=f"{'/'.join(map(str, key))} · {r.variant} (best by LOO)",
            )
            fig.savefig(
                out / "figures" / ("ppc_" + "__".join(map(str, key)).replace("/", "_") + ".png"),
                dpi=110,
            )
    return loo, notes
