"""The score tables (``Scores``): the folder ``bayesobs score`` writes and reads back."""

from __future__ import annotations

import json as _json
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from ..errors import BayesobsInputError
from ..paradigms import table_names
from ..provenance import write_manifest
from ..trials import write_csv


class Scores(NamedTuple):
    """Every table ``bayesobs score`` writes (see DESIGN.md for the contract files)."""

    fits: pd.DataFrame
    evidence: pd.DataFrame
    accuracy: pd.DataFrame
    cue: pd.DataFrame
    bcs: pd.DataFrame
    bayesbench: pd.DataFrame
    bcs_tasks: pd.DataFrame
    bcs_agreement: pd.DataFrame
    cue_probe: pd.DataFrame
    summary: pd.DataFrame
    missing: pd.DataFrame
    search: pd.DataFrame | None = None
    search_accuracy: pd.DataFrame | None = None
    search_bias: pd.DataFrame | None = None
    controls: pd.DataFrame | None = None  # METHOD §12: the anchoring control, not a factor
    bcs_extra: pd.DataFrame | None = None  # noise_text, cot: ablations outside the BCS
    hvs: pd.DataFrame | None = None  # HVSBench-style questions (task hvs): the Table 3 layout
    # perception tasks (bayesobs.tunnel.scores): accuracy, by problem size, covariate effects, F1, chains
    perception: pd.DataFrame | None = None
    perception_size: pd.DataFrame | None = None
    perception_effects: pd.DataFrame | None = None
    perception_f1: pd.DataFrame | None = None
    perception_chain: pd.DataFrame | None = None
    # Percept-V (task percept_v, bayesobs.perceptv.score): per domain, per skill, format errors
    perceptv_domains: pd.DataFrame | None = None
    perceptv_skills: pd.DataFrame | None = None
    perceptv_formats: pd.DataFrame | None = None
    # --logprobs runs: mean within-answer sd beside the best model's residual sd (bayesobs.scores.spread)
    answer_spread: pd.DataFrame | None = None
    # right/wrong paradigms with 3+ levels: psychometric functions (bayesobs.scores.psychometric)
    psychometric: pd.DataFrame | None = None
    # right/wrong paradigms with cot beside base: accuracy(cot) - accuracy(base) (bayesobs.scores.cot_accuracy)
    cot_accuracy: pd.DataFrame | None = None
    # the tables of registered paradigms (bayesobs.paradigms) that have no field above, by name
    plugins: dict[str, pd.DataFrame] | None = None

    def tables(self) -> dict[str, pd.DataFrame | None]:
        """Every table by name: the fields in order, then :attr:`plugins`' tables."""
        out = {name: getattr(self, name) for name in self._fields if name != "plugins"}
        return {**out, **(self.plugins or {})}

    def to_folder(
        self, out, trials: pd.DataFrame | None = None, manifest: dict | None = None
    ) -> list[str]:
        """Write every computed table as ``out/NAME.csv``; returns the names written."""
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for name, table in self.tables().items():
            if table is not None and len(table.columns):  # no columns: not computed
                write_csv(table, out / f"{name}.csv")
                written.append(name)
        if trials is not None:
            _write_scored_trials(trials, out / SCORED_TRIALS)
            written.append(SCORED_TRIALS)

        counts = {}
        if trials is not None:
            counts = {"n_trials": len(trials), "n_missing": int(trials["response"].isna().sum())}
        write_manifest(out / "score_manifest.json", "score", **{**(manifest or {}), **counts})
        return written

    @classmethod
    def from_folder(cls, folder) -> Scores | None:
        """The tables of a ``bayesobs score`` output folder, or None if it is not one."""
        folder = Path(folder)
        own = [n for n in table_names() if n not in cls._fields]  # plug-ins' tables
        if not any(
            (folder / f"{n}.csv").exists()
            for n in ("bayesbench", "search", "perception", "hvs", *own)
        ):
            return None
        tables = {}
        for name in (*(f for f in cls._fields if f != "plugins"), *own):
            p = folder / f"{name}.csv"
            try:
                tables[name] = (
                    pd.read_csv(p) if p.exists() and p.stat().st_size > 1 else pd.DataFrame()
                )
            except (UnicodeDecodeError, pd.errors.ParserError) as exc:
                reason = str(exc).strip().splitlines()[-1]
                raise BayesobsInputError(f"{p}: not a readable score table ({reason})") from None
        for name in (*table_names(), "answer_spread", "psychometric", "cot_accuracy"):
            if tables[name].empty and not len(tables[name].columns):
                tables[name] = None
        for name in ("subject", "task"):  # keys stay text (e.g. subject "007")
            for t in tables.values():
                if t is not None and name in t:
                    t[name] = t[name].astype(str)
        plugins = {n: t for n in own if (t := tables.pop(n)) is not None}
        return cls(**tables, plugins=plugins or None)


SCORED_TRIALS = "trials.parquet"  # the scored trial table inside a score folder


def _write_scored_trials(trials: pd.DataFrame, path) -> None:
    """The scored trials as Parquet, atomically; mixed-type text columns kept as text."""
    t = trials.copy()
    for col in [c for c in t.columns if pd.api.types.is_object_dtype(t[c].dtype)]:
        t[col] = t[col].map(
            lambda v: (
                v
                if v is None or isinstance(v, str) or (isinstance(v, float) and v != v)
                else _json.dumps(v)
                if isinstance(v, (list, dict))
                else str(v)
            )
        )
    tmp = path.with_name(path.name + ".part")
    t.to_parquet(tmp, index=False)
    tmp.replace(path)
