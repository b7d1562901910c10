"""Issue 51: ``--map`` reads nested JSON fields (dotted paths, constant subscripts), never as code."""

from __future__ import annotations

import json

import pytest

from bayesobs.cli import main
from bayesobs.errors import BayesobsInputError
from bayesobs.expr import ExpressionError, parse
from bayesobs.trials import read_trials

RATIOS = [0.3, 0.55, 0.8, 0.42]
REPLIES = ["0.30", "0.5", "0.75", "0.4"]


def _lm_eval(path):
    """An lm-eval-harness samples file (its ``samples_TASK_*.jsonl`` fields) of four docs."""
    with path.open("w") as f:
        for i, (ratio, reply) in enumerate(zip(RATIOS, REPLIES, strict=True)):
            f.write(
                json.dumps(
                    {
                        "doc_id": i,
                        "doc": {"ratio": ratio, "question": "How long is line B?"},
                        "target": str(ratio),
                        "arguments": [["How long is line B?", {"until": ["\n"]}]],
                        "resps": [[reply]],
                        "filtered_resps": [reply],
                        "exact_match": 0.0,
                    }
                )
                + "\n"
            )
    return path


def test_an_lm_eval_samples_file_maps_its_nested_fields(tmp_path):
    path = _lm_eval(tmp_path / "samples_lines.jsonl")
    for stim in ("doc.ratio", "doc['ratio']"):
        df = read_trials(path, {"stimulus": stim, "response": "filtered_resps[0]"})
        assert df["stimulus"].tolist() == RATIOS
        assert df["response"].tolist() == [float(r) for r in REPLIES]
    df = read_trials(path, {"stimulus": "doc.ratio", "response": "resps[0][0]"})
    assert df["response"].tolist() == [float(r) for r in REPLIES]
    # a path inside arithmetic: numbers stay numbers
    df = read_trials(path, {"stimulus": "doc.ratio * 100", "response": "filtered_resps[-1]"})
    assert df["stimulus"].tolist() == pytest.approx([100 * r for r in RATIOS])


def test_a_list_without_its_index_is_still_not_a_number(tmp_path):
    path = _lm_eval(tmp_path / "samples.jsonl")
    with pytest.raises(BayesobsInputError, match=r"\['0.30'\] is not a number"):
        read_trials(path, {"stimulus": "doc.ratio", "response": "filtered_resps"})


def test_a_jatos_style_nested_json_lines_file_and_json_text_cells(tmp_path):
    """Dicts in the JSON, and a cell holding JSON text (as JATOS stores a component's result)."""
    path = tmp_path / "jatos.jsonl"
    rows = [
        {"a": {"b": [0, 1, {"c": 2.0 + i}]}, "data": json.dumps({"resp": {"value": [2.1 + i]}})}
        for i in range(3)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    df = read_trials(path, {"stimulus": "a.b[2].c", "response": "data.resp['value'][0]"})
    assert df["stimulus"].tolist() == [2.0, 3.0, 4.0]
    assert df["response"].tolist() == pytest.approx([2.1, 3.1, 4.1])


@pytest.mark.parametrize(
    ("stim", "words"),
    [
        ("doc.size", "row 3: doc.size: no key 'size'"),
        ("filtered_resps[5]", "row 3: filtered_resps[5]: index 5 out of range"),
        ("doc.ratio.x", "row 3: doc.ratio.x: 0.8 holds no fields"),
    ],
)
def test_a_missing_key_or_index_names_the_row_and_the_path(tmp_path, capsys, stim, words):
    path = tmp_path / "s.jsonl"
    lines = [json.loads(x) for x in _lm_eval(path).read_text().splitlines()]
    if stim == "doc.size":
        for r in lines[:2]:
            r["doc"]["size"] = 1
    elif stim == "filtered_resps[5]":
        for r in lines[:2]:
            r["filtered_resps"] = [0] * 6
    else:
        for r in lines[:2]:
            r["doc"]["ratio"] = {"x": 1}
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    out = tmp_path / "o"
    code = main(["fit", str(path), "--out", str(out), "--map", f"stimulus={stim}"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert f"{path}, {words}" in err, err


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("doc.__class__", "'__class__': names starting with '__'"),
        ("doc.keys()", "only the functions"),
        ("doc[ratio]", "a subscript is a constant"),
        ("abs(a)[0]", "subscripts and fields read data"),
        ("abs(a).real", "subscripts and fields read data"),
        ("doc['__class__']", "names starting with '__'"),
    ],
)
def test_paths_stay_inside_the_grammar(text, words):
    with pytest.raises(ExpressionError, match=words.replace("(", r"\(").replace(")", r"\)")):
        parse(text)


def test_the_docs_lm_eval_command_runs_as_written(tmp_path, monkeypatch):
    """docs/human-data.md "Nested logs": its command, on a samples file of that name."""
    import shlex

    from docs_pages import commands, fenced_blocks, page, section

    text = section(page("human-data.md"), "Fitting someone else's export")
    line = next(x for b in fenced_blocks(text) for x in commands(b) if "filtered_resps" in x)
    monkeypatch.chdir(tmp_path)
    argv = shlex.split(line)[1:]
    _lm_eval(tmp_path / argv[1])
    assert main([*argv, "--bootstrap", "2"]) == 0
    assert (tmp_path / "fit" / "fits.csv").exists()
