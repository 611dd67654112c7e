"""The sampling options every front door shares, as one pydantic model.

:class:`SamplingOptions` holds what :class:`~taskcal_agents.langchain.TaskCalibratedRunnable`
(and through it :class:`~taskcal_agents.langchain.TaskCalibratedChatModel`),
:class:`~taskcal_agents.langchain.TaskCalibrationMiddleware` and
:class:`~taskcal_agents.langchain.TaskCalibratedDecisionModel` all take: the number
of samples N, the sampling temperature, the belief's Dirichlet prior α and, optionally,
adaptive N (:class:`AdaptiveSampling`: draw in rounds and stop once more samples would
hardly change the action; the rule is :mod:`taskcal_agents.decision._adaptive`). The pydantic front
doors inherit its fields; the middleware validates its arguments into one.
"""

from __future__ import annotations

import numbers
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from taskcal_agents.decision._stopping_prior import StoppingPrior
from taskcal_agents.errors import ConfigurationError

__all__ = ["DEFAULT_N_SAMPLES", "DEFAULT_TEMPERATURE", "AdaptiveSampling", "SamplingOptions"]

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


def _whole_number(value: Any) -> Any:
    """An integer (numpy's too) as ``int``; refuse ``bool``, floats and strings.

    pydantic's lax mode would take ``True`` as 1 and ``"8"`` or ``8.0`` as 8: a count given
    as one of those is a mistake to report, not to guess.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        msg = "must be an integer, not a bool, float or string"
        raise ValueError(msg)
    return int(value)


Count = Annotated[int, BeforeValidator(_whole_number)]
"""An integer field that takes Python and numpy integers only (see :func:`_whole_number`)."""


class AdaptiveSampling(BaseModel):
    """Adaptive N: draw the N samples in rounds and stop once the action is settled.

    The rounds are cumulative sample counts ``first, 2·first, 4·first, …`` capped at N
    (:meth:`rounds`: 4, 8, 16 for N = 16); one request per round. After each round the
    adaptive N's stopping rule estimates the probability that
    finishing the draw to N would change the action, and sampling stops when it is below
    ``epsilon`` (always at N).

    Attributes:
        epsilon: Stop when the estimated probability of a change is below this.
        first: Samples in the first round.
        draws: The most futures the rule sums exactly; past that, its Monte-Carlo draws.
        prior: The stopping prior, or ``None``: the calibrator artefact's (``taskcal fit``
            stores one); without a fitted prior adaptive N draws all N samples.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    epsilon: float = Field(gt=0, lt=1)
    """Stop when the estimated probability that N samples would change the action is below
    this (in (0, 1); smaller: more samples, fewer changed decisions)."""
    first: int = Field(default=4, ge=1)
    """Samples in the first round; each later round doubles the count drawn so far."""
    draws: int = Field(default=4096, ge=16)
    """The most possible futures (counts of the missing samples) the rule sums exactly per
    check; when there are more, it averages this many Monte-Carlo draws from the
    predictive instead."""
    prior: StoppingPrior | None = None
    """The stopping rule's Dirichlet prior over the outcomes
    (:func:`~taskcal_agents.decision._stopping_prior.fit_stopping_prior`); ``None``: the
    calibrator artefact's. Only a fitted prior (``n_items > 0``) lets the rule stop early;
    without one adaptive N draws all N samples and warns once."""

    def rounds(self, n_max: int) -> tuple[int, ...]:
        """The cumulative sample counts after each round, ending at ``n_max``.

        Raises:
            ConfigurationError: If ``n_max`` is not an integer >= 1.
        """
        if isinstance(n_max, bool) or not isinstance(n_max, int) or n_max < 1:
            msg = (
                f"AdaptiveSampling.rounds parameter 'n_max' must be an integer >= 1, got {n_max!r}."
            )
            raise ConfigurationError(msg)
        out = [min(self.first, n_max)]
        while out[-1] < n_max:
            out.append(min(2 * out[-1], n_max))
        return tuple(out)


