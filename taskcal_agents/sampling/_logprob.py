"""One-pass belief: the label distribution read from ``top_logprobs`` instead of N samples.

When a task's answer is a constrained choice among labels, vLLM's ``structured_outputs``
``{"choice": labels}`` masks every token that cannot start a label, and ``top_logprobs`` of
one forward pass (``max_tokens=1``) then hold the distribution of the first generated token
over the tokens that can. Under the choice grammar a first token that is a prefix of only one
label decides that label (the grammar forces the rest), so

    p(label) = Σ_{first tokens t that only that label starts with} p(t).

A first token shared by several labels (``"a"`` for ``ask`` and ``answer``) is resolved by one
more forward pass that continues the assistant message after ``t`` (vLLM's
``continue_final_message``) with the remainders as the choice, recursively up to
``max_depth``; branches lighter than ``min_branch_mass`` are split evenly instead. With
``groups`` (one group per label: the one-pass tool belief groups every "call TOOL" option
under ``tool_call``), a branch whose labels are all of one group is not resolved: its mass
is exact for the group and split evenly within it (``within_group_mass``), so the group
distribution usually takes one forward pass.

vLLM returns log-probabilities before temperature (its default ``raw_logprobs``), after the
grammar mask, so the distribution at temperature T is computed here as p^(1/T), renormalised
over the tokens seen at each step. ``top_p``/``top_k`` are not applied. ``coverage`` reports
the share of the untempered first-step mass that the (at most 20) returned tokens account for.

The algorithm is written once, as a generator that yields requests and receives responses,
and driven by :func:`logprob_belief` (sync) and :func:`alogprob_belief` (async).
"""

from __future__ import annotations

import math
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from langchain_core.messages import AIMessage
from numpy.typing import NDArray

from taskcal_agents.decision import DEFAULT_ALPHA, Belief
from taskcal_agents.errors import ConfigurationError, SamplingError
from taskcal_agents.parsing import choice_constraint
from taskcal_agents.sampling._drive import adrive, drive
from taskcal_agents.sampling._messages import to_openai_messages
from taskcal_agents.sampling._sampler import Sampler

MASKED_LOGPROB = -1000.0
"""Log-probabilities at or below this are tokens the grammar masked (vLLM reports -9999)."""

MAX_TOP_LOGPROBS = 20
"""vLLM's default ``--max-logprobs``."""


@dataclass(frozen=True)
class LogprobBelief:
    """A label distribution read from token log-probabilities.

    Attributes:
        labels: The labels, in the order of ``probs``.
        probs: Probability per label, shape ``(k,)``, sums to 1.
        coverage: Share of the first step's (untempered) probability mass that the returned
            top tokens carried; 1 means nothing was cut off by ``top_logprobs``.
        requests: Forward passes used (1 unless first tokens were shared between labels).
        temperature: The temperature the probabilities are for.
        unresolved_mass: Mass of shared-prefix branches split evenly instead of resolved.
        within_group_mass: Mass of branches whose labels were all of one group, exact for
            the group and split evenly between its labels (0 without ``groups``).
    """

    labels: tuple[str, ...]
    probs: NDArray[np.float64]
    coverage: float
    requests: int
    temperature: float
    unresolved_mass: float = 0.0
    within_group_mass: float = 0.0
    first_tokens: tuple[tuple[str, float], ...] = field(default=(), repr=False)

    def as_dict(self) -> dict[str, float]:
        """``{label: probability}``."""
        return {label: float(p) for label, p in zip(self.labels, self.probs, strict=True)}

    def to_belief(
        self,
        n: int = 16,
        *,
        alpha: float = DEFAULT_ALPHA,
        labels: Sequence[str] | None = None,
    ) -> Belief:
        """A :class:`~taskcal_agents.decision.Belief` with ``n`` pseudo-samples of these probs.

        Useful to feed a calibrator fitted on N-sample beliefs (with the same ``alpha``).

        Args:
            n: Pseudo-samples.
            alpha: The Dirichlet prior of the belief.
            labels: The task labels the choices stand for, in the choices' order (the
                belief read over ``call, ask, refuse`` becomes one over ``tool_call,
                request_for_info, cannot_answer``); ``None`` keeps the choices.

        Raises:
            ConfigurationError: ``labels`` does not give one label per choice.
        """
        if labels is not None and len(labels) != len(self.labels):
            msg = (
                f"to_belief labels must give one task label per choice {list(self.labels)!r}, "
                f"got {list(labels)!r}."
            )
            raise ConfigurationError(msg)
        names = list(self.labels if labels is None else labels)
        return Belief(self.probs * n, names, n=n, alpha=alpha)


