"""Exact rescaling of a null table to any entry std (σ_Q, σ_K).

:func:`rescale`: with r the ratio of the variable's σ (σ_Qσ_K for W_QK, σ_Q or σ_K for a factor)
and p its ``sigma_power``, ``value * r**p`` (``scaling="power"``) or ``value + p ln r`` (``"log"``).
"""

from __future__ import annotations

import json

from ..errors import TableError, check_sigma


def rescale(ds, sigma_q: float, sigma_k: float):
    """The table ``ds`` at entry std (σ_Q, σ_K), every variable rescaled exactly in float64 and
    rounded once to its dtype (:class:`InputError` where a value would leave that dtype's range)."""
    from .tables import reference_values

    sigma_q, sigma_k = check_sigma(sigma_q, "sigma_q"), check_sigma(sigma_k, "sigma_k")
    try:
        old_q, old_k = float(ds.attrs["sigma_q"]), float(ds.attrs["sigma_k"])
    except KeyError as exc:
        raise TableError("table has no sigma_q/sigma_k attributes; not an rmtbase table") from exc
    ratio = {"sigma_q": sigma_q / old_q, "sigma_k": sigma_k / old_k,
             "sigma_q*sigma_k": (sigma_q / old_q) * (sigma_k / old_k)}
    from .sigma_range import Rule, scale_values

    out = ds.copy()
    for name, var in ds.data_vars.items():
        r = ratio[var.attrs["sigma_of"]]
        p = int(var.attrs["sigma_power"])
        if var.attrs["scaling"] not in ("power", "log"):
            raise TableError(f"variable {name} has unknown scaling {var.attrs['scaling']!r}")
        of = var.attrs["sigma_of"]
        rule = Rule(p, var.attrs["scaling"], str(name), f"({of})" if "*" in of else of)
        new = scale_values(var.values, rule, r, var.dtype, sigma_q, sigma_k)
        out[name] = var.copy(data=new)
    out.attrs = dict(ds.attrs, sigma_q=sigma_q, sigma_k=sigma_k)
    if ds.attrs.get("ensemble") == "lowrank":
        cells = [c.split("x") for c in str(ds.attrs.get("cells", "")).split(",") if c]
        refs = {f"{a}x{b}": reference_values(int(a), int(b), sigma_q, sigma_k) for a, b in cells}
        out.attrs["analytic_reference_values"] = json.dumps(refs, sort_keys=True)
    out.attrs["history"] = (ds.attrs.get("history", "") + f"rescaled from sigma_q={old_q}, "
                            f"sigma_k={old_k} to sigma_q={sigma_q}, sigma_k={sigma_k}; ").strip()
    return out
