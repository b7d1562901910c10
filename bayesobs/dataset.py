"""``bayesobs export dataset``: an experiment folder as an open data set."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .errors import BayesobsInputError
from .paradigms import default_paradigm
from .run.imagecost import IMAGE_MODES
from .run.store import FolderLock, writable_folder
from .trials import PARADIGM_MARKERS, paradigm_rows, read_trials

#: each paradigm's file: ``train`` in its name makes it the train split of
#: ``load_dataset("parquet", data_dir=OUT)``, which reads only split-named files
DATA_FILE = "train.parquet"
#: paradigm of rows that state none and match no :data:`PARADIGM_MARKERS`
DEFAULT_PARADIGM = default_paradigm()  # magnitude (bayesobs.paradigms)
#: environment variables whose values must never appear in an export
KEY_VARIABLES: tuple[str, ...] = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
_KEY_NAME = re.compile(r"api[_-]?key|secret|password|authorization|bearer|access[_-]?token", re.I)
_KEY_VALUE = re.compile(r"\b(sk-[A-Za-z0-9_-]{20,}|sk-ant-[A-Za-z0-9_-]{20,})")
_CONFIG_NAME = re.compile(r"[^A-Za-z0-9_-]+")

#: what the columns of the trial table mean (the card's schema table); others are listed
#: with their type only
COLUMN_DOCS: dict[str, str] = {
    "subject": "who answered: a model (`openai:MODEL`, `anthropic:MODEL`), a simulated observer (`sim:NAME`) or a participant id",
    "task": "task name (a spec in `tasks/`)",
    "modality": "text, image or multimodal",
    "condition": "base or an ablation (steering, noise, context)",
    "session": "session type (a stimulus range, a search cell ...)",
    "run": "repetition of the session type",
    "trial": "position within the run",
    "paradigm": "magnitude, search, perception, hvs ...",
    "stimulus": "the true value shown (a magnitude, the set size, the problem size ...)",
    "response": "the number parsed from the reply (empty: no number)",
    "raw_response": "the subject's reply, verbatim",
    "valid": "whether a number could be parsed from the reply",
    "range_low": "lower end of the session's stimulus range",
    "range_high": "upper end of the session's stimulus range",
    "seed": "seed of the session's stimulus sequence",
    "prompt_id": "hash of the prompt template",
    "stimulus_id": "hash of the stimulus",
    "stimulus_text": "the stimulus as text (text and multimodal trials)",
    "image": "path of the stimulus image, relative to the data set root (copied) or the experiment folder",
    "latency_s": "seconds the reply took",
    "timestamp": "when the trial was logged (UTC)",
    "blur_sigma": "Gaussian blur of the image (noise ablations)",
    "context_window": "how many earlier trials the subject saw in context",
    "context_trials": "the earlier trials in context (JSON list)",
    "usage": "tokens used by the call (JSON)",
    "catch": "attention-check trial",
    "set_size": "items in the search display",
    "correct": "whether the answer was right (right/wrong paradigms)",
    "problem_size": "size of the perception problem",
    "gold": "the right answer (perception tasks)",
}


@dataclass
class ExportSummary:
    """What :func:`export_dataset` wrote."""

    out: Path
    rows: dict[str, int] = field(default_factory=dict)
    scores: list[str] = field(default_factory=list)
    images: int = 0


def _walk(value, path: str = "") -> Iterator[tuple[str, object]]:
    """Every (dotted key path, leaf value) of a JSON-like value."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _walk(v, f"{path}[{i}]")
    else:
        yield path, value


def secret_in(value, env: dict[str, str] | None = None) -> str | None:
    """Where a JSON-like value holds something like an API key (a path), else None."""
    env = os.environ if env is None else env
    known = [env[v] for v in KEY_VARIABLES if len(env.get(v, "")) >= 8]
    for where, leaf in _walk(value):
        name = re.split(r"[.\[]", where)[-1] if where else ""
        if _KEY_NAME.search(name) and leaf not in (None, "", False):
            return where
        if isinstance(leaf, str) and (_KEY_VALUE.search(leaf) or any(k in leaf for k in known)):
            return where
    return None


