"""Every exact comparison in the tests says why it is exact (docs/conventions.md, "Exact
comparisons in tests").

float32 results of two different compiled programs (eager vs jit, numpy vs JAX, another batch
or chunk shape, a file drawn on another CPU) differ in their last bits from one instruction set
to another, so a test that asserts them bit-equal passes here and fails on a user's machine.
An exact assertion is right only where both sides come from one compiled program with the same
inputs, one read of a file, copies of stored values, or integer, boolean or byte data. This test
scans ``tests/*.py`` for the exact forms and asks each to carry an ``# exact: <why>`` comment on
its line or in the comment lines just above it; ``assert not ...equal`` (a claim that two
things differ) and ``atol=0`` beside a nonzero ``rtol`` (a relative tolerance) need none.
"""

from __future__ import annotations

import re
from pathlib import Path

#: The exact forms: a zero absolute tolerance, numpy's/xarray's/torch's equality assertions.
EXACT = re.compile(r"\barray_equal\(|assert_array_equal\(|assert_identical\(|\.identical\("
                   r"|xr\.testing\.assert_equal\(|\.equals\(|torch\.equal\(")
#: ``atol=0`` is exact unless a nonzero ``rtol`` stands beside it (a relative tolerance).
ZERO_ATOL = re.compile(r"atol\s*=\s*0(?![.\deE])\s*[,)]")
RELATIVE = re.compile(r"rtol\s*=\s*(?!0(?![.\deE])\s*[,)])\S")
NEGATED = re.compile(r"\bnot\s+(np\.|torch\.)?\w*\.?(array_)?equal\(|\bnot\s+\w+\.equals\(")
REASON = re.compile(r"#\s*exact:\s*\S")


def unexplained(text: str) -> list[tuple[int, str]]:
    """``(line number, line)`` of each exact comparison in ``text`` with no ``# exact:``
    comment on its line or in the comment lines right above it."""
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        code = line.split("#", 1)[0]
        around = " ".join(x.split("#", 1)[0] for x in lines[max(i - 1, 0):i + 2])
        zero = ZERO_ATOL.search(code) and not RELATIVE.search(around)
        if not (EXACT.search(code) or zero) or NEGATED.search(code):
            continue
        if REASON.search(line):
            continue
        j = i - 1
        explained = False
        while j >= 0 and lines[j].lstrip().startswith("#"):
            if REASON.search(lines[j]):
                explained = True
                break
            j -= 1
        if not explained:
            out.append((i + 1, line.strip()))
    return out


def test_the_scan_finds_an_unexplained_comparison_and_accepts_a_reason():
    bad = ("x = 1\nnp.testing.assert_array_equal(a, b)\nnp.testing.assert_allclose(a, b, atol=0)\n"
           "np.testing.assert_allclose(a, b, rtol=0, atol=0)\n")
    assert [n for n, _ in unexplained(bad)] == [2, 3, 4]
    good = ("# exact: integers\nnp.testing.assert_array_equal(a, b)\n"
            "assert np.array_equal(a, b)  # exact: same jitted program, same inputs\n"
            "# exact: one read of the file\n# (both sides)\nxr.testing.assert_identical(a, b)\n"
            "assert not np.array_equal(a, b)\nnp.testing.assert_allclose(a, b, atol=0.5)\n"
            "np.testing.assert_allclose(a, b, atol=0e0 + 1e-6)\n"
            "np.testing.assert_allclose(a, b, rtol=RTOL, atol=0)\n"
            "np.testing.assert_allclose(a, b, rtol=4e-6,\n    atol=0)\n")
    assert unexplained(good) == []
    assert [n for n, _ in unexplained("# exact:\nassert np.array_equal(a, b)\n")] == [2]


def test_every_exact_comparison_says_why_it_is_exact():
    here = Path(__file__).parent
    missing = [f"{p.name}:{n}: {line}" for p in sorted(here.glob("*.py")) if p != Path(__file__)
               for n, line in unexplained(p.read_text(encoding="utf-8"))]
    assert not missing, (
        f"{len(missing)} exact comparison(s) without a reason. Float equality holds only within "
        "one compiled program (docs/conventions.md): put '# exact: <why>' on the line or the "
        "comment line above (same jitted program and inputs; one read of a file; copies of "
        "stored values; integers/bytes/bit patterns), or compare with a tolerance from float32 "
        "rounding, e.g. atol = k * eps32 * max|value|, saying why that k:\n  "
        + "\n  ".join(missing))
