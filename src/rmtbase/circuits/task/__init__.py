"""Circuits for a task (docs/tasks.md): prompt pairs with an output metric, a graph whose nodes
are the embeddings, every head (inputs q, k, v distinct), every MLP and the logits; edges
scored by attribution and exact patching, circuits scored by faithfulness and written in the
field's formats; a transformer without norms given as plain weights (tracr's) runs on the same
graph (:mod:`.nonorm`). Importing this package does not import torch."""

from .export import auto_circuit_name, circuit_json, read_circuit
from .forward import TaskModel
from .graph import Graph
from .metric import METRICS
from .nonorm import NoNormModel, NoNormWeights
from .runner import COUNTERFACTUALS
from .search import evaluate, find_task_circuit, write_outputs
from .taskfile import Task, induction_task, read_task

__all__ = ["COUNTERFACTUALS", "METRICS", "Graph", "NoNormModel", "NoNormWeights", "Task",
           "TaskModel", "auto_circuit_name", "circuit_json", "evaluate", "find_task_circuit",
           "induction_task", "read_circuit", "read_task", "write_outputs"]