def check_labels(labels: Sequence[str]) -> tuple[str, ...]:
    """Validate labels for a choice constraint: distinct, non-empty, none a prefix of another.

    Raises:
        ConfigurationError: Otherwise.
    """
    choice_constraint(labels)  # distinct, non-empty strings
    labels = tuple(labels)
    for a in labels:
        for b in labels:
            if a != b and b.startswith(a):
                msg = (
                    f"logprob_belief: label {a!r} is a prefix of label {b!r}; one-pass beliefs "
                    "need prefix-free labels (the choice grammar could stop after either). "
                    "Rename one of them."
                )
                raise ConfigurationError(msg)
    return labels


def belief_protocol(
    messages: Any,
    labels: Sequence[str],
    *,
    temperature: float = 1.0,
    tools: Sequence[Any] | None = None,
    top_logprobs: int = MAX_TOP_LOGPROBS,
    max_depth: int = 4,
    min_branch_mass: float = 1e-3,
    extra_body: Mapping[str, Any] | None = None,
    groups: Sequence[str] | None = None,
) -> Generator[dict[str, Any], list[AIMessage], LogprobBelief]:
    """The belief computation as a generator: yields sample kwargs, receives the messages.

    Each yielded dict holds the keyword arguments of :meth:`OpenAISampler.sample`
    (``messages`` included); send back its result. The generator returns the
    :class:`LogprobBelief`. ``groups`` gives each label a group (see the module docstring);
    ``None``: every label is its own.

    Raises:
        ConfigurationError: Invalid labels or parameters.
        SamplingError: A response had no log-probabilities.
    """
    labels = check_labels(labels)
    if not temperature > 0:
        msg = f"logprob_belief: temperature must be > 0, got {temperature!r}."
        raise ConfigurationError(msg)
    if not 1 <= top_logprobs <= MAX_TOP_LOGPROBS:
        msg = (
            f"logprob_belief: top_logprobs must be in [1, {MAX_TOP_LOGPROBS}], "
            f"got {top_logprobs!r}."
        )
        raise ConfigurationError(msg)
    if groups is not None and len(groups) != len(labels):
        msg = (
            f"logprob_belief: groups must give one group per label ({len(labels)}), got "
            f"{len(groups)}."
        )
        raise ConfigurationError(msg)
    group_of = dict(zip(labels, groups if groups is not None else labels, strict=True))
    base = to_openai_messages(messages)
    mass = dict.fromkeys(labels, 0.0)
    state = {"requests": 0, "unresolved": 0.0, "coverage": 1.0, "within": 0.0}
    first: list[tuple[str, float]] = []

    def node(
        prefix: bytes, candidates: tuple[str, ...], weight: float, depth: int
    ) -> Generator[dict[str, Any], list[AIMessage], None]:
        remainders = {label: label.encode()[len(prefix) :] for label in candidates}
        body: dict[str, Any] = dict(extra_body or {})
        request_messages = list(base)
        if prefix:
            request_messages.append({"role": "assistant", "content": prefix.decode()})
            body |= {"continue_final_message": True, "add_generation_prompt": False}
        request: dict[str, Any] = {
            "messages": request_messages,
            "n": 1,
            "temperature": 1.0,
            "max_tokens": 1,
            "logprobs": top_logprobs,
            "structured_outputs": choice_constraint([r.decode() for r in remainders.values()]),
        }
        if tools:
            request |= {"tools": list(tools), "tool_choice": "none"}
        if body:
            request["extra_body"] = body
        response = yield request
        state["requests"] += 1
        tokens = top_tokens(response[0])
        if depth == 0:
            first.extend((text.decode("utf-8", "replace"), lp) for text, lp in tokens)
            state["coverage"] = float(sum(math.exp(lp) for _, lp in tokens))
        probs = _tempered([lp for _, lp in tokens], temperature)
        for (text, _), p in zip(tokens, probs, strict=True):
            matching = tuple(label for label in candidates if remainders[label].startswith(text))
            if len(matching) == 1:
                mass[matching[0]] += weight * p
            elif len({group_of[label] for label in matching}) == 1:  # one group: exact
                state["within"] += weight * p
                for label in matching:
                    mass[label] += weight * p / len(matching)
            elif len(matching) > 1:
                resolvable = depth + 1 < max_depth and _is_text(prefix + text)
                if resolvable and weight * p >= min_branch_mass:
                    yield from node(prefix + text, matching, weight * p, depth + 1)
                else:
                    state["unresolved"] += weight * p
                    for label in matching:
                        mass[label] += weight * p / len(matching)

    yield from node(b"", labels, 1.0, 0)
    total = sum(mass.values())
    if not total > 0:
        msg = (
            f"logprob_belief: none of the returned top tokens {first!r} starts any label of "
            f"{list(labels)!r}; does the server apply structured_outputs?"
        )
        raise SamplingError(msg)
    probs = np.array([mass[label] / total for label in labels], dtype=np.float64)
    return LogprobBelief(
        labels=labels,
        probs=probs,
        coverage=min(1.0, state["coverage"]),
        requests=int(state["requests"]),
        temperature=float(temperature),
        unresolved_mass=float(state["unresolved"]),
        within_group_mass=float(state["within"]),
        first_tokens=tuple(first),
    )