class SamplingOptions(BaseModel):
    """How a front door samples, smooths, retries and falls back.

    The one model of these options: the pydantic front doors inherit its fields, the
    middleware validates its arguments into one (:meth:`checked`), and the decision
    protocol every front door drives reads them.

    Attributes:
        n_samples: The number of samples N per decision.
        temperature: Sampling temperature passed per call (``None``: the model's own).
        alpha: Dirichlet smoothing prior of the belief; ``None``: the calibrator's fitting
            value (an artefact records it; else ``DEFAULT_ALPHA``).
        adaptive: Adaptive N (draw in rounds, stop when settled), or ``None``: all N.
        on_error: After the retries fail: raise, or take the task's fallback action.
        max_retries: Retries of a failed draw (per round with adaptive N).
        retry_wait: Seconds before the first retry; doubles after each.
    """

    n_samples: Count = Field(default=DEFAULT_N_SAMPLES, ge=1)
    """The number of samples N per decision."""
    temperature: float | None = Field(default=DEFAULT_TEMPERATURE, ge=0, allow_inf_nan=False)
    """Sampling temperature passed per call (``None``: the model's own setting)."""
    alpha: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """Dirichlet smoothing prior of the belief; ``None`` (the default): the calibrator's
    fitting value (an artefact records it; a bare calibrator or the raw belief
    :data:`~taskcal_agents.decision.DEFAULT_ALPHA`). An explicit value overrides it."""
    adaptive: AdaptiveSampling | None = None
    """Adaptive N (:class:`AdaptiveSampling`, or its ``epsilon`` as a number): draw in rounds
    and stop once more samples would change the action with probability below ε;
    ``None`` draws all N at once."""
    belief: Literal["samples", "one_pass"] = "samples"
    """How the belief is read. ``"samples"``: N completions parsed by g_T. ``"one_pass"``
    (a tool decision): one forward pass's top log-probabilities over the options "call
    TOOL" (one per offered tool), "ask for missing information" and "no offered tool can do
    this", and one greedy completion for the call to send
    (:mod:`taskcal_agents.sampling._one_pass`); it needs an OpenAI-compatible model that
    returns log-probabilities under a choice constraint (vLLM). ``n_samples`` and
    ``adaptive`` do not apply; ``temperature`` is the belief's."""
    on_error: Literal["raise", "fallback"] = "raise"
    """After the retries fail: raise :class:`~taskcal_agents.errors.SamplingError` (a
    :class:`~taskcal_agents.errors.ServerError` naming the URL when an OpenAI-compatible
    server failed: unreachable, timed out, 5xx/429, a body cut short), or return the task's
    fallback decision flagged with the error. With adaptive N a round that fails for good
    does so too: the samples of earlier rounds are discarded, not decided on, and the
    error's attempt count is that round's."""
    max_retries: Count = Field(default=0, ge=0)
    """How many times a failed draw is retried (with adaptive N, per round)."""
    retry_wait: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    """Seconds to wait before the first retry; doubles after each retry."""

    @classmethod
    def checked(cls, owner: str, **values: Any) -> SamplingOptions:
        """Validate *values* into options, or raise an error naming *owner*'s parameter.

        Raises:
            ConfigurationError: A value is out of range or of the wrong type.
        """
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            error = exc.errors()[0]
            name = ".".join(str(part) for part in error["loc"]) or "?"
            reason = str(error["msg"]).removeprefix("Value error, ")
            msg = f"{owner} parameter {name!r}: {reason}, got {error.get('input')!r}."
            raise ConfigurationError(msg) from exc

    @model_validator(mode="after")
    def _one_pass_alone(self) -> SamplingOptions:
        """Adaptive N draws samples in rounds: the one-pass belief draws none."""
        if self.belief == "one_pass" and self.adaptive is not None:
            msg = "adaptive N stops a draw of samples early; belief='one_pass' draws none"
            raise ValueError(msg)
        if self.belief == "one_pass" and not (self.temperature or 0) > 0:
            msg = (
                "belief='one_pass' reads the labels' probabilities at this temperature, so it "
                "must be > 0 (1.0: the model's own distribution)"
            )
            raise ValueError(msg)
        return self

    @field_validator("adaptive", mode="before")
    @classmethod
    def _epsilon_alone(cls, value: Any) -> Any:
        """A bare number is the ε of :class:`AdaptiveSampling` with its other defaults."""
        if isinstance(value, int | float) and not isinstance(value, bool):
            return AdaptiveSampling(epsilon=value)
        return value
