"""Whole matrices and fine-tune deltas scored against their nulls."""
