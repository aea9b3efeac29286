"""The outlier directions themselves: singular triplets of W_QK (or W_OV) above the null.

For a head with ``n_spikes`` = r > 0 of W = AᵀB (A = W_Q, B = W_K; or A = W_O,hᵀ, B = W_V,h),
its r leading singular values and vectors: float64 thin factorisations Aᵀ = Q_A R_A,
Bᵀ = Q_B R_B, R_A R_Bᵀ = U S Vᵀ give S, Q_A U, Q_B V; each right vector's largest-|·| entry is
positive. :func:`directions_dataset`: rows (``layer``, ``head``, ``circuit``, ``index``)."""

from __future__ import annotations

import numpy as np
import xarray as xr


def head_directions(wq, wk, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(singular values (k,), left (k, d), right (k, d)) of W = wqᵀ wk for factors
    ``(d_h, d)`` (module docstring), float64."""
    a = np.asarray(wq, dtype=np.float64).T
    b = np.asarray(wk, dtype=np.float64).T
    qa, ra = np.linalg.qr(a)
    qb, rb = np.linalg.qr(b)
    u, s, vt = np.linalg.svd(ra @ rb.T)
    left = (qa @ u[:, :k]).T
    right = (qb @ vt[:k].T).T
    sign = np.sign(right[np.arange(right.shape[0]), np.argmax(np.abs(right), axis=1)])
    sign[sign == 0] = 1.0
    return s[:k], left * sign[:, None], right * sign[:, None]


def directions_dataset(layers, score: xr.Dataset, circuit: str = "qk") -> xr.Dataset:
    """The directions table (module docstring) of the heads in ``layers`` (an iterable of
    :class:`rmtbase.models.LayerHeads` of the model ``score`` was computed from, the same
    circuit) with ``n_spikes`` > 0 in ``score``."""
    rows: dict[str, list] = {k: [] for k in ("layer", "head", "circuit", "index",
                                             "singular_value", "edge_ratio", "p_value",
                                             "left", "right")}
    heads = score["head"].values
    d = int(score.attrs["d"])
    for lh in layers:
        n = score["n_spikes"].sel(layer=int(lh.layer)).values
        for j, h in enumerate(heads):
            r = int(n[j])
            if r <= 0:
                continue
            s, left, right = head_directions(lh.wq[j], lh.wk[j], r)
            sel = score.sel(layer=int(lh.layer), head=int(h))
            for i in range(r):
                rows["layer"].append(int(lh.layer))
                rows["head"].append(int(h))
                rows["circuit"].append(circuit)
                rows["index"].append(i + 1)
                rows["singular_value"].append(float(s[i]))
                rows["edge_ratio"].append(float(sel["spike_x"].values[i]))
                rows["p_value"].append(float(sel["spike_p"].values[i])
                                       if "spike_p" in sel else np.nan)
                rows["left"].append(left[i])
                rows["right"].append(right[i])
    n_rows = len(rows["layer"])
    vec = {k: np.asarray(rows[k], dtype=np.float64).reshape(n_rows, d) for k in ("left", "right")}
    ds = xr.Dataset(
        {"layer": ("direction", np.asarray(rows["layer"], dtype=np.int64)),
         "head": ("direction", np.asarray(rows["head"], dtype=np.int64)),
         "circuit": ("direction", np.asarray(rows["circuit"], dtype=str)),
         "index": ("direction", np.asarray(rows["index"], dtype=np.int64)),
         "singular_value": ("direction", np.asarray(rows["singular_value"])),
         "edge_ratio": ("direction", np.asarray(rows["edge_ratio"])),
         "p_value": ("direction", np.asarray(rows["p_value"])),
         "left": (("direction", "residual"), vec["left"]),
         "right": (("direction", "residual"), vec["right"])},
        coords={"direction": np.arange(n_rows), "residual": np.arange(d)},
        attrs={"model": score.attrs.get("model", ""), "circuit": circuit, "d": d,
               "d_h": int(score.attrs["d_h"]),
               "definition": ("singular triplets of W = A^T B above the null's largest "
                              "eigenvalue (n_spikes per head), from thin QR factorisations; "
                              "rmtbase.scoring.measures.directions"),
               "join": "layer, head, circuit, index (1 = largest)"})
    meaning = {"qk": ("direction queries read (x_i^T W x_j: W's left vector)",
                      "direction keys are read along (right vector)"),
               "ov": ("direction the head writes to the residual stream (left vector)",
                      "direction the head reads from the residual stream (right vector)")}
    ds["left"].attrs["long_name"], ds["right"].attrs["long_name"] = meaning.get(
        circuit, ("left singular vector", "right singular vector"))
    ds["singular_value"].attrs.update(long_name="singular value of W (sqrt of lambda_k)",
                                      units="1")
    ds["edge_ratio"].attrs.update(long_name="lambda_k / upper edge of MP_c x MP_c (spike_x)",
                                  units="1")
    ds["p_value"].attrs.update(long_name="P(null head's largest eigenvalue >= lambda_k), "
                                         "add-one (spike_p)", units="1")
    return ds


def combine_directions(tables: list[xr.Dataset]) -> xr.Dataset:
    """Directions tables of several circuits as one (rows concatenated)."""
    ds = xr.concat(tables, dim="direction", data_vars="all")
    ds = ds.assign_coords(direction=np.arange(ds.sizes["direction"]))
    ds.attrs["circuit"] = ",".join(str(t.attrs.get("circuit")) for t in tables)
    return ds


__all__ = ["combine_directions", "directions_dataset", "head_directions"]
