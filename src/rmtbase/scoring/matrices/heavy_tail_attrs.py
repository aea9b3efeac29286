"""The heavy-tail table's variables: one long_name and definition each, which the table
(:func:`.heavy_tail.score_heavy_tail`), its netCDF file and scores.nc's ``heavy_tail_*``
variables all take from here."""

from __future__ import annotations

import xarray as xr

#: (long_name, definition) of each variable of the table.
ATTRS = {
    "value": ("WeightWatcher 0.7.7 metric of the stored matrix",
              "the metric named by heavy_tail_metric (docs/statistics.md)"),
    "p_value": ("two-sided add-one empirical p against the null", "NaN for log_norm"),
    "null_median": ("median of the metric over the null's draws", ""),
    "null_lo": ("2.5 % quantile of the metric over the null's draws", ""),
    "null_hi": ("97.5 % quantile of the metric over the null's draws", ""),
    "band_units": ("(value - null median) / half the null's 95 % band", ""),
    "xmin": ("lower cutoff of the power-law fit of lambda = s^2", "KS-distance minimum"),
    "folklore": ("WeightWatcher's reading of alpha", "alpha < 2 over-trained, 2 <= alpha "
                 "<= 6 well trained, alpha > 6 under-trained; empty: no matrix"),
    "null_well_trained": ("share of the null's draws with 2 <= alpha <= 6", ""),
    "rows": ("rows of the matrix (out features)", "0: no matrix"),
    "cols": ("columns of the matrix (in features)", "0: no matrix"),
    "storage": ("storage of the matrix", ""),
    "null_storage": ("storage of the null's draws", ""),
    "reason": ("why the metrics do not describe the matrix", "empty: they do"),
    "alpha_flag": ("alpha unlike the null's: Benjamini-Hochberg over the matrices' alpha p",
                   "at the table's fdr"),
    "alpha_q": ("Benjamini-Hochberg q of alpha's p over the matrices", "NaN: no p"),
}
#: (long_name, definition) of the model summaries (:mod:`.heavy_tail_summary`), by field.
SUMMARY_ATTRS = {
    "value": ("mean over the described matrices (WeightWatcher get_summary)", ""),
    "p": ("two-sided add-one empirical p of the mean against the null's replicate means",
          "NaN for log_norm (conditioned)"),
    "null_lo": ("2.5 % quantile of the null's replicate means", ""),
    "null_median": ("median of the null's replicate means", ""),
    "null_hi": ("97.5 % quantile of the null's replicate means", ""),
    "matrices": ("matrices in the mean", ""),
}


def described(ds: xr.Dataset, prefix: str = "heavy_tail_") -> xr.Dataset:
    """Give the table's variables in ``ds`` (named ``prefix`` + name) their CF attributes
    (units, long_name, definition), in place; returns ``ds``."""
    for table, stem in ((ATTRS, prefix), (SUMMARY_ATTRS, prefix + "summary_")):
        for k, (long_name, definition) in table.items():
            if stem + k in ds:
                attrs = {"long_name": long_name, "units": "1"}
                if definition:
                    attrs["definition"] = definition
                ds[stem + k].attrs = attrs
    return ds


__all__ = ["ATTRS", "SUMMARY_ATTRS", "described"]
