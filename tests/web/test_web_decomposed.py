"""The decomposed scavenger hunt for people (issue 28 item 11, follow-up): ``serve`` and the export.

As the runner does for models, ``bayesobs serve`` asks each step after the first
from the participant's OWN previous answer (``Task.follow_up`` on the logged
record), asks the same question after a restart of the server, and logs a step
that has nothing to start from as ``not_asked`` without showing it.  The jsPsych
export carries a step's question for every cell the step before may name
(tests/web/test_jspsych_worded.py).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from bayesobs.cli import main
from bayesobs.tunnel.subject import grid_from_text
from bayesobs.tunnel.tasks import ScavengerHunt
from bayesobs.web import ParticipantServer

SPEC = """\
task = "scavenger_hunt"
seed = 23
trials = 2
modalities = ["text"]
conditions = ["base"]

[[sessions]]
name = "decomposed"
range = [2, 4]
variant = "decomposed"

[ablations]
context = 0
"""
_START = re.compile(r"Starting at the (\w+) (\w+), follow the label for 1 step\.")


def _rows(folder: Path) -> list[dict]:
    p = folder / "trials.jsonl"
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()] if p.exists() else []


@pytest.fixture
def spec(tmp_path) -> Path:
    path = tmp_path / "hunt.toml"
    path.write_text(SPEC)
    return path


def _client(server: ParticipantServer, cookies=None) -> TestClient:
    # an IP host: the app answers only its own names (see SecurityHeaders)
    client = TestClient(server.app(), base_url="http://127.0.0.1")
    for name, value in (cookies or {}).items():
        client.cookies.set(name, value)
    return client


def _cells(payload: dict) -> dict[str, dict]:
    return {f"{c['colour']} {c['shape']}": c for c in grid_from_text(payload["text"])}


def _start(payload: dict) -> str:
    m = _START.search(payload["question"])
    assert m, payload["question"]
    return f"{m.group(1)} {m.group(2)}"


def _wrong_cell(payload: dict) -> str:
    """An on-grid cell whose label is on the grid, other than the one the step's label names."""
    cells = _cells(payload)
    right = cells[_start(payload)]["label"]
    return next(k for k, c in cells.items() if k != right and c["label"] in cells)


def test_a_wrong_step_one_is_followed_and_a_restart_asks_the_same(spec, tmp_path):
    folder = tmp_path / "e"
    server = ParticipantServer(spec, folder, order="fixed")
    planned = server.study_of("p").sessions[0].stimuli
    with _client(server) as c:
        assert c.post("/api/start", json={"consent": True, "pid": "p"}).status_code == 200
        first = c.get("/api/next").json()
        assert first["id"] == 0 and _start(first) == planned[0].params["columns"]["step_start"]
        said = _wrong_cell(first)
        second = c.post("/api/answer", json={"id": 0, "response": said}).json()
        cookies = dict(c.cookies)
    # step 2 starts where the participant said, not where the gold path goes
    assert second["id"] == 1
    gold_start = planned[1].params["columns"]["step_start"]
    assert said != gold_start
    assert _start(second) == said, second["question"]
    assert "{" not in second["question"]  # still a person's wording of the question

    # the server restarts on the same folder: the same question, from the log
    again = ParticipantServer(spec, folder, order="fixed")
    with _client(again, cookies) as c:
        resumed = c.get("/api/next").json()
        assert resumed["id"] == 1 and resumed["question"] == second["question"]
        assert resumed["text"] == second["text"]
        right = _cells(resumed)[said]["label"]  # the right answer from where they stand
        third = c.post("/api/answer", json={"id": 1, "response": right}).json()
        assert third["id"] == 2 and _start(third) == right

    rows = _rows(folder)
    assert [r["step"] for r in rows] == [1, 2]
    one, two = rows
    assert one["step_start_from"] == "gold" and one["correct"] == 0
    assert two["step_start"] == said and two["step_start_from"] == "answer"
    assert two["path_answer"] == planned[1].params["gold"]  # the gold path's answer, kept
    assert two["gold"] == right and two["correct"] == 1 and two["valid"]
    assert two["stimulus_id"] != planned[1].key()  # the question asked, not the one planned


