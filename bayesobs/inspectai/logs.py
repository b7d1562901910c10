"""inspect eval logs both ways: a bayesobs task's log into an experiment folder, a folder as logs."""

from __future__ import annotations

import base64
import re
from pathlib import Path

from inspect_ai.log import (
    EvalConfig,
    EvalDataset,
    EvalLog,
    EvalMetric,
    EvalResults,
    EvalSample,
    EvalScore,
    EvalSpec,
    EvalStats,
    read_eval_log,
    write_eval_log,
)
from inspect_ai.model import (
    ChatMessageAssistant,
    ChatMessageUser,
    ContentImage,
    ContentText,
    ModelOutput,
)

from ..errors import BayesobsInputError
from ..provenance import utc_now
from ..run.store import TRIAL_ID, ExperimentStore, read_jsonl
from .scorer import trial_score
from .solver import IMAGES_KEY, SUBJECT_KIND, TRIALS_KEY
from .tasks import RUN_KEYS, sample_id, sample_input

SCORER = "trial_scorer"  # the score of a sample, as inspect names the scorer's


def _png_url(png: bytes) -> str:
    """A PNG as a data URL (not cached: an export reads each image once)."""
    return "data:image/png;base64," + base64.b64encode(png).decode()


def read_log(path: str | Path) -> EvalLog:
    """An inspect eval log of a bayesobs task (``.eval`` or ``.json``), or one clear error."""
    try:
        log = read_eval_log(str(path))
    except FileNotFoundError:
        raise BayesobsInputError(f"{path}: no such file") from None
    except Exception as exc:  # inspect's reader on a file that is no eval log
        raise BayesobsInputError(
            f"{path}: not an inspect eval log ({type(exc).__name__})"
        ) from None
    samples = log.samples or []  # a sample that failed before its first trial has no rows
    if not log.eval.task.startswith("bayesobs/") or not all(
        TRIALS_KEY in s.store or s.error for s in samples
    ):
        raise BayesobsInputError(
            f"{path}: a log of inspect task {log.eval.task!r}, not of a bayesobs task "
            "(inspect eval bayesobs/TASK, or bayesobs export inspect)"
        )
    return log


def import_logs(logs: list[str | Path], out: str | Path) -> dict[str, int]:
    """Inspect eval logs of bayesobs tasks into an experiment folder that ``fit``/``score`` read.

    Parameters
    ----------
    logs : list of str or Path
        ``.eval`` or ``.json`` logs of ``inspect eval bayesobs/TASK`` (or of
        :func:`export_logs`), read through ``inspect_ai.log.read_eval_log``.
    out : str or Path
        The experiment folder (created; its lock is held while writing).
        Trials it already holds are not added twice.

    Returns
    -------
    dict of str to int
        ``trials`` added, ``already`` there, ``samples`` read and ``errors``
        (samples that ended in an error: their trials before it are added).

    Raises
    ------
    BayesobsInputError
        For a file that is not an inspect eval log, or a log of another task.
    """
    read = [(Path(p), read_log(p)) for p in logs]  # every log checked before anything is written
    counts = dict(trials=0, already=0, samples=0, errors=0)
    with ExperimentStore(out, {"command": "import inspect"}, lock=True) as store:
        for path, log in read:
            for sample in log.samples or []:
                for png in sample.store.get(IMAGES_KEY, {}).values():
                    store.save_png(base64.b64decode(png))
                for row in sample.store.get(TRIALS_KEY, []):
                    new = tuple(row[k] for k in TRIAL_ID) not in store.done
                    if new:
                        store.append(row)
                    counts["trials" if new else "already"] += 1
                counts["samples"] += 1
                counts["errors"] += sample.error is not None
            store.log_run(
                event="import inspect",
                log=str(path),
                task=log.eval.task,
                model=log.eval.model,
                samples=len(log.samples or []),
            )
    return counts


