"""Row expressions (``--map``, ``--where``, ``--missing-where``) without Python evaluation.

An expression is read by a small grammar of its own and evaluated column by
column with NumPy/pandas operations; nothing in it is ever handed to Python's
``eval``, ``exec`` or ``compile``, nor to ``pandas.eval``.  So an expression
recorded in a shared folder, or typed on a command line, can name columns and
compute with them, and can do nothing else.

The grammar (Python's precedence, lowest first)::

    expr     := or
    or       := and (("or" | "|") and)*
    and      := not (("and" | "&") not)*
    not      := "not" not | compare
    compare  := sum ((CMP | "in" | "not" "in") sum)*      chained like Python
    sum      := product (("+" | "-") product)*
    product  := unary (("*" | "/" | "//" | "%") unary)*
    unary    := ("-" | "+" | "~") unary | power
    power    := atom ("**" unary)?
    atom     := NUMBER | STRING | "True" | "False" | NAME | `ANY NAME`
              | FUNCTION "(" expr ("," expr)* ")" | "(" expr ")" | list
    list     := "[" literal ("," literal)* "]" | "(" literal "," ... ")"   (after "in" only)

``CMP`` is one of ``== != < <= > >=``.  ``&``, ``|`` and ``~`` are the
logical *and*, *or* and *not* (with the precedence pandas gives them), and
need true/false operands.  A name is a column; a backquoted name may hold
any character but a backquote.  The functions are :data:`FUNCTIONS`.
Arithmetic needs numbers (true/false count as 1/0); text can be compared
and tested with ``in``, and a lone quoted text is a constant (``--map
"task='numerosity'"``).  Comparisons with a missing value are false (``!=``
true), as in pandas.

Anything else (attribute access, subscripts, calls of other names, lambdas,
double-underscore names, string prefixes, ``@`` variables) is an
:class:`ExpressionError` naming the 1-based position of the offending token.
Expressions are at most :data:`MAX_LENGTH` characters and nest at most
:data:`MAX_DEPTH` levels.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .errors import BayesobsInputError

MAX_LENGTH = 1000
MAX_DEPTH = 50

COMPARISONS = ("==", "!=", "<=", ">=", "<", ">")
_OPERATORS = ("**", "//", *COMPARISONS, "+", "-", "*", "/", "%", "&", "|", "~")
_KEYWORDS = {"and", "or", "not", "in", "True", "False"}
# Python words that are not part of the grammar: refused by name, not looked up as columns
_REFUSED_WORDS = {
    "lambda",
    "if",
    "else",
    "for",
    "while",
    "import",
    "from",
    "is",
    "None",
    "def",
    "class",
    "return",
    "yield",
    "await",
    "async",
    "with",
    "as",
    "global",
    "nonlocal",
    "del",
    "assert",
    "raise",
    "try",
    "except",
    "finally",
    "pass",
    "break",
    "continue",
}


def _isnull(x):
    return x.isna() if isinstance(x, pd.Series) else bool(pd.isna(x))


def _notnull(x):
    return x.notna() if isinstance(x, pd.Series) else not bool(pd.isna(x))


# round's digits: beyond these NumPy's scaling overflows (and very many digits cost seconds)
MAX_ROUND_DIGITS = 100


def _round(x, digits=0):
    if isinstance(digits, pd.Series) or not float(digits).is_integer():
        raise TypeError("round's digits must be a whole number")
    if abs(digits) > MAX_ROUND_DIGITS:
        raise ValueError(f"round's digits must be from -{MAX_ROUND_DIGITS} to {MAX_ROUND_DIGITS}")
    return np.round(x, int(digits))


# name -> (function, fewest arguments, most arguments, works on numbers only)
FUNCTIONS: dict[str, tuple[Any, int, int, bool]] = {
    "abs": (np.abs, 1, 1, True),
    "sqrt": (np.sqrt, 1, 1, True),
    "exp": (np.exp, 1, 1, True),
    "expm1": (np.expm1, 1, 1, True),
    "log": (np.log, 1, 1, True),
    "log1p": (np.log1p, 1, 1, True),
    "log2": (np.log2, 1, 1, True),
    "log10": (np.log10, 1, 1, True),
    "sin": (np.sin, 1, 1, True),
    "cos": (np.cos, 1, 1, True),
    "tan": (np.tan, 1, 1, True),
    "floor": (np.floor, 1, 1, True),
    "ceil": (np.ceil, 1, 1, True),
    "round": (_round, 1, 2, True),
    "min": (np.minimum, 2, 2, True),
    "max": (np.maximum, 2, 2, True),
    "isnull": (_isnull, 1, 1, False),
    "isna": (_isnull, 1, 1, False),
    "notnull": (_notnull, 1, 1, False),
    "notna": (_notnull, 1, 1, False),
}


class ExpressionError(BayesobsInputError):
    """An expression outside the grammar, or one that cannot be computed on the table.

    Parameters
    ----------
    text : str
        The expression.
    position : int or None
        1-based column of the offending token (None: the expression as a whole).
    reason : str
        What is wrong.
    what : str, optional
        The option that gave the expression (e.g. ``--where``), put in front.
    lead : str, optional
        Words between the expression and the position.
    """

    def __init__(
        self, text: str, position: int | None, reason: str, what: str = "", lead: str = ""
    ):
        self.text, self.position, self.reason, self.what = text, position, reason, what
        where = f"position {position}: " if position is not None else ""
        shown = text if len(text) <= 120 else text[:117] + "..."
        super().__init__(f"{what + ' ' if what else ''}{shown!r}: {lead}{where}{reason}")

    def named(self, what: str, lead: str = "", reason: str | None = None) -> ExpressionError:
        """The same error with the option that gave the expression in front.

        ``lead`` goes before the position (e.g. ``"cannot evaluate: "``);
        ``reason`` replaces the reason (e.g. to add the table's columns).

        Parameters
        ----------
        what : str
            The option, e.g. ``"--where"``.
        lead : str
            Words between the expression and the position.
        reason : str, optional
            A new reason; the error's own by default.

        Returns
        -------
        ExpressionError
            A new error with the same text and position.
        """
        return ExpressionError(
            self.text, self.position, self.reason if reason is None else reason, what, lead
        )


# ------------------------------------------------------------------------ tokens
@dataclass(frozen=True)
class Token:
    """One token: ``kind`` (num, str, name, op, punct, end), its value and 0-based offset."""

    kind: str
    value: Any
    pos: int


_NUMBER = re.compile(r"(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", "'": "'", '"': '"'}


def tokenize(text: str) -> list[Token]:
    """The tokens of ``text``; a character outside the grammar is an :class:`ExpressionError`.

    Parameters
    ----------
    text : str
        The expression.

    Returns
    -------
    list of Token
        The tokens in order, ending with an ``end`` token.

    Raises
    ------
    ExpressionError
        Naming the 1-based position of the first character outside the grammar.
    """
    out: list[Token] = []
    i, n = 0, len(text)

    def fail(pos: int, reason: str):
        raise ExpressionError(text, pos + 1, reason)

    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
            continue
        m = _NUMBER.match(text, i)
        if m and (c.isdigit() or c == "."):
            end = m.end()
            if end < n and (text[end].isalpha() or text[end] == "_"):
                fail(end, f"{text[end]!r} right after the number {m.group()!r}")
            raw = m.group()
            if re.fullmatch(r"\d+", raw):
                v = int(raw)
                value: Any = np.int64(v) if v < 2**63 else np.float64(raw)
            else:
                value = np.float64(raw)
            if not np.isfinite(value):
                fail(i, f"the number {raw[:20]}{'...' if len(raw) > 20 else ''} is too large")
            out.append(Token("num", value, i))
            i = end
            continue
        if c == ".":
            fail(i, "'.' is not allowed (no attribute access)")
        m = _NAME.match(text, i)
        if m:
            word = m.group()
            if i + len(word) < n and text[i + len(word)] in "'\"":
                fail(i, f"string prefixes such as {word}'...' are not allowed (no f-strings)")
            if word in _REFUSED_WORDS:
                fail(
                    i,
                    f"{word!r} is not allowed (expressions hold columns, numbers, texts, "
                    "arithmetic, comparisons, and/or/not, in, and a few functions)",
                )
            if word.startswith("__"):
                fail(i, f"{word!r}: names starting with '__' are not allowed")
            out.append(Token("name", word, i))
            i = m.end()
            continue
        if c == "`":
            end = text.find("`", i + 1)
            if end < 0:
                fail(i, "backquoted column name without its closing backquote")
            if end == i + 1:
                fail(i, "empty backquoted column name")
            out.append(Token("column", text[i + 1 : end], i))
            i = end + 1
            continue
        if c in "'\"":
            j, chars = i + 1, []
            while j < n and text[j] != c:
                if text[j] == "\\" and j + 1 < n:
                    chars.append(_ESCAPES.get(text[j + 1], text[j + 1]))
                    j += 2
                    continue
                chars.append(text[j])
                j += 1
            if j >= n:
                fail(i, "text without its closing quote")
            out.append(Token("str", "".join(chars), i))
            i = j + 1
            continue
        op = next((o for o in _OPERATORS if text.startswith(o, i)), None)
        if op is not None:
            out.append(Token("op", op, i))
            i += len(op)
            continue
        if c in "()[],":
            out.append(Token("punct", c, i))
            i += 1
            continue
        if c == "=":
            fail(i, "'=' is not a comparison (use '==')")
        if c == "@":
            fail(i, "'@' variables are not allowed (name columns only)")
        fail(i, f"{c!r} is not allowed")
    out.append(Token("end", None, n))
    return out


# ------------------------------------------------------------------------ syntax
@dataclass(frozen=True)
class Expr:
    """A node of the expression tree.

    ``kind`` is ``const``, ``column``, ``unary``, ``binary``, ``logic``,
    ``compare``, ``isin``, ``call`` or ``list``; ``value`` holds the constant,
    column name, operator or function name; ``args`` the operands; ``pos``
    the 1-based position of the token that made the node; ``text`` the whole
    expression (for messages).
    """

    kind: str
    value: Any
    args: tuple[Expr, ...]
    pos: int
    text: str
    depth: int = 1


def _node(kind: str, value, args: tuple[Expr, ...], tok: Token, text: str) -> Expr:
    depth = 1 + max((a.depth for a in args), default=0)
    if depth > MAX_DEPTH:
        raise ExpressionError(text, tok.pos + 1, f"nested deeper than {MAX_DEPTH} levels")
    return Expr(kind, value, args, tok.pos + 1, text, depth)


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.toks = tokenize(text)
        self.i = 0
        self.nesting = 0

    # helpers
    @property
    def tok(self) -> Token:
        return self.toks[self.i]

    def fail(self, tok: Token, reason: str):
        raise ExpressionError(self.text, tok.pos + 1, reason)

    def describe(self, tok: Token) -> str:
        if tok.kind == "end":
            return "the end"
        nxt = self.toks[self.toks.index(tok) + 1]
        raw = self.text[tok.pos : nxt.pos].strip()
        return repr(raw if len(raw) <= 20 else raw[:17] + "...")

    def at(self, kind: str, *values) -> bool:
        t = self.tok
        return t.kind == kind and (not values or t.value in values)

    def take(self) -> Token:
        t = self.tok
        self.i += 1
        return t

    def expect(self, kind: str, value, what: str) -> Token:
        if not self.at(kind, value):
            self.fail(self.tok, f"expected {what}, found {self.describe(self.tok)}")
        return self.take()

    def deeper(self, tok: Token) -> None:
        self.nesting += 1
        if self.nesting > MAX_DEPTH:
            self.fail(tok, f"nested deeper than {MAX_DEPTH} levels")

    # grammar
    def parse(self) -> Expr:
        e = self.or_()
        if not self.at("end"):
            t = self.tok
            if t.kind == "punct" and t.value == "(":
                self.fail(t, "only the functions " + ", ".join(FUNCTIONS) + " can be called")
            if t.kind == "punct" and t.value == "[":
                self.fail(t, "'[' is not allowed here (no subscripts; lists only after 'in')")
            self.fail(t, f"unexpected {self.describe(t)}")
        return e

    def or_(self) -> Expr:
        e = self.and_()
        while self.at("name", "or") or self.at("op", "|"):
            t = self.take()
            e = _node("logic", "or", (e, self.and_()), t, self.text)
        return e

    def and_(self) -> Expr:
        e = self.not_()
        while self.at("name", "and") or self.at("op", "&"):
            t = self.take()
            e = _node("logic", "and", (e, self.not_()), t, self.text)
        return e

    def not_(self) -> Expr:
        if self.at("name", "not"):
            t = self.take()
            self.deeper(t)
            e = _node("unary", "not", (self.not_(),), t, self.text)
            self.nesting -= 1
            return e
        return self.compare()

    def compare(self) -> Expr:
        e = self.sum_()
        pairs = []
        left = e
        while True:
            t = self.tok
            if t.kind == "op" and t.value in COMPARISONS:
                self.take()
                right = self.sum_()
                pairs.append(_node("compare", t.value, (left, right), t, self.text))
            elif self.at("name", "in") or (
                self.at("name", "not")
                and self.toks[self.i + 1].kind == "name"
                and self.toks[self.i + 1].value == "in"
            ):
                negate = self.take().value == "not"
                if negate:
                    self.take()
                right = self.literal_list(t)
                pairs.append(_node("isin", negate, (left, right), t, self.text))
            else:
                break
            left = right
        if not pairs:
            return e
        out = pairs[0]
        for p in pairs[1:]:  # a < b < c: (a < b) and (b < c), as in Python
            out = _node("logic", "and", (out, p), self.toks[0], self.text)
        return out

    def literal_list(self, at: Token) -> Expr:
        t = self.tok
        if not (t.kind == "punct" and t.value in "(["):
            self.fail(t, "'in' takes a list of constants, e.g. x in [1, 2] or x in ('a', 'b')")
        close = "]" if self.take().value == "[" else ")"
        items = []
        while not self.at("punct", close):
            sign = -1 if self.at("op", "-") else 1
            if sign < 0 or self.at("op", "+"):
                self.take()
            v = self.tok
            if v.kind == "num":
                items.append(v.value * sign)
            elif v.kind == "str" and sign > 0:
                items.append(v.value)
            elif v.kind == "name" and v.value in ("True", "False") and sign > 0:
                items.append(np.bool_(v.value == "True"))
            else:
                self.fail(v, "a list after 'in' holds numbers and quoted texts only")
            self.take()
            if not self.at("punct", close):
                self.expect("punct", ",", f"',' or {close!r}")
        self.take()
        return _node("list", tuple(items), (), t, self.text)

    def sum_(self) -> Expr:
        e = self.product()
        while self.at("op", "+", "-"):
            t = self.take()
            e = _node("binary", t.value, (e, self.product()), t, self.text)
        return e

    def product(self) -> Expr:
        e = self.unary()
        while self.at("op", "*", "/", "//", "%"):
            t = self.take()
            e = _node("binary", t.value, (e, self.unary()), t, self.text)
        return e

    def unary(self) -> Expr:
        if self.at("op", "-", "+", "~"):
            t = self.take()
            self.deeper(t)
            e = _node("unary", t.value, (self.unary(),), t, self.text)
            self.nesting -= 1
            return e
        return self.power()

    def power(self) -> Expr:
        e = self.atom()
        if self.at("op", "**"):
            t = self.take()
            self.deeper(t)
            e = _node("binary", "**", (e, self.unary()), t, self.text)
            self.nesting -= 1
        return e

    def atom(self) -> Expr:
        t = self.tok
        if t.kind == "num" or t.kind == "str":
            self.take()
            e = _node("const", t.value, (), t, self.text)
        elif t.kind == "column":
            self.take()
            e = _node("column", t.value, (), t, self.text)
        elif t.kind == "name":
            e = self.name()
        elif t.kind == "punct" and t.value == "(":
            self.take()
            self.deeper(t)
            e = self.or_()
            self.nesting -= 1
            if self.at("punct", ","):
                self.fail(self.tok, "a tuple is allowed only after 'in'")
            self.expect("punct", ")", "')'")
        elif t.kind == "punct" and t.value == "[":
            self.fail(t, "'[' is not allowed here (no subscripts; lists only after 'in')")
        else:
            self.fail(t, f"expected a column, number, text or '(', found {self.describe(t)}")
        nxt = self.tok
        if nxt.kind == "punct" and nxt.value == "[":
            self.fail(nxt, "'[' is not allowed (no subscripts)")
        if nxt.kind == "punct" and nxt.value == "(":
            self.fail(nxt, "only the functions " + ", ".join(FUNCTIONS) + " can be called")
        return e

    def name(self) -> Expr:
        t = self.take()
        word = t.value
        if word in ("True", "False"):
            return _node("const", np.bool_(word == "True"), (), t, self.text)
        if word in _KEYWORDS:
            self.fail(t, f"{word!r} needs something before it")
        if self.at("punct", "("):
            if word not in FUNCTIONS:
                self.fail(
                    t, f"{word!r} is not a function here; the functions are " + ", ".join(FUNCTIONS)
                )
            return self.call(t)
        return _node("column", word, (), t, self.text)

    def call(self, t: Token) -> Expr:
        self.take()  # (
        self.deeper(t)
        args = []
        while not self.at("punct", ")"):
            args.append(self.or_())
            if not self.at("punct", ")"):
                self.expect("punct", ",", "',' or ')'")
        self.take()
        self.nesting -= 1
        _, low, high, _ = FUNCTIONS[t.value]
        if not low <= len(args) <= high:
            want = str(low) if low == high else f"{low} or {high}"
            self.fail(t, f"{t.value}() takes {want} argument(s), not {len(args)}")
        return _node("call", t.value, tuple(args), t, self.text)


def parse(text: str) -> Expr:
    """Parse ``text`` into an expression tree.

    Parameters
    ----------
    text : str
        The expression, at most :data:`MAX_LENGTH` characters.

    Returns
    -------
    Expr
        The tree; give it to :func:`evaluate`.

    Raises
    ------
    ExpressionError
        Naming the 1-based position of the first token outside the grammar.
    """
    if not isinstance(text, str):
        raise ExpressionError(str(text), None, "an expression must be text")
    if len(text) > MAX_LENGTH:
        raise ExpressionError(
            text, MAX_LENGTH + 1, f"longer than {MAX_LENGTH} characters ({len(text)})"
        )
    if not text.strip():
        raise ExpressionError(text, None, "empty expression")
    return _Parser(text).parse()


def columns(expr: Expr | str) -> list[str]:
    """The column names an expression uses, in order of first appearance.

    Parameters
    ----------
    expr : Expr or str
        An expression tree, or text that is parsed first.

    Returns
    -------
    list of str
        The names, each once.

    Raises
    ------
    ExpressionError
        When ``expr`` is text outside the grammar.
    """
    expr = parse(expr) if isinstance(expr, str) else expr
    out: list[str] = []
    stack = [expr]
    while stack:
        e = stack.pop()
        if e.kind == "column" and e.value not in out:
            out.append(e.value)
        stack.extend(reversed(e.args))
    return out


# ------------------------------------------------------------------------ values
def _is_text(v) -> bool:
    if isinstance(v, pd.Series):
        return not (pd.api.types.is_numeric_dtype(v) or pd.api.types.is_bool_dtype(v))
    return isinstance(v, str)


def _is_bool(v) -> bool:
    if isinstance(v, pd.Series):
        return pd.api.types.is_bool_dtype(v)
    return isinstance(v, (bool, np.bool_))


def _number(v, e: Expr, what: str):
    """``v`` as a number (true/false as 1/0); text is an error naming the operator."""
    if _is_text(v):
        shown = f"column {e.value!r} holds text" if e.kind == "column" else "it is text"
        raise ExpressionError(e.text, e.pos, f"{what} needs numbers, but {shown}")
    if _is_bool(v):
        return v.astype(np.int64) if isinstance(v, pd.Series) else np.int64(v)
    return v


def _truth(v, e: Expr, what: str):
    if not _is_bool(v):
        raise ExpressionError(
            e.text,
            e.pos,
            f"{what!r} needs true/false values (comparisons), e.g. (a > 1) {what} (b == 2)",
        )
    return v


_ARITH = {
    "+": np.add,
    "-": np.subtract,
    "*": np.multiply,
    "/": np.true_divide,
    "//": np.floor_divide,
    "%": np.mod,
    "**": np.power,
}
_COMPARE = {
    "==": np.equal,
    "!=": np.not_equal,
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
}


_SERIES_COMPARE = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _as_float_if_int(v):
    """Integer powers can overflow silently or refuse negative exponents: use floats."""
    if isinstance(v, pd.Series) and pd.api.types.is_integer_dtype(v):
        return v.astype(float)
    if isinstance(v, (int, np.integer)):
        return np.float64(v)
    return v


def _compare(op: str, a, b, e: Expr):
    if isinstance(a, pd.Series) or isinstance(b, pd.Series):
        fn = _SERIES_COMPARE[op]
        if not isinstance(a, pd.Series):  # keep the column on the left: pandas' own rules
            flipped = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(op, op)
            return _compare(flipped, b, a, e)
        if isinstance(a.dtype, pd.CategoricalDtype) and (
            op not in ("==", "!=") or isinstance(b, pd.Series)
        ):
            a = a.astype(object)
        if isinstance(b, pd.Series) and isinstance(b.dtype, pd.CategoricalDtype):
            b = b.astype(object)
        out = fn(a, b)
        return out.astype(bool) if not pd.api.types.is_bool_dtype(out) else out
    if _is_text(a) != _is_text(b):
        if op in ("==", "!="):
            return np.bool_(op == "!=")
        raise TypeError("cannot order text against a number")
    return np.bool_(_COMPARE[op](a, b))


def _eval(e: Expr, frame: pd.DataFrame):
    k = e.kind
    if k == "const":
        return e.value
    if k == "column":
        if e.value not in frame.columns:
            raise ExpressionError(e.text, e.pos, f"no column named {e.value!r}")
        return frame[e.value]
    if k == "call":
        fn, _, _, numeric = FUNCTIONS[e.value]
        args = [_eval(a, frame) for a in e.args]
        if numeric:
            args = [_number(v, a, f"{e.value}()") for v, a in zip(args, e.args, strict=True)]
        out = fn(*args)
        return out
    if k == "unary":
        v = _eval(e.args[0], frame)
        if e.value in ("not", "~"):
            v = _truth(v, e, e.value)
            return ~v if isinstance(v, pd.Series) else np.bool_(not v)
        v = _number(v, e.args[0], f"unary {e.value!r}")
        return -v if e.value == "-" else +v
    if k == "logic":
        a = _truth(_eval(e.args[0], frame), e, e.value)
        b = _truth(_eval(e.args[1], frame), e, e.value)
        if e.value == "and":
            return (
                a & b if isinstance(a, pd.Series) or isinstance(b, pd.Series) else np.bool_(a and b)
            )
        return a | b if isinstance(a, pd.Series) or isinstance(b, pd.Series) else np.bool_(a or b)
    if k == "binary":
        a = _number(_eval(e.args[0], frame), e.args[0], repr(e.value))
        b = _number(_eval(e.args[1], frame), e.args[1], repr(e.value))
        if e.value in ("**", "/", "//", "%"):
            a, b = _as_float_if_int(a), _as_float_if_int(b)
        out = _ARITH[e.value](a, b)
        return out
    if k == "compare":
        a, b = _eval(e.args[0], frame), _eval(e.args[1], frame)
        return _compare(e.value, a, b, e)
    if k == "isin":
        a = _eval(e.args[0], frame)
        values = list(e.args[1].value)
        if isinstance(a, pd.Series):
            out = a.isin(values)
        else:
            out = np.bool_(any(_compare("==", a, v, e) for v in values))
        return ~out if e.value else out
    raise ExpressionError(e.text, e.pos, f"unknown node {k!r}")  # pragma: no cover


def evaluate(expr: Expr | str, frame: pd.DataFrame):
    """Evaluate an expression over the rows of ``frame``.

    Parameters
    ----------
    expr : Expr or str
        A tree from :func:`parse`, or the text to parse.
    frame : DataFrame
        The table whose columns the expression names.

    Returns
    -------
    Series or scalar
        A Series aligned with ``frame`` when the expression names a column;
        a NumPy scalar or text when it is a constant.

    Raises
    ------
    ExpressionError
        Outside the grammar, an unknown column, or an operation the values do
        not support (e.g. arithmetic on text), naming the position.
    """
    tree = parse(expr) if isinstance(expr, str) else expr
    try:
        with np.errstate(all="ignore"):
            return _eval(tree, frame)
    except ExpressionError:
        raise
    except (TypeError, ValueError, OverflowError, ZeroDivisionError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ExpressionError(
            tree.text, None, f"not computable on these columns ({reason})"
        ) from None
