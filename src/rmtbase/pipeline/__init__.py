"""The score pipeline as one library call: :func:`run_score` runs what ``rmtbase score MODEL``
runs (score, composition, circuit search, whole matrices, text probe, labels) on one
:class:`ScoreRequest` and returns every Dataset as one :class:`ScoreRun`, which
:func:`rmtbase.report.write.write_report` writes. :mod:`.checks` holds the later stages'
preconditions, :mod:`.labels` each head's behaviour label."""

from .run import Prepared, ScoreRequest, ScoreRun, check_request, run_score

__all__ = ["Prepared", "ScoreRequest", "ScoreRun", "check_request", "run_score"]