def logprob_belief(
    sampler: Sampler, messages: Any, labels: Sequence[str], **options: Any
) -> LogprobBelief:
    """The label distribution from one forward pass (``max_tokens=1``) under a choice constraint.

    Args:
        sampler: Client of the vLLM server (an
            :class:`~taskcal_agents.sampling.OpenAISampler`: the belief needs ``logprobs``).
        messages: The prompt (string, LangChain messages or OpenAI dicts). It should ask for
            one of the labels; the constraint makes sure only labels can come out.
        labels: The choices, distinct and prefix-free.
        **options: ``temperature`` (default 1.0), ``tools`` (rendered in the prompt, with
            ``tool_choice="none"``), ``top_logprobs`` (default 20), ``max_depth`` (default 4),
            ``min_branch_mass`` (default 1e-3), ``extra_body``. See :func:`belief_protocol`.

    Returns:
        The belief; ``requests`` says how many forward passes it took.

    Raises:
        ConfigurationError: Invalid labels or options.
        SamplingError, ServerError: As :meth:`OpenAISampler.sample`.
    """
    return drive(belief_protocol(messages, labels, **options), lambda r: sampler.sample(**r))


async def alogprob_belief(
    sampler: Sampler, messages: Any, labels: Sequence[str], **options: Any
) -> LogprobBelief:
    """Async :func:`logprob_belief`."""
    protocol = belief_protocol(messages, labels, **options)
    return await adrive(protocol, lambda request: sampler.asample(**request))


def top_tokens(message: AIMessage) -> list[tuple[bytes, float]]:
    """``(token bytes, logprob)`` of the first generated token's unmasked top candidates.

    Raises:
        SamplingError: The message carries no log-probabilities.
    """
    logprobs = message.response_metadata.get("logprobs") or {}
    content = logprobs.get("content") or []
    if not content:
        msg = (
            "logprob_belief: the response carries no logprobs; the server must support "
            "logprobs/top_logprobs on chat completions."
        )
        raise SamplingError(msg)
    out: list[tuple[bytes, float]] = []
    for entry in content[0].get("top_logprobs") or []:
        logprob = float(entry["logprob"])
        if logprob <= MASKED_LOGPROB or not math.isfinite(logprob):
            continue
        raw = entry.get("bytes")
        out.append((bytes(raw) if raw is not None else entry["token"].encode(), logprob))
    return out


def _tempered(logprobs: Sequence[float], temperature: float) -> list[float]:
    if not logprobs:
        return []
    scaled = np.asarray(logprobs, dtype=np.float64) / temperature
    weights = np.exp(scaled - scaled.max())
    return list(weights / weights.sum())


def _is_text(prefix: bytes) -> bool:
    try:
        prefix.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


__all__ = [
    "MASKED_LOGPROB",
    "LogprobBelief",
    "alogprob_belief",
    "belief_protocol",
    "check_labels",
    "logprob_belief",
    "top_tokens",
]
