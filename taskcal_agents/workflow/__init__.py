"""The calibration workflow: sample → fit → evaluate → report.

``_store``: the resumable samples file; ``_runner``: concurrent sampling into it;
``_evaluate``: cross-fitted decoder comparison on arrays; ``_fit``: the calibrator artefact;
``_report``: figures and a markdown summary.
"""

from __future__ import annotations

from taskcal_agents.workflow._store import (
    SAMPLES_FORMAT,
    SAMPLES_FORMAT_VERSION,
    SamplesFile,
    SamplesStore,
    read_samples,
)

__all__ = [
    "SAMPLES_FORMAT",
    "SAMPLES_FORMAT_VERSION",
    "SamplesFile",
    "SamplesStore",
    "read_samples",
]
