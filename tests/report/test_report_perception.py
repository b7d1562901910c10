"""Figure labels never overlap one another or the legend (issue 25.4)."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

from bayesobs.paradigms import by_name
from bayesobs.perceptv import plots
from bayesobs.perceptv.published import SKILLS
from bayesobs.report.perception import accuracy_by_variant, perception_sections, published_lines


def _boxes(fig):
    """Window extents of every visible, non-empty text of the figure (legend texts included)."""
    FigureCanvasAgg(fig)
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    found = fig.findobj(lambda a: isinstance(a, Text) and a.get_visible())
    texts = list({id(t): t for t in found}.values())
    return [(t.get_text(), t.get_window_extent(renderer)) for t in texts if t.get_text().strip()]


def _overlaps(fig):
    boxes = _boxes(fig)
    return [(a, b) for (a, ba), (b, bb) in itertools.combinations(boxes, 2) if ba.overlaps(bb)]


def _accuracy_table():
    rows = []
    for subject in ("model-a", "model-b"):
        for v in ("standard", "unconnected", "pixel_perfect"):
            rows.append(
                {
                    "subject": subject,
                    "task": "object_reid",
                    "modality": "image",
                    "condition": "base",
                    "variant": v,
                    "accuracy": 0.7,
                    "lo": 0.6,
                    "hi": 0.8,
                    "chance": 0.5,
                }
            )
    return pd.DataFrame(rows)


def test_tunnel_vision_reference_labels_sit_in_the_legend_not_on_the_plot():
    fig = accuracy_by_variant(_accuracy_table(), "object_reid", published_lines("object_reid"))
    ax = fig.axes[0]
    assert not ax.texts  # no labels drawn beside the lines
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"human", "paper: GPT-5", "paper: Claude Sonnet 4"} <= set(legend)
    assert _overlaps(fig) == []
    renderer = fig.canvas.get_renderer()
    assert not ax.get_legend().get_window_extent(renderer).overlaps(ax.get_window_extent(renderer))


def test_percept_v_domain_bars_have_readable_labels():
    domains = [f"domain_number_{k}_long_name" for k in range(12)]
    t = pd.concat([_accuracy_table().iloc[:1].assign(task="percept_v", variant=d) for d in domains])
    fig = accuracy_by_variant(t, "percept_v")
    assert _overlaps(fig) == []


def test_percept_v_skill_labels_do_not_overlap():
    keys = [*SKILLS, "average_of_skills"]
    skills = pd.DataFrame(
        [{"subject": s, "skill": k, "accuracy": 50.0} for s in ("m1", "m2") for k in keys]
    )
    fig = plots.plot_skills(skills)
    assert _overlaps(fig) == []


def test_percept_v_has_one_problem_size_section(tmp_path):
    size = pd.DataFrame(
        [
            {
                "subject": "m1",
                "task": "percept_v",
                "modality": "image",
                "variant": dom,
                "problem_size": n,
                "accuracy": 0.5,
                "chance": 0.1,
            }
            for dom in ("counting", "maze")
            for n in (1, 3, 5)
        ]
    )
    acc = size.groupby(["subject", "task", "modality", "variant"], as_index=False)[
        ["accuracy", "chance"]
    ].mean()
    acc = acc.assign(condition="base", lo=0.4, hi=0.6)
    (tmp_path / "figures").mkdir()
    res = SimpleNamespace(
        perception=acc,
        perception_size=size,
        perception_f1=None,
        perception_chain=None,
        perception_effects=None,
        perceptv_skills=None,
    )

    def save(fig, path):
        fig.savefig(path)
        return path.name

    _, sections = perception_sections(res, tmp_path, save, lambda df: "")
    assert not [t for t, _, _ in sections if "Percept-V" in t]  # Percept-V's own hook draws it
    tables = {k: v for k, v in vars(res).items() if v is not None}
    sections = [  # both paradigms' report hooks, as the report calls them
        section
        for name in ("perception", "perceptv")
        for section in by_name(name).report_parts(tables, None, tmp_path, save, str)[1]
    ]
    titles = [t for t, _, _ in sections if "size" in t]
    assert titles == ["Percept-V: accuracy against problem size"]
