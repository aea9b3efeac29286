"""The circuit engine both searches (:mod:`..head`, :mod:`..task`) configure; no torch import."""
