"""Share of docstring lines in src/: module, class and function docstrings against all lines.

Usage: ``python scripts/docstring_share.py [--top N] [--limit PCT] [PATH ...]`` (default
``src``). Prints the docstring lines, all lines and their ratio; ``--top N`` lists the N longest
docstrings; ``--limit PCT`` exits 1 when the share is over PCT or a module docstring is over 30
lines.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

MODULE_LIMIT = 30


def docstrings(path: Path) -> list[tuple[str, int]]:
    """(qualified name, line count) of every module, class and function docstring in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []

    def visit(node, prefix):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            doc = body[0]
            out.append((prefix or "<module>", doc.end_lineno - doc.lineno + 1))
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(child, f"{prefix}.{child.name}" if prefix else child.name)

    visit(tree, "")
    return out


def main(argv: list[str] | None = None) -> int:
    """Print the share; return 1 when ``--limit`` is given and exceeded, else 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", default=["src"])
    parser.add_argument("--top", type=int, default=0, help="list the N longest docstrings")
    parser.add_argument("--limit", type=float, help="fail above this percentage")
    args = parser.parse_args(argv)
    files = sorted(f for p in args.paths for f in
                   ([Path(p)] if Path(p).is_file() else Path(p).rglob("*.py")))
    total = doc = 0
    rows, long_modules = [], []
    for f in files:
        total += len(f.read_text(encoding="utf-8").splitlines())
        for name, n in docstrings(f):
            doc += n
            rows.append((n, f"{f}:{name}"))
            if name == "<module>" and n > MODULE_LIMIT:
                long_modules.append(f"{f} ({n} lines)")
    share = 100 * doc / total if total else 0.0
    print(f"docstring lines {doc:,} of {total:,} source lines: {share:.1f} % ({len(files)} files)")
    print(f"module docstrings over {MODULE_LIMIT} lines: {len(long_modules)}")
    for m in long_modules:
        print(f"  {m}")
    for n, where in sorted(rows, reverse=True)[:args.top]:
        print(f"{n:5d}  {where}")
    if args.limit is not None and (share > args.limit or long_modules):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
