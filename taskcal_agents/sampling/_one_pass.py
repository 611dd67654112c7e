"""The one-pass tool decision: the belief over call / ask / refuse from one forward pass.

The conversation and the offered tools, with an instruction (merged into the system
message by the one prompt policy), are answered under a choice constraint among one
option per label role (:func:`tool_options`):

- ``call NAME()`` for each offered tool (the parentheses keep one tool's option from being
  the prefix of another's);
- :data:`ASK_OPTION` for the ask label, :data:`REFUSE_OPTION` for the refusal label, and
  :data:`ANSWER_OPTION` for a ``direct_answer`` label.

The labels' probabilities are read from the top log-probabilities of that pass
(:func:`~taskcal_agents.sampling._logprob.belief_protocol`, with the call options grouped
under the call label, so a first token shared only by call options needs no second pass).
One greedy completion then supplies the call to ground and send (drawn by the caller: the
front doors' :func:`~taskcal_agents.decision.decide_one_pass`, or ``taskcal sample
--belief one_pass``), and :meth:`Decider.decide_one_pass
<taskcal_agents.decision.Decider.decide_one_pass>` decides.
"""

from __future__ import annotations

import string
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from langchain_core.messages import AIMessage
from numpy.typing import NDArray

from taskcal_agents.decision import Task
from taskcal_agents.errors import ConfigurationError
from taskcal_agents.sampling._logprob import LogprobBelief, belief_protocol
from taskcal_agents.sampling._messages import to_openai_messages
from taskcal_agents.sampling._prompts import with_task_prompt

__all__ = [
    "ANSWER_OPTION",
    "ASK_OPTION",
    "REFUSE_OPTION",
    "OnePassBelief",
    "ToolOptions",
    "call_options",
    "one_pass_instruction",
    "one_pass_protocol",
    "tool_options",
]

ASK_OPTION = "ask for missing information"
"""The option of the ask label."""
REFUSE_OPTION = "no offered tool can do this"
"""The option of the refusal label."""
ANSWER_OPTION = "answer without a tool"
"""The option of a ``direct_answer`` label."""
DIRECT_ANSWER = "direct_answer"


@dataclass(frozen=True)
class ToolOptions:
    """The choices of a one-pass tool decision.

    Attributes:
        options: The strings the model may emit.
        labels: The task label each option stands for.
        tools: The tool a call option names (``None`` for the others).
        shown: For lettered options (:func:`call_options`), what each letter stands for;
            empty: the options are shown as they are.
    """

    options: tuple[str, ...]
    labels: tuple[str, ...]
    tools: tuple[str | None, ...]
    shown: tuple[str, ...] = ()


def tool_options(task: Task, tool_names: Sequence[str]) -> ToolOptions:
    """The options of ``task``'s one-pass decision with ``tool_names`` offered.

    Raises:
        ConfigurationError: The task is not a tool decision whose labels are the call, ask
            and refusal labels (and optionally ``direct_answer``).
    """
    refusal = task.abstain_action if task.abstain_action in task.labels else None
    roles = {task.call_action: None, task.ask_action: ASK_OPTION, refusal: REFUSE_OPTION}
    roles[DIRECT_ANSWER] = ANSWER_OPTION
    if task.call_action not in task.labels or any(label not in roles for label in task.labels):
        msg = (
            f"the one-pass belief reads a tool decision's labels from one choice among "
            f"'call TOOL', {ASK_OPTION!r} and {REFUSE_OPTION!r}; task {task.name!r} has "
            f"labels {list(task.labels)!r} (call_action {task.call_action!r}, ask_action "
            f"{task.ask_action!r}, abstain_action {task.abstain_action!r}); use a "
            "tool_decision() task, or belief='samples'."
        )
        raise ConfigurationError(msg)
    options: list[str] = []
    labels: list[str] = []
    tools: list[str | None] = []
    for label in task.labels:
        if label == task.call_action:
            for name in dict.fromkeys(tool_names):
                options.append(f"call {name}()")
                labels.append(label)
                tools.append(name)
        else:
            options.append(str(roles[label]))
            labels.append(label)
            tools.append(None)
    return ToolOptions(tuple(options), tuple(labels), tuple(tools))


def call_options(task: Task, calls: Sequence[tuple[str, str]]) -> ToolOptions:
    """The options of a clustered one-pass decision: lettered calls, then ask and refuse.

    Clustered self-assessment: the distinct calls a few samples made (each ``(tool name,
    the call as text)``, e.g. ``("get_weather", 'get_weather(city="Paris")')``) replace the
    one option per offered tool, and every option is a letter (A, B, …), so one forward
    pass reads each option's probability.

    Raises:
        ConfigurationError: As :func:`tool_options`, two calls have the same text, or there
            are more than 26 options.
    """
    base = tool_options(task, ())
    texts = [text for _, text in calls]
    if len(set(texts)) != len(texts):
        msg = f"call_options: the calls must be distinct, got {texts!r}."
        raise ConfigurationError(msg)
    shown = (*texts, *base.options)
    if len(shown) > len(string.ascii_uppercase):
        msg = f"call_options: at most 26 options, got {len(shown)}."
        raise ConfigurationError(msg)
    call = str(task.call_action)
    return ToolOptions(
        tuple(string.ascii_uppercase[: len(shown)]),
        (*(call for _ in calls), *base.labels),
        (*(name for name, _ in calls), *base.tools),
        shown,
    )


