"""Batch APIs: a run or sweep through OpenAI's Batch API or Anthropic's Message Batches, in rounds."""

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
