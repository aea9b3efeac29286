"""Circuits for a task (docs/tasks.md): prompt pairs with an output metric, a graph whose nodes
are the embeddings, every head (inputs q, k, v distinct), every MLP and the logits; edges
scored by attribution and exact patching, circuits scored by faithfulness and written in the
field's formats. Importing this package does not import torch."""
