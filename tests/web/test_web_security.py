"""`bayesobs serve` under attack (issue 48): slow and idle connections, bot joins, formula cells, bad bodies.

Every attack is bounded and stays on the loopback: the attacker connects from 127.0.0.2 (Linux
routes all of 127.0.0.0/8 to the loopback), the real participant from 127.0.0.1.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

import bayesobs.web.app as web_app
import bayesobs.web.participants as web_participants
from bayesobs.web import ParticipantServer, running
from bayesobs.web.security import Guard

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "tasks" / "line_ratio.toml"
HALF_REQUEST = b"GET /api/study HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slow"  # never ends
SERVE = "import sys; from bayesobs.cli import main; sys.exit(main())"


def _server(folder, trials=2, spec=SPEC, **kw):
    return ParticipantServer(spec, folder, ["multimodal"], ["base"], trials, token="tok", **kw)


def _slow_clients(port: int, n: int) -> list[socket.socket]:
    """``n`` connections from 127.0.0.2, each sending half a request's headers."""
    out = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.2", 0))
        s.settimeout(5)
        try:
            s.connect(("127.0.0.1", port))
            s.sendall(HALF_REQUEST)
        except OSError:  # refused at once: as good as closed
            pass
        out.append(s)
    return out


def _closed(s: socket.socket, wait_s: float) -> bool:
    """Whether the server closed ``s`` (within ``wait_s``)."""
    s.settimeout(wait_s)
    try:
        s.recv(100)  # b"" (closed), or a 503 line before the close
        return True
    except TimeoutError:
        return False
    except OSError:  # reset
        return True


def _participant(url: str, pid: str) -> None:
    """A real participant joins and answers the first trial (each request bounded by 10 s)."""
    with httpx.Client(base_url=url, timeout=10) as c:
        assert c.post("/api/start", json={"consent": True, "pid": pid}).status_code == 200
        t = c.get("/api/next").json()
        assert c.post("/api/answer", json={"id": t["id"], "response": "0.5"}).status_code == 200


