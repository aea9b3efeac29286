"""One checkpoint of study ``circuits``: its tokenizer, the probe's text, and what is read
from its folder (K-composition, factor axes, last checkpoint's composition p and score)."""

from __future__ import annotations

import numpy as np

#: Sequences in the probe's text (one window each).
PROBE_WINDOWS = 32


def _tokenizer(vocab: int):
    """Word-level tokenizer: ``<bos>`` = 0, ``t1 … tV`` = 1 … V; ``<unk>`` (V + 1) never
    reaches the model; BOS added in front of every sequence."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    words = {"<bos>": 0, **{f"t{i}": i for i in range(1, vocab + 1)}, "<unk>": vocab + 1}
    tk = Tokenizer(models.WordLevel(words, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tk.post_processor = processors.TemplateProcessing(single="<bos> $A",
                                                      special_tokens=[("<bos>", 0)])
    return PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<bos>", unk_token="<unk>")


def probe_text(recipe, seed: int):
    """The probe's text: :data:`PROBE_WINDOWS` training-distribution sequences without their
    BOS (each a window of ``seq_len`` tokens once the tokenizer adds BOS)."""
    from ..probe.text import Text
    from ._induction_train import batch

    ids, _, _ = batch(np.random.default_rng([seed, 3]), PROBE_WINDOWS, recipe)
    text = "\n".join(" ".join(f"t{int(t)}" for t in row[1:]) for row in ids)
    return Text(text=text, sha256="", name=f"repeated random segments (seed {seed})")


def k_composition(folder) -> np.ndarray:
    """``(layer_from, head_from, layer_to, head_to)`` K-composition of every cross-layer pair of
    ``folder`` (NaN where ``layer_to ≤ layer_from``), by
    :func:`rmtbase.scoring.composition.run.composition_from_factors` on raw weights, no null."""
    from ..models import load_heads
    from ..models.ov import load_ov_heads
    from ..scoring.composition.run import composition_from_factors
    from ..stats.composition import KINDS

    layers = [(a.wq, a.wk, b.wq, b.wk)
              for a, b in zip(load_heads(folder), load_ov_heads(folder), strict=True)]
    comp, _, _ = composition_from_factors(layers, n_kv=np.shape(layers[0][0])[0])
    return comp[KINDS.index("k")]


def factor_axes(folder) -> np.ndarray:
    """``(axis, layer, head)`` factor axes of each head's profile in ``folder`` (alignment,
    symmetry, q/k input focus), without their null."""
    from ..models import load_heads
    from ..scoring.profile.factors import FACTOR_AXES, factor_profile

    per = [factor_profile(np.asarray(h.wq, np.float32), np.asarray(h.wk, np.float32))
           for h in load_heads(folder)]
    return np.stack([np.stack([p[a] for p in per]) for a in FACTOR_AXES])


def _composition_last(folder, seed: int, draws: int) -> dict:
    """K-composition and its null p (layer 0 → 1) of :func:`rmtbase.composition` (Gaussian-factor
    null, :data:`rmtbase.studies.circuits.COMPOSITION_DRAWS` draws, add-one p)."""
    from ..scoring.composition.run import composition

    cd = composition(str(folder), draws=draws, seed=seed)
    sel = dict(kind="k", layer_from=0, layer_to=1)
    return {k: np.asarray(cd[v].sel(**sel).transpose("head_from", "head_to").values, float)
            for k, v in (("k", "composition"), ("p", "composition_p"))}


def _add_profile(ds, folder, seed: int):
    """``head_p_value`` (layer, head) of :func:`rmtbase.score_model` on ``folder``."""
    from ..scoring.score import score_model

    sc = score_model(str(folder), stats="spectral", progress=False, seed=seed,
                     spectrum_draws=0)
    ds["head_p_value"] = (("layer", "head"), np.asarray(sc["head_p_value"].values, float),
                          {"units": "1", "long_name": "single-head p of rmtbase.score_model "
                                                      "(W_QK spectral statistics, Gaussian null)"})
    return ds
