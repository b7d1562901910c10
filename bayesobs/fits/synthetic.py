"""Synthetic trial tables from known observers (for demos, tests, benchmarks)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trials import CONDITIONS, MODALITIES
from .observers.models import simulate

# Session ranges (overlapping, as in the paper) per task.
TASK_RANGES: dict[str, tuple[tuple[float, float], ...]] = {
    "line_ratio": ((0.1, 0.5), (0.3, 0.7), (0.5, 0.9)),
    "marker_location": ((0.05, 0.45), (0.3, 0.7), (0.55, 0.95)),
    "maze_distance": ((50.0, 150.0), (100.0, 250.0), (200.0, 400.0)),
    "duration": ((2.0, 8.0), (5.0, 15.0), (10.0, 30.0)),
}
SESSIONS: tuple[str, ...] = ("short", "medium", "long")
VISUAL_TASKS: tuple[str, ...] = ("line_ratio", "marker_location", "maze_distance")
DURATION_CONDITIONS: tuple[str, ...] = (
    "base",
    "steer_verbal",
    "steer_numeric",
    "steer_biased",
    "context_short",
    "context_long",
)


def bayesbench_design(include_context_none: bool = False) -> list[tuple[str, str, str]]:
    """(task, modality, condition) cells of the paper's protocol."""
    conds = [c for c in CONDITIONS if include_context_none or c != "context_none"]
    cells = [(t, m, c) for t in VISUAL_TASKS for m in MODALITIES for c in conds]
    cells += [("duration", "text", c) for c in DURATION_CONDITIONS]
    return cells


def simulated_trials(
    n_subjects: int = 9,
    trials_per_session: int = 40,
    runs: int = 1,
    seed: int = 0,
    design: list[tuple[str, str, str]] | None = None,
) -> pd.DataFrame:
    """A BayesBench-shaped trial table whose responses come from known observers."""
    rng = np.random.default_rng(seed)
    design = design or bayesbench_design()
    kinds = ["static", "kalman", "linear", "static_gain", "kalman_log", "static_log"]
    text_noise, image_noise = 0.04, 0.08
    # optimal fusion of the two unimodal noises
    noise = {
        "text": text_noise,
        "image": image_noise,
        "multimodal": (text_noise**-2 + image_noise**-2) ** -0.5,
    }
    conditions: dict[tuple[str, str], list[str]] = {}
    for task, modality, condition in design:
        conditions.setdefault((task, condition), []).append(modality)
    frames = []
    for s in range(n_subjects):
        kind = kinds[s % len(kinds)]
        w0 = rng.uniform(0.15, 0.45)
        for (task, condition), modalities in conditions.items():
            bump = 0.15 if condition.startswith(("steer", "noise", "context_long")) else 0.0
            for si, session in enumerate(SESSIONS):
                lo, hi = TASK_RANGES[task][si]
                scale = (hi + lo) / 2
                for r in range(runs):
                    # the same stimulus sequence in every modality (cue combination pairs them)
                    x = rng.uniform(lo, hi, trials_per_session)
                    for modality in modalities:
                        sd = noise[modality]
                        if kind.startswith("static"):
                            p = {"w_prior": min(w0 + bump, 0.85), "sigma": sd * scale}
                            if kind == "static_gain":
                                p.update(g=0.9, delta=0.05 * scale)
                        elif kind.startswith("kalman"):
                            p = {"rho": 0.3 / (1 + 5 * bump), "sigma": sd * scale}
                        else:
                            p = {"w": 0.8, "b": 0.1 * scale, "sigma": sd * scale}
                        if kind.endswith("_log"):
                            p["sigma"] = sd * 1.5
                        y = simulate(kind, p, x, rng=rng)
                        frames.append(
                            pd.DataFrame(
                                {
                                    "subject": f"sim{s}:{kind}",
                                    "task": task,
                                    "modality": modality,
                                    "condition": condition,
                                    "session": session,
                                    "run": r,
                                    "trial": np.arange(trials_per_session),
                                    "stimulus": x,
                                    "response": y,
                                    "range_low": lo,
                                    "range_high": hi,
                                }
                            )
                        )
    return pd.concat(frames, ignore_index=True)
