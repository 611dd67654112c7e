"""The decision protocol: the rounds of one decision, without I/O.

Every front door (the Runnable and the chat model over it, the agent middleware, the
decision model) and the workflow's sampler run the same state machine: a generator that
*yields* each :class:`Draw` it needs (which inputs, how many more samples, after how long a
wait) and *receives* what was drawn, one entry per input: its samples, or the exception its
draw raised. It applies

- adaptive N (:class:`~taskcal_agents.decision.AdaptiveSampling`): the rounds of
  ``adaptive.rounds(n_samples)``, and after each round an input whose stopping rule says
  stop draws no more;
- retries (:class:`RetryPolicy`, tenacity's wait strategies): a round whose draw failed
  with a retryable error is drawn again for the inputs that failed, the wait before each
  attempt being tenacity's;
- the declared fallback: an input whose round fails for good gets the task's fallback
  decision with the error (``on_error="fallback"``), or its error (``"raise"``); the samples
  of its earlier rounds are discarded, not decided on;

and ends in one :class:`~taskcal_agents.decision.Decision` (or error) per input. An input
whose last message is the user's plain yes to the library's confirmation question draws
nothing: its decision sends exactly the confirmed call
(:meth:`~taskcal_agents.decision.Decider.approved`).
:func:`taskcal_agents.sampling._drive.drive` and
:func:`~taskcal_agents.sampling._drive.adrive` run it, the first with blocking calls and
``time.sleep``, the second awaited.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.messages import AIMessage
from tenacity import RetryCallState
from tenacity.wait import wait_base, wait_exponential, wait_exponential_jitter, wait_none

from taskcal_agents.decision._adaptive import (
    StopCheck,
    _fitted_prior,
    _warn_unfitted,
    stop_check_messages,
    with_stop,
)
from taskcal_agents.decision._decider import Decider, Decision
from taskcal_agents.decision._options import AdaptiveSampling, SamplingOptions
from taskcal_agents.decision._terms import approvable
from taskcal_agents.errors import (
    ConfigurationError,
    SamplingError,
    SamplingServerError,
    ServerError,
)
from taskcal_agents.parsing import GroundingContext

__all__ = [
    "DecisionInput",
    "Draw",
    "Drawn",
    "RetryPolicy",
    "Rounds",
    "decide_in_rounds",
    "decide_one_pass",
    "draw_in_rounds",
    "is_control_flow",
]


_JITTER_HAS_MULTIPLIER = "multiplier" in inspect.signature(wait_exponential_jitter).parameters
"""tenacity 9.1 renamed ``wait_exponential_jitter``'s ``initial`` to ``multiplier``."""


def is_control_flow(exc: BaseException) -> bool:
    """Whether *exc* is a LangGraph interrupt or other bubble-up signal (never retried)."""
    try:
        from langgraph.errors import GraphBubbleUp
    except ImportError:
        return False
    return isinstance(exc, GraphBubbleUp)


def _propagates(exc: BaseException) -> bool:
    """Whether *exc* leaves the protocol as it is, rather than failing a draw."""
    return (
        not isinstance(exc, Exception)
        or is_control_flow(exc)
        or isinstance(exc, ConfigurationError)
    )


@dataclass(frozen=True)
class RetryPolicy:
    """How often a failed draw is tried, on which errors, and how long to wait between.

    Attributes:
        attempts: Tries per round (1: no retry).
        retry_on: Exception types to retry, or a predicate (``with_retry()``'s forms).
        wait: A tenacity wait strategy; the wait before attempt *k* is its value after
            *k* − 1 failed attempts.
    """

    attempts: int = 1
    retry_on: tuple[type[BaseException], ...] | Callable[[BaseException], bool] = (Exception,)
    wait: wait_base = field(default_factory=wait_none)

    @classmethod
    def of(cls, max_retries: int, retry_wait: float) -> RetryPolicy:
        """*max_retries* retries; *retry_wait* seconds before the first, doubling after."""
        return cls(max_retries + 1, wait=wait_exponential(multiplier=retry_wait))

    @classmethod
    def of_runnable_retry(cls, retry: Any) -> RetryPolicy:
        """The policy of a LangChain ``with_retry()`` layer (a ``RunnableRetry``).

        Its attempts, its exception types and its wait: tenacity's
        ``wait_exponential_jitter`` with the layer's parameters, as ``RunnableRetry`` builds
        it (LangChain's ``initial`` is tenacity's ``multiplier`` now), or no wait.
        """
        params = dict(retry.exponential_jitter_params or {})
        if "initial" in params and _JITTER_HAS_MULTIPLIER:
            params["multiplier"] = params.pop("initial")
        wait: wait_base = (
            wait_exponential_jitter(**params) if retry.wait_exponential_jitter else wait_none()
        )
        return cls(retry.max_attempt_number, retry.retry_exception_types, wait)

    def wait_before(self, attempt: int) -> float:
        """Seconds to wait before *attempt* (1 is the first try: no wait)."""
        if attempt < 2:
            return 0.0
        state = RetryCallState(None, None, (), {})  # type: ignore[arg-type]
        state.attempt_number = attempt - 1
        return float(self.wait(state))

    def retries(self, error: BaseException) -> bool:
        """Whether *error* is retried (never a control-flow signal)."""
        if not isinstance(error, Exception) or is_control_flow(error):
            return False
        if isinstance(self.retry_on, tuple):
            return isinstance(error, self.retry_on)
        return bool(self.retry_on(error))


