"""Published reference numbers of the Tunnel Vision paper, each with its source, for report lines."""

from __future__ import annotations

from typing import NamedTuple


class Reference(NamedTuple):
    """One published number."""

    task: str  # object_reid | scavenger_hunt | circuits
    variant: str  # a generator variant, or "all"
    who: str  # "chance", "human", a heuristic, or a model name
    metric: str  # "accuracy" (%), "final_step_error" (%), "log_odds_distance", "log_odds_crossings", ...
    value: float
    source: str  # where in the paper
    note: str = ""


_REID = "Sec. 4.1 text (Fig. 2)"
REFERENCES: tuple[Reference, ...] = (
    # Object re-identification
    *(
        Reference("object_reid", v, "chance", "accuracy", 50.0, "Sec. 3.1 (balanced yes/no)")
        for v in ("standard", "unconnected", "pixel_perfect")
    ),
    Reference(
        "object_reid",
        "standard",
        "human",
        "accuracy",
        100.0,
        "Sec. 4 (200 self-evaluated examples)",
    ),
    Reference(
        "object_reid",
        "standard",
        "best model",
        "accuracy",
        60.0,
        _REID,
        "upper bound: 'the highest score being 60%'",
    ),
    Reference("object_reid", "unconnected", "GPT-5", "accuracy", 77.0, _REID),
    Reference("object_reid", "unconnected", "Gemini 2.5 Pro", "accuracy", 65.0, _REID),
    Reference("object_reid", "unconnected", "Claude Sonnet 4", "accuracy", 79.0, _REID),
    Reference("object_reid", "pixel_perfect", "GPT-5", "accuracy", 71.0, _REID),
    Reference("object_reid", "pixel_perfect", "Gemini 2.5 Pro", "accuracy", 65.0, _REID),
    Reference("object_reid", "pixel_perfect", "Claude Sonnet 4", "accuracy", 70.0, _REID),
    Reference(
        "object_reid",
        "all",
        "Molmo-7B / Llama-3.2-11B",
        "f1_one_class",
        0.0,
        "Fig. 3 and Sec. 4.1 'Failure Modes'",
        "F1 = 0 for one class across several variants",
    ),
    # Visual scavenger hunt
    *(
        Reference("scavenger_hunt", v, "chance", "accuracy", 100 / 11, "Sec. 3.2 (11 colours, ~9%)")
        for v in ("L2", "L3", "L4")
    ),
    Reference(
        "scavenger_hunt",
        "all",
        "most frequent colour",
        "accuracy",
        12.0,
        "Sec. 4.2 'Heuristic Strategies'",
    ),
    Reference(
        "scavenger_hunt", "all", "human", "accuracy", 100.0, "Sec. 4 (200 self-evaluated examples)"
    ),
    Reference(
        "scavenger_hunt",
        "L3",
        "o4-mini",
        "accuracy",
        44.5,
        "Sec. 4.2 text (Fig. 4)",
        "compared there with 0.94^3 = 83%, i.e. chain length 3; the spec lists it as overall",
    ),
    Reference("scavenger_hunt", "decomposed", "o4-mini", "accuracy", 90.67, "Table 1 (75 trials)"),
    Reference("scavenger_hunt", "decomposed", "o4-mini", "final_step_error", 6.0, "Table 1"),
    Reference("scavenger_hunt", "decomposed", "Gemini 2.5 Pro", "accuracy", 88.00, "Table 1"),
    Reference("scavenger_hunt", "decomposed", "Gemini 2.5 Pro", "final_step_error", 8.0, "Table 1"),
    Reference("scavenger_hunt", "decomposed", "Llama-3.2-11B", "accuracy", 24.00, "Table 1"),
    Reference("scavenger_hunt", "decomposed", "Llama-3.2-11B", "final_step_error", 85.0, "Table 1"),
    Reference("scavenger_hunt", "decomposed", "Qwen2.5-VL-32B", "accuracy", 16.00, "Table 1"),
    Reference(
        "scavenger_hunt", "decomposed", "Qwen2.5-VL-32B", "final_step_error", 86.0, "Table 1"
    ),
    Reference("scavenger_hunt", "decomposed", "Qwen2.5-VL-7B", "accuracy", 14.67, "Table 1"),
    Reference("scavenger_hunt", "decomposed", "Qwen2.5-VL-7B", "final_step_error", 85.0, "Table 1"),
    # Circuit connections
    *(
        Reference(
            "circuits", v, "chance", "accuracy", 100 / 7, "Sec. 3.3 (4-10 components: 14.29%)"
        )
        for v in ("standard", "single", "unique")
    ),
    Reference(
        "circuits", "standard", "human", "accuracy", 99.5, "Sec. 4 (200 self-evaluated examples)"
    ),
    Reference(
        "circuits",
        "single",
        "Gemini 2.5 Pro",
        "accuracy",
        27.0,
        "Sec. 4.3 text (Fig. 6)",
        "best on Single",
    ),
    Reference("circuits", "unique", "Gemini 2.5 Pro", "accuracy", 48.0, "Sec. 4.3 text (Fig. 6)"),
)

