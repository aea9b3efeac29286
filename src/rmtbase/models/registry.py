"""The adapter of every supported architecture, keyed by Hugging Face ``model_type``.

One adapter module per checkpoint layout (``docs/architectures.md`` lists them with the layout
each undoes and how it is verified).
"""

from __future__ import annotations

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

#: ``model_type`` -> adapter instance.
ADAPTERS: dict[str, Adapter] = {mt: cls() for cls in _CLASSES for mt in cls.model_types}

#: Supported architectures, as Hugging Face ``model_type`` values.
SUPPORTED: tuple[str, ...] = tuple(ADAPTERS)

#: Class-name stems for configs without ``model_type`` (very old checkpoints); longest first
#: wins, so ``GPTNeoX`` is not read as ``GPT``.
CLASS_STEMS = {"GPT2": "gpt2", "GPTNeoX": "gpt_neox", "Llama": "llama", "Mistral": "mistral",
               "Qwen2": "qwen2", "Bert": "bert", "Roberta": "roberta", "OPT": "opt",
               "GPTJ": "gptj", "GPTBigCode": "gpt_bigcode", "Falcon": "falcon",
               "DistilBert": "distilbert", "MPNet": "mpnet", "Phi": "phi", "Phi3": "phi3",
               "Bloom": "bloom"}
