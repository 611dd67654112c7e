"""The sampling options every front door shares, as one pydantic model.

:class:`SamplingOptions` holds what :class:`~taskcal_agents.runnable.TaskCalibratedRunnable`
(and through it :class:`~taskcal_agents.chat_model.TaskCalibratedChatModel`),
:class:`~taskcal_agents.middleware.TaskCalibrationMiddleware` and
:class:`~taskcal_agents.decision_model.TaskCalibratedDecisionModel` all take: the number
of samples N, the sampling temperature and the belief's Dirichlet prior α. The pydantic
front doors inherit its fields; the middleware validates its arguments into one.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from taskcal_agents.belief import DEFAULT_ALPHA

__all__ = ["DEFAULT_N_SAMPLES", "DEFAULT_TEMPERATURE", "SamplingOptions"]

DEFAULT_N_SAMPLES = 16
"""The default number of samples N per decision, at every front door.

16 is what ``taskcal sample`` draws by default (``SampleSettings.n``), so a calibrator
fitted with the default workflow sees beliefs of the same resolution (steps of 1/16)
that the front doors produce at run time; a different N changes the distribution of p̂
the calibrator was fitted on. One request with ``n=16`` costs about as much wall time as
one with ``n=8`` on an OpenAI-compatible server (see ``benchmarks/bench_sampling.py``).
"""

DEFAULT_TEMPERATURE = 1.0
"""The default sampling temperature: the model's own distribution, unsharpened."""


class SamplingOptions(BaseModel):
    """How a front door samples and smooths: N, temperature and α.

    Attributes:
        n_samples: The number of samples N per decision.
        temperature: Sampling temperature passed per call (``None``: the model's own).
        alpha: Dirichlet smoothing prior of the belief (use the calibrator's fitting
            value; a calibrator artefact records it).
    """

    n_samples: int = Field(default=DEFAULT_N_SAMPLES, ge=1)
    """The number of samples N per decision."""
    temperature: float | None = Field(default=DEFAULT_TEMPERATURE, ge=0)
    """Sampling temperature passed per call (``None``: the model's own setting)."""
    alpha: float = Field(default=DEFAULT_ALPHA, ge=0)
    """Dirichlet smoothing prior of the belief (use the calibrator's fitting value)."""
