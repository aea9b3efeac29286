"""OLMo, OLMo-2 and OLMo-3 adapters: LLaMA names; OLMo-2/3 add a QK-norm over all heads.

Layout undone (Groeneveld et al. 2024; Team OLMo 2024): as LLaMA (GQA allowed). OLMo's
``clip_qkv`` clamp is not modelled (W_QK describes the logit wherever nothing is clipped).
OLMo-2/3's ``q_norm`` / ``k_norm`` are RMSNorms over the whole projection, gains of that length;
``fold_qk_norm=True`` multiplies row h·d_h + r of W_Q by its gain
(:mod:`rmtbase.models._qknorm`)."""

from __future__ import annotations

from ._adapter import Adapter
from ._config import Dims, gqa_dims
from ._qknorm import QKNorm
from .llama import LLAMA_LAYOUT

_A = "layers.{i}.self_attn."


class OlmoAdapter(Adapter):
    model_types = ("olmo",)
    layouts = (LLAMA_LAYOUT,)

    def dims(self, cfg: dict) -> Dims:
        return gqa_dims(cfg)


class Olmo2Adapter(Adapter):
    model_types = ("olmo2", "olmo3")
    layouts = (LLAMA_LAYOUT,)
    _norm = QKNorm(_A + "q_norm.weight", _A + "k_norm.weight", kind="rms", scope="all_heads")

    def dims(self, cfg: dict) -> Dims:
        return gqa_dims(cfg)

    def qk_norm(self, cfg: dict) -> QKNorm:
        return self._norm
