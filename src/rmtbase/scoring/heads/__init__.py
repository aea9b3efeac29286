"""The heads against their references, layer by layer, each grown while needed."""
