"""Prices per model and what a logged reply cost: the dollars of ``--dry-run``, the running total and ``--max-cost``.

The shipped table (``prices.toml``, with its date and source) holds the
OpenAI and Anthropic models the docs name, in dollars per million tokens; a
user's file (``--prices FILE``, the same shape) and ``--price MODEL=IN,OUT``
override it.  A model not in the table has no price: its cost is None with
the reason, never a made-up number.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..errors import BayesobsInputError

TABLE = Path(__file__).with_name("prices.toml")
MILLION = 1_000_000
_SNAPSHOT = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2})$")  # gpt-4o-2024-08-06, claude-...-20250929


@dataclass(frozen=True)
class Price:
    """Dollars per million input, cached input and output tokens; the Batch API's fraction off."""

    input: float
    cached_input: float
    output: float
    batch_discount: float = 0.5

    def cost(self, prompt: int, cached: int, completion: int, batch: bool = False) -> float:
        """Dollars of one call: uncached input, cached input and output tokens (reasoning included)."""
        usd = ((prompt - cached) * self.input + cached * self.cached_input) / MILLION
        usd += completion * self.output / MILLION
        return usd * (1 - self.batch_discount) if batch else usd


@dataclass
class Prices:
    """A price table: model -> :class:`Price`, with the date and source of the shipped one."""

    models: dict[str, Price]
    date: str = ""
    source: str = ""

    def model(self, subject: str) -> str:
        """The model name of a subject (``openai:gpt-4o`` -> ``gpt-4o``; a provider prefix ``x/`` dropped)."""
        return subject.partition(":")[2].rpartition("/")[2] if ":" in subject else subject

    def price(self, subject: str) -> Price | None:
        """The price of a subject's model (a dated snapshot takes its model's), or None."""
        name = self.model(subject)
        return self.models.get(name) or self.models.get(_SNAPSHOT.sub("", name))

    def why_unknown(self, subject: str) -> str:
        """Why a subject has no price, and how to give it one."""
        name = self.model(subject)
        return (
            f"no price for model {name!r} (prices table of {self.date or 'a user file'}); "
            f"give --price {name}=IN,OUT (dollars per million tokens) or --prices FILE"
        )


def _number(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise BayesobsInputError(f"{what} must be a finite number of dollars, not {value!r}")
    if value < 0:
        raise BayesobsInputError(f"{what} must be >= 0, not {value}")
    return float(value)


def _price(entry, where: str) -> Price:
    """A :class:`Price` from a table entry, every field checked."""
    if not isinstance(entry, dict) or not {"input", "output"} <= set(entry):
        raise BayesobsInputError(f"{where} needs input and output (dollars per million tokens)")
    unknown = set(entry) - {"input", "cached_input", "output", "batch_discount"}
    if unknown:
        raise BayesobsInputError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    inp = _number(entry["input"], f"{where} input")
    discount = _number(entry.get("batch_discount", 0.5), f"{where} batch_discount")
    if discount > 1:
        raise BayesobsInputError(f"{where} batch_discount is a fraction in 0..1, not {discount}")
    return Price(
        inp,
        _number(entry.get("cached_input", inp), f"{where} cached_input"),
        _number(entry["output"], f"{where} output"),
        discount,
    )


def read_table(path: str | Path) -> Prices:
    """A price table file (``prices.toml``'s shape), checked; one clear error for a bad one."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise BayesobsInputError(
            f"--prices {path}: cannot read a TOML price table ({exc})"
        ) from None
    models = data.get("models")
    if not isinstance(models, dict) or not models:
        raise BayesobsInputError(f"--prices {path}: no [models.NAME] tables")
    table = {m: _price(e, f"--prices {path}: models.{m}") for m, e in models.items()}
    return Prices(table, str(data.get("date", "")), str(data.get("source", path)))


def parse_price(text: str) -> tuple[str, dict]:
    """``MODEL=IN,OUT[,CACHED_IN]`` (dollars per million tokens) -> (model, fields)."""
    model, _, rest = text.partition("=")
    parts = rest.split(",")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
    if not model.strip() or len(values) not in (2, 3):
        raise BayesobsInputError(
            f"--price takes MODEL=IN,OUT or MODEL=IN,OUT,CACHED_IN in dollars per million "
            f"tokens, e.g. gpt-4o=2.5,10, not {text!r}"
        )
    fields = dict(zip(("input", "output", "cached_input"), values, strict=False))
    return model.strip(), fields


def load_prices(path: str | Path | None = None, overrides: list[str] | tuple = ()) -> Prices:
    """The shipped table, a user's file over it, then ``--price`` overrides over both.

    Parameters
    ----------
    path : str or Path, optional
        A TOML table in ``prices.toml``'s shape (``[models.NAME]`` with
        ``input``, ``output`` and optional ``cached_input``,
        ``batch_discount``); its models add to or replace the shipped ones.
    overrides : list of str
        ``MODEL=IN,OUT[,CACHED_IN]`` in dollars per million tokens (cached
        input defaults to the input price; the batch discount stays the
        model's, else a half).

    Returns
    -------
    Prices
        The merged table, with the shipped table's date and source (or the
        user file's, when given).

    Raises
    ------
    BayesobsInputError
        For an unreadable or malformed file, or a malformed ``--price``.
    """
    shipped = read_table(TABLE)
    prices = shipped
    if path is not None:
        user = read_table(path)
        prices = Prices({**shipped.models, **user.models}, user.date, user.source)
    for text in overrides:
        model, fields = parse_price(text)
        old = prices.models.get(model)
        fields.setdefault("batch_discount", old.batch_discount if old else 0.5)
        prices.models[model] = _price(fields, f"--price {text}")
    return prices


def row_usage(row: dict) -> tuple[int, int, int] | None:
    """(prompt, cached, completion) tokens a logged row's reply was billed for; None when not reported."""
    usage = row.get("usage")
    if not isinstance(usage, dict):
        return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    cached = row.get("cached_tokens")
    return prompt, min(cached, prompt) if isinstance(cached, int) else 0, completion


def row_cost(row: dict, prices: Prices) -> float | None:
    """Dollars a logged row's call cost: 0 for a replayed (cached) reply, an unasked trial or a ``sim:``; None unknown."""
    if row.get("cached") or row.get("not_asked") or str(row.get("subject")).startswith("sim:"):
        return 0.0
    usage, price = row_usage(row), prices.price(str(row.get("subject")))
    if usage is None or price is None:
        return None
    return price.cost(*usage, batch=bool(row.get("batch_id")))


def money(usd: float | None) -> str:
    """Dollars as a user reads them: ``$12.35``, ``$0.0123``, ``$0.000123``; None as ``$?``."""
    if usd is None:
        return "$?"
    return (
        f"${usd:,.2f}" if usd >= 10 else f"${usd:.4f}" if usd >= 0.01 or not usd else f"${usd:.6f}"
    )
