"""Row expressions (``--map``, ``--where``, ``--missing-where``) without Python evaluation."""

from __future__ import annotations

import ast
import bisect
import json
import keyword
import operator
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .errors import BayesobsInputError

MAX_LENGTH = 1000
MAX_DEPTH = 50
# round's digits: beyond these NumPy's scaling overflows (and very many digits cost seconds)
MAX_ROUND_DIGITS = 100


def _isnull(x):
    return x.isna() if isinstance(x, pd.Series) else bool(pd.isna(x))


def _notnull(x):
    return x.notna() if isinstance(x, pd.Series) else not bool(pd.isna(x))


def _round(x, digits=0):
    if isinstance(digits, pd.Series) or not float(digits).is_integer():
        raise TypeError("round's digits must be a whole number")
    if abs(digits) > MAX_ROUND_DIGITS:
        raise ValueError(f"round's digits must be from -{MAX_ROUND_DIGITS} to {MAX_ROUND_DIGITS}")
    return np.round(x, int(digits))


# name -> (function, fewest arguments, most arguments, works on numbers only)
_MATH = ("abs", "sqrt", "exp", "expm1", "log", "log1p", "log2", "log10", "sin", "cos", "tan",
         "floor", "ceil")  # fmt: skip
FUNCTIONS: dict[str, tuple[Any, int, int, bool]] = {
    **{name: (getattr(np, name), 1, 1, True) for name in _MATH},
    "round": (_round, 1, 2, True),
    "min": (np.minimum, 2, 2, True),
    "max": (np.maximum, 2, 2, True),
    **dict.fromkeys(("isnull", "isna"), (_isnull, 1, 1, False)),
    **dict.fromkeys(("notnull", "notna"), (_notnull, 1, 1, False)),
}


class ExpressionError(BayesobsInputError):
    """An expression outside the grammar, or one that cannot be computed on the table."""

    def __init__(
        self, text: str, position: int | None, reason: str, what: str = "", lead: str = ""
    ):
        self.text, self.position, self.reason, self.what = text, position, reason, what
        where = f"position {position}: " if position is not None else ""
        shown = text if len(text) <= 120 else text[:117] + "..."
        super().__init__(f"{what + ' ' if what else ''}{shown!r}: {lead}{where}{reason}")

    def named(self, what: str, lead: str = "", reason: str | None = None) -> ExpressionError:
        """The same error with the option that gave the expression in front."""
        return ExpressionError(
            self.text, self.position, self.reason if reason is None else reason, what, lead
        )


# ------------------------------------------------------------------ the scan before the parser
_TOKEN = re.compile(
    r"(?P<space>\s+)|(?P<num>(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<str>'(?:\\.|[^'\\])*'|\"(?:\\.|[^\"\\])*\")"
    r"|(?P<col>`[^`]*`)|(?P<op>\*\*|//|[=!<>]=|[-+*/%<>~&|()\[\],]|\.(?=[A-Za-z_]))",
    re.S,
)
_WORDS = {"and", "or", "not", "in", "True", "False"}
_REFUSED_WORDS = set(keyword.kwlist) - _WORDS  # lambda, if, is, None, import, ...
_ESCAPES = {"n": "\n", "t": "\t"}
_CHAR_REASONS = {
    ".": "'.' is not allowed here (a field is read as column.field)",
    "=": "'=' is not a comparison (use '==')",
    "@": "'@' variables are not allowed (name columns only)",
    "'": "text without its closing quote",
    '"': "text without its closing quote",
    "`": "backquoted column name without its closing backquote",
}
_CLOSE = {"(": ")", "[": "]"}


def _shown(raw: str) -> str:
    raw = raw.strip()
    return repr(raw if len(raw) <= 20 else raw[:17] + "...")


