"""Row expressions (issue 26, item 1; issue 50: parsed by `ast`, a whitelist of nodes): never Python evaluation."""

from __future__ import annotations

import ast
import builtins
import json
import random

import numpy as np
import pandas as pd
import pytest

from bayesobs import expr as E
from bayesobs.cli import main
from bayesobs.errors import BayesobsInputError
from bayesobs.expr import MAX_DEPTH, MAX_LENGTH, ExpressionError, columns, evaluate, parse


@pytest.fixture
def frame():
    """Numbers with a missing value, text as categories (as a CSV is read) and as objects, bools."""
    return pd.DataFrame(
        {
            "stimulus": [1.0, 2.5, np.nan, 4.0, 10.0],
            "keyDuration": [800, 1200, 9999, 450, 10000],
            "valid": [1, 0, 1, 1, 0],
            "TrialType": pd.Categorical(["Time", "Dist", "Time", np.nan, "Time"]),
            "name": ["a", "b", "c", "a", None],
            "ok": [True, False, True, True, False],
            "col name": [3, 4, 5, 6, 7],
        }
    )


# expressions pandas' DataFrame.eval also computes: the independent reference
REFERENCE = [
    "valid == 0",
    "valid != 0",
    "keyDuration / 1000",
    "keyDuration >= 9999",
    "TrialType == 'Time'",
    'TrialType != "Time"',
    "name == 'a'",
    "stimulus > 2",
    "stimulus <= 2.5",
    "stimulus == stimulus",
    "stimulus * 2 + 1",
    "-stimulus ** 2",
    "2 ** -1 * stimulus",
    "stimulus % 3",
    "keyDuration // 7",
    "(stimulus + 1) * (valid - 2)",
    "valid == 1 and stimulus > 2",
    "valid == 1 & stimulus > 2",
    "valid == 0 or stimulus < 2",
    "valid == 0 | stimulus < 2",
    "not valid == 1",
    "~ok",
    "ok & (valid == 1)",
    "1 < stimulus < 5",
    "valid in [0, 2]",
    "name in ('a', 'c')",
    "name not in ['a']",
    "name in ('a')",
    "TrialType in ['Dist']",
    "abs(stimulus - 3)",
    "sqrt(stimulus)",
    "log(stimulus)",
    "exp(stimulus / 10)",
    "log10(keyDuration)",
    "`col name` * 2",
    "stimulus > 1e0",
    "stimulus > .5",
    "keyDuration / 1000 > 1",
    "True",
    "3 * 2 - 1",
    "'numerosity'",
]


@pytest.mark.parametrize("text", REFERENCE)
def test_the_same_as_pandas_eval(frame, text):
    want = frame.eval(text)
    got = evaluate(text, frame)
    if isinstance(want, pd.Series):
        assert isinstance(got, pd.Series)
        pd.testing.assert_series_equal(
            got.reset_index(drop=True),
            want.reset_index(drop=True),
            check_dtype=False,
            check_names=False,
            check_categorical=False,
        )
    else:
        assert got == want


def test_missing_values_compare_false(frame):
    assert evaluate("stimulus > 0", frame).tolist() == [True, True, False, True, True]
    assert evaluate("stimulus != 2.5", frame).tolist() == [True, False, True, True, True]
    assert evaluate("TrialType == 'Time'", frame).tolist() == [True, False, True, False, True]
    assert evaluate("isnull(stimulus)", frame).tolist() == [False, False, True, False, False]
    assert evaluate("notna(name)", frame).tolist() == [True, True, True, True, False]


def test_functions_and_constants(frame):
    assert evaluate("round(stimulus / 3, 2)", frame).tolist()[:2] == [0.33, 0.83]
    assert evaluate("min(stimulus, 3)", frame).tolist()[:2] == [1.0, 2.5]
    assert evaluate("max(valid, 0.5)", frame).tolist() == [1, 0.5, 1, 1, 0.5]
    assert evaluate("floor(stimulus)", frame).tolist()[:2] == [1.0, 2.0]
    assert evaluate("'x'", frame) == "x"
    assert evaluate("'it\\'s'", frame) == "it's"
    assert columns("a + b * abs(a) > `c d`") == ["a", "b", "c d"]


