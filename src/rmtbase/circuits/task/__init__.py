"""Circuits for a task (docs/tasks.md): prompt pairs with an output metric, a graph whose nodes
are the embeddings, every head (inputs q, k, v distinct), every MLP and the logits; edges
scored by attribution and exact patching, circuits scored by faithfulness and written in the
field's formats; a transformer without norms given as plain weights (tracr's) runs on the same
graph (:mod:`.nonorm`). Importing this package does not import torch."""

from ..core.forward import TaskModel
from ..core.graph import Graph
from ..core.metric import METRICS
from ..core.runner import COUNTERFACTUALS
from .export import auto_circuit_name, circuit_json, read_circuit
from .nonorm import NoNormModel, NoNormWeights
from .search import evaluate, find_task_circuit, write_outputs
from .settings import SearchSettings
from .taskfile import Task, induction_task, read_task

__all__ = ["COUNTERFACTUALS", "METRICS", "Graph", "NoNormModel", "NoNormWeights",
           "SearchSettings", "Task", "TaskModel", "auto_circuit_name", "circuit_json",
           "evaluate", "find_task_circuit", "induction_task", "read_circuit", "read_task",
           "write_outputs"]
