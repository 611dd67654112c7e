"""The entailment judge of answer clustering: the served model says whether answers agree.

:func:`entailment_judge` asks the model "does answer A mean the same as answer B for this
question?" under a ``yes``/``no`` choice constraint, one greedy request per ordered pair,
cached. Answer clustering (:func:`~taskcal_agents.parsing.cluster_answers`
with ``entails``; a task's ``method: entailment``) asks it about answers that are not
lexically equivalent: two answers join one cluster when each entails the other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from langchain_core.messages import AIMessage

from taskcal_agents.errors import ConfigurationError, SamplingError
from taskcal_agents.parsing._constraints import choice_constraint
from taskcal_agents.parsing._text import message_text

ENTAILMENT_PROMPT = (
    "Question: {question}\n"
    "Answer A: {a}\n"
    "Answer B: {b}\n\n"
    "Does answer A mean the same as answer B for this question? Reply yes or no."
)
"""The judge's prompt (placeholders ``{question}``, ``{a}``, ``{b}``)."""

ENTAILMENT_CHOICES = ("yes", "no")
"""The judge's constrained replies."""


class EntailmentJudgeFactory(Protocol):
    """Makes the judge of one question, e.g. ``functools.partial(entailment_judge, sampler)``."""

    def __call__(self, *, question: str) -> Callable[[str, str], bool]:
        """Return ``entails(a, b)`` for answers to *question*."""
        ...


class ChoiceSampler(Protocol):
    """What the judge needs: ``sample`` with a ``structured_outputs`` choice constraint.

    The sync half of :class:`taskcal_agents.sampling.Sampler` (which this module, below the
    sampling package, does not import): every sampler of that package is one.
    """

    def sample(
        self,
        messages: Any,
        *,
        n: int,
        temperature: float,
        max_tokens: int,
        structured_outputs: Mapping[str, Any],
    ) -> list[AIMessage]:
        """Return *n* completions of *messages*."""
        ...


def entailment_judge(
    sampler: ChoiceSampler,
    *,
    question: str,
    prompt: str = ENTAILMENT_PROMPT,
    max_tokens: int = 4,
) -> Callable[[str, str], bool]:
    """A yes/no judge of "does answer A mean the same as answer B", asked of the model.

    Each ordered pair costs one greedy request constrained to ``yes``/``no`` (vLLM's
    ``structured_outputs`` choice) and is cached, so clustering N answers asks at most
    ``N * (N - 1)`` questions.

    Args:
        sampler: An :class:`~taskcal_agents.sampling.OpenAISampler` (or
            ``OfflineSampler``, or anything with that ``sample``).
        question: The question both answers answer.
        prompt: The prompt, with ``{question}``, ``{a}`` and ``{b}``.
        max_tokens: Completion length limit (the choice grammar ends the reply sooner).

    Returns:
        ``entails(a, b) -> bool``: ``True`` when the model answers ``yes``.

    Raises:
        ConfigurationError: *question* is not a non-empty string or *prompt* does not
            format with exactly those placeholders.
    """
    if not isinstance(question, str) or not question.strip():
        msg = f"entailment_judge: question must be a non-empty string, got {question!r}."
        raise ConfigurationError(msg)
    try:
        prompt.format(question="", a="", b="")
    except (KeyError, IndexError, ValueError, AttributeError) as exc:
        msg = (
            "entailment_judge: prompt must be a format string with the placeholders "
            f"{{question}}, {{a}} and {{b}}, got {prompt!r} ({type(exc).__name__}: {exc})."
        )
        raise ConfigurationError(msg) from exc
    constraint = choice_constraint(ENTAILMENT_CHOICES)
    cache: dict[tuple[str, str], bool] = {}

    def entails(a: str, b: str) -> bool:
        if (a, b) not in cache:
            content = prompt.format(question=question, a=a, b=b)
            replies = sampler.sample(
                [{"role": "user", "content": content}],
                n=1,
                temperature=0.0,
                max_tokens=max_tokens,
                structured_outputs=constraint,
            )
            verdict = message_text(replies[0]).lower() if len(replies) == 1 else None
            if verdict not in ENTAILMENT_CHOICES:
                msg = (
                    f"entailment_judge: expected one reply in {list(ENTAILMENT_CHOICES)!r} "
                    f"under the choice constraint, got {[message_text(r) for r in replies]!r}; "
                    "does the server apply structured_outputs?"
                )
                raise SamplingError(msg)
            cache[(a, b)] = verdict == "yes"
        return cache[(a, b)]

    return entails
