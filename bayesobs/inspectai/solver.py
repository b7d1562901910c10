"""The solver: one sample's session run asked through the bayesobs runner, on inspect's model."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import time

from inspect_ai.model import (
    GenerateConfig,
    Model,
    ModelOutput,
    get_model,
)
from inspect_ai.solver import Generate, TaskState, solver

from ..chat import Reply, Request
from ..run.engine import Runner
from ..run.plan import Session
from ..run.subjects.turns import inspect_messages

TRIALS_KEY = "bayesobs_trials"  # sample store: the run's trial rows, as trials.jsonl holds them
IMAGES_KEY = "bayesobs_images"  # sample store: the rows' PNGs, base64, by their stimuli/ name
SUBJECT_KIND = "inspect"  # trial rows name their subject inspect:PROVIDER/MODEL
STOP_REASONS = {"max_tokens": "length", "model_length": "length", "stop": "stop"}


class InspectModel:
    """A bayesobs subject that asks inspect's model of the sample (its generate config applies)."""

    def __init__(self, model: Model):
        self.model = model
        self.last: ModelOutput | None = None

    async def complete(self, request: Request) -> Reply:
        """The subject interface: one generate call."""
        t0 = time.perf_counter()
        # a failure (or one of inspect's limits) goes to inspect as it is: the sample's error
        out = await self.model.generate(
            inspect_messages(request), config=GenerateConfig(max_tokens=request.max_tokens)
        )
        self.last = out
        usage = out.usage.model_dump(exclude_none=True) if out.usage else None
        return Reply(
            text=out.completion,
            latency_s=time.perf_counter() - t0,
            usage=usage,
            finish_reason=STOP_REASONS.get(out.stop_reason, out.stop_reason),
            extra={"provider": str(self.model).partition("/")[0], "model": self.model.name},
        )


class SampleStore:
    """The part of an experiment folder the runner writes, kept in memory for one sample."""

    def __init__(self):
        self.done: dict = {}
        self.requests: dict = {}
        self.rows: list[dict] = []
        self.images: dict[str, str] = {}

    def append(self, record: dict) -> None:
        """Keep a trial row."""
        self.rows.append(record)

    def save_png(self, png: bytes) -> str:
        """Keep a PNG by content hash; its name as an experiment folder's."""
        name = f"stimuli/{hashlib.sha256(png).hexdigest()[:20]}.png"
        self.images.setdefault(name, base64.b64encode(png).decode())
        return name

    def log_run(self, **event) -> None:
        """A run event: inspect's log records the sample's error and events itself."""


@solver
def ask_trials(sessions: dict[str, Session]):
    """Ask a sample's trials in order, with the rolling context, as ``bayesobs run`` asks them.

    Parameters
    ----------
    sessions : dict of str to Session
        The planned session runs by sample id (:func:`bayesobs.inspectai.tasks.bayesobs_task`).

    Returns
    -------
    Solver
        Puts the trial rows and their PNGs in the sample store and the last
        reply in the state's output.
    """

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        model = get_model()
        sess = dataclasses.replace(
            sessions[str(state.sample_id)], subject=f"{SUBJECT_KIND}:{model}"
        )
        subject = InspectModel(model)
        store = SampleStore()
        try:
            runner = Runner(store, {sess.subject: subject}, concurrency=1, progress=False)
            await runner.run_session(sess, None)
        finally:  # a failed trial ends the sample; the trials before it stay in the log
            state.store.set(TRIALS_KEY, store.rows)
            state.store.set(IMAGES_KEY, store.images)
        if subject.last is not None:
            state.output = subject.last
        return state

    return solve