def test_slow_clients_are_closed_and_a_participant_still_gets_in(tmp_path, monkeypatch):
    monkeypatch.setattr(Guard, "header_timeout", 1.0)  # 10 s in use: shortened, not timed
    monkeypatch.setattr(Guard, "per_address", 40)
    with running(_server(tmp_path / "exp")) as url:
        port = int(url.rsplit(":", 1)[1])
        slow = _slow_clients(port, 120)
        for _ in range(5):  # a whole header, then a body that never ends
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(b"POST /api/start HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            s.sendall(b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
            slow.append(s)
        try:
            _participant(url, "real")  # the 80 over the cap are refused, the 40 wait
            assert all(_closed(s, 10) for s in slow)  # none is held for good
        finally:
            for s in slow:
                s.close()


@pytest.mark.slow  # 1,100 connections and a server of its own under `ulimit -n 1024`
def test_eleven_hundred_idle_connections_under_ulimit_1024(tmp_path):

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-c", SERVE, "serve", str(SPEC), "--out", str(tmp_path / "exp")]
    cmd += ["--trials", "2", "--port", str(port)]
    log = tmp_path / "serve.log"
    with log.open("w") as err:
        # the shell sets the limit: a preexec_fn would fork this (JAX-threaded) process
        proc = subprocess.Popen(
            ["bash", "-c", 'ulimit -n 1024 && exec "$@"', "serve", *cmd],
            stdout=subprocess.DEVNULL,
            stderr=err,
            cwd=ROOT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):  # up to 30 s to start
            try:
                httpx.get(url + "/api/study", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        slow = _slow_clients(port, 1100)
        for _ in range(50):  # garbage: uvicorn's warning, once
            with socket.create_connection(("127.0.0.1", port), timeout=5) as g:
                g.sendall(b"\x00GARBAGE\r\n\r\n")
                g.recv(100)
        try:
            _participant(url, "real")
            assert all(_closed(s, 15) for s in slow)
        finally:
            for s in slow:
                s.close()
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    lines = log.read_text().splitlines()
    bad = ("Traceback", "Too many", "descriptors")  # never out of them: one line per condition
    assert len(lines) <= 3 and not any(b in x for x in lines for b in bad), lines


def test_joins_from_one_address_are_rate_limited(tmp_path):
    with running(_server(tmp_path / "exp")) as url, httpx.Client(base_url=url) as c:
        codes = []
        for _ in range(60):
            c.cookies.clear()
            r = c.post("/api/start", json={"consent": True})
            codes.append(r.status_code)
        refused = r
    assert codes.count(200) <= 31 and set(codes) == {200, 429}
    assert "too many new participants" in refused.json()["error"]
    assert int(refused.headers["retry-after"]) > 0
    joins = (tmp_path / "exp" / "participants.jsonl").read_text().splitlines()
    assert len(joins) == codes.count(200)


def test_bad_start_bodies_are_400_not_500(tmp_path):
    deep = ("[" * 2000 + "]" * 2000).encode()
    with running(_server(tmp_path / "exp")) as url, httpx.Client(base_url=url) as c:
        for body in ({"consent": True, "pid": 5}, {"consent": True, "pid": ["a"]}):
            r = c.post("/api/start", json=body)
            assert r.status_code == 400 and "participant id" in r.json()["error"], body
        nested = b'{"consent": true, "pid": ' + deep + b"}"
        r = c.post("/api/start", content=nested, headers={"content-type": "application/json"})
        assert r.status_code == 400 and r.json()["error"]


def test_participants_log_without_key_is_one_line(tmp_path):
    folder = tmp_path / "exp"
    folder.mkdir()
    (folder / "participants.jsonl").write_text(json.dumps({"event": "join", "pid": "a"}) + "\n")
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = str(free.getsockname()[1])
    cmd = [sys.executable, "-c", SERVE, "serve", str(SPEC), "--out", str(folder), "--port", port]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0 and "key_sha256" in r.stderr


@pytest.mark.parametrize("host", ["busy", "256.1.1.1"])
def test_serve_on_a_busy_port_or_bad_host_is_one_line_and_no_links(tmp_path, host):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        cmd = [sys.executable, "-c", SERVE, "serve", str(SPEC), "--out", str(tmp_path / "e")]
        cmd += ["--port", str(port), "--host", "127.0.0.1" if host == "busy" else host]
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "participants:" not in r.stdout, r.stdout
    assert r.stderr.strip().count("\n") == 0 and (
        "cannot listen" in r.stderr or "--host" in r.stderr
    )
    assert "Traceback" not in r.stderr


def _csv(c: httpx.Client) -> list[dict]:
    r = c.get("/experimenter/trials.csv?token=tok", follow_redirects=True)
    return list(csv.DictReader(io.StringIO(r.text)))


def test_a_typed_formula_never_reaches_the_spreadsheet_as_one(tmp_path):
    attack = "=cmd|' /C calc'!A0 yes"
    spec = ROOT / "tasks" / "object_reid.toml"
    server = ParticipantServer(spec, tmp_path / "exp", None, None, 1, token="tok")
    with running(server) as url, httpx.Client(base_url=url) as c:
        c.post("/api/start", json={"consent": True, "pid": "mallory"})
        t = c.get("/api/next").json()
        assert c.post("/api/answer", json={"id": t["id"], "response": attack}).status_code == 200
        rows = _csv(c)
    cells = [v for r in rows for v in r.values() if v]
    assert not [v for v in cells if v[0] in "=+@\t\r"]
    assert rows[0]["raw_response"] == "'" + attack  # OWASP: a leading apostrophe
    assert float(rows[0]["response"]) in (0.0, 1.0) and float(rows[0]["latency_s"]) >= 0


def test_negative_numbers_stay_numbers_in_the_csv():
    import pandas as pd

    from bayesobs.web.security import spreadsheet_safe

    df = pd.DataFrame({"x": [-0.5, 1.0], "t": ["-0.25", "-cmd"], "u": ["@SUM(A1)", "+1+1"]})
    out = spreadsheet_safe(df)
    assert out["x"].tolist() == [-0.5, 1.0] and out["t"].tolist() == ["-0.25", "'-cmd"]
    assert out["u"].tolist() == ["'@SUM(A1)", "'+1+1"]


def test_a_lost_start_reply_does_not_lock_the_participant_out(tmp_path):
    with running(_server(tmp_path / "exp")) as url:
        first, again, third = (httpx.Client(base_url=url) for _ in range(3))
        with first, again, third:
            assert first.post("/api/start", json={"consent": True, "pid": "zoe"}).status_code == 200
            # the reply (and its cookies) never reached the browser: the same id joins again
            r = again.post("/api/start", json={"consent": True, "pid": "zoe"})
            assert r.status_code == 200 and r.json()["done"] == 0
            assert first.get("/api/next").status_code == 401  # the lost key no longer works
            t = again.get("/api/next").json()
            assert again.post("/api/answer", json={"id": t["id"], "response": "0.5"}).is_success
            # once zoe has answered, a second browser is refused as before
            assert third.post("/api/start", json={"consent": True, "pid": "zoe"}).status_code == 403
    restarted = _server(tmp_path / "exp")
    assert restarted.keys["zoe"] == hashlib.sha256(again.cookies["bo_key"].encode()).hexdigest()


def test_last_seen_follows_answers(tmp_path, monkeypatch):
    clock = iter(f"2026-01-01T00:00:{s:02d}Z" for s in range(60))
    for module in (web_app, web_participants):  # last seen (routes), the row's timestamp (log)
        monkeypatch.setattr(module, "utc_now", lambda: next(clock))
    server = _server(tmp_path / "exp")
    with running(server) as url, httpx.Client(base_url=url) as c:
        c.post("/api/start", json={"consent": True, "pid": "amy"})
        t = c.get("/api/next").json()
        c.post("/api/answer", json={"id": t["id"], "response": "0.5"})
        answered = json.loads((tmp_path / "exp" / "trials.jsonl").read_text())["timestamp"]
        page = c.get("/experimenter?token=tok", follow_redirects=True).text
    assert server.last_seen["amy"] >= answered and server.last_seen["amy"] in page


def test_a_pilot_never_sets_the_consent_duration(tmp_path):
    server = _server(tmp_path / "exp", trials=7)  # 21 answers
    guess = server.expected_minutes()
    assert "estimated from the number of trials" in guess[1]

    def finish(c: httpx.Client, pid: str) -> None:
        assert c.post("/api/start", json={"consent": True, "pid": pid}).status_code == 200
        t = c.get("/api/next").json()
        while not t["finished"]:
            t = c.post("/api/answer", json={"id": t["id"], "response": "0.5"}).json()

    with running(server) as url:
        with httpx.Client(base_url=url) as exp:  # the experimenter clicks through their study
            exp.get("/experimenter?token=tok", follow_redirects=True)
            finish(exp, "pilot")
            assert exp.get("/api/study").json()["minutes"] == guess[0]
        for pid in ("r1", "r2"):
            with httpx.Client(base_url=url) as c:
                finish(c, pid)
        assert server.expected_minutes() == guess  # two real participants: not yet
        with httpx.Client(base_url=url) as c:
            finish(c, "r3")
        basis = server.expected_minutes()[1]
    assert "3 participants who finished" in basis
    assert json.loads((tmp_path / "exp" / "participants.jsonl").read_text().splitlines()[0])[
        "pilot"
    ]