def test_one_constant_in_parentheses_after_in_is_a_list_of_one(frame):
    """As the grammar had it before Python's parser read it (where (1) is just 1)."""
    assert evaluate("valid in (1)", frame).tolist() == evaluate("valid in [1]", frame).tolist()
    assert evaluate("valid not in (-1)", frame).all()
    with pytest.raises(ExpressionError, match="position 11: 'in' takes a list"):
        parse("valid in (1) < 2")


def test_a_column_named_like_a_function_is_still_a_column():
    df = pd.DataFrame({"log": [1.0, 2.0], "min": [3, 4]})
    assert evaluate("log + min", df).tolist() == [4.0, 6.0]


@pytest.mark.parametrize(
    ("text", "position", "words"),
    [
        ("a.b(1)", 4, "only the functions"),  # a path reads data (issue 51); nothing is called
        ("stimulus.__class__", 10, "'__'"),
        ("stimulus[x]", 9, "a subscript is a constant"),
        ("abs(a)[0]", 7, "subscripts and fields read data"),
        ("__import__('os')", 1, "'__'"),
        ("__class__", 1, "'__'"),
        ("open('x')", 1, "not a function"),
        ("stimulus('x')", 1, "not a function"),
        ("abs(stimulus)(1)", 14, "only the functions"),
        ("[1, 2]", 1, "'['"),
        ("lambda: 1", 1, "'lambda'"),
        ("f'{stimulus}'", 1, "f-strings"),
        ("stimulus if 1 else 2", 10, "'if' is not allowed"),
        ("x = 1", 3, "'=='"),
        ("@x > 1", 1, "'@'"),
        ("a == (1, 2)", 8, "tuple"),
        ("a in b", 6, "list of constants"),
        ("a in [b]", 7, "numbers and quoted texts"),
        ("1 +", 4, "the end"),
        ("(a", 3, "')'"),
        ("'abc", 1, "closing quote"),
        ("`abc", 1, "closing backquote"),
        ("a; b", 2, "';'"),
        ("abs(a, b)", 1, "takes 1"),
        ("min(a)", 1, "takes 2"),
        ("a is None", 3, "'is' is not allowed"),
        ("a b", 3, "unexpected"),
        ("1x", 2, "right after the number"),
        ("and a", 1, "needs something before"),
        ("", None, "empty"),
        # Python that the grammar leaves out (issue 50: the parser is Python's own)
        ("[c for c in x]", 4, "'for' is not allowed"),
        ("{'a': 1}", 1, "'{'"),
        ("(x := 1)", 4, "':'"),
        ("stimulus[1:2]", 11, "':'"),
        ("...", 1, "'.'"),
        ("a << 2", 3, "'<<' is not allowed"),
        ("abs(*a)", 5, "'*a' is not allowed"),
        ("a in [*b]", 7, "'*b' is not allowed"),
        ("`abs`(a)", 6, "only the functions"),
        ("a in [1] < 2", 6, "'['"),
        ("'a' 'b'", 5, "unexpected"),
        ("1j", 2, "right after the number"),
        ("0x10", 2, "right after the number"),
        ("stimulus > 1 # comment", 14, "'#'"),
        ("a ^ b", 3, "'^'"),
        ("a\\\n+ 1", 2, "'\\\\'"),
    ],
)
def test_outside_the_grammar_names_the_position(text, position, words):
    with pytest.raises(ExpressionError) as info:
        parse(text)
    assert info.value.position == position, str(info.value)
    assert words in str(info.value)
    assert isinstance(info.value, BayesobsInputError)
    if position is not None:
        assert f"position {position}:" in str(info.value)


@pytest.mark.parametrize(
    "source",
    ["a.__class__", "a['__globals__']", "abs(a)[0]", "a[b]", "a[1.5]", "lambda: 1", "[c for c in a]", "{c for c in a}", "{a: 1}", "(c for c in a)",
     "a[1:2]", "open('x')", "__import__('os')", "abs(a).real", "abs(*a)", "abs(x=a)",
     "abs(**a)", "(x := 1)", "a if b else c", "f'{a}'", "a is None", "a @ b", "a ^ b", "a & b",
     "a << 1", "...", "None", "b'x'", "1j", "{a}", "x in y", "x == [1]", "x == (1, 2)"],
)  # fmt: skip
def test_the_whitelist_refuses_what_the_scan_would_let_through(source):
    """The second line of defence: Python outside the grammar, parsed by ast directly, is refused."""
    tree = ast.parse(source, mode="eval")
    at, reason = E._check(tree, source)
    assert 0 <= at < len(source) and reason, (source, at, reason)


