"""``python:package.module:name``: a user's callable or class as the subject, with the runner's retries and cache."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import inspect
import os
import sys
import time

from ...chat import FatalSubjectError, Reply, Request, SubjectError
from ...errors import BayesobsInputError
from . import plugin_subject
from .cache import ResponseCache, request_key
from .retries import backoff, pause

FORM = "write python:package.module:name, e.g. python:mylab.models:answer"


class ReplyTypeError(FatalSubjectError, BayesobsInputError):
    """A reply that is not text: no retry mends it, so the run stops (the CLI: one line, exit 2)."""


class CallableSubject:
    """A callable as a subject: its reply checked to be text, retried on a raise, cached.

    Parameters
    ----------
    name : str
        The subject's spec (``python:package.module:name`` or an installed kind's ``KIND:NAME``).
    call : callable
        Called with the :class:`~bayesobs.chat.Request`; returns the reply text (a str, or a
        :class:`~bayesobs.chat.Reply`), or an awaitable of it.
    identity : str
        The callable's qualified name, part of each cache key.
    cache : ResponseCache, optional
        The response cache (None: neither read nor written).
    cache_scope : str
        ``"global"``, or the experiment folder whose replies may be replayed.
    folder : str, optional
        The experiment folder, recorded with each cached reply.
    max_attempts, max_wait_s : int, float
        Attempts per trial and seconds of waiting between them (``--max-attempts``, ``--max-wait``).
    inner : object, optional
        An installed kind's subject object, whose other attributes this one shows.
    """

    def __init__(
        self,
        name: str,
        call,
        identity: str,
        cache: ResponseCache | None = None,
        cache_scope: str = "global",
        folder: str | None = None,
        max_attempts: int = 12,
        max_wait_s: float = 600.0,
        inner=None,
    ):
        self.name, self.call, self.identity, self.inner = name, call, identity, inner
        self.cache, self.cache_scope, self.folder = cache, cache_scope, folder
        self.max_attempts, self.max_wait_s = max_attempts, max_wait_s
        self.noted = False

    def __getattr__(self, attr):
        """An installed kind's own attributes (``options``, ``adaptations``, ``aclose``)."""
        inner = self.__dict__.get("inner")
        if inner is None:
            raise AttributeError(attr)
        return getattr(inner, attr)

    def cache_key(self, request: Request) -> str:
        """The callable, the request (images by their SHA-256), the trial's identity, the scope."""
        turns = [
            (t.role, t.text, [hashlib.sha256(p).hexdigest() for p in t.pngs]) for t in request.turns
        ]
        body = {"callable": self.identity, "system": request.system, "turns": turns}
        body["max_tokens"] = request.max_tokens
        parts = ("subject", "task", "modality", "condition", "session", "run", "trial", "seed")
        identity = {k: request.meta.get(k) for k in parts}
        return request_key(body, {**identity, "endpoint": self.name, "scope": self.cache_scope})

    async def complete(self, request: Request) -> Reply:
        """Replay the cache, else call (retrying a raise with the runner's backoff).

        Parameters
        ----------
        request : Request
            The trial's request.

        Returns
        -------
        Reply
            The reply, with its attempts and latency.

        Raises
        ------
        SubjectError
            When every attempt raised (the trial is logged as failed), or as the callable raised it.
        ReplyTypeError
            When the callable returned something other than text.
        """
        key = self.cache_key(request) if self.cache is not None else None
        if key is not None and (hit := self.cache.get(key)) is not None:
            where = hit.get("folder") or "an earlier run"
            return Reply(hit["text"], usage=hit.get("usage"), cached=True, attempts=0,
                         finish_reason=hit.get("finish_reason"), cached_from=where)  # fmt: skip
        attempt, waited = 0, 0.0
        while True:
            attempt += 1
            t0 = time.perf_counter()
            try:
                out = self.call(request)
                if inspect.isawaitable(out):
                    out = await out
                break
            except SubjectError:  # the callable's own verdict
                raise
            except Exception as exc:
                waited += await self._retry(attempt, waited, f"{type(exc).__name__}: {exc}")
        if not isinstance(out, (str, Reply)):
            raise ReplyTypeError(
                f"{self.name} returned {type(out).__name__}, not str (the reply text); "
                "everything logged so far is kept"
            )
        reply = out if isinstance(out, Reply) else Reply(out)
        if key is not None:
            self.cache.put(key, reply.text, reply.usage, finish_reason=reply.finish_reason,
                           folder=self.folder, endpoint=self.name)  # fmt: skip
        latency = reply.latency_s or time.perf_counter() - t0
        return dataclasses.replace(reply, latency_s=latency, attempts=attempt)

    async def _retry(self, attempt: int, waited: float, what: str) -> float:
        """Wait before the next attempt (the seconds waited), or the error that ends the trial."""
        if attempt >= self.max_attempts:
            raise SubjectError(f"gave up after {attempt} attempts: {what}")
        delay = backoff(attempt, 1.0, 300.0)  # the API subjects' schedule: 1 s doubling, to 300 s
        if waited + delay > self.max_wait_s:
            raise SubjectError(
                f"gave up after {attempt} attempts and {waited:.0f} s of waiting "
                f"(--max-wait {self.max_wait_s:g}): {what}"
            )
        if not self.noted:  # a bug in the callable shows at once, not after the last attempt
            self.noted = True
            print(f"note: {self.name} raised {what}; retrying, up to {self.max_attempts} "
                  f"attempts and {self.max_wait_s:g} s of waiting a trial (--max-attempts, "
                  "--max-wait)", file=sys.stderr)  # fmt: skip
        await pause(delay)
        return delay