def _scan(text: str):
    """Python source for ``text``, the text offset of each source character, backquoted names, tokens."""
    parts: list[str] = []
    origin: list[int] = []
    names: dict[str, str] = {}
    tokens: list[tuple[int, int, int]] = []  # (source offset, text start, text end)
    i = 0

    def fail(pos: int, reason: str):
        raise ExpressionError(text, pos + 1, reason)

    while i < len(text):
        m = _TOKEN.match(text, i)
        if m is None:
            fail(i, _CHAR_REASONS.get(text[i], f"{text[i]!r} is not allowed"))
        kind, raw, end = m.lastgroup, m.group(), m.end()
        out = (" " if origin else "") if kind == "space" else raw  # Python refuses an indent
        if kind == "num":
            if end < len(text) and (text[end].isalpha() or text[end] == "_"):
                fail(end, f"{text[end]!r} right after the number {raw!r}")
            if not np.isfinite(np.float64(raw)):
                fail(i, f"the number {raw[:20]}{'...' if len(raw) > 20 else ''} is too large")
            out = str(int(raw)) if raw.isdigit() else raw  # Python refuses leading zeros
        elif kind == "name":
            if end < len(text) and text[end] in "'\"":
                fail(i, f"string prefixes such as {raw}'...' are not allowed (no f-strings)")
            if raw in _REFUSED_WORDS:
                fail(
                    i,
                    f"{raw!r} is not allowed (expressions hold columns, numbers, texts, "
                    "arithmetic, comparisons, and/or/not, in, and a few functions)",
                )
            if raw.startswith("__"):
                fail(i, f"{raw!r}: names starting with '__' are not allowed")
        elif kind == "str":
            body = re.sub(r"\\(.)", lambda e: _ESCAPES.get(e[1], e[1]), raw[1:-1], flags=re.S)
            out = ascii(body)  # ASCII source: ast's byte offsets are character offsets
        elif kind == "col":
            if end == i + 2:
                fail(i, "empty backquoted column name")
            out = f"__{len(names)}"  # no name of the grammar starts with '__'
            names[out] = raw[1:-1]
        elif kind == "op" and raw in ("&", "|"):
            out = " and " if raw == "&" else " or "
        if kind != "space":
            tokens.append((len(origin) + len(out) - len(out.lstrip()), i, end))
        parts.append(out)
        origin.extend([i] * len(out))
        i = end
    opened: list[str] = []
    for k, (_, start, end) in enumerate(tokens):  # brackets closed, not too deep; 'a' 'b' apart
        if text[start] in "'\"" and k and text[tokens[k - 1][1]] in "'\"":
            fail(start, f"unexpected {_shown(text[start:end])}")  # (Python would join them)
        if text[start] in _CLOSE:
            opened.append(_CLOSE[text[start]])
            if len(opened) > MAX_DEPTH:
                fail(start, f"nested deeper than {MAX_DEPTH} levels")
        elif text[start] in ")]" and (not opened or opened.pop() != text[start]):
            fail(start, f"unexpected {text[start]!r}")
    if opened:
        fail(len(text), f"expected {opened[-1]!r}, found the end")
    origin.append(len(text))
    return "".join(parts), origin, names, tokens


# ------------------------------------------------------------------ the whitelist
_ARITH = {ast.Add: ("+", np.add), ast.Sub: ("-", np.subtract), ast.Mult: ("*", np.multiply),
          ast.Div: ("/", np.true_divide), ast.FloorDiv: ("//", np.floor_divide),
          ast.Mod: ("%", np.mod), ast.Pow: ("**", np.power)}  # fmt: skip
_COMPARE = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
            ast.In: "in", ast.NotIn: "not in"}  # fmt: skip
_UNARY = {ast.Not: "not", ast.Invert: "~", ast.USub: "-", ast.UAdd: "+"}
# the syntax nodes an expression may hold (with the checks of _refusal on each)
NODES = (ast.Expression, ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.Compare, ast.Call, ast.Name,
         ast.Constant, ast.List, ast.Tuple, ast.Load, ast.And, ast.Or, ast.Attribute, ast.Subscript,
         *_ARITH, *_COMPARE, *_UNARY)  # fmt: skip