def test_length_and_depth_are_bounded():
    with pytest.raises(ExpressionError, match=f"longer than {MAX_LENGTH}"):
        parse("a + " * 300 + "a")
    for text in (
        "(" * 200 + "a" + ")" * 200,
        "-" * 500 + "a",
        "not " * 200 + "a",
        " + ".join(["a"] * 200),
        "2 ** " * 100 + "2",
        "abs(" * 100 + "a" + ")" * 100,
    ):
        with pytest.raises(ExpressionError, match=f"deeper than {MAX_DEPTH}"):
            parse(text)
    assert isinstance(parse("(" * 20 + "a" + ")" * 20).tree.body, ast.Name)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("nope > 1", "no column named 'nope'"),
        ("name + 1", "holds text"),
        ("name * 3", "holds text"),
        ("'a' * 100000000", "it is text"),
        ("stimulus and valid", "needs true/false"),
        ("~valid", "needs true/false"),
        ("log(name)", "holds text"),
        ("TrialType < 'Time' and stimulus > 1 or name > 2", "not computable"),
        ("round(stimulus, 1.5)", "not computable"),
    ],
)
def test_what_the_values_do_not_support_is_one_error(frame, text, words):
    with pytest.raises(ExpressionError) as info:
        evaluate(text, frame)
    assert words in str(info.value)


def test_huge_numbers_stay_numbers(frame):
    # Python ints would make 10 ** 10 ** 10 a long computation; NumPy floats give inf at once
    assert evaluate("10 ** 10 ** 10", frame) == np.inf
    assert evaluate("99999999999999999999999 > 1", frame)
    assert np.isinf(evaluate("stimulus / 0", frame)).sum() == 4
    assert evaluate("2 ** -1", frame) == 0.5


# ------------------------------------------------------------------ the fuzzer
_ATOMS = [
    "stimulus", "valid", "name", "TrialType", "ok", "`col name`", "1", "2.5", "1e3", "'a'",
    '"Time"', "True", "__class__", "__import__", "__globals__", "__builtins__", "os", "eval",
    "exec", "lambda", "open", "sys", "getattr", "abs", "log", "min", "x", "f'{1}'", "b'1'",
    "globals", "__init__", "system", "None", "import", "for", "if", "is", "@v",
]  # fmt: skip
_GLUE = [
    "+", "-", "*", "/", "//", "%", "**", "==", "!=", "<", "<=", ">", ">=", "and", "or",
    "not", "in", "not in", "&", "|", "~", "(", ")", "[", "]", ",", ".", ":", ";", "=",
    "`", "'", '"', "\\", "{", "}", "#", "$", "!", "?", "\n",
]  # fmt: skip
_CRAFTED = [
    "stimulus.__class__.__init__.__globals__['np'].save('PWNED', 1)",
    "__import__('os').system('touch PWNED')",
    "stimulus.__class__.__init__.__globals__['__builtins__']['open']('PWNED', 'w')",
    "(lambda: __import__('os'))()",
    'f\'{__import__("os").system("touch PWNED")}\'',
    "[c for c in ().__class__.__base__.__subclasses__()]",
    "getattr(stimulus, '__class__')",
    "eval('1')",
    "exec('import os')",
    "@__builtins__",
    "stimulus.apply(eval)",
    "valid == 1 and __import__('os')",
    "abs(stimulus).__class__",
    "`__class__`",  # a backquoted name is only ever looked up as a column
]


def _sequences(n: int, seed: int):
    """Random token sequences: a third alternate atoms and glue (so many parse), the rest anything."""
    rng = random.Random(seed)
    for i in range(n):
        k = rng.randint(1, 12)
        if i % 3 == 0:
            yield " ".join(rng.choice(_GLUE if j % 2 else _ATOMS) for j in range(k))
        else:
            yield " ".join(rng.choice(_ATOMS if rng.random() < 0.5 else _GLUE) for _ in range(k))


