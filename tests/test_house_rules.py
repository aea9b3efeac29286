"""The house's own size rules (CONTRIBUTING.md): the user's pages in docs/ stay within
200 KiB of Markdown, and docstrings stay within 15 % of src/'s lines with no module docstring
over 30 lines (``scripts/docstring_share.py --limit 15``, the script the rule names)."""

from __future__ import annotations

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