@dataclass(frozen=True)
class Draw:
    """What the protocol asks its driver for: wait, then draw more samples for some inputs.

    Attributes:
        items: The inputs (indices into the protocol's inputs) to draw for.
        n: Samples to draw for each of them.
        drawn: Samples each already has (a sampling seed moves on by this).
        attempt: 1 for a round's first try, then 2, 3, … for its retries.
        wait: Seconds to wait before drawing.
        request: A request of its own (:func:`decide_one_pass`): its ``messages`` replace the
            input's prompt and its other entries (``logprobs``, a choice constraint,
            ``max_tokens``, ``temperature``…) the sample arguments; ``None``: ``n`` samples
            of the input's prompt.
    """

    items: tuple[int, ...]
    n: int
    drawn: int
    attempt: int
    wait: float
    request: Mapping[str, Any] | None = None


Drawn = Sequence[Sequence[AIMessage] | BaseException]
"""What a driver sends back for a :class:`Draw`: per input, its samples or its error."""


@dataclass
class Rounds:
    """What the rounds of one input came to.

    Attributes:
        samples: The samples drawn (empty when a round failed for good).
        error: The error of the round that failed for good, else ``None``.
        attempts: Tries of the input's last round.
        check: The stopping rule's last verdict (``None``: no check was made).
    """

    samples: list[AIMessage] = field(default_factory=list)
    error: BaseException | None = None
    attempts: int = 0
    check: StopCheck | None = None


def draw_in_rounds(
    n_inputs: int,
    n_samples: int,
    *,
    adaptive: AdaptiveSampling | None = None,
    retry: RetryPolicy | None = None,
    stop_check: Callable[[int, list[AIMessage]], StopCheck] | None = None,
    skip: Collection[int] = (),
) -> Generator[Draw, Drawn, list[Rounds]]:
    """Draw the samples of *n_inputs* inputs in rounds, with retries; return what each got.

    Without *adaptive* there is one round of *n_samples*. With it, the rounds of
    ``adaptive.rounds(n_samples)``, and after each round short of N an input for which
    ``stop_check(i, samples)`` says stop draws no more. An error thrown into the
    generator at a ``yield`` is that draw's error for all of its inputs. Two kinds of
    error are never a draw's and leave the protocol as they are: a control-flow signal
    (:func:`is_control_flow`) and a :class:`~taskcal_agents.errors.ConfigurationError` (a
    request the driver refused to send: retrying it or falling back would hide a bug).
    The inputs in *skip* draw nothing.
    """
    retry = retry or RetryPolicy()
    out = [Rounds() for _ in range(n_inputs)]
    active = [i for i in range(n_inputs) if i not in skip]
    done = 0
    rounds = (n_samples,) if adaptive is None else adaptive.rounds(n_samples)
    for total in rounds:
        pending, attempt, n = list(active), 0, total - done
        while pending and attempt < retry.attempts:
            attempt += 1
            draw = Draw(tuple(pending), n, done, attempt, retry.wait_before(attempt))
            try:
                drawn: Drawn = yield draw
            except Exception as exc:
                if _propagates(exc):
                    raise
                drawn = [exc] * len(pending)
            failed = []
            for i, result in zip(pending, drawn, strict=True):
                out[i].attempts = attempt
                if isinstance(result, BaseException):
                    if _propagates(result):
                        raise result
                    out[i].error = result
                    if retry.retries(result):
                        failed.append(i)
                    continue
                out[i].error = None
                out[i].samples = [*out[i].samples, *result]
            pending = failed
        for i in active:
            if out[i].error is not None:
                out[i].samples = []
        active = [i for i in active if out[i].error is None]
        done = total
        if stop_check is not None and adaptive is not None and total < n_samples:
            checks = {i: stop_check(i, out[i].samples) for i in active}
            for i, check in checks.items():
                out[i].check = check
            active = [i for i in active if not checks[i].stop]
    return out


