"""--participants: a Prolific (or any) participant export joined onto the trials (issue 52)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import make_cell
from test_compare import planted  # noqa: F401 - three score folders and their features

from bayesobs.cli import main
from bayesobs.demographics import join_participants

PROLIFIC = """Submission id,PROLIFIC_PID,Status,Age,Sex,Ethnicity simplified
s1,5f1a,APPROVED,34,Female,White
s2,5f2b,APPROVED,17,Male,Asian
s3,9zzz,RETURNED,40,Male,Black
"""


def _trials(tmp_path):
    rng = np.random.default_rng(1)
    cells = [make_cell(rng, n_per=12, subject=s, task="line_ratio") for s in ("5f1a", "5f2b", "x9")]
    pd.concat(cells).to_csv(tmp_path / "t.csv", index=False)
    (tmp_path / "prolific.csv").write_text(PROLIFIC)
    return tmp_path / "t.csv", tmp_path / "prolific.csv"


def test_demographics_become_trial_columns_and_unmatched_ids_are_counted(tmp_path):
    trials, people = _trials(tmp_path)
    t = pd.read_csv(trials)
    with pytest.warns(UserWarning, match=r"1 of 3 participant\(s\) .* no row"):
        j = join_participants(t, people)
    assert len(j) == len(t)  # a join never adds nor drops a trial
    ages = j.groupby("subject")["Age"].first()
    assert ages["5f1a"] == 34 and ages["5f2b"] == 17 and np.isnan(ages["x9"])
    assert set(j.loc[j["subject"] == "5f2b", "Ethnicity_simplified"]) == {"Asian"}
    assert "PROLIFIC_PID" not in j.columns and j["Age"].dtype.kind == "f"


def test_fit_excludes_by_a_demographic_column(tmp_path, capsys):
    trials, people = _trials(tmp_path)
    args = ["fit", str(trials), "--out", str(tmp_path / "o"), "--participants", str(people)]
    with pytest.warns(UserWarning, match="1 of 3"):  # x9 took part elsewhere
        assert main([*args, "--exclude", "Age < 18"]) == 0
    table = pd.read_csv(tmp_path / "o" / "exclusions.csv", dtype={"subject": str})
    hit = table[table["rule"] == "Age < 18"]  # the 17-year-old's 36 trials, no one else's
    assert hit[["subject", "trials"]].values.tolist() == [["5f2b", 36]]


def test_a_participant_file_without_the_id_column_is_one_line_exit_2(tmp_path, capsys):
    trials, people = _trials(tmp_path)
    args = ["fit", str(trials), "--out", str(tmp_path / "o"), "--participants", str(people)]
    assert main([*args, "--participants-id", "participant_id"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no participant-id column 'participant_id'" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.slow  # ~4 s: the mixed models of three score folders
def test_compare_takes_the_participant_export_as_its_features(planted, tmp_path):  # noqa: F811
    """compare --participants FILE equals --features with the id column named subject."""
    folders, path, features = planted
    people = features.rename(columns={"subject": "PROLIFIC_PID"})
    people.to_csv(tmp_path / "prolific.csv", index=False)
    runs = {"f": ["--features", str(path)], "p": ["--participants", str(tmp_path / "prolific.csv")]}
    for name, how in runs.items():
        assert main(["compare", *map(str, folders), *how, "--out", str(tmp_path / name)]) == 0
    got, want = (pd.read_csv(tmp_path / k / "compare.csv") for k in ("p", "f"))
    pd.testing.assert_frame_equal(got, want)


@pytest.mark.slow  # ~8 s: scores and figures of a report
def test_report_joins_the_participant_export(tmp_path):
    trials, people = _trials(tmp_path)
    args = ["report", str(trials), "--out", str(tmp_path / "r"), "--bootstrap", "2"]
    with pytest.warns(UserWarning, match="1 of 3"):
        assert main([*args, "--participants", str(people)]) == 0
    assert (tmp_path / "r" / "index.html").exists()
