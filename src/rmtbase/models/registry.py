"""The adapter of every supported architecture, keyed by Hugging Face ``model_type``.

:data:`ADAPTERS` is a :class:`rmtbase.registry.Registry`; entry-point group ``rmtbase.adapters``
names an :class:`~rmtbase.models._adapter.Adapter` subclass or instance."""

from __future__ import annotations

from ..registry import GROUPS, Registry
from ._adapter import Adapter
from .bert import BertAdapter
from .bloom import BloomAdapter
from .cohere import CohereAdapter
from .distilbert import DistilBertAdapter
from .falcon import FalconAdapter
from .gemma import Gemma3Adapter, Gemma3TextAdapter, GemmaAdapter
from .gpt2 import GPT2Adapter
from .gpt_bigcode import GPTBigCodeAdapter
from .gpt_neox import GPTNeoXAdapter
from .gptj import GPTJAdapter
from .llama import LlamaAdapter
from .mixtral import MixtralAdapter
from .modernbert import ModernBertAdapter
from .mpnet import MPNetAdapter
from .olmo import Olmo2Adapter, OlmoAdapter
from .opt import OPTAdapter
from .phi import PhiAdapter
from .phi3 import Phi3Adapter
from .qwen3 import Qwen3Adapter, Qwen3MoeAdapter
from .stablelm import StableLmAdapter
from .starcoder2 import Starcoder2Adapter
from .vit import ViTAdapter

_CLASSES = (GPT2Adapter, GPTNeoXAdapter, LlamaAdapter, BertAdapter, OPTAdapter, GPTJAdapter,
            OlmoAdapter, Olmo2Adapter, Qwen3Adapter, Qwen3MoeAdapter, GemmaAdapter,
            Gemma3TextAdapter, Gemma3Adapter, Phi3Adapter, PhiAdapter, FalconAdapter,
            GPTBigCodeAdapter, MixtralAdapter, StableLmAdapter, Starcoder2Adapter,
            CohereAdapter, MPNetAdapter, DistilBertAdapter, ModernBertAdapter, ViTAdapter,
            BloomAdapter)



def register(adapter, *, shipped: bool = False) -> Adapter:
    """Register ``adapter`` (an :class:`Adapter` subclass or instance) under each of its
    ``model_types``; TypeError if it is none, has no model type, or one is taken. ``shipped``:
    one of rmtbase's own."""
    if isinstance(adapter, type) and issubclass(adapter, Adapter):
        adapter = adapter()
    if not isinstance(adapter, Adapter):
        raise TypeError(f"{adapter!r} is not a rmtbase.models._adapter.Adapter")
    types = tuple(adapter.model_types)
    if not types or not all(isinstance(t, str) and t for t in types):
        raise TypeError(f"{type(adapter).__qualname__}.model_types must name one or more "
                        f"model types, got {types!r}")
    taken = [t for t in types if ADAPTERS.peek(t) is not None]
    if taken:
        raise TypeError(f"model type {taken[0]!r} already has an adapter "
                        f"({type(ADAPTERS.peek(taken[0])).__qualname__})")
    for t in types:
        ADAPTERS.register(t, adapter, shipped=shipped)
    return adapter


def unregister(model_type: str) -> None:
    """Take ``model_type``'s adapter out (a test's own); the shipped ones stay."""
    if any(model_type in cls.model_types for cls in _CLASSES):
        raise TypeError(f"the shipped adapter of {model_type!r} cannot be unregistered")
    ADAPTERS.unregister(model_type)


#: ``model_type`` -> adapter instance (plugins: entry-point group ``rmtbase.adapters``).
def _check(name: str, adapter) -> None:
    if not isinstance(adapter, Adapter) or name not in tuple(adapter.model_types):
        raise TypeError(f"{adapter!r} is not an Adapter instance of model type {name!r}")


ADAPTERS: Registry = Registry("adapter", GROUPS["adapter"], lambda name, obj: register(obj),
                              _check)
for _cls in _CLASSES:
    register(_cls, shipped=True)
del _cls

#: Supported architectures, as Hugging Face ``model_type`` values (a live view: an adapter
#: registered later, or by a plugin, is in it).
SUPPORTED = ADAPTERS.names()

#: Class-name stems for configs without ``model_type`` (very old checkpoints); longest first
#: wins, so ``GPTNeoX`` is not read as ``GPT``.
CLASS_STEMS = {"GPT2": "gpt2", "GPTNeoX": "gpt_neox", "Llama": "llama", "Mistral": "mistral",
               "Qwen2": "qwen2", "Bert": "bert", "Roberta": "roberta", "OPT": "opt",
               "GPTJ": "gptj", "GPTBigCode": "gpt_bigcode", "Falcon": "falcon",
               "DistilBert": "distilbert", "MPNet": "mpnet", "Phi": "phi", "Phi3": "phi3",
               "Bloom": "bloom"}