def _turns(folder: Path, row: dict, images: dict) -> list:
    """A trial as chat messages: what was shown (text, images), then the reply."""
    names = row.get("images") or ([row["image"]] if row.get("image") else [])
    parts: list = [ContentText(text=row["stimulus_text"])] if row.get("stimulus_text") else []
    for name in names:
        path = folder / name
        if path.is_file():
            images[name] = base64.b64encode(png := path.read_bytes()).decode()
            parts.append(ContentImage(image=_png_url(png)))
    return [
        ChatMessageUser(content=parts or ""),
        ChatMessageAssistant(content=row.get("raw_response") or ""),
    ]


def _sample(folder: Path, model: str, run: tuple, rows: list[dict]) -> EvalSample:
    """One session run's trial rows as an inspect sample."""
    rows = sorted(rows, key=lambda r: r["trial"])
    images: dict[str, str] = {}
    messages = [m for r in rows for m in _turns(folder, r, images)]
    return EvalSample(
        id=sample_id(run),
        epoch=1,
        input=sample_input(run, len(rows)),
        target="",
        messages=messages,
        output=ModelOutput.from_content(model=model, content=rows[-1].get("raw_response") or ""),
        scores={SCORER: trial_score(rows)},
        store={TRIALS_KEY: rows, IMAGES_KEY: images},
        metadata=dict(zip(RUN_KEYS, run, strict=True)),
    )


def export_logs(folder: str | Path, out: str | Path) -> list[Path]:
    """An experiment folder as inspect eval logs: one per subject and task, a sample per run.

    Each sample holds its run's trials as chat messages (the stimulus text
    and images shown, the reply), a score whose metadata lists every trial's
    stimulus, parsed response, gold, validity and why it is invalid, and the
    trial rows themselves, so ``inspect view`` shows every trial and
    :func:`import_logs` gives the same rows back.

    Parameters
    ----------
    folder : str or Path
        An experiment folder (``trials.jsonl``; PNGs under ``stimuli/``).
    out : str or Path
        The log folder (created): ``TASK_SUBJECT.eval`` files.

    Returns
    -------
    list of Path
        The logs written.

    Raises
    ------
    BayesobsInputError
        For a folder without trials.
    """
    folder, out = Path(folder), Path(out)
    path = folder / "trials.jsonl"
    if not path.is_file():
        raise BayesobsInputError(f"{folder}: no trials.jsonl (not an experiment folder)")
    runs: dict[tuple, dict[tuple, list[dict]]] = {}
    for row in read_jsonl(path)[0]:
        run = tuple(row[k] for k in RUN_KEYS)
        runs.setdefault((row["subject"], row["task"]), {}).setdefault(run, []).append(row)
    if not runs:
        raise BayesobsInputError(f"{path}: no trials to export")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for (subject, task), by_run in sorted(runs.items()):
        kind, _, name = subject.partition(":")
        model = name if kind == SUBJECT_KIND else subject.replace(":", "/", 1)
        samples = [_sample(folder, model, run, rows) for run, rows in by_run.items()]
        value = sum(s.scores[SCORER].value for s in samples) / len(samples)
        times = [r.get("timestamp") or "" for rows in by_run.values() for r in rows]
        log = EvalLog(
            eval=EvalSpec(
                created=utc_now(),
                task=f"bayesobs/{task}",
                dataset=EvalDataset(name=task, samples=len(samples)),
                model=model,
                config=EvalConfig(),
                metadata={"bayesobs_folder": str(folder), "subject": subject},
            ),
            status="success",
            stats=EvalStats(started_at=min(times), completed_at=max(times)),
            samples=samples,
            results=EvalResults(
                total_samples=len(samples),
                completed_samples=len(samples),
                scores=[
                    EvalScore(
                        name=SCORER,
                        scorer=SCORER,
                        metrics={"mean": EvalMetric(name="mean", value=value)},
                    )
                ],
            ),
        )
        target = out / f"{task}_{re.sub(r'[^A-Za-z0-9._-]+', '-', subject)}.eval"
        write_eval_log(log, str(target))
        written.append(target)
    return written
