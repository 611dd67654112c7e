"""A fitted calibrator artefact evaluated on held-out samples, as it will be served.

``taskcal evaluate --artefact A`` adds the decoder ``mbr_artefact``: the artefact's map,
fitted elsewhere (on a corpus's train split, say), held fixed on every fold, so the
evaluation's cross-fitting fits nothing and each item is decided as the runtime's
:class:`~taskcal_agents.decision.Decider` with that artefact decides it (its input
layout: p̂, the belief features, or the raw inputs with the relevance features). The
label-shuffle test then asks whether the fixed map beats the best constant action by more
than it would on labels unrelated to the beliefs.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from taskcal_agents.decision import Decider, ResolvedCalibrator, Task, resolve_calibrator
from taskcal_agents.errors import ConfigurationError

__all__ = ["ARTEFACT_DECODER", "FixedMap", "artefact_factory"]

ARTEFACT_DECODER = "artefact"
"""The calibrator name of the artefact's decoder (its row is ``mbr_artefact``)."""

Inputs = Literal["probs", "features", "inputs"]


class FixedMap:
    """A fitted calibrator whose ``fit`` changes nothing (a held-out evaluation).

    Args:
        calibrator: The fitted calibrator.
        inputs: What it reads, as the Decider feeds it: p̂ (``"probs"``), the belief
            features (``"features"``) or the raw inputs (``"inputs"``).
    """

    def __init__(self, calibrator: Any, inputs: Inputs) -> None:
        self.calibrator = calibrator
        self.inputs = inputs

    @property
    def reads_raw_columns(self) -> bool:
        """Whether it reads the raw inputs (with the relevance features)."""
        return self.inputs == "inputs"

    @property
    def reads_extra_columns(self) -> bool:
        """Whether it reads the belief features (or the raw inputs)."""
        return self.inputs != "probs"

    def set_params(self, **params: Any) -> FixedMap:
        """Ignore ``n_classes`` (the artefact's map has its own); return self."""
        return self

    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> FixedMap:
        """Fit nothing: check that the inputs have the width the map was fitted on."""
        width = getattr(self.calibrator, "n_features_in_", None)
        if width is not None and np.shape(X)[1] != int(width):
            msg = (
                f"the artefact's calibrator reads {int(width)} input columns, but the "
                f"evaluation has {np.shape(X)[1]} ({self.inputs}); evaluate with the "
                "artefact's task (its unparsed policy and grounding)."
            )
            raise ConfigurationError(msg)
        return self

    def predict_proba(self, X: ArrayLike) -> NDArray[np.float64]:
        """The artefact's calibrated beliefs."""
        return np.asarray(self.calibrator.predict_proba(X), dtype=np.float64)


def artefact_factory(
    path: str | os.PathLike[str], task: Task
) -> tuple[Callable[[], FixedMap], ResolvedCalibrator, str]:
    """The factory of an artefact's fixed map, the resolved artefact, and its file's hash.

    Args:
        path: The artefact file (``taskcal fit``).
        task: The evaluation's task: the artefact's labels must be its labels.

    Returns:
        ``(make, resolved, sha256)``: ``make()`` returns a :class:`FixedMap` that reads
        what the runtime's Decider would feed the artefact; the hash is the first 16 hex
        digits of the file's SHA-256, which names the artefact in the evaluation.

    Raises:
        ConfigurationError: The artefact does not fit the task.
        DataFileError: The file cannot be read.
    """
    resolved = resolve_calibrator(os.fspath(path), task, owner="taskcal evaluate --artefact")
    if resolved.calibrator is None:
        msg = f"artefact {os.fspath(path)!r} holds no calibrator."
        raise ConfigurationError(msg)
    decider = Decider.from_resolved(task, resolved)
    inputs: Inputs = (
        "inputs" if decider.reads_inputs else "features" if decider.reads_features else "probs"
    )
    calibrator = resolved.calibrator
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    return (lambda: FixedMap(calibrator, inputs)), resolved, digest
