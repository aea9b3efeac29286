"""The ``rmtbase`` executable's entry point (``[project.scripts]``) and ``python -m rmtbase``.

Its only job is to import :mod:`rmtbase.cli` inside a guard: a Ctrl-C during that import (JAX,
numpy and xarray load there, the first ~0.1–1 s) ends the command with one line and exit 130
instead of a KeyboardInterrupt traceback. Everything after is
:func:`rmtbase.cli.console_main`.
"""

from __future__ import annotations

import sys


def main() -> int:
    try:
        from .cli import console_main
    except KeyboardInterrupt:
        sys.stderr.write("rmtbase: interrupted\n")
        return 130
    return console_main()


__all__ = ["main"]
