"""The human-participant web app (``bayesobs serve``) and the jsPsych export."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

from .app import ParticipantServer
from .security import listen, uvicorn_config


@contextmanager
def running(server: ParticipantServer, host: str = "127.0.0.1"):
    """Serve ``server`` on a free port in a background thread; yields the base URL.

    Uvicorn (imported here, an optional dependency of the web app) serves
    ``server.app()`` as ``serve`` does (:func:`.security.uvicorn_config`) on a
    socket bound to port 0 of ``host``; the context waits
    up to 10 s for it to start and, on exit, asks it to stop and joins the
    thread (up to 10 s).

    Parameters
    ----------
    server : ParticipantServer
        The study server to serve.
    host : str
        The interface to bind (default ``"127.0.0.1"``, this machine only).

    Yields
    ------
    str
        The base URL, ``http://HOST:PORT``.
    """
    import uvicorn  # start-up time: the ASGI server loads only for serve

    sock = listen(host, 0)
    uv = uvicorn.Server(uvicorn_config(server.app(), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.time() + 10
    while not uv.started and time.time() < deadline:
        time.sleep(0.02)
    try:
        yield f"http://{host}:{sock.getsockname()[1]}"
    finally:
        uv.should_exit = True
        thread.join(timeout=10)
        sock.close()


__all__ = ["ParticipantServer", "running"]