def _is_data(node: ast.AST) -> bool:
    """A column, or a path into the nested JSON of one (``doc.ratio``, ``resps[0][0]``)."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return isinstance(node, ast.Name)


def _key(node: ast.AST) -> int | str | None:
    """The constant of a subscript (a whole number, signed or not, or a text); None otherwise."""
    sign = 1
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        sign, node = (-1 if isinstance(node.op, ast.USub) else 1), node.operand
        if not (isinstance(node, ast.Constant) and type(node.value) is int):
            return None
    if isinstance(node, ast.Constant) and type(node.value) in (int, str):
        return sign * node.value if type(node.value) is int else node.value
    return None


def _is_item(node: ast.AST) -> bool:
    """A constant of a list after ``in``: a number (signed or not), a text, True/False."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
        return isinstance(node, ast.Constant) and type(node.value) in (int, float)
    return isinstance(node, ast.Constant) and type(node.value) in (int, float, str, bool)


def _refusal(node: ast.AST, parent: ast.AST | None, source: str) -> tuple[int, str] | None:
    """(source offset, reason) when ``node`` is outside the grammar; None when it is inside."""
    if not hasattr(node, "col_offset"):  # operators and contexts: checked with their node
        return None
    at = node.col_offset
    after = getattr(parent, "comparators", [])
    if isinstance(node, (ast.List, ast.Tuple)):
        k = next((k for k, c in enumerate(after) if c is node), None)
        if k is not None and k == len(after) - 1 and type(parent.ops[k]) in (ast.In, ast.NotIn):
            bad = next((e for e in node.elts if not _is_item(e)), None)
            return bad and (bad.col_offset, "a list after 'in' holds numbers and quoted texts only")
        if isinstance(node, ast.Tuple) and node.elts:
            at = source.index(",", node.elts[0].end_col_offset)
            return at, "a tuple is allowed only after 'in'"
        return at, "'[' is not allowed here (lists only after 'in')"
    if isinstance(node, ast.BinOp) and type(node.op) not in _ARITH:
        rest = source[node.left.end_col_offset :]
        at = len(source) - len(rest.lstrip(" )"))
        return at, f"{_shown(source[at : at + 2])} is not allowed"  # << >> (& | are and/or)
    if isinstance(node, ast.Compare):
        for k, (op, comp) in enumerate(zip(node.ops, node.comparators, strict=True)):
            if type(op) not in _COMPARE:
                return comp.col_offset, "only == != < <= > >= in and not in compare"
            # after 'in': a list, a tuple, or one constant in parentheses, x in (1)
            one = _is_item(comp) and source[: comp.col_offset].rstrip().endswith("(")
            listed = isinstance(comp, (ast.List, ast.Tuple)) or one
            if isinstance(op, (ast.In, ast.NotIn)) and not (listed and k == len(node.ops) - 1):
                return comp.col_offset, (
                    "'in' takes a list of constants, e.g. x in [1, 2] or x in ('a', 'b')"
                )
    if isinstance(node, ast.Call):
        fn = node.func
        if isinstance(fn, ast.Name) and fn.id in FUNCTIONS:
            if node.keywords:
                return node.keywords[0].col_offset, "keyword arguments are not allowed"
            _, low, high, _ = FUNCTIONS[fn.id]
            if not low <= len(node.args) <= high:
                want = str(low) if low == high else f"{low} or {high}"
                return at, f"{fn.id}() takes {want} argument(s), not {len(node.args)}"
        elif isinstance(fn, ast.Name) and not fn.id.startswith("__"):
            return at, f"{fn.id!r} is not a function here; the functions are " + ", ".join(
                FUNCTIONS
            )
        else:
            at = source.index("(", fn.end_col_offset)
            return at, "only the functions " + ", ".join(FUNCTIONS) + " can be called"
    if isinstance(node, ast.Constant) and type(node.value) not in (int, float, str, bool):
        return at, f"{_shown(ast.unparse(node))} is not allowed"
    if isinstance(node, (ast.Attribute, ast.Subscript)):
        at = source.index(
            "." if isinstance(node, ast.Attribute) else "[", node.value.end_col_offset
        )
        key = node.attr if isinstance(node, ast.Attribute) else _key(node.slice)
        if not _is_data(node.value):
            return at, "subscripts and fields read data: a column or a path into one (doc.ratio)"
        if key is None:
            return at, "a subscript is a constant: a whole number or a quoted key (doc['ratio'])"
        if isinstance(key, str) and key.startswith("__"):
            return at, f"{key!r}: names starting with '__' are not allowed"
    if not isinstance(node, NODES):
        span = source[at : getattr(node, "end_col_offset", at + 1)]
        return at, f"{_shown(span)} is not allowed"
    return None


