"""The house's own size rules (CONTRIBUTING.md): the user's pages in docs/ stay within
200 KiB of Markdown."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS_LIMIT = 200 * 1024  # bytes of Markdown under docs/, every folder included


def test_docs_fit_in_200_kib():
    pages = sorted((ROOT / "docs").rglob("*.md"))
    sizes = {str(p.relative_to(ROOT)): p.stat().st_size for p in pages}
    total = sum(sizes.values())
    biggest = sorted(sizes.items(), key=lambda kv: -kv[1])[:5]
    assert total <= DOCS_LIMIT, f"docs/ holds {total:,} bytes of Markdown; largest: {biggest}"
