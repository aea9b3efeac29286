"""Run WeightWatcher 0.7.7 in its own interpreter (RMTBASE_WW_PYTHON) on matrices or a model.

    python _ww_peer.py matrices IN.npz OUT.json [--mp]   # one nn.Linear per matrix
    python _ww_peer.py model FOLDER OUT.json             # a transformers folder

Writes per layer: name, shape and WW's columns; ``cpu_s``: process CPU of ``analyze()``."""

import json
import sys
import time

import numpy as np


def _rows(details):
    keep = ("name", "longname", "N", "M", "alpha", "xmin", "D", "sigma", "num_pl_spikes",
            "log_norm", "log_spectral_norm", "alpha_weighted", "log_alpha_norm", "stable_rank",
            "mp_softrank", "num_spikes", "sigma_mp", "bulk_max", "rand_distance", "lambda_max")
    return [{k: (v.item() if hasattr(v, "item") else v) for k, v in row.items() if k in keep}
            for row in details.to_dict("records")]


def main(argv):
    import torch
    import weightwatcher as ww

    mode, src, out = argv[:3]
    mp = "--mp" in argv
    if mode == "matrices":
        mats = np.load(src)
        names = list(mats.files)
        mods = []
        for k in names:
            w = torch.from_numpy(np.asarray(mats[k], dtype=np.float32))
            lin = torch.nn.Linear(w.shape[1], w.shape[0], bias=False)
            with torch.no_grad():
                lin.weight.copy_(w)
            mods.append(lin)
        model = torch.nn.Sequential(*mods)
    else:
        from transformers import AutoModel

        model = AutoModel.from_pretrained(src)
        names = None
    np.random.seed(0)
    t0 = time.process_time()
    details = ww.WeightWatcher(model=model).analyze(mp_fit=mp, randomize=mp)
    cpu = time.process_time() - t0
    rows = _rows(details)
    if names is not None:
        for r, k in zip(rows, names, strict=True):
            r["matrix"] = k
    with open(out, "w") as f:
        json.dump({"cpu_s": cpu, "layers": rows}, f, default=float)


if __name__ == "__main__":
    main(sys.argv[1:])