def _check(tree: ast.Expression, source: str) -> tuple[int, str] | None:
    """The leftmost refusal in ``tree``, or the first node nested too deep; None when it passes."""
    refusals = []
    stack: list[tuple[ast.AST, ast.AST | None, int]] = [(tree, None, 0)]
    while stack:
        node, parent, depth = stack.pop()
        if (found := _refusal(node, parent, source)) is not None:
            refusals.append(found)
        depth += isinstance(node, ast.expr)
        if depth > MAX_DEPTH:
            refusals.append((node.col_offset, f"nested deeper than {MAX_DEPTH} levels"))
            continue
        stack.extend((child, node, depth) for child in ast.iter_child_nodes(node))
    return min(refusals, default=None)


# ------------------------------------------------------------------ parsing
@dataclass(frozen=True)
class Expression:
    """A parsed expression (from :func:`parse`): its text, checked tree, and offsets map."""

    text: str
    tree: ast.Expression
    names: dict[str, str]  # placeholder -> backquoted column name
    origin: tuple[int, ...]

    def _error(self, offset: int | None, reason: str) -> ExpressionError:
        pos = None if offset is None else self.origin[min(offset, len(self.origin) - 1)] + 1
        return ExpressionError(self.text, pos, reason)

    def _column(self, node: ast.Name) -> str:
        return self.names.get(node.id, node.id)


def _syntax_error(text: str, exc: SyntaxError, source: str, tokens) -> ExpressionError:
    """Python's SyntaxError as one line naming the token it stopped at."""
    at = exc.offset - 1 if exc.offset else len(source)
    if (
        "forgot a comma" in str(exc.msg) and exc.end_offset
    ):  # Python names the pair: take the second
        inside = [t for t in tokens if at <= t[0] < exc.end_offset - 1]
        at = inside[1][0] if len(inside) > 1 else at
    k = bisect.bisect_left([t[0] for t in tokens], at)
    if k == len(tokens):
        return ExpressionError(
            text, len(text) + 1, "expected a column, number, text or '(', found the end"
        )
    raw = text[tokens[k][1] : tokens[k][2]]
    reason = (
        f"{raw!r} needs something before it"
        if raw in ("and", "or", "&", "|", "in")
        else f"unexpected {_shown(raw)}"
    )
    return ExpressionError(text, tokens[k][1] + 1, reason)


def parse(text: str) -> Expression:
    """Parse ``text`` into a checked expression."""
    if not isinstance(text, str):
        raise ExpressionError(str(text), None, "an expression must be text")
    if len(text) > MAX_LENGTH:
        raise ExpressionError(
            text, MAX_LENGTH + 1, f"longer than {MAX_LENGTH} characters ({len(text)})"
        )
    if not text.strip():
        raise ExpressionError(text, None, "empty expression")
    source, origin, names, tokens = _scan(text)
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        raise _syntax_error(text, exc, source, tokens) from None
    expr = Expression(text, tree, names, tuple(origin))
    if (refused := _check(tree, source)) is not None:
        raise expr._error(*refused)
    return expr


def columns(expr: Expression | str) -> list[str]:
    """The column names an expression uses, in order of first appearance."""
    expr = parse(expr) if isinstance(expr, str) else expr
    called = {id(n.func) for n in ast.walk(expr.tree) if isinstance(n, ast.Call)}
    found = [n for n in ast.walk(expr.tree) if isinstance(n, ast.Name) and id(n) not in called]
    found.sort(key=lambda n: n.col_offset)
    return list(dict.fromkeys(expr._column(n) for n in found))