def test_a_step_with_nothing_to_start_from_is_logged_not_asked_and_skipped(
    spec, tmp_path, monkeypatch
):
    """A follow_up that returns ``not_asked`` is logged invalid, never shown, and the next
    step (which follows an unasked one) too; the participant goes on to the next puzzle."""
    original = ScavengerHunt.follow_up
    unreadable = set()

    def follow_up(self, stim, previous, record):
        # as if the participant's answer could not be read (a person's answers are checked
        # before they are logged, so the hook is driven here for a chosen answer)
        if record.get("response_value") in unreadable:
            record = {**record, "valid": False}
        return original(self, stim, previous, record)

    monkeypatch.setattr(ScavengerHunt, "follow_up", follow_up)
    folder = tmp_path / "e"
    server = ParticipantServer(spec, folder, order="fixed")
    with _client(server) as c:
        c.post("/api/start", json={"consent": True, "pid": "q"})
        first = c.get("/api/next").json()
        said = _wrong_cell(first)
        unreadable.add(said)
        nxt = c.post("/api/answer", json={"id": 0, "response": said}).json()
        # steps 2 and 3 of puzzle 1 are logged unasked: puzzle 2's step 1 comes next
        assert nxt["id"] == 3 and nxt["done"] == 3 and nxt["total"] == 6
        assert c.get("/api/next").json()["id"] == 3
        stale = c.post("/api/answer", json={"id": 1, "response": said})
        assert stale.status_code == 409  # an unasked step cannot be answered
    rows = _rows(folder)
    assert [r["trial"] for r in rows] == [0, 1, 2]
    for r in rows[1:]:
        assert r["not_asked"] is True and r["valid"] is False and r["response"] is None
        assert r["invalid_reason"].startswith("not asked: step ")
        assert r["step_start_from"] == "answer" and r["correct"] is None
        assert r["raw_response"] is None and r["subject"] == "q"
    assert (
        rows[1]["step_start"] is None and rows[2]["step_start"] is None
    )  # no answer to start from
    assert rows[1]["invalid_reason"] == "not asked: step 1 gave no answer to start from"
    # a restart keeps the count: the participant is still at puzzle 2's step 1
    again = ParticipantServer(spec, folder, order="fixed")
    assert again.progress["q"] == 3


def test_a_restart_after_the_answer_that_leaves_nothing_to_ask_logs_the_skip_on_next(
    spec, tmp_path, monkeypatch
):
    """A server that died between logging step 1 and skipping step 2 skips it on the next request."""
    folder = tmp_path / "e"
    server = ParticipantServer(spec, folder, order="fixed")
    with _client(server) as c:
        c.post("/api/start", json={"consent": True, "pid": "r"})
        first = c.get("/api/next").json()
        said = _wrong_cell(first)
        c.post("/api/answer", json={"id": 0, "response": said})
        cookies = dict(c.cookies)
    assert len(_rows(folder)) == 1
    # the hook now leaves nothing to start from (as a changed task would)
    original = ScavengerHunt.follow_up
    monkeypatch.setattr(
        ScavengerHunt,
        "follow_up",
        lambda self, stim, prev, rec: original(self, stim, prev, {**rec, "valid": False}),
    )
    again = ParticipantServer(spec, folder, order="fixed")
    with _client(again, cookies) as c:
        assert c.get("/api/next").json()["id"] == 3
    assert [r.get("not_asked", False) for r in _rows(folder)] == [False, True, True]


def test_the_jspsych_export_refuses_questions_built_from_any_number(tmp_path, monkeypatch, capsys):
    """A step built from a typed number (no few answers to build it from): one line, exit 2.

    The decomposed hunt exports (tests/web/test_jspsych_worded.py): its steps start from a
    cell, one of a few answers, and the export carries the question for each."""
    from bayesobs.stimuli import TASKS

    line_ratio = TASKS["line_ratio"]
    monkeypatch.setattr(line_ratio, "follows", lambda self, stim: stim.value > 0.5)
    root = Path(__file__).resolve().parents[2]
    args = ["export", "jspsych", str(root / "tasks" / "line_ratio.toml"), "--trials", "3"]
    assert main([*args, "--out", str(tmp_path / "y")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "previous answer" in err and "bayesobs serve" in err
    assert not (tmp_path / "y" / "experiment.js").exists()


def test_a_catch_trial_between_the_steps_changes_nothing(spec, tmp_path):
    """With an attention check after every trial, step 2 still starts from step 1's answer."""
    server = ParticipantServer(spec, tmp_path / "e", order="fixed", catch_every=1)
    with _client(server) as c:
        c.post("/api/start", json={"consent": True, "pid": "s"})
        first = c.get("/api/next").json()
        said = _wrong_cell(first)
        check = c.post("/api/answer", json={"id": 0, "response": said}).json()
        assert check["catch"] is True and check["id"] == 1
        value = re.search(r"type (?:the word )?(\S+) as your answer", check["question"]).group(1)
        second = c.post("/api/answer", json={"id": 1, "response": value}).json()
    assert second["id"] == 2 and _start(second) == said