def _check_no_secrets(manifest: dict, trials: pd.DataFrame) -> None:
    where = secret_in(manifest)
    if where:
        raise BayesobsInputError(
            f"manifest.json holds what looks like an API key at {where}; nothing exported"
        )
    for col in trials.columns:
        if _KEY_NAME.search(str(col)) and trials[col].notna().any():
            raise BayesobsInputError(f"the trials have a key-like column {col!r}; nothing exported")
        if trials[col].dtype == object or pd.api.types.is_string_dtype(trials[col]):
            for i, v in trials[col].items():
                where = secret_in(v if isinstance(v, (dict, list, str)) else None)
                if where is not None:
                    raise BayesobsInputError(
                        f"trial row {i} column {col!r} holds what looks like an API key; nothing exported"
                    )


def _read_manifest(folder: Path) -> dict:
    path = folder / "manifest.json"
    if not folder.is_dir() or not (folder / "trials.jsonl").is_file() or not path.is_file():
        raise BayesobsInputError(
            f"{folder}: not an experiment folder (needs trials.jsonl and manifest.json, as "
            "run, sweep or serve write them)"
        )
    try:
        manifest = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise BayesobsInputError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(manifest, dict):
        raise BayesobsInputError(f"{path}: not a manifest (a JSON object)")
    return manifest


def config_name(paradigm: str) -> str:
    """A paradigm's name as a data set config (letters, digits, ``_`` and ``-``)."""
    name = _CONFIG_NAME.sub("_", str(paradigm)).strip("_")
    return name or DEFAULT_PARADIGM


