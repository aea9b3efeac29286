"""Studies that reproduce the seeds' figures and check their numerical claims.

Each study is a module ``rmtbase.studies.<name>`` with ``run(out_dir, quick=False, seed=0) ->
dict``: it writes PNG figures and the numbers behind them (CSV / netCDF) into ``out_dir`` and
returns ``{"figures": [...], "data": [...], "summary": {...}}``. ``quick=True`` runs a reduced
size (well under a minute on 2 CPU cores; CI runs every study that way); the full size is what
``docs/gallery`` and ``studies/README.md`` show. The registry below is the single list of
studies; ``rmtbase study --list`` prints it. Nothing is imported until a study is run.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from ..errors import InputError

#: name -> one-line description (the seed each study reproduces).
STUDIES = {
    "random_baselines": "seed 000 Figs 1-4: elements, singular values, spectra, σ/entropy/KL of random W_QK",
    "product_spectrum": "seed 003 Fig 1: MC spectrum at (768, 64) vs MP and MP⊠MP; null spectral statistics",
    "weibull_anchor": "seed 002: Weibull anchor (k0, λ0/σ), noise curve V(p), verdicts on the paper's claims",
    "residual_paths": "seed 004: residual-path products vs depth; effective depth of MiniLM weights",
    "minilm": "seeds 000/003 per-head figures for all-MiniLM-L6-v2 against the null",
}


def names() -> list[str]:
    """Names of the registered studies, in registry order."""
    return list(STUDIES)


def get(name: str):
    """The module of study ``name`` (InputError naming the known studies otherwise)."""
    if name not in STUDIES:
        raise InputError(f"unknown study {name!r}; known: {', '.join(STUDIES)}")
    return importlib.import_module(f"{__name__}.{name}")


def run(name: str, out_dir, *, quick: bool = False, seed: int = 0) -> dict:
    """Run study ``name`` into ``out_dir`` (created if needed) and return its result dict."""
    module = get(name)
    out = Path(out_dir) / name
    return module.run(out, quick=quick, seed=seed)