# ------------------------------------------------------------------ values
def _is_text(v) -> bool:
    if isinstance(v, pd.Series):
        return not (pd.api.types.is_numeric_dtype(v) or pd.api.types.is_bool_dtype(v))
    return isinstance(v, str)


def _is_bool(v) -> bool:
    if isinstance(v, pd.Series):
        return pd.api.types.is_bool_dtype(v)
    return isinstance(v, (bool, np.bool_))


def _constant(value):
    """A literal as NumPy gives it: int64 (float64 beyond its range), float64, bool_, or text."""
    if isinstance(value, bool):
        return np.bool_(value)
    if isinstance(value, int):
        return np.int64(value) if value < 2**63 else np.float64(value)
    return np.float64(value) if isinstance(value, float) else value


def _as_float_if_int(v):
    """Integer powers can overflow silently or refuse negative exponents: use floats."""
    if isinstance(v, pd.Series) and pd.api.types.is_integer_dtype(v):
        return v.astype(float)
    if isinstance(v, (int, np.integer)):
        return np.float64(v)
    return v


_SERIES_COMPARE = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
                   ">": operator.gt, ">=": operator.ge}  # fmt: skip
_FLIPPED = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}


def _compare(op: str, a, b):
    if isinstance(a, pd.Series) or isinstance(b, pd.Series):
        if not isinstance(a, pd.Series):  # keep the column on the left: pandas' own rules
            return _compare(_FLIPPED.get(op, op), b, a)
        if isinstance(a.dtype, pd.CategoricalDtype) and (
            op not in ("==", "!=") or isinstance(b, pd.Series)
        ):
            a = a.astype(object)
        if isinstance(b, pd.Series) and isinstance(b.dtype, pd.CategoricalDtype):
            b = b.astype(object)
        out = _SERIES_COMPARE[op](a, b)
        return out.astype(bool) if not pd.api.types.is_bool_dtype(out) else out
    if _is_text(a) != _is_text(b):
        if op in ("==", "!="):
            return np.bool_(op == "!=")
        raise TypeError("cannot order text against a number")
    return np.bool_(_SERIES_COMPARE[op](a, b))


def _both(a, b, op: str):
    """``a and b`` / ``a or b`` of true/false values, element-wise when either is a column."""
    if isinstance(a, pd.Series) or isinstance(b, pd.Series):
        return a & b if op == "and" else a | b
    return np.bool_(a and b) if op == "and" else np.bool_(a or b)


