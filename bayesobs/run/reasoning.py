"""Reply budgets of reasoning models: constants and rules shared by the CLI, runner and subject."""

from __future__ import annotations

# hidden-reasoning tokens a reply may spend before its visible answer (with --reasoning-effort)
DEFAULT_REASONING_BUDGET = 4096
MAX_REASONING_BUDGET = 1_000_000
# how the reply budget is sent: "auto" starts with max_completion_tokens (OpenAI's parameter)
TOKEN_PARAMS = ("auto", "max_completion_tokens", "max_tokens")
BUDGET_EXHAUSTED = "budget_exhausted"  # invalid_reason of a reply whose budget went to reasoning


def reasoning_budget(effort: str | None, budget: int) -> int:
    """Tokens added to the reply budget for hidden reasoning: ``budget`` with an effort, else 0."""
    return budget if effort and effort != "none" else 0


def budget_exhausted(text: str, finish_reason: str | None, reasoning_tokens: int | None) -> bool:
    """An empty reply cut off by its budget after hidden reasoning (``budget_exhausted``)."""
    return (
        finish_reason == "length"
        and not (text or "").strip()
        and isinstance(reasoning_tokens, int)
        and reasoning_tokens > 0
    )