def _sampling_error(what: str, r: Rounds) -> SamplingError:
    """The error of an input whose draw failed for good, from the draw's error."""
    error = r.error
    msg = (
        f"{what} after {r.attempts} attempt(s): {type(error).__name__}: {error}; raise "
        "max_retries or pass on_error='fallback' to take the task's fallback action instead."
    )
    out = SamplingServerError(msg) if isinstance(error, ServerError) else SamplingError(msg)
    out.__cause__ = error
    return out


@dataclass(frozen=True)
class DecisionInput:
    """What one input's decision reads besides its samples.

    Attributes:
        question: The question, for a task that clusters open answers (else ``None``).
        answered_calls: The calls the input made and answered in its user turn.
        context: The input's tools and conversation, for a task that grounds its calls.
    """

    question: str | None = None
    answered_calls: frozenset[str] = frozenset()
    context: GroundingContext | None = None


def _approves(decider: Decider, item: DecisionInput, tool_names: Sequence[str] | None) -> bool:
    """Whether the input's last message approves confirmed calls the task may send as they are.

    :func:`~taskcal_agents.decision._terms.approvable`: offered, grounded and trusted.
    """
    return approvable(decider.task, item.context, tool_names)


def decide_in_rounds(
    decider: Decider,
    inputs: Sequence[DecisionInput],
    options: SamplingOptions,
    *,
    retry: RetryPolicy | None = None,
    tool_names: Sequence[str] | None = None,
    on_error: Literal["raise", "fallback"] = "raise",
    return_samples: bool = False,
    what: str = "could not sample the completions",
) -> Generator[Draw, Drawn, list[Decision | BaseException]]:
    """The whole protocol: draw in rounds (:func:`draw_in_rounds`), then decide each input.

    Args:
        decider: The task, calibrator, α and risk guard in force for all the inputs.
        inputs: Per input, what its decision reads besides its samples.
        options: N and adaptive N.
        retry: The retry policy (``None``: one try).
        tool_names: The offered tools' names (``None``: any tool).
        on_error: For an input whose draw failed for good: a
            :class:`~taskcal_agents.errors.SamplingError` (a
            :class:`~taskcal_agents.errors.ServerError` when the server failed) from its
            error (``"raise"``), or the task's fallback decision naming the error and the
            attempts (``"fallback"``).
        return_samples: Keep the samples and their labels in the decisions.
        what: How the error of ``"raise"`` begins (who could not sample what).

    Returns:
        Per input, its decision (with adaptive N: where the draw stopped), or the error
        its decision raised.
    """
    adaptive = options.adaptive
    if adaptive is not None and _fitted_prior(decider, adaptive) is None:
        _warn_unfitted(decider.task)  # the rule could never stop early: one round of N
        adaptive = None

    def stop(i: int, samples: list[AIMessage]) -> StopCheck:
        assert adaptive is not None
        return stop_check_messages(
            decider, samples, options.n_samples, adaptive, tool_names=tool_names,
            answered_calls=inputs[i].answered_calls, context=inputs[i].context,
        )  # fmt: skip

    # A conversation whose last message approves a confirmed call sends exactly that call.
    approved = {i for i, item in enumerate(inputs) if _approves(decider, item, tool_names)}
    rounds = yield from draw_in_rounds(
        len(inputs), options.n_samples, adaptive=adaptive, retry=retry, stop_check=stop,
        skip=approved,
    )  # fmt: skip
    out: list[Decision | BaseException] = []
    for i, (item, r) in enumerate(zip(inputs, rounds, strict=True)):
        if i in approved:
            assert item.context is not None
            out.append(decider.approved(item.context, tool_names=tool_names))
            continue
        if r.error is not None:
            out.append(_failed_round(decider, what, r, on_error))
            continue
        try:
            decision = decider.decide(
                r.samples, tool_names=tool_names, return_samples=return_samples,
                question=item.question, answered_calls=item.answered_calls,
                context=item.context,
            )  # fmt: skip
        except Exception as exc:
            out.append(exc)
            continue
        out.append(decision if adaptive is None else with_stop(decision, r.check))
    return out


