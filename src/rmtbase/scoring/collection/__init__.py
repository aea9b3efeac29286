"""Many scores in one Dataset: collections, trajectories, per-entry files."""