class _Evaluator:
    """Evaluates a checked tree over the columns of one frame."""

    def __init__(self, expr: Expression, frame: pd.DataFrame, where=None):
        self.expr, self.frame = expr, frame
        self.where = where or (lambda i: f"row {i + 1}")

    def path(self, node: ast.Attribute | ast.Subscript) -> pd.Series:
        """The nested JSON field a path reads, per row (JSON text is parsed; null stays null)."""
        keys: list[int | str] = []
        shown = ""
        while isinstance(node, (ast.Attribute, ast.Subscript)):
            key = node.attr if isinstance(node, ast.Attribute) else _key(node.slice)
            shown = (f".{key}" if isinstance(node, ast.Attribute) else f"[{key!r}]") + shown
            keys.insert(0, key)
            node = node.value
        column = self(node)
        shown = self.expr._column(node) + shown
        out = []
        for i, v in enumerate(column.astype(object)):
            for key in keys:
                if isinstance(v, str) and v.lstrip()[:1] in ("{", "["):
                    try:
                        v = json.loads(v)
                    except ValueError:
                        pass  # text, not JSON: refused below
                if v is None or (isinstance(v, float) and np.isnan(v)):
                    break
                if isinstance(v, dict) and key in v:
                    v = v[key]
                elif isinstance(v, (list, tuple, np.ndarray)) and type(key) is int:
                    if not -len(v) <= key < len(v):
                        why = f"index {key} out of range (it holds {len(v)})"
                        raise ExpressionError(
                            self.expr.text, None, f"{self.where(i)}: {shown}: {why}"
                        )
                    v = v[key]
                else:
                    why = (
                        f"no key {key!r}"
                        if isinstance(v, dict)
                        else f"{_shown(repr(v))[1:-1]} holds no fields"
                    )
                    raise ExpressionError(self.expr.text, None, f"{self.where(i)}: {shown}: {why}")
            out.append(v)
        return pd.Series(out, index=column.index)

    def number(self, node: ast.expr, what: str):
        """The value of ``node`` as a number (true/false as 1/0); text is an error."""
        v = self(node)
        if _is_text(v):
            shown = (
                f"column {self.expr._column(node)!r} holds text"
                if isinstance(node, ast.Name)
                else "it is text"
            )
            raise self.expr._error(node.col_offset, f"{what} needs numbers, but {shown}")
        if _is_bool(v):
            return v.astype(np.int64) if isinstance(v, pd.Series) else np.int64(v)
        return v

    def truth(self, node: ast.expr, what: str):
        """The value of ``node``, which must be true/false."""
        v = self(node)
        if not _is_bool(v):
            raise self.expr._error(
                node.col_offset,
                f"{what!r} needs true/false values (comparisons), e.g. (a > 1) {what} (b == 2)",
            )
        return v

    def __call__(self, node: ast.expr):
        if isinstance(node, ast.Constant):
            return _constant(node.value)
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            return self.path(node)
        if isinstance(node, ast.Name):
            name = self.expr._column(node)
            if name not in self.frame.columns:
                raise self.expr._error(node.col_offset, f"no column named {name!r}")
            return self.frame[name]
        if isinstance(node, ast.Call):
            fn, _, _, numeric = FUNCTIONS[node.func.id]
            what = f"{node.func.id}()"
            return fn(*[self.number(a, what) if numeric else self(a) for a in node.args])
        if isinstance(node, ast.UnaryOp):
            op = _UNARY[type(node.op)]
            if op in ("not", "~"):
                v = self.truth(node.operand, op)
                return ~v if isinstance(v, pd.Series) else np.bool_(not v)
            v = self.number(node.operand, f"unary {op!r}")
            return -v if op == "-" else +v
        if isinstance(node, ast.BoolOp):
            op = "and" if isinstance(node.op, ast.And) else "or"
            out = self.truth(node.values[0], op)
            for v in node.values[1:]:
                out = _both(out, self.truth(v, op), op)
            return out
        if isinstance(node, ast.BinOp):
            symbol, fn = _ARITH[type(node.op)]
            a, b = self.number(node.left, repr(symbol)), self.number(node.right, repr(symbol))
            if symbol in ("**", "/", "//", "%"):
                a, b = _as_float_if_int(a), _as_float_if_int(b)
            return fn(a, b)
        if isinstance(node, ast.Compare):  # a < b < c: (a < b) and (b < c), as in Python
            left, out = self(node.left), None
            for op, comp in zip(node.ops, node.comparators, strict=True):
                if isinstance(op, (ast.In, ast.NotIn)):
                    values = [self(e) for e in getattr(comp, "elts", [comp])]
                    if isinstance(left, pd.Series):
                        found = left.isin(values)
                    else:
                        found = np.bool_(any(_compare("==", left, v) for v in values))
                    value = ~found if isinstance(op, ast.NotIn) else found
                else:
                    right = self(comp)
                    value = _compare(_COMPARE[type(op)], left, right)
                    left = right
                out = value if out is None else _both(out, value, "and")
            return out
        raise self.expr._error(node.col_offset, "outside the grammar")  # pragma: no cover


def evaluate(expr: Expression | str, frame: pd.DataFrame, where=None):
    """Evaluate an expression over the rows of ``frame`` (``where(i)`` names row ``i`` in errors)."""
    expr = parse(expr) if isinstance(expr, str) else expr
    try:
        with np.errstate(all="ignore"):
            return _Evaluator(expr, frame, where)(expr.tree.body)
    except ExpressionError:
        raise
    except (TypeError, ValueError, OverflowError, ZeroDivisionError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ExpressionError(
            expr.text, None, f"not computable on these columns ({reason})"
        ) from None
