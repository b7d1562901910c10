"""Published Percept-V numbers (seed 004, ``seeds/perceptv_paper.txt``), each table with its source."""

from __future__ import annotations

MODELS = (
    "GPT-5-mini",
    "GPT-4o",
    "o4-mini",
    "Gemini 2.5 Flash",
    "Qwen2.5-VL-7B",
    "DeepSeek-VL2-Tiny",
)
ONE_SHOT_MODELS = MODELS[:4]

SKILLS = (
    "discrimination",
    "memory",
    "sequential_memory",
    "figure_ground",
    "form_constancy",
    "closure",
    "spatial_relationship",
)
SKILL_NAMES = {
    "discrimination": "Visual Discrimination",
    "memory": "Visual Memory",
    "sequential_memory": "Visual Sequential Memory",
    "figure_ground": "Visual Figure Ground",
    "form_constancy": "Visual Form Constancy",
    "closure": "Visual Closure",
    "spatial_relationship": "Visual Spatial Relationship",
}

# Table 1: the domains that require each skill (a domain counts in every skill it lists).
SKILL_DOMAINS: dict[str, tuple[str, ...]] = {
    "discrimination": (
        "change_colour",
        "vanishing_objects",
        "comparing_size",
        "counting_shapes",
        "sort_lines",
        "sort_circles",
        "locate_circles_colour",
        "locate_circles_shape",
        "match_shadow",
        "match_outline",
    ),
    "memory": (
        "list_colours",
        "list_shapes",
        "circle_boxes",
        "colours_present",
        "count_coloured_circles",
        "numbered_shapes",
        "graph_counting",
        "sort_circles",
        "sort_lines",
        "counting_shapes",
        "identifying_shapes",
    ),
    "sequential_memory": (
        "grid_path",
        "layered_colours",
        "layered_shapes",
        "comparing_size",
        "match_outline",
        "match_shadow",
    ),
    "figure_ground": (
        "list_colours",
        "list_shapes",
        "locate_circles_colour",
        "locate_circles_shape",
        "layered_shapes",
        "layered_colours",
    ),
    "form_constancy": (
        "mirror_image",
        "water_image",
        "counting_circles",
        "counting_shapes",
        "numbered_shapes",
    ),
    "closure": ("match_outline", "match_shadow", "layered_shapes", "layered_colours"),
    "spatial_relationship": (
        "comparing_size",
        "circle_location",
        "circle_right_triangle",
        "counting_locations",
        "cross_and_knots",
        "inside_circles",
        "maze_solving",
    ),
}

# Sec. 4.3: the 13 domains that use counting (the list is ours; it reproduces GPT-5-mini's C = 47.73).
COUNTING_DOMAINS = (
    "change_colour",
    "circle_boxes",
    "circle_location",
    "count_coloured_circles",
    "counting_circles",
    "counting_locations",
    "counting_shapes",
    "graph_counting",
    "match_outline",
    "match_shadow",
    "mirror_image",
    "vanishing_objects",
    "water_image",
)

