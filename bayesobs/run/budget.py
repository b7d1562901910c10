"""What a folder's calls cost, and the budget asked before each call (``--max-cost``, ``--max-total-tokens``).

:class:`Spend` adds up the logged rows (the usage each reply reports, priced
by :mod:`bayesobs.run.prices`; a reply replayed from the cache costs
nothing).  :class:`Budget` holds the limits and answers :meth:`Budget.may_spend`
("may I make N more calls?"): what is spent, plus the calls in flight and the
``N`` asked, each at the running mean of the billed calls so far (before the
first, the ``--dry-run`` estimate of a call), must stay within every limit.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import BayesobsInputError
from .prices import Prices, load_prices, money, row_cost, row_usage
from .store import logged_trials


class BudgetReached(Exception):
    """The next call would pass the budget: the session stops cleanly, resumable."""


@dataclass
class Spend:
    """Dollars and tokens of logged calls: billed ones, replays from the cache (free), unpriced ones."""

    usd: float = 0.0
    tokens: int = 0  # input + output tokens of billed calls (reasoning included)
    input: int = 0
    cached_input: int = 0
    output: int = 0
    billed: int = 0  # calls that reached the provider and reported usage
    replayed: int = 0  # replies replayed from the response cache: $0
    unpriced: Counter = field(default_factory=Counter)  # model -> calls without a price or usage

    def add(self, row: dict, prices: Prices) -> tuple[float, int]:
        """Count one logged row; its (dollars, tokens)."""
        if row.get("cached"):
            self.replayed += 1
            return 0.0, 0
        usd, usage = row_cost(row, prices), row_usage(row)
        if usd is None:
            self.unpriced[prices.model(str(row.get("subject")))] += 1
        if usage is None:
            return usd or 0.0, 0
        prompt, cached, completion = usage
        self.billed += 1
        self.usd += usd or 0.0
        self.tokens += prompt + completion
        self.input, self.cached_input = self.input + prompt, self.cached_input + cached
        self.output += completion
        return usd or 0.0, prompt + completion

    def line(self) -> str:
        """``spent $X on N call(s) (... tokens)``, saying what is free and what has no price."""
        text = (
            f"spent {money(self.usd)} on {self.billed:,} billed call(s) ({self.input:,} input "
            f"tokens, {self.cached_input:,} of them cached; {self.output:,} output tokens, "
            f"reasoning included), {self.replayed:,} replayed from the cache at $0"
        )
        if self.unpriced:
            names = ", ".join(sorted(self.unpriced))
            text += (
                f"; {sum(self.unpriced.values()):,} call(s) of {names} not counted in dollars "
                "(no price or no usage reported: give --price MODEL=IN,OUT)"
            )
        return text

    def summary(self) -> dict:
        """The figures of a ``runs.jsonl`` event."""
        return {
            "cost_usd": round(self.usd, 6),
            "tokens": self.tokens,
            "billed_calls": self.billed,
            "replayed": self.replayed,
            **({"unpriced": dict(self.unpriced)} if self.unpriced else {}),
        }


def check_limits(max_cost: float | None, max_total_tokens: int | None) -> None:
    """``--max-cost`` a positive finite number of dollars, ``--max-total-tokens`` a whole number >= 1."""
    if max_cost is not None and not (
        isinstance(max_cost, int | float) and math.isfinite(max_cost) and max_cost > 0
    ):
        raise BayesobsInputError(f"--max-cost must be a positive number of dollars, not {max_cost}")
    if max_total_tokens is not None and (
        isinstance(max_total_tokens, bool)
        or not isinstance(max_total_tokens, int)
        or max_total_tokens < 1
    ):
        raise BayesobsInputError(
            f"--max-total-tokens must be a whole number >= 1, not {max_total_tokens}"
        )


class Budget:
    """Limits in dollars and tokens over a folder's calls, asked before each new one.

    Parameters
    ----------
    prices : Prices
        The price table (:func:`bayesobs.run.prices.load_prices`).
    max_cost : float, optional
        Dollars the folder's calls may cost in all (earlier runs included).
    max_total_tokens : int, optional
        Input plus output tokens they may take in all.
    first_call : tuple of (float, int), optional
        Dollars and tokens of one call before any is billed (the
        ``--dry-run`` estimate); after that the running mean is used.
    """

    def __init__(
        self,
        prices: Prices,
        max_cost: float | None = None,
        max_total_tokens: int | None = None,
        first_call: tuple[float, int] = (0.0, 0),
    ):
        check_limits(max_cost, max_total_tokens)
        self.prices, self.max_cost, self.max_total_tokens = prices, max_cost, max_total_tokens
        self.first_call = first_call
        self.spend = Spend()
        self.inflight = 0
        self.stopped = 0  # sessions stopped by the budget

    def per_call(self) -> tuple[float, float]:
        """The estimate of the next call: the running mean of billed calls, else ``first_call``."""
        if self.spend.billed:
            return self.spend.usd / self.spend.billed, self.spend.tokens / self.spend.billed
        return self.first_call

    def may_spend(self, n: int = 1) -> bool:
        """Whether ``n`` more calls (beside those in flight), at the running mean, keep within every limit.

        Parameters
        ----------
        n : int, default 1
            Calls about to be made.

        Returns
        -------
        bool
            True when spent + (in flight + ``n``) x the per-call estimate
            stays within ``max_cost`` and ``max_total_tokens``.
        """
        usd, tokens = self.per_call()
        k = self.inflight + n
        return (self.max_cost is None or self.spend.usd + k * usd <= self.max_cost) and (
            self.max_total_tokens is None or self.spend.tokens + k * tokens <= self.max_total_tokens
        )

    def fits(self, n: int) -> int:
        """How many of ``n`` calls fit the budget now (the batch path submits no more)."""
        lo, hi = 0, n
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if self.may_spend(mid) else (lo, mid - 1)
        return lo

    def reserve(self) -> None:
        """Take a place for one call, or raise :class:`BudgetReached`."""
        if not self.may_spend(1):
            raise BudgetReached(self.stop_line())
        self.inflight += 1

    def settle(self, row: dict | None) -> None:
        """The reserved call ended: count its logged row (None: it failed, nothing billed)."""
        self.inflight -= 1
        if row is not None:
            self.spend.add(row, self.prices)

    def event(self) -> dict:
        """The ``budget_reached`` event of ``runs.jsonl``: the spend, the limits and the estimate that stopped it."""
        usd, tokens = self.per_call()
        return {
            **self.spend.summary(),
            "max_cost": self.max_cost,
            "max_total_tokens": self.max_total_tokens,
            "next_call_usd": round(usd, 6),
            "next_call_tokens": round(tokens),
        }

    def limits(self) -> str:
        """The limits as given: ``$5.00`` and/or ``200,000 tokens``."""
        parts = [money(self.max_cost)] if self.max_cost is not None else []
        if self.max_total_tokens is not None:
            parts.append(f"{self.max_total_tokens:,} tokens")
        return " and ".join(parts)

    def stop_line(self) -> str:
        """The one line of a stop: what was spent, the estimate that stopped it, how to resume."""
        usd, tokens = self.per_call()
        how = "running mean of the billed calls" if self.spend.billed else "dry-run estimate"
        return (
            f"budget reached: {self.spend.line()}; the next call (about {money(usd)}, "
            f"{tokens:,.0f} tokens: the {how}) would pass the budget of {self.limits()}; "
            "what is logged is kept: the same command with a larger budget resumes"
        )


def folder_budget(
    folder, max_cost: float | None = None, max_total_tokens: int | None = None, prices=None
) -> Budget:
    """A :class:`Budget` over the calls already logged in ``folder``: ask its ``may_spend(n)`` between rounds.

    Parameters
    ----------
    folder : str or Path
        An experiment folder (its ``trials.jsonl``; none yet: nothing spent).
    max_cost : float, optional
        Dollars the folder's calls may cost in all.
    max_total_tokens : int, optional
        Input plus output tokens they may take in all.
    prices : Prices, optional
        The price table (default: the shipped one).

    Returns
    -------
    Budget
        Its ``spend`` holds the folder's logged calls; with none billed yet
        its per-call estimate is 0 (give ``first_call`` to :class:`Budget`
        for a rough one).
    """
    budget = Budget(prices or load_prices(), max_cost, max_total_tokens)
    for row in logged_trials(Path(folder) / "trials.jsonl")[0].values():
        budget.spend.add(row, budget.prices)
    return budget
