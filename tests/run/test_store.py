"""The experiment log (`bayesobs.run.store`): append-only, torn tails cut and kept, strict JSON, locks."""

from __future__ import annotations

import json
import math

import pytest

from bayesobs.errors import BayesobsInputError
from bayesobs.run.store import AppendLog, ExperimentStore, FolderLock, repair_tail, save_png

KEY = dict(
    subject="s", task="line_ratio", modality="text", condition="base", session="short", run=0
)


def test_a_torn_tail_is_cut_to_the_last_whole_line_and_kept_beside_the_log(tmp_path):
    log = tmp_path / "trials.jsonl"
    log.write_bytes(b'{"a":1}\n{"a":2}\n{"a":3,"b"')
    assert repair_tail(log) == b'{"a":3,"b"'
    assert log.read_bytes() == b'{"a":1}\n{"a":2}\n'  # whole lines untouched
    assert (tmp_path / "trials.jsonl.torn").read_bytes() == b'{"a":3,"b"\n'
    assert repair_tail(log) == b""  # a whole log is left alone


def test_appends_never_rewrite_what_was_logged(tmp_path):
    log = AppendLog(tmp_path / "runs.jsonl")
    log.append({"event": "start"})
    before = log.path.read_bytes()
    log.append({"event": "stop"})
    after = log.path.read_bytes()
    assert after.startswith(before) and after.count(b"\n") == 2
    assert log.read() == ([{"event": "start"}, {"event": "stop"}], 0)


def test_non_finite_numbers_are_written_as_null(tmp_path):
    """Other languages read the log: no NaN or Infinity tokens, at any depth."""
    log = AppendLog(tmp_path / "trials.jsonl")
    log.append({"rt_ms": math.inf, "x": [1.0, -math.inf], "y": {"z": math.nan}, "ok": 2.5})
    text = log.path.read_text()
    assert "Infinity" not in text and "NaN" not in text
    assert json.loads(text) == {"rt_ms": None, "x": [1.0, None], "y": {"z": None}, "ok": 2.5}


def test_a_trial_is_logged_once_and_the_manifest_guards_the_folder(tmp_path):
    with ExperimentStore(tmp_path / "e", {"spec": "a"}) as store:
        store.append({**KEY, "trial": 0, "response": 0.5})
        with pytest.raises(RuntimeError, match="already logged"):
            store.append({**KEY, "trial": 0, "response": 0.6})
    with ExperimentStore(tmp_path / "e", {"spec": "a"}) as again:
        assert list(again.done) == [(*KEY.values(), 0)]
    with pytest.raises(BayesobsInputError, match=r"different experiment .*spec: \"a\" -> \"b\""):
        ExperimentStore(tmp_path / "e", {"spec": "b"})


def test_one_writer_per_folder(tmp_path):
    lock = FolderLock(tmp_path)
    try:
        with pytest.raises(BayesobsInputError, match="is in use by pid"):
            FolderLock(tmp_path)
    finally:
        lock.release()
    FolderLock(tmp_path).release()  # free again once released


def test_images_are_stored_once_by_content(tmp_path):
    a = save_png(tmp_path, b"\x89PNG one")
    b = save_png(tmp_path, b"\x89PNG one")
    c = save_png(tmp_path, b"\x89PNG two")
    assert a == b != c
    assert (tmp_path / a).read_bytes() == b"\x89PNG one"
    assert sorted(p.name for p in (tmp_path / "stimuli").iterdir()) == sorted(
        [a.split("/")[1], c.split("/")[1]]
    )


def test_a_score_into_a_folder_another_score_holds_is_refused(tmp_path, capsys):
    """Two ``score`` runs into one ``--out`` (issue 47): the second refuses in one line, exit 2."""
    from bayesobs.cli import main
    from bayesobs.run.store import lock_folder

    trials = tmp_path / "t.csv"
    trials.write_text("stimulus,response\n" + "".join(f"{i},{i}\n" for i in range(1, 9)))
    out = tmp_path / "scores"
    argv = ["score", str(trials), "--out", str(out), "--bootstrap", "0", "--no-probe"]
    with lock_folder(out, "score"):  # the first score, still writing its tables
        assert main([*argv, "--no-references", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is in use by pid" in err[0] and "(bayesobs score," in err[0]
    assert sorted(p.name for p in out.iterdir()) == [".lock"]  # nothing written beside it