# Table 3 (zero-shot, temperature 0): per-domain accuracy, one value per model in MODELS order.
TABLE3_DOMAINS: dict[str, tuple[float, ...]] = {
    "change_colour": (32.0, 18.5, 32.0, 23.5, 8.0, 4.5),
    "circle_boxes": (30.0, 33.0, 34.0, 28.0, 12.5, 10.5),
    "circle_location": (56.5, 41.5, 46.0, 57.5, 14.5, 5.5),
    "circle_right_triangle": (100.0, 82.0, 99.5, 99.0, 25.0, 50.0),
    "colours_present": (3.5, 1.5, 4.5, 4.5, 0.0, 0.0),
    "comparing_size": (27.0, 36.5, 31.0, 55.0, 5.0, 0.0),
    "count_coloured_circles": (51.0, 44.0, 37.5, 44.5, 39.0, 2.5),
    "counting_circles": (68.0, 57.5, 55.0, 55.5, 42.5, 5.5),
    "counting_locations": (44.5, 20.5, 36.5, 33.5, 15.5, 0.0),
    "counting_shapes": (72.5, 44.0, 58.5, 61.0, 41.0, 0.0),
    "cross_and_knots": (99.5, 57.5, 100.0, 96.0, 23.5, 0.0),
    "graph_counting": (39.0, 31.0, 33.5, 36.0, 26.0, 0.0),
    "grid_path": (54.5, 0.5, 53.0, 23.5, 0.0, 0.0),
    "identifying_shapes": (79.5, 69.0, 92.5, 47.0, 41.5, 0.0),
    "inside_circles": (96.0, 87.5, 95.5, 93.0, 96.5, 68.0),
    "layered_colours": (35.0, 25.0, 33.5, 34.0, 0.5, 0.0),
    "layered_shapes": (24.0, 11.5, 20.0, 18.5, 9.5, 0.0),
    "list_colours": (41.0, 18.0, 35.5, 58.0, 1.5, 0.5),
    "list_shapes": (88.5, 70.5, 90.5, 92.0, 21.0, 0.0),
    "locate_circles_colour": (100.0, 11.5, 100.0, 82.0, 6.0, 0.0),
    "locate_circles_shape": (100.0, 16.0, 100.0, 92.5, 7.0, 0.0),
    "match_outline": (66.0, 23.0, 84.5, 72.5, 7.5, 17.0),
    "match_shadow": (54.5, 32.5, 63.0, 48.0, 5.5, 14.5),
    "maze_solving": (43.0, 27.0, 30.0, 54.5, 14.5, 0.0),
    "mirror_image": (33.5, 12.5, 29.0, 24.0, 21.5, 5.0),
    "numbered_shapes": (81.5, 12.0, 75.5, 88.5, 8.0, 1.0),
    "sort_circles": (36.5, 24.0, 34.0, 30.0, 20.0, 0.0),
    "sort_lines": (26.5, 22.0, 27.0, 22.5, 5.0, 0.0),
    "vanishing_objects": (35.0, 9.0, 23.0, 25.5, 10.0, 5.0),
    "water_image": (38.0, 10.5, 26.5, 22.5, 15.0, 3.5),
}

# Table 3: skill rows, "Average of skills" and "Full Percept-V Dataset" as printed.
TABLE3_SUMMARY: dict[str, tuple[float, ...]] = {
    "Visual Discrimination": (55.0, 23.7, 55.3, 51.25, 11.5, 4.1),
    "Visual Memory": (49.95, 33.55, 47.55, 46.55, 19.59, 1.32),
    "Visual Sequential Memory": (43.5, 21.5, 47.5, 41.92, 4.67, 5.25),
    "Visual Figure Ground": (64.75, 25.42, 63.25, 62.83, 7.58, 0.08),
    "Visual Form Constancy": (58.7, 27.3, 48.9, 50.3, 25.6, 3.0),
    "Visual Closure": (44.88, 23.0, 50.25, 43.25, 5.75, 7.88),
    "Visual Spatial Relationship": (66.64, 50.36, 62.64, 69.79, 27.79, 17.64),
    "Average of skills": (54.77, 29.26, 53.63, 52.27, 14.64, 5.61),
    "Full Percept-V Dataset": (55.22, 31.65, 52.7, 50.75, 18.1, 6.43),
}

# Table 4: format errors (% of replies not following the output format) by answer type.
TABLE4_FORMAT_ERRORS: dict[str, tuple[float, ...]] = {
    "single": (0.14, 0.00, 0.00, 0.00, 0.00, 3.68),
    "fixed": (0.00, 0.00, 0.17, 0.83, 5.18, 61.58),
    "list": (2.19, 0.00, 0.00, 0.00, 0.00, 22.44),
    "set": (0.00, 0.00, 0.10, 0.20, 19.10, 60.00),
}