class _Failed(Exception):
    """A one-pass request that failed for good: its error and the attempts it took."""

    def __init__(self, error: BaseException, attempts: int) -> None:
        super().__init__(str(error))
        self.error = error
        self.attempts = attempts


def _one_request(
    i: int, request: Mapping[str, Any], retry: RetryPolicy
) -> Generator[Draw, Drawn, list[AIMessage]]:
    """Draw one request of input ``i``, retried by ``retry``; raise :class:`_Failed` for good."""
    attempt = 0
    while True:
        attempt += 1
        try:
            drawn: Drawn = yield Draw((i,), 1, 0, attempt, retry.wait_before(attempt), request)
        except Exception as exc:
            if _propagates(exc):
                raise
            drawn = [exc]
        result = drawn[0]
        if not isinstance(result, BaseException):
            return list(result)
        if _propagates(result):
            raise result
        if attempt >= retry.attempts or not retry.retries(result):
            raise _Failed(result, attempt)


OnePassProtocol = Generator[dict[str, Any], list[AIMessage], Any]
"""A one-pass belief's requests (``messages`` and sample keyword arguments); it returns an
object with the labels' ``probs`` and the forward passes it took (``requests``)."""


def decide_one_pass(
    decider: Decider,
    inputs: Sequence[DecisionInput],
    prompts: Sequence[Any],
    belief: Callable[[int], OnePassProtocol],
    *,
    retry: RetryPolicy | None = None,
    tool_names: Sequence[str] | None = None,
    on_error: Literal["raise", "fallback"] = "raise",
    return_samples: bool = False,
    what: str = "could not read the one-pass belief",
) -> Generator[Draw, Drawn, list[Decision | BaseException]]:
    """The one-pass protocol: per input, its belief's requests, one greedy completion, a decision.

    ``belief(i)`` is input i's one-pass belief protocol
    (:func:`~taskcal_agents.sampling.one_pass_protocol`); each of its requests, and then the
    greedy completion of ``prompts[i]`` (temperature 0), is one :class:`Draw` with its own
    ``request``, retried as a round of :func:`draw_in_rounds` is. The decision is
    :meth:`Decider.decide_one_pass`. Errors and the fallback are as in
    :func:`decide_in_rounds`; an input whose last message approves a confirmed call draws
    nothing.
    """
    retry = retry or RetryPolicy()
    out: list[Decision | BaseException] = []
    for i, item in enumerate(inputs):
        if _approves(decider, item, tool_names):
            assert item.context is not None
            approved = decider.approved(item.context, tool_names=tool_names)
            out.append(approved.model_copy(update={"belief": "one_pass"}))
            continue
        try:
            protocol = belief(i)
            request = next(protocol)
            while True:
                request = protocol.send((yield from _one_request(i, request, retry)))
        except StopIteration as stop:
            probs, passes = stop.value.probs, int(stop.value.requests)
        except _Failed as failed:
            out.append(_failed(decider, what, failed, on_error))
            continue
        except Exception as exc:
            if _propagates(exc):
                raise
            out.append(exc)
            continue
        greedy_request = {"messages": prompts[i], "temperature": 0.0}
        try:
            (greedy,) = yield from _one_request(i, greedy_request, retry)
        except _Failed as failed:
            out.append(_failed(decider, what, failed, on_error))
            continue
        try:
            decision = decider.decide_one_pass(
                probs, greedy, forward_passes=passes + 1, tool_names=tool_names,
                return_samples=return_samples, answered_calls=item.answered_calls,
                context=item.context,
            )  # fmt: skip
        except Exception as exc:
            out.append(exc)
            continue
        out.append(decision)
    return out


def _failed(
    decider: Decider, what: str, failed: _Failed, on_error: Literal["raise", "fallback"]
) -> Decision | BaseException:
    """The fallback decision or the error of a one-pass input whose request failed for good."""
    rounds = Rounds(error=failed.error, attempts=failed.attempts)
    result = _failed_round(decider, what, rounds, on_error)
    if isinstance(result, Decision):
        return result.model_copy(update={"belief": "one_pass"})
    return result


def _failed_round(
    decider: Decider, what: str, r: Rounds, on_error: Literal["raise", "fallback"]
) -> Decision | BaseException:
    """The task's fallback decision naming the error (``"fallback"``), or the error."""
    if on_error == "fallback":
        why = f"model error after {r.attempts} attempt(s): {type(r.error).__name__}: "
        return decider.fallback(f"{why}{r.error}")
    return _sampling_error(what, r)