# Table 2: log-odds per px of distance and per crossing (p-values), five strongest models.
_TABLE2 = {
    # model: {variant: (distance, p, crossings, p)}
    "GPT-5": {
        "single": (-0.0106, 0.00131, -1.0008, 0.00238),
        "standard": (-0.0063, 0.00225, 0.0028, 0.982),
        "unique": (-0.0026, 0.299, -0.3477, 0.0742),
    },
    "Gemini 2.5 Pro": {
        "single": (-0.0084, 0.00546, -0.5349, 0.0244),
        "standard": (-0.0086, 6.45e-5, -0.1656, 0.204),
        "unique": (-0.0055, 0.0333, -0.2761, 0.151),
    },
    "o4-mini": {
        "single": (-0.0186, 7.81e-5, -0.7154, 0.0312),
        "standard": (-0.0102, 1.1e-5, -0.3925, 0.0142),
        "unique": (-0.0033, 0.189, -0.0519, 0.782),
    },
    "Claude Sonnet 3.7": {
        "single": (-0.0106, 0.00328, -0.9305, 0.0102),
        "standard": (-0.0092, 4.62e-5, -0.2021, 0.153),
        "unique": (-0.0097, 6.94e-4, -0.1130, 0.561),
    },
    "Claude Sonnet 4": {
        "single": (-0.0134, 6.94e-4, -0.5653, 0.0561),
        "standard": (-0.0123, 7.65e-7, -0.0420, 0.749),
        "unique": (-0.0097, 0.00106, -0.7260, 0.00853),
    },
}
TABLE2: tuple[Reference, ...] = tuple(
    ref
    for model, rows in _TABLE2.items()
    for variant, (d, pd_, c, pc) in rows.items()
    for ref in (
        Reference("circuits", variant, model, "log_odds_distance", d, "Table 2", f"p = {pd_:g}"),
        Reference("circuits", variant, model, "log_odds_crossings", c, "Table 2", f"p = {pc:g}"),
    )
)


def references(
    task: str | None = None, variant: str | None = None, metric: str | None = None
) -> list[Reference]:
    """Published numbers (accuracies and Table 2 coefficients), filtered by task, variant, metric."""
    return [
        r
        for r in REFERENCES + TABLE2
        if (task is None or r.task == task)
        and (variant is None or r.variant in (variant, "all"))
        and (metric is None or r.metric == metric)
    ]


def chance(task: str, variant: str) -> float:
    """The paper's chance accuracy (%) for a task variant (decomposed hunt: 1/11 like the others)."""
    if task == "scavenger_hunt":
        return 100 / 11
    hits = [r.value for r in references(task, variant, "accuracy") if r.who == "chance"]
    if not hits:
        raise ValueError(f"no chance level for {task}/{variant}")
    return hits[0]