def split_paradigms(trials: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The trial table split by paradigm (:func:`bayesobs.trials.paradigm_rows`)."""
    names = set(PARADIGM_MARKERS)
    if "paradigm" in trials.columns:
        names |= {str(v) for v in trials["paradigm"].dropna().unique()}
    taken = pd.Series(False, index=trials.index)
    masks: dict[str, pd.Series] = {}
    for name in sorted(names):
        mask = paradigm_rows(trials, name) & ~taken
        if mask.any():
            masks[config_name(name)] = masks.get(config_name(name), mask) | mask
            taken |= mask
    if (~taken).any():
        key = config_name(DEFAULT_PARADIGM)
        masks[key] = masks.get(key, ~taken) | ~taken
    return {
        name: trials[mask.to_numpy()].reset_index(drop=True) for name, mask in sorted(masks.items())
    }


def _nested(v) -> bool:
    return isinstance(v, (dict, list, tuple))


def parquet_ready(part: pd.DataFrame) -> pd.DataFrame:
    """Nested values as JSON text, other object columns as text (one type per column)."""
    out = part.copy()
    for col in out.columns:
        s = out[col]
        if s.dtype != object:
            continue
        if s.map(_nested).any():
            out[col] = s.map(lambda v: json.dumps(v) if _nested(v) else (None if v is None else v))
        kinds = {type(v) for v in out[col].dropna()}
        if len(kinds) > 1:
            out[col] = out[col].map(lambda v: None if v is None or v != v else str(v))
    return out


def _yaml_str(s: str) -> str:
    return json.dumps(str(s))  # a JSON string is a YAML scalar


def _type_name(s: pd.Series) -> str:
    if pd.api.types.is_bool_dtype(s):
        return "bool"
    if pd.api.types.is_integer_dtype(s):
        return "int"
    if pd.api.types.is_float_dtype(s):
        return "float"
    if pd.api.types.is_datetime64_any_dtype(s):
        return "timestamp"
    return "string"


def dataset_card(
    parts: dict[str, pd.DataFrame],
    manifest: dict,
    scores: list[str],
    images: str,
    n_images: int,
    license: str,
) -> str:
    """The data set's README.md: YAML front matter, schema, protocol, subjects, licences."""
    lines = ["---", f"license: {license}", "configs:"]
    for i, name in enumerate(parts):
        lines += [f"- config_name: {name}"]
        if i == 0:
            lines += ["  default: true"]
        lines += ["  data_files:", "  - split: train", f"    path: data/{name}/*.parquet"]
    lines += ["tags:", "- psychophysics", "- bayesobs", "---", ""]
    exp = manifest.get("experiment", {}) if isinstance(manifest.get("experiment"), dict) else {}
    specs = [s for s in exp.get("specs", []) or [] if isinstance(s, dict)]
    subjects = sorted(set().union(*(set(p["subject"].astype(str)) for p in parts.values())))
    lines += [
        "# bayesobs experiment",
        "",
        f"Trials of {len(subjects)} subject(s) on {len(specs)} task(s), exported by "
        "`bayesobs export dataset` from an experiment folder written by `bayesobs "
        f"{exp.get('command', 'run')}`.",
        "",
        "## Files",
        "",
        "| config | file | rows |",
        "|---|---|---|",
    ]
    lines += [f"| {n} | data/{n}/{DATA_FILE} | {len(p)} |" for n, p in parts.items()]
    lines += [
        "",
        "Load one paradigm with `datasets.load_dataset(PATH, name=CONFIG)`, all of them "
        '(one table) with `datasets.load_dataset("parquet", data_dir=PATH)`.',
    ]
    if scores:
        lines += [
            "",
            "Scores (`bayesobs score` tables, CSV): " + ", ".join(f"`scores/{s}`" for s in scores),
        ]
    lines += ["", "## Schema", "", "| column | type | filled in | meaning |", "|---|---|---|---|"]
    first = next(iter(parts.values()))
    for col in first.columns:
        filled = ", ".join(n for n, p in parts.items() if p[col].notna().any())
        kind = _type_name(pd.concat([p[col] for p in parts.values()]))
        lines.append(f"| {col} | {kind} | {filled} | {COLUMN_DOCS.get(col, '')} |")
    lines += [
        "",
        "One row per trial; every paradigm's file has every column (empty where the "
        "paradigm does not fill it).  Columns empty in every row are left out; nested values "
        "are JSON text.  `raw_response` is the reply verbatim.",
        "",
        "Images: "
        + {
            "paths": "`image` names the stimulus PNG inside the original experiment folder; "
            "the files are not included (the generated stimuli are reproducible from the task "
            "spec and `seed`).",
            "copy": f"`image` names a PNG under `stimuli/` in this data set ({n_images} file(s)).",
            "omit": "not included (the `image` column is dropped).",
        }[images],
        "",
        "## Protocol",
        "",
        "From the experiment's `manifest.json` (included):",
        "",
        "| task | modalities | conditions | trials per run | runs | seed |",
        "|---|---|---|---|---|---|",
    ]
    for s in specs:
        mods = ", ".join(map(str, exp.get("modalities") or s.get("modalities") or []))
        conds = ", ".join(map(str, exp.get("conditions") or s.get("conditions") or []))
        lines.append(
            f"| {s.get('task')} | {mods} | {conds} | {exp.get('trials') or s.get('trials')} "
            f"| {exp.get('runs') or s.get('runs')} | {s.get('seed')} |"
        )
    versions = manifest.get("versions", {}) if isinstance(manifest.get("versions"), dict) else {}
    lines += [
        "",
        f"Created {manifest.get('created_utc', '?')} with bayesobs {versions.get('bayesobs', '?')} "
        f"(git {manifest.get('git_revision', '?')}).",
        "",
        "## Subjects",
        "",
    ]
    for subj in subjects:
        n = sum(int((p["subject"].astype(str) == subj).sum()) for p in parts.values())
        lines.append(f"- `{subj}`: {n} trial(s)")
    used = {str(s.get("task")) for s in specs}
    lines += [
        "",
        "## Licences",
        "",
        f"The trial table and the generated stimuli: `{license}` (chosen by the exporter).",
        "API keys are never exported.",
    ]
    if exp.get("ami") or "duration" in used:
        lines.append(
            "- `duration`: the words come from the AMI Meeting Corpus (CC BY 4.0); cite it."
        )
    if {"hvs", "hvs_small"} & used:
        lines.append(
            "- `hvs`: questions built from COCO-Search18, COCO-FreeView, SIS10K and saliency "
            "ranks; their images and annotations keep their publishers' licences (COCO images: "
            "Flickr terms of use)."
        )
    lines.append("")
    return "\n".join(lines)


def _score_files(folder: Path | None) -> list[Path]:
    if folder is None:
        return []
    return sorted(folder.glob("*.csv")) + sorted(folder.glob("*.json"))


def _empty_but_lock(out: Path) -> bool:
    return all(p.name == ".lock" for p in out.iterdir())


def export_dataset(
    folder: str | Path,
    out: str | Path,
    scores: str | Path | None = None,
    images: str = "paths",
    license: str = "cc-by-4.0",
) -> ExportSummary:
    """Write an experiment folder as a Hugging Face-loadable data set (see the module docs)."""
    folder, out = Path(folder), Path(out)
    if images not in IMAGE_MODES:
        raise BayesobsInputError(f"images must be one of {', '.join(IMAGE_MODES)}, got {images!r}")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.+-]*", license or ""):
        raise BayesobsInputError(f"--license {license!r}: use a licence id such as cc-by-4.0")
    manifest = _read_manifest(folder)
    score_dir = Path(scores) if scores is not None else folder / "scores"
    if scores is not None and not score_dir.is_dir():
        raise BayesobsInputError(f"{score_dir}: no such score folder")
    if scores is not None and not any(
        (score_dir / n).is_file() for n in ("score_manifest.json", "bayesbench.csv")
    ):
        raise BayesobsInputError(
            f"{score_dir}: not a score folder (no score_manifest.json or bayesbench.csv, "
            "as bayesobs score writes)"
        )
    if not score_dir.is_dir():
        score_dir = None
    if out.exists() and out.is_dir() and not _empty_but_lock(out):
        raise BayesobsInputError(f"{out} is not empty; export into a new or empty folder")
    trials = read_trials(folder, keep_catch=True)
    if not len(trials):
        raise BayesobsInputError(f"{folder}: no trials to export")
    _check_no_secrets(manifest, trials)
    if images == "omit":
        trials = trials.drop(columns=["image"], errors="ignore")
    pictures: list[Path] = []
    if images == "copy" and "image" in trials.columns:
        for rel in trials["image"].dropna().unique():
            src = (folder / str(rel)).resolve()
            if Path(str(rel)).is_absolute() or ".." in Path(str(rel)).parts:  # would leave out
                raise BayesobsInputError(
                    f"{folder}: image {rel!r} is not a path inside the folder (absolute or '..')"
                )
            if not src.is_relative_to(folder.resolve()) or not src.is_file():
                raise BayesobsInputError(f"{folder}: image {rel!r} is not a file in the folder")
            pictures.append(Path(str(rel)))
    trials = parquet_ready(trials.dropna(axis=1, how="all"))
    schema = pa.Table.from_pandas(trials, preserve_index=False).schema
    parts = split_paradigms(trials)
    with FolderLock(writable_folder(out), "export dataset"):
        if not _empty_but_lock(out):  # another writer came first
            raise BayesobsInputError(f"{out} is not empty; export into a new or empty folder")
        summary = ExportSummary(out=out)
        for name, part in parts.items():
            target = out / "data" / name / DATA_FILE
            target.parent.mkdir(parents=True)
            tmp = target.with_name(target.name + ".part")
            pq.write_table(pa.Table.from_pandas(part, schema=schema, preserve_index=False), tmp)
            tmp.replace(target)
            summary.rows[name] = len(part)
        for src in _score_files(score_dir):
            (out / "scores").mkdir(exist_ok=True)
            shutil.copyfile(src, out / "scores" / src.name)
            summary.scores.append(src.name)
        for rel in pictures:
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(folder / rel, out / rel)
        summary.images = len(pictures)
        (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        card = dataset_card(parts, manifest, summary.scores, images, summary.images, license)
        (out / "README.md").write_text(card)
    return summary