def test_the_fuzzer_never_evaluates_python(frame, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # a crafted expression that ran would leave PWNED here

    def refuse(*args, **kwargs):
        raise AssertionError("Python evaluation was reached")

    real_compile = builtins.compile

    def parse_only(source, filename, mode, flags=0, *args, **kwargs):
        """ast.parse compiles to a syntax tree only; any other compile is evaluation."""
        if not flags & ast.PyCF_ONLY_AST:
            refuse()
        return real_compile(source, filename, mode, flags, *args, **kwargs)

    monkeypatch.setattr(builtins, "compile", parse_only)
    for target, name in (
        (builtins, "eval"),
        (builtins, "exec"),
        (pd, "eval"),
        (pd.DataFrame, "eval"),
        (pd.DataFrame, "query"),
    ):
        monkeypatch.setattr(target, name, refuse)
    parsed = refused = 0
    for text in [*_CRAFTED, *_sequences(3000, seed=26)]:
        try:
            tree = parse(text)
        except ExpressionError as exc:
            assert exc.position is None or 1 <= exc.position <= len(text) + 1, (text, exc)
            refused += 1
            continue
        parsed += 1
        for node in ast.walk(tree.tree):
            assert isinstance(node, E.NODES), (text, node)
            if isinstance(node, ast.Call):
                assert node.func.id in E.FUNCTIONS
            if isinstance(node, ast.Name):  # a dunder name only backquoted, and only looked up
                assert not tree.names.get(node.id, node.id).startswith("__") or "`" in text, text
        try:  # anything but a value or an ExpressionError (a TypeError, a RecursionError) fails
            value = evaluate(tree, frame)
        except ExpressionError:
            continue
        assert isinstance(value, (pd.Series, np.generic, str)), (text, type(value))
    monkeypatch.undo()
    assert not list(tmp_path.iterdir())
    assert parsed > 100 and refused > 1000  # both sides of the grammar were exercised


# ------------------------------------------------------------------ through the CLI
def _csv(path):
    rng = np.random.default_rng(2)
    s = rng.uniform(1, 5, 40)
    r = s + rng.normal(0, 0.3, 40)
    path.write_text(
        "stimulus,response,valid\n"
        + "".join(f"{a},{b},{i % 5 != 0:d}\n" for i, (a, b) in enumerate(zip(s, r, strict=True)))
    )
    return path


@pytest.mark.parametrize("option", ["--map", "--where", "--missing-where"])
def test_a_crafted_expression_on_the_command_line_is_refused(tmp_path, capsys, option):
    path = _csv(tmp_path / "t.csv")
    crafted = f"stimulus.__class__.__init__.__globals__['np'].save('{tmp_path}/PWNED', 1)"
    value = f"response={crafted}" if option == "--map" else crafted
    assert main(["fit", str(path), "--out", str(tmp_path / "o"), option, value]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "position 10: '__class__': names starting with '__' are not allowed" in err
    assert not (tmp_path / "PWNED.npy").exists()


def test_a_score_folder_never_evaluates_its_manifest(tmp_path, capsys):
    """`report` reads a score folder's stored trials; it never evaluates the manifest's expressions."""
    path = _csv(tmp_path / "t.csv")
    folder = tmp_path / "s"
    argv = ["score", str(path), "--out", str(folder), "--bootstrap", "0", "--no-probe"]
    # (the report draws only the paper's tasks: name one with a quoted constant)
    assert main([*argv, "--where", "valid == 1", "--map", "task='duration'"]) == 0
    man = folder / "score_manifest.json"
    record = json.loads(man.read_text())
    crafted = f"stimulus.__class__.__init__.__globals__['np'].save('{tmp_path}/PWNED', 1)"
    record.update(where=crafted, missing_where=crafted, map=[f"response={crafted}"])
    man.write_text(json.dumps(record))
    # with its trials.parquet: read, nothing evaluated
    assert main(["report", str(folder), "--out", str(tmp_path / "r1")]) == 0
    assert not (tmp_path / "PWNED.npy").exists()
    # without it: one line asking for `score` again, still nothing evaluated
    (folder / "trials.parquet").unlink()
    capsys.readouterr()
    assert main(["report", str(folder), "--out", str(tmp_path / "r2")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "run bayesobs score again" in err and "--where" in err
    assert not (tmp_path / "PWNED.npy").exists()
