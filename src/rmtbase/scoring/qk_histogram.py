"""The per-head histogram of W_QK's entries stored with a score (``qk_hist``).

Each head's W_QK = W_Qᵀ W_K (d×d) is formed once per head for its element statistics
(:mod:`rmtbase.scoring.qk_elements`, one head at a time, so memory stays at one
d×d product per thread); :func:`elements_and_histogram` takes the statistics and this histogram
from that one product (both defined in :mod:`rmtbase.stats.head_elements`). Entries are standardised by the null's entry std at the head's measured
rms, z = entry / (√d_h σ̂_Q σ̂_K), so under the null z is variance-gamma with variance 1
(Gaunt 2014; :mod:`rmtbase.analytic.variance_gamma`) and close to N(0, 1) for large d_h. The
histogram is a density on the fixed bins :data:`QK_HIST_EDGES` (64 bins on [−8, 8]); mass
beyond ±8 is 1 − Σ density × 0.25. ``report.html`` draws it against both references.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

# the histogram's bins and the traceable statistics-and-histogram of one head live with the
# compiled program the null tables share (rmtbase.stats.head_elements); re-exported here
from ..stats.head_elements import QK_HIST_EDGES, elements_and_histogram


def add_qk_hist(ds: xr.Dataset, hist: np.ndarray) -> None:
    """Store the heads' histograms as ``qk_hist`` (layer, head, qk_z), bin centres ``qk_z``."""
    e = QK_HIST_EDGES
    ds["qk_hist"] = (("layer", "head", "qk_z"), np.asarray(hist, dtype=np.float32))
    ds["qk_hist"].attrs.update(
        definition="density of z = W_QK entry / (sqrt(d_h) sigma_Q sigma_K) (sigma = the head's "
                   "entry rms) on fixed bins; variance-gamma with variance 1 under the null",
        bin_width=float(e[1] - e[0]), z_min=float(e[0]), z_max=float(e[-1]))
    ds.coords["qk_z"] = 0.5 * (e[:-1] + e[1:])


__all__ = ["QK_HIST_EDGES", "add_qk_hist", "elements_and_histogram"]
