"""Catch trials and preregistered exclusion rules: `--exclude` and exclusions.csv."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import make_cell

from bayesobs.cli import main
from bayesobs.errors import BayesobsInputError
from bayesobs.exclusions import exclude, parse_rule, participant_measures


def _study(seed=0):
    """Four participants (static observers), response times, and catch trials.

    Participant 3 fails most catch trials, participant 2 one of four; every participant has a few
    anticipations (rt_ms < 200).  Catch trials carry ``catch`` and ``correct``
    as the web app logs them, with their own trial numbers.
    """
    rng = np.random.default_rng(seed)
    frames = []
    for s in ("1", "2", "3", "10"):
        cell = make_cell(rng, "static", {"w_prior": 0.4, "sigma": 0.03}, subject=s)
        cell["trial"] = cell.groupby("session").cumcount()
        cell["rt_ms"] = rng.uniform(150, 2500, len(cell)).round()
        catch = pd.DataFrame(
            {
                "session": ["s0"] * 4,
                "stimulus": [0.5] * 4,
                "response": [0.5, 0.5, 0.1, 0.5],
                "subject": s,
                "trial": [100, 101, 102, 103],
                "rt_ms": 900.0,
                "catch": True,
                "correct": {"3": [False, False, False, True], "2": [True, True, False, True]}.get(
                    s, [True] * 4
                ),
            }
        )
        frames += [cell, catch]
    return pd.concat(frames, ignore_index=True)


def _reference(df):
    """The exclusions done by hand: no catch trial, no participant 3, fast trials missing."""
    ref = df[df["catch"] != True].copy()  # noqa: E712 - NaN-safe
    ref = ref[ref["subject"] != "3"].copy()
    ref.loc[ref["rt_ms"] < 200, "response"] = np.nan
    return ref.drop(columns=["catch", "correct"])


def test_rules_are_a_grammar_never_python():
    assert parse_rule("  catch_error_rate>0.2 ").text == "catch_error_rate>0.2"
    r = parse_rule("rt_ms < 2e2")
    assert (r.name, r.op, r.value, r.level) == ("rt_ms", "<", 200.0, "trial")
    for bad in (
        "__import__('os').system('x') > 1",
        "rt_ms.__class__ < 1",
        "rt_ms < 200 or 1",
        "abs(rt_ms) < 200",
        "rt_ms < nan",
        "rt_ms < inf",
        "",
    ):
        with pytest.raises(BayesobsInputError, match="expected NAME OP NUMBER"):
            parse_rule(bad)


def test_participant_measures_against_a_hand_count():
    df = _study()
    m = participant_measures(df).set_index("subject")
    assert m.loc["3", "catch_error_rate"] == pytest.approx(0.75)
    assert m.loc["2", "catch_error_rate"] == pytest.approx(0.25)
    assert m.loc["1", "catch_error_rate"] == 0
    assert m.loc["10", "catch_trials"] == 4 and m.loc["10", "trials"] == 120
    fast = df[(df["subject"] == "2") & (df["catch"] != True)]  # noqa: E712
    assert m.loc["2", "median_rt_ms"] == pytest.approx(fast["rt_ms"].median())


def test_median_rt_ms_of_a_served_study_is_read_from_the_browser_times():
    """`serve` logs rt_client_s (seconds), not rt_ms: median_rt_ms must not be NaN there."""
    df = _study()
    served = df.assign(rt_client_s=df["rt_ms"] / 1000).drop(columns="rt_ms")
    m = participant_measures(served).set_index("subject")
    fast = df[(df["subject"] == "2") & (df["catch"] != True)]  # noqa: E712
    assert m.loc["2", "median_rt_ms"] == pytest.approx(fast["rt_ms"].median())
    medians = df[df["catch"] != True].groupby("subject")["rt_ms"].median()  # noqa: E712
    cut = float(medians.median())  # about half the participants are slower
    assert 0 < (medians > cut).sum() < len(medians)
    table = exclude(served, [f"median_rt_ms > {cut}"]).table
    assert set(table.loc[table["level"] == "participant", "subject"]) == set(
        medians.index[medians > cut]
    )


def test_fit_with_exclusions_equals_the_fit_of_the_data_excluded_by_hand(tmp_path, capsys):
    df = _study()
    df.to_csv(tmp_path / "t.csv", index=False)
    _reference(df).to_csv(tmp_path / "ref.csv", index=False)
    rules = ["--exclude", "catch_error_rate > 0.5", "--exclude", "rt_ms < 200"]
    assert main(["fit", str(tmp_path / "t.csv"), "--out", str(tmp_path / "o"), *rules]) == 0
    out = " ".join(capsys.readouterr().out.split())  # unwrapped
    assert "catch_error_rate > 0.5: 1 participant(s) (3), 120 trial(s)" in out
    assert main(["fit", str(tmp_path / "ref.csv"), "--out", str(tmp_path / "r")]) == 0
    got = pd.read_csv(tmp_path / "o" / "fits.csv")
    ref = pd.read_csv(tmp_path / "r" / "fits.csv")
    pd.testing.assert_frame_equal(got, ref)
    assert "3" not in set(got["subject"].astype(str))
    table = pd.read_csv(tmp_path / "o" / "exclusions.csv", dtype={"subject": str})
    assert list(table.columns) == ["subject", "rule", "level", "value", "trials"]
    part = table[table["level"] == "participant"]
    assert part[["subject", "rule", "trials"]].values.tolist() == [
        ["3", "catch_error_rate > 0.5", 120]
    ]
    assert part["value"].iloc[0] == pytest.approx(0.75)
    fast = table[table["level"] == "trial"].set_index("subject")["trials"]
    expect = (
        df[(df["catch"] != True) & (df["subject"] != "3") & (df["rt_ms"] < 200)]  # noqa: E712
        .groupby("subject")
        .size()
    )
    assert fast.sort_index().to_dict() == expect.sort_index().to_dict()
    catch = table[table["level"] == "catch"]
    assert sorted(catch["subject"]) == ["1", "10", "2", "3"] and (catch["trials"] == 4).all()
    manifest = json.loads((tmp_path / "o" / "fit_manifest.json").read_text())
    assert manifest["exclude"] == ["catch_error_rate > 0.5", "rt_ms < 200"]


def test_catch_trials_are_never_fitted_even_without_rules(tmp_path):
    df = _study()
    df.to_csv(tmp_path / "t.csv", index=False)
    df[df["catch"] != True].drop(columns=["catch", "correct"]).to_csv(  # noqa: E712
        tmp_path / "ref.csv", index=False
    )
    assert main(["fit", str(tmp_path / "t.csv"), "--out", str(tmp_path / "o")]) == 0
    assert main(["fit", str(tmp_path / "ref.csv"), "--out", str(tmp_path / "r")]) == 0
    pd.testing.assert_frame_equal(
        pd.read_csv(tmp_path / "o" / "fits.csv"), pd.read_csv(tmp_path / "r" / "fits.csv")
    )
    assert (tmp_path / "o" / "exclusions.csv").exists()
    assert not (tmp_path / "r" / "exclusions.csv").exists()
    # the library drops them too
    import bayesobs

    fits, _ = bayesobs.fit(df)
    assert len(fits) == len(pd.read_csv(tmp_path / "r" / "fits.csv"))


def test_score_writes_exclusions_and_scores_the_kept_trials(tmp_path):
    df = _study()
    df.to_csv(tmp_path / "t.csv", index=False)
    args = ["score", str(tmp_path / "t.csv"), "--out", str(tmp_path / "s"), "--no-probe"]
    assert main([*args, "--exclude", "catch_error_rate > 0.5"]) == 0
    table = pd.read_csv(tmp_path / "s" / "exclusions.csv", dtype={"subject": str})
    assert "3" in set(table.loc[table["level"] == "participant", "subject"])
    scored = pd.read_parquet(tmp_path / "s" / "trials.parquet")
    assert "3" not in set(scored["subject"]) and "catch" not in scored.columns
    assert len(scored) == 3 * 120


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ("rt_ms <", "expected NAME OP NUMBER"),
        ("nosuch > 1", "'nosuch' is neither a participant measure"),
        ("session > 1", "column 'session' holds no numbers"),
        ("trials > 0", "every trial is excluded"),
    ],
)
def test_bad_rules_are_one_line_and_exit_2(tmp_path, capsys, rule, message):
    _study().to_csv(tmp_path / "t.csv", index=False)
    code = main(["fit", str(tmp_path / "t.csv"), "--out", str(tmp_path / "o"), "--exclude", rule])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o" / "fits.csv").exists()


def test_exclude_keeps_a_trial_excluded_by_two_rules_counted_once():
    df = _study()
    from bayesobs.trials import normalize_trials

    t = normalize_trials(df, keep_catch=True)
    res = exclude(t, ["rt_ms < 200", "rt_ms < 300"])
    table = res.table[res.table["level"] == "trial"]
    n200 = int(((t["rt_ms"] < 200) & (t["catch"] != True)).sum())  # noqa: E712
    n300 = int(((t["rt_ms"] < 300) & (t["catch"] != True)).sum())  # noqa: E712
    assert table.loc[table["rule"] == "rt_ms < 200", "trials"].sum() == n200
    assert table.loc[table["rule"] == "rt_ms < 300", "trials"].sum() == n300 - n200


def test_a_served_study_with_catch_trials_is_scored_with_its_exclusions(tmp_path):
    """serve --catch-every, two people (one fails the checks), then score --exclude."""
    import re
    from pathlib import Path

    import httpx

    from bayesobs.web import ParticipantServer, running

    spec = Path(__file__).resolve().parents[1] / "tasks" / "line_ratio.toml"
    folder = tmp_path / "e"
    server = ParticipantServer(spec, folder, ["text"], ["base"], 4, catch_every=3)
    rng = np.random.default_rng(1)
    with running(server) as url, httpx.Client(base_url=url) as c:
        for pid, attentive in (("p1", True), ("p2", False)):
            c.cookies.clear()
            c.post("/api/start", json={"consent": True, "pid": pid})
            t = c.get("/api/next").json()
            while not t["finished"]:
                if t.get("catch"):
                    said = re.search(r"type (\S+?) ", t["question"]).group(1)
                    said = said if attentive else "0.99"
                else:
                    said = f"{rng.uniform(0.1, 0.9):.3f}"
                t = c.post("/api/answer", json={"id": t["id"], "response": said}).json()
    rows = [json.loads(x) for x in (folder / "trials.jsonl").read_text().splitlines()]
    n_catch = sum(bool(r.get("catch")) for r in rows)
    assert n_catch >= 4
    out = tmp_path / "s"
    args = ["score", str(folder), "--out", str(out), "--no-probe", "--no-progress"]
    assert main([*args, "--exclude", "catch_error_rate > 0.2"]) == 0
    table = pd.read_csv(out / "exclusions.csv")
    part = table[table["level"] == "participant"]
    assert part["subject"].tolist() == ["p2"] and part["value"].iloc[0] == 1.0
    assert table.loc[table["level"] == "catch", "trials"].sum() == n_catch
    scored = pd.read_parquet(out / SCORED)
    assert set(scored["subject"]) == {"p1"} and "catch" not in scored.columns
    # each run numbered 0, 1, 2... again, in the order the person answered
    for _, run in scored.groupby(["session", "run"]):
        assert run["trial"].tolist() == list(range(len(run)))
    # the report states the exclusions
    assert main(["report", str(out), "--out", str(tmp_path / "r")]) == 0
    page = (tmp_path / "r" / "index.html").read_text()
    assert "<h2>Exclusions</h2>" in page
    assert "catch_error_rate &gt; 0.2: 1 participant(s) (p2)" in page
    assert (tmp_path / "r" / "tables" / "exclusions.csv").exists()


SCORED = "trials.parquet"
