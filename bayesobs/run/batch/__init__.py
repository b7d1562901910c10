"""Batch APIs: a run or sweep through OpenAI's Batch API or Anthropic's Message Batches, in rounds.

``bayesobs run|sweep ... --batch`` asks every trial through the provider's
batch endpoint instead of one call at a time: the requests of a round go as
one batch per subject (:mod:`~bayesobs.run.batch.openai_batches`: a JSONL file
uploaded to ``/v1/files`` and submitted to ``/v1/batches``;
:mod:`~bayesobs.run.batch.anthropic_batches`: one
``client.messages.batches.create``), each body exactly what the live run would
send, polled until the batch ends, and the results read by the subject's own
reply reader.

Rounds (:mod:`~bayesobs.run.batch.rounds`).  A rolling context carries the
session's own earlier answers, so a session's trial ``t + 1`` can only be asked
once trial ``t`` is answered: round ``t`` holds trial ``t`` of every such
session (one batch per subject and round, split at the provider's limits on
requests and bytes).  A session whose requests do not depend on its answers
(no context window, ``context_none``, and no trial asked from the answer before
it) has all its trials in the first round.  Polling starts after
:data:`~bayesobs.run.batch.options.POLL_FIRST_S` seconds and doubles up to
``--poll-max`` (:data:`POLL_MAX_S` by default).

The trials are logged by the live runner's own code
(:meth:`bayesobs.run.engine.Runner.run_session`, through
:class:`~bayesobs.run.store.ExperimentStore`), so the rows are those of a live
run with the same columns, plus ``batch_id``; ``latency_s`` is 0 (a batch
has no per-request timing) and ``attempts`` counts the batches a request
went in.  A reply in the response cache is replayed, not asked again, and
each batch reply is cached as a live one is.

Resumable.  ``batches.jsonl`` in the experiment folder (append-only, written
while the run holds the folder's lock) records each batch before it is
created (``submitting``: its round, subject and ``custom_id`` -> trial), its
id once created (``submitted``) and how it ended (``ended``).  A restarted
run collects the batches of trials not yet logged (waiting for those still
running) instead of asking again; a batch created just before a kill, whose
id never reached the log, is found by its nonce (OpenAI: in its
``metadata``; Anthropic: by its time and size, its ``custom_id`` tagged with
the nonce).  A request that failed (HTTP 429 or 5xx, an expired or
cancelled batch, a batch that failed validation, a reply without an answer)
goes into the next round, up to ``--max-attempts`` batches; a request that
cannot succeed (another 4xx) stops its session, as in a live run, and is
asked again when the run is resumed.  A batch, or its results, that the
provider no longer has (a 404: expired files, another project's key) is noted
(``lost`` in ``batches.jsonl``, ``batch_lost`` in ``runs.jsonl``, one line
on stderr) and its trials not logged go into the next batch.  Nothing is logged twice
(:meth:`~bayesobs.run.store.ExperimentStore.append` refuses a trial already
logged).
"""

from .anthropic_batches import CUSTOM_ID, message_outcome, read_message_results, tagged
from .openai_batches import ENDPOINT, outcome
from .options import POLL_MAX_S, BatchOptions, check_batch_subjects, check_poll_max
from .rounds import (
    BatchRun,
    chunks,
    custom_id,
    execute_batch,
    independent,
    poll_delays,
    rounds_needed,
)

__all__ = [
    "CUSTOM_ID",
    "ENDPOINT",
    "POLL_MAX_S",
    "BatchOptions",
    "BatchRun",
    "check_batch_subjects",
    "check_poll_max",
    "chunks",
    "custom_id",
    "execute_batch",
    "independent",
    "message_outcome",
    "outcome",
    "poll_delays",
    "read_message_results",
    "rounds_needed",
    "tagged",
]