# Table 6 (Appendix A.7, one-shot; the table has no locate_circles_shape row).
TABLE6_DOMAINS: dict[str, tuple[float, ...]] = {
    "change_colour": (30.15, 11.5, 24.62, 21.11),
    "circle_boxes": (26.63, 21.5, 28.64, 24.12),
    "circle_location": (55.78, 13.0, 48.24, 54.27),
    "circle_right_triangle": (100.0, 59.0, 100.0, 96.48),
    "colours_present": (4.02, 1.5, 5.03, 1.01),
    "comparing_size": (17.59, 2.5, 23.62, 36.18),
    "count_coloured_circles": (41.71, 16.5, 35.68, 46.73),
    "counting_circles": (57.79, 23.5, 48.74, 53.27),
    "counting_locations": (35.68, 9.0, 35.18, 28.64),
    "counting_shapes": (60.8, 20.2, 50.75, 56.28),
    "cross_and_knots": (100.0, 21.0, 100.0, 91.46),
    "graph_counting": (33.17, 3.0, 27.14, 31.16),
    "grid_path": (51.76, 0.5, 46.23, 0.5),
    "identifying_shapes": (67.84, 41.5, 91.46, 51.76),
    "inside_circles": (94.97, 52.0, 92.96, 95.48),
    "layered_colours": (31.16, 25.0, 34.17, 24.62),
    "layered_shapes": (21.11, 12.5, 19.1, 19.1),
    "list_colours": (40.7, 12.0, 40.7, 36.18),
    "list_shapes": (91.96, 68.5, 91.96, 82.91),
    "locate_circles_colour": (99.5, 1.0, 98.49, 63.32),
    "match_outline": (58.79, 17.5, 79.4, 71.86),
    "match_shadow": (51.26, 16.0, 70.35, 48.24),
    "maze_solving": (48.24, 15.0, 31.16, 46.23),
    "mirror_image": (30.15, 17.5, 27.14, 20.1),
    "numbered_shapes": (81.91, 9.5, 77.39, 53.77),
    "sort_circles": (34.67, 16.5, 33.17, 25.63),
    "sort_lines": (28.64, 19.5, 23.62, 23.62),
    "vanishing_objects": (34.17, 6.0, 22.11, 22.61),
    "water_image": (34.67, 12.5, 24.12, 20.1),
}
TABLE6_SUMMARY: dict[str, tuple[float, ...]] = {
    "Visual Discrimination": (51.46, 11.17, 52.51, 43.57),
    "Visual Memory": (46.55, 20.93, 45.96, 39.38),
    "Visual Sequential Memory": (38.61, 12.33, 45.48, 33.42),
    "Visual Figure Ground": (63.9, 20.0, 63.9, 48.83),
    "Visual Form Constancy": (53.06, 16.64, 45.63, 40.7),
    "Visual Closure": (40.58, 17.75, 50.76, 40.96),
    "Visual Spatial Relationship": (64.61, 24.5, 61.59, 64.11),
    "Average of skills": (51.25, 17.62, 52.26, 44.42),
}

# Sec. 4.3: counting (C) vs non-counting (NC) domain means.
COUNTING_SPLIT: dict[str, tuple[float, float]] = {
    "GPT-4o": (29.03, 32.13),
    "GPT-5-mini": (47.73, 58.54),
    "o4-mini": (42.99, 58.44),
    "Gemini 2.5 Flash": (40.92, 55.22),
    "Qwen2.5-VL-7B": (19.88, 15.93),
    "DeepSeek-VL2-Tiny": (5.65, 6.88),
}

# Table 5 (Appendix A.2) and Sec. 4.4: the human study (16 participants, a random subset of items;
# the models were scored on the same items).
HUMAN_STUDY_OVERALL: dict[str, float] = {
    "GPT-5-mini": 56.81,
    "GPT-4o": 31.94,
    "o4-mini": 56.83,
    "Gemini 2.5 Flash": 55.58,
    "Qwen2.5-VL-7B": 14.69,
    "DeepSeek-VL2-Tiny": 7.08,
    "Human": 95.43,
}
HUMAN_STUDY_NOTES: dict[str, float] = {
    "spatial_relationship/Human": 96.42,  # Sec. 4.4
    "spatial_relationship/Gemini 2.5 Flash": 73.08,  # Sec. 4.4
    "colours_present/Human": 90.0,  # Sec. 4.4
    "colours_present/best model": 6.67,  # Sec. 4.4
}


def domain_accuracy(model: str, table: str = "zero_shot") -> dict[str, float]:
    """One model's per-domain accuracy (%) from Table 3 (``zero_shot``) or Table 6 (``one_shot``)."""
    models, rows = (
        (MODELS, TABLE3_DOMAINS) if table == "zero_shot" else (ONE_SHOT_MODELS, TABLE6_DOMAINS)
    )
    try:
        k = models.index(model)
    except ValueError:
        raise ValueError(f"unknown model {model!r}; expected one of {models}") from None
    return {d: v[k] for d, v in rows.items()}


def summary(model: str, table: str = "zero_shot") -> dict[str, float]:
    """One model's printed skill scores, ``average_of_skills`` and ``full_dataset``."""
    models, rows = (
        (MODELS, TABLE3_SUMMARY) if table == "zero_shot" else (ONE_SHOT_MODELS, TABLE6_SUMMARY)
    )
    k = models.index(model)
    out = {s: rows[SKILL_NAMES[s]][k] for s in SKILLS}
    out["average_of_skills"] = rows["Average of skills"][k]
    if "Full Percept-V Dataset" in rows:
        out["full_dataset"] = rows["Full Percept-V Dataset"][k]
    return out