def load_callable(spec: str, seed: int = 0) -> tuple:
    """The callable a ``python:package.module:name`` spec names, and its qualified name."""
    module, sep, name = spec.partition(":")[2].partition(":")
    if not sep or not module or not name:
        raise BayesobsInputError(f"subject {spec!r}: {FORM}")
    if os.getcwd() not in sys.path:  # a module beside the user, as ``python -m`` finds it
        sys.path.insert(0, os.getcwd())
    try:
        obj = getattr(importlib.import_module(module), name)
    except AttributeError:
        raise BayesobsInputError(f"subject {spec!r}: module {module!r} has no {name!r}") from None
    except Exception as exc:  # not found, or the module's own error on import
        raise BayesobsInputError(
            f"subject {spec!r}: cannot import {module!r}: {type(exc).__name__}: {exc}"
        ) from None
    identity = f"{getattr(obj, '__module__', module)}:{getattr(obj, '__qualname__', name)}"
    if inspect.isclass(obj):  # instantiated once, with the run's seed where it takes one
        try:
            seeded = "seed" in inspect.signature(obj).parameters
        except (TypeError, ValueError):
            seeded = False
        try:
            obj = obj(seed=seed) if seeded else obj()
        except Exception as exc:
            raise BayesobsInputError(
                f"subject {spec!r}: {name}() failed: {type(exc).__name__}: {exc}"
            ) from None
        identity += f"(seed={seed})" if seeded else "()"
    call = getattr(obj, "complete", None) if not inspect.isroutine(obj) else None
    call = call if callable(call) else obj
    if not callable(call):
        raise BayesobsInputError(
            f"subject {spec!r}: {module}:{name} is {type(obj).__name__}, not a callable or a class"
        )
    return call, identity


def own_subject(spec: str, seed: int = 0, chat: dict | None = None, **cache) -> CallableSubject:
    """A ``python:`` subject, or an installed kind's (entry points ``bayesobs.subjects``), made safe.

    Parameters
    ----------
    spec : str
        ``python:package.module:name``, or ``KIND:NAME`` of an installed kind.
    seed : int
        The seed a class (or an installed kind's factory) is given.
    chat : dict, optional
        The run's chat options; ``max_attempts`` and ``max_wait_s`` apply.
    **cache
        ``cache``, ``cache_scope`` and ``folder`` of :class:`CallableSubject`; an installed
        kind's object is cached only when it sets ``cacheable = True``.

    Returns
    -------
    CallableSubject
        The subject.

    Raises
    ------
    BayesobsInputError
        When the spec is malformed, its module does not import, its name is missing or not
        callable, or a class or factory fails.
    """
    retry = {k: (chat or {})[k] for k in ("max_attempts", "max_wait_s") if k in (chat or {})}
    if spec.startswith("python:"):
        call, identity = load_callable(spec, seed)
        return CallableSubject(spec, call, identity, **cache, **retry)
    obj = plugin_subject(spec, seed=seed)
    if not getattr(obj, "cacheable", False):
        cache = {**cache, "cache": None}
    identity = f"{type(obj).__module__}:{type(obj).__qualname__}"
    return CallableSubject(spec, obj.complete, identity, **cache, **retry, inner=obj)
