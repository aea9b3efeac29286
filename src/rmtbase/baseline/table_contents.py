"""What a head table holds and how it is drawn: statistic sets, ensembles, the stored spectrum
(:data:`STAT_SETS`, :func:`stat_names`, :data:`ENSEMBLES`, :func:`check_ensemble`,
:data:`LAMBDA_VAR` and kin, :func:`stores_spectrum`, :func:`n_eigenvalues`), and
:func:`fast_spectral`."""

from __future__ import annotations

from ..analytic._network_kind import ginibre_alias
from ..errors import InputError

#: The statistic sets a table can hold (``stats=``).
STAT_SETS = ("all", "spectral", "elementwise")
#: The null ensembles a table is drawn from (:mod:`rmtbase.baseline.null`): the one
#: definition, read by the tables, the draws and the command line. The spelling "gaussian" of
#: "ginibre" is accepted (:func:`check_ensemble`).
ENSEMBLES = ("lowrank", "ginibre", "residual")
#: Statistic sets that a table generated with ``stats=key`` can serve.
SERVES = {"all": {"all", "spectral", "elementwise"}, "spectral": {"spectral"},
           "elementwise": {"elementwise"}}


def check_ensemble(ensemble) -> str:
    """The null ensemble, one of :data:`ENSEMBLES` (``"gaussian"`` becomes ``"ginibre"`` with a
    DeprecationWarning); else a one-line InputError."""
    ensemble = ginibre_alias(ensemble, "ensemble")
    if ensemble not in ENSEMBLES:
        raise InputError(f"ensemble must be one of {', '.join(ENSEMBLES)}, got {ensemble!r}")
    return ensemble


#: Table variable of the stored spectrum (:mod:`rmtbase.baseline.spectra`), the ``null_draws``
#: key it comes from, and its extra dim.
LAMBDA_VAR = "lambda"
LAMBDA_KEY = "qk.lambda"
EIG_DIM = "eig"

LAMBDA_ATTRS = {
    "long_name": "eigenvalues of W_QK W_QK^T (squared singular values of W_QK), per draw",
    "units": "sigma^2",
    "definition": ("lambda_k = s_k(W_QK)^2, the nonzero ones (d_h; d for the ginibre "
                   "ensemble) sorted descending, NaN-padded along eig where a cell has fewer; "
                   "normalised x = lambda / (sigma_q^2 sigma_k^2 d^2)"),
    "sigma_power": 2, "scaling": "power", "matrix": "qk", "sigma_of": "sigma_q*sigma_k",
    "statistic": "lambda",
}


def stores_spectrum(stats: str) -> bool:
    """Whether a table of statistic set ``stats`` stores ``lambda``."""
    return stats in ("all", "spectral")


def n_eigenvalues(d: int, d_h: int, ensemble: str) -> int:
    """Number of eigenvalues a draw of cell (d, d_h) stores."""
    return d if ensemble == "ginibre" else d_h


def fast_spectral(stats: str, ensemble: str, storage) -> bool:
    """Whether :func:`rmtbase.baseline.null.null_draws` takes the exact fast spectral path.

    Only spectral statistics of lowrank draws stored as a float type: 16-bit rounding changes them
    by < 10⁻² null sds, so they share the float32 null; block formats take the factor path.
    ``storage``: the :class:`rmtbase.stats.storage.Storage` record."""
    return stats == "spectral" and ensemble == "lowrank" and storage.is_float


def stat_names(spec) -> list[str]:
    """Keys ``"qk.npr"``, … of the statistics a table of ``spec`` holds."""
    from ..stats import ELEMENT_STATS
    from ..stats.spectral import SHIPPED_SPECTRAL

    names = ["q.rms", "k.rms"]
    if spec.stats in ("all", "spectral"):
        names += [f"qk.{s}" for s in SHIPPED_SPECTRAL]
    if spec.stats in ("all", "elementwise"):
        names += [f"{m}.{s}" for m in ("q", "k", "qk") for s in ELEMENT_STATS]
    return names
