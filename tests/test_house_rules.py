"""The house's own size rules (CONTRIBUTING.md): the user's pages in docs/ stay within
200 KiB of Markdown, docstrings stay within 15 % of src/'s lines with no module docstring
over 30 lines (``scripts/docstring_share.py --limit 15``, the script the rule names), no module
of src/ is over 400 lines, and in ``rmtbase.circuits`` no function is over 60 lines or 7
parameters but the named exceptions, which may not grow."""

from __future__ import annotations

import ast
from pathlib import Path

from _scripts import load

ROOT = Path(__file__).resolve().parents[1]
DOCS_LIMIT = 200 * 1024  # bytes of Markdown under docs/, every folder included


def test_docs_fit_in_200_kib():
    pages = sorted((ROOT / "docs").rglob("*.md"))
    sizes = {str(p.relative_to(ROOT)): p.stat().st_size for p in pages}
    total = sum(sizes.values())
    biggest = sorted(sizes.items(), key=lambda kv: -kv[1])[:5]
    assert total <= DOCS_LIMIT, f"docs/ holds {total:,} bytes of Markdown; largest: {biggest}"


def test_docstrings_within_their_share(capsys):
    code = load("scripts/docstring_share.py").main(["--limit", "15", str(ROOT / "src")])
    out = capsys.readouterr().out
    assert code == 0, out



MODULE_LINES = 400
FUNCTION_LINES = 60  # from ``def`` to its last line, docstring included
PARAMETERS = 7  # self and cls not counted, *args and **kwargs counted
#: The functions of rmtbase.circuits over a limit, each with the (lines, parameters) it may
#: not exceed: to be split, or given a settings record, not grown.
OVER = {
    "head/run.py::_search": (90, 4),
    "head/run.py::_receiver_kind": (35, 9),
    "head/run.py::_row": (9, 10),
    "head/run.py::_via_rows": (36, 8),
}


def test_no_module_is_over_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in sorted((ROOT / "src").rglob("*.py"))
            if (n := len(p.read_text("utf-8").splitlines())) > MODULE_LINES}
    assert not long, f"modules over {MODULE_LINES} lines: {long}"


def _functions(root: Path):
    """``{"path::name": (lines, parameters)}`` of every function and method under ``root``."""
    out = {}
    for p in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text("utf-8"))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            a = node.args
            n = (len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + bool(a.vararg)
                 + bool(a.kwarg))
            if (a.posonlyargs + a.args)[:1] and (a.posonlyargs + a.args)[0].arg in ("self", "cls"):
                n -= 1
            key = f"{p.relative_to(root).as_posix()}::{node.name}"
            lines = node.end_lineno - node.lineno + 1
            old = out.get(key, (0, 0))
            out[key] = (max(old[0], lines), max(old[1], n))
    return out


def test_circuits_functions_keep_the_length_and_parameter_limits():
    got = _functions(ROOT / "src" / "rmtbase" / "circuits")
    bad = [f"{k}: {lines} lines, {n} parameters" for k, (lines, n) in sorted(got.items())
           if lines > max(FUNCTION_LINES, OVER.get(k, (0, 0))[0])
           or n > max(PARAMETERS, OVER.get(k, (0, 0))[1])]
    assert not bad, (f"over {FUNCTION_LINES} lines or {PARAMETERS} parameters (or over an "
                     "exception's own):\n" + "\n".join(bad))
    gone = sorted(set(OVER) - set(got))
    assert not gone, f"exceptions naming no function (remove them): {gone}"
