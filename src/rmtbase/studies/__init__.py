"""Studies that reproduce the seeds' figures and check their numerical claims.

Each study is a module ``rmtbase.studies.<name>`` with ``run(out_dir, quick=False, seed=0) ->
dict`` (extra options: :func:`check_options`); it writes figures and the numbers behind them
into ``out_dir`` and returns ``{"figures": [...], "data": [...], "summary": {...}}``.
``quick=True`` runs a reduced size (CI); the registry below is the single list of studies.
Nothing is imported until a study is run."""

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
    "product_networks": "seed 004: Ginibre and residual products vs depth against "
                        "their limit laws, exact finite-d moments and kurtosis curves",
    "head_function": "seed 003: weight statistics vs attention behaviour on text "
                     "(Spearman, within-layer permutations; anomalous vs specialised heads)",
    "circuits": "small GPT-2s trained to contain an induction circuit; does "
                "K-composition of the weights find the probe's previous-token -> induction pairs",
}


def names() -> list[str]:
    """Names of the registered studies, in registry order."""
    return list(STUDIES)


def get(name: str):
    """The module of study ``name`` (InputError naming the known studies otherwise)."""
    if name not in STUDIES:
        raise InputError(f"unknown study {name!r}; known: {', '.join(STUDIES)}")
    return importlib.import_module(f"{__name__}.{name}")


def check_out(name: str, out_dir, *, overwrite: bool = True) -> Path:
    """``out_dir/name``, checked before any work: absent, empty or this study's earlier output."""
    from ..files.output import check_output_dir

    get(name)
    parent = Path(out_dir).expanduser()
    if parent.exists() and not parent.is_dir():
        raise InputError(f"{parent} exists and is not a folder; give a folder for --out")
    return check_output_dir(parent / name, f"rmtbase study {name}", overwrite=overwrite)


def check_options(name: str, options: dict) -> None:
    """InputError when study ``name``'s ``run`` does not take every key of ``options``."""
    import inspect

    params = inspect.signature(get(name).run).parameters
    bad = sorted(k for k in options if k not in params)
    if bad:
        raise InputError(f"study {name} takes no --{bad[0]}")


def run(name: str, out_dir, *, quick: bool = False, seed: int = 0, overwrite: bool = True,
        **options) -> dict:
    """Run study ``name`` into ``out_dir/name`` all or nothing and return its result dict.
    ``options``: the study's extra keyword arguments (:func:`check_options`);
    ``overwrite=False`` refuses an earlier output."""
    from ..files.output import OutputFolder

    module = get(name)
    check_options(name, options)
    final = check_out(name, out_dir, overwrite=overwrite)
    with OutputFolder(final, kind=f"rmtbase study {name}") as folder:
        result = module.run(folder.tmp, quick=quick, seed=seed, **options)
        for p in sorted(folder.tmp.rglob("*")):
            if p.is_file():
                rel = p.relative_to(folder.tmp).as_posix()
                folder.written[rel] = final / rel

    def moved(path):
        return str(final / Path(path).relative_to(folder.tmp))

    for key in ("figures", "data"):
        if key in result:
            result[key] = [moved(p) for p in result[key]]
    return result
