"""A head's profile on named axes, its null, cache and stopping rule."""
