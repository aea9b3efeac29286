"""The head-behaviour search (:func:`.run.find_circuits`) on :mod:`..core`; no torch import."""