_MEANINGS = {
    ASK_OPTION: "a tool fits, but the request lacks a value it needs",
    REFUSE_OPTION: "none of the offered tools can do what is asked",
    ANSWER_OPTION: "reply directly, no tool is needed",
}
"""What the instruction says each option other than a call means."""


def one_pass_instruction(options: ToolOptions) -> str:
    """The instruction that asks for one of ``options``, merged into the system message."""
    lettered = bool(options.shown)
    if lettered:
        lines = [
            "Before you reply, choose what to do. Reply with the letter of exactly one option:"
        ]
    else:
        lines = ["Before you reply, choose what to do. Reply with exactly one of these options:"]
    shown = options.shown or options.options
    for option, text, tool in zip(options.options, shown, options.tools, strict=True):
        if tool is not None and lettered:
            lines.append(f"{option}. make exactly this call: {text}")
        elif tool is not None:
            lines.append(f"- {option}: call the tool {tool}, with every value it needs given")
        elif lettered:
            lines.append(f"{option}. {text}: {_MEANINGS[text]}")
        else:
            lines.append(f"- {option}: {_MEANINGS[text]}")
    return "\n".join(lines)


@dataclass(frozen=True)
class OnePassBelief:
    """The labels' distribution from one forward pass.

    Attributes:
        labels: The task labels, in the order of ``probs``.
        probs: Probability per task label.
        choice: The belief over the options, as read (per-option probabilities within the
            call label are split evenly where the pass did not resolve them).
        options: The options.
    """

    labels: tuple[str, ...]
    probs: NDArray[np.float64]
    choice: LogprobBelief
    options: ToolOptions

    @property
    def requests(self) -> int:
        """The forward passes the belief took (1 unless labels shared a first token)."""
        return self.choice.requests

    @property
    def coverage(self) -> float:
        """The share of the first step's mass the returned top tokens carried."""
        return self.choice.coverage

    @property
    def unresolved_mass(self) -> float:
        """Mass split evenly between labels instead of resolved (see :class:`LogprobBelief`)."""
        return self.choice.unresolved_mass

    def option_probs(self) -> dict[str, float]:
        """``{option: probability}`` (even splits within the call label where unresolved)."""
        return self.choice.as_dict()

    def as_dict(self) -> dict[str, float]:
        """``{label: probability}``."""
        return {label: float(p) for label, p in zip(self.labels, self.probs, strict=True)}


def one_pass_protocol(
    task: Task,
    messages: Any,
    *,
    tool_names: Sequence[str],
    tools: Sequence[Any] | None = None,
    temperature: float = 1.0,
    extra_body: Mapping[str, Any] | None = None,
    options: ToolOptions | None = None,
) -> Generator[dict[str, Any], list[AIMessage], OnePassBelief]:
    """The one-pass belief as a generator of requests (:meth:`Sampler.sample` keyword arguments).

    Args:
        task: The tool decision.
        messages: The request as it is sampled (the task's prompt already merged in).
        tool_names: The offered tools' names (one call option each).
        tools: The tool schemas to send with each request, or ``None`` where the model has
            them bound (the front doors); the requests ask for ``tool_choice="none"``
            either way, so the tools are in the prompt and only an option can come out.
        temperature: The temperature the probabilities are for.
        extra_body: More request fields (vLLM's).
        options: The choices (:func:`call_options` for the clustered variant); ``None``:
            :func:`tool_options` of ``tool_names``.

    Raises:
        ConfigurationError: The task is not a tool decision (:func:`tool_options`).
        SamplingError: A response carried no log-probabilities.
    """
    options = tool_options(task, tool_names) if options is None else options
    prompt = with_task_prompt(to_openai_messages(messages), one_pass_instruction(options))
    protocol = belief_protocol(
        prompt, options.options, temperature=temperature, tools=tools,
        extra_body=extra_body, groups=options.labels,
    )  # fmt: skip
    try:
        request = next(protocol)
        while True:
            if tool_names or tools:
                request["tool_choice"] = "none"
            request = protocol.send((yield request))
    except StopIteration as stop:
        choice: LogprobBelief = stop.value
    mass = dict.fromkeys(task.labels, 0.0)
    for label, p in zip(options.labels, choice.probs, strict=True):
        mass[label] += float(p)
    probs = np.array([mass[label] for label in task.labels], dtype=np.float64)
    return OnePassBelief(tuple(task.labels), probs, choice, options)
