"""How a layer's null is drawn at its storage, and what is checked about it."""
