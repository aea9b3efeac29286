"""Composition of head pairs (Elhage et al. 2021) against its null."""
