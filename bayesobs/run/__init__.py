"""The run wing: specs and plans, the runner and its engine, subjects, presentation, the store."""

# The most sessions at once under ``--concurrency auto`` (bayesobs.run.concurrency): here, so
# that the CLI's parser reads it without loading asyncio (every command's start-up).
DEFAULT_MAX_CONCURRENCY = 64
