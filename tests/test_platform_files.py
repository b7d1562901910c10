"""Platform files read directly (issue 52): JATOS's .jrzip and data-only .txt, partial + final data."""

from __future__ import annotations

import json
import zipfile

import pytest

import bayesobs
from bayesobs.cli import main


def _trial(i: int, subject: str = "p1") -> dict:
    """One trial row as the jsPsych export records it."""
    return {
        "trial_type": "survey-html-form",
        "trial_index": 4 + i,
        "time_elapsed": 1000 * (i + 1),
        "bayesobs_trial": True,
        "subject": subject,
        "task": "line_ratio",
        "modality": "text",
        "condition": "base",
        "session": "short",
        "run": 0,
        "trial": i,
        "stimulus": 0.1 + 0.02 * i,
        "response": {"response": f"{0.2 + 0.01 * i:.2f}"},
        "rt": 1500,
    }


def _extra() -> dict:
    return {"trial_type": "html-button-response", "trial_index": 0, "time_elapsed": 5}


def _appended(rows) -> str:
    """A result's data as appendResultData leaves it: one JSON object per trial, one a line."""
    return "".join(json.dumps(r) + "\n" for r in rows)


def test_jatos_data_only_txt_reads_whole_arrays_and_appended_trials(tmp_path):
    p1 = [_extra(), *(_trial(i, "p1") for i in range(5))]
    p2 = [_trial(i, "p2") for i in range(3)]  # quit after 3: only the appended lines
    txt = tmp_path / "jatos_results_data_20261128.txt"
    txt.write_text(json.dumps(p1) + "\n" + _appended(p2))
    t = bayesobs.read_trials(txt)
    assert sorted(t.groupby("subject").size().items()) == [("p1", 5), ("p2", 3)]
    assert sorted(t.loc[t["subject"] == "p2", "response"]) == pytest.approx([0.2, 0.21, 0.22])


def test_partial_and_final_data_of_one_result_neither_drop_nor_double(tmp_path):
    rows = [_trial(i) for i in range(6)]
    # the per-trial appends arrived, then the whole array (a final append, or an older jatos.js)
    txt = tmp_path / "data.txt"
    txt.write_text(_appended(rows[:4]) + json.dumps([_extra(), *rows]) + "\n")
    t = bayesobs.read_trials(txt)
    assert sorted(t["trial"].astype(int)) == list(range(6))


def test_datapipe_block_files_and_the_final_file_read_together_once(tmp_path):
    rows = [_trial(i) for i in range(6)]
    (tmp_path / "p1_1_part0.json").write_text(json.dumps(rows[:3]))
    (tmp_path / "p1_1_part1.json").write_text(json.dumps(rows[3:]))
    (tmp_path / "p1_1.json").write_text(json.dumps([_extra(), *rows]))
    t = bayesobs.read_trials(sorted(tmp_path.glob("*.json")))
    assert sorted(t["trial"].astype(int)) == list(range(6))


def _jrzip(path, results: dict[int, str]):
    """A .jrzip as JATOS exports it: study_result_<id>/comp-result_<id>/data.txt per result."""
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("metadata.json", json.dumps({"apiVersion": "1.0.1", "data": []}))
        for k, text in results.items():
            z.writestr(f"study_result_{k}/comp-result_{100 + k}/data.txt", text)
            z.writestr(f"study_result_{k}/comp-result_{100 + k}/files/", "")
    return path


def test_jatos_jrzip_reads_every_result_folder(tmp_path):
    a = json.dumps([_extra(), *(_trial(i, "a") for i in range(4))])
    b = _appended(_trial(i, "b") for i in range(2))
    z = _jrzip(tmp_path / "jatos_results_20261128.jrzip", {1: a, 2: b})
    t = bayesobs.read_trials(z)
    assert sorted(t.groupby("subject").size().items()) == [("a", 4), ("b", 2)]
    assert main(["fit", str(z), "--out", str(tmp_path / "fit")]) == 0


@pytest.mark.parametrize(
    ("name", "content", "says"),
    [
        ("bad.jrzip", b"PK\x03\x04 not really a zip", "not a zip archive"),
        ("empty.jrzip", None, "no data.txt"),
        ("bad.txt", b'[{"a": 1}]\n{"trial": 2, oops\n', "line 2"),
    ],
)
def test_malformed_platform_files_are_one_line_exit_2(tmp_path, capsys, name, content, says):
    p = tmp_path / name
    if content is None:
        with zipfile.ZipFile(p, "w") as z:
            z.writestr("metadata.json", "{}")
    else:
        p.write_bytes(content)
    assert main(["fit", str(p), "--out", str(tmp_path / "fit")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and says in err and "Traceback" not in err
    assert not (tmp_path / "fit").exists()


def test_pavlovia_csv_reads_as_it_comes_off_the_platform(tmp_path):
    """jsPsych's CSV (Pavlovia's save, also of incomplete results): answers as JSON texts."""
    import pandas as pd

    rows = [_extra(), *(_trial(i) for i in range(4))]
    for r in rows:
        if "response" in r:
            r["response"] = json.dumps(r["response"])
    p = tmp_path / "line_ratio_p1_SESSION_2026-11-28_14h03.07.123.csv"
    pd.DataFrame.from_records(rows).to_csv(p, index=False)
    t = bayesobs.read_trials(p)
    assert sorted(t["response"]) == pytest.approx([0.2, 0.21, 0.22, 0.23])
