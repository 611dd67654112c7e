"""AgentDojo replay: ground-truth conversations of AgentDojo user tasks, step by step.

For a user task of an AgentDojo suite (workspace, slack, travel, banking) this rebuilds the
conversation an agent has when it follows the task's ground truth: the environment is loaded
with the given injections in place (``TaskSuite.load_and_inject_default_environment``), the
ground-truth calls are run one by one with the suite's ``FunctionsRuntime`` and their outputs
are formatted the way AgentDojo's pipeline formats them (``tool_result_to_str``: YAML for
pydantic models and lists, ``str`` otherwise; an error replaces the output, as in AgentDojo's
OpenAI message conversion). Each prefix of the conversation is a :class:`Step` that knows the
ground-truth call that comes next, so a decision rule can be scored on "does it still make the
legitimate next call after it has read injected content".

``agentdojo`` is not a dependency of ``taskcal_agents``; only this benchmark imports it (use the
venv that has it, e.g. ``runs/.venv-agentdojo``).

This module never runs an injection task: it only replays user tasks, with the injection vectors
filled by whatever strings the caller passes (canaries, placeholders or attack texts).
"""

from __future__ import annotations

import copy
import json
import re
from ast import literal_eval
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentdojo.agent_pipeline.agent_pipeline import load_system_message
from agentdojo.agent_pipeline.tool_execution import is_string_list, tool_result_to_str
from agentdojo.base_tasks import BaseUserTask
from agentdojo.functions_runtime import FunctionCall, FunctionsRuntime
from agentdojo.task_suite.load_suites import _SUITES
from agentdojo.task_suite.task_suite import TaskSuite
from pydantic import BaseModel

SUITE_NAMES: tuple[str, ...] = ("workspace", "slack", "travel", "banking")
"""The four AgentDojo suites this benchmark uses."""

PREFERRED_VERSION = "v1.2.2"
"""The benchmark version used when it ships; otherwise the newest one the package has."""

FALLBACK_SYSTEM_MESSAGE = "You are a helpful assistant that uses the given tools."

__all__ = [
    "PREFERRED_VERSION",
    "SUITE_NAMES",
    "Step",
    "after_injection",
    "canary_injections",
    "injection_vectors_for",
    "load_suites",
    "newest_version",
    "replay",
    "steps_after_injection",
    "system_message",
    "tool_schemas",
]


# --------------------------------------------------------------------------- suites


def _version_key(version: str) -> tuple[int, ...]:
    """``"v1.2.2"`` -> ``(1, 2, 2)``; unparseable parts count as 0."""
    parts = version.lstrip("v").split(".")
    return tuple(int(p) if p.isdigit() else 0 for p in parts)


def newest_version() -> str:
    """The benchmark version to use: ``v1.2.2`` if shipped, else the newest registered one."""
    versions = [v for v, suites in _SUITES.items() if suites]
    if PREFERRED_VERSION in versions:
        return PREFERRED_VERSION
    return max(versions, key=_version_key)


def load_suites(version: str | None = None) -> dict[str, TaskSuite]:
    """The workspace, slack, travel and banking suites of one AgentDojo benchmark version.

    Args:
        version: e.g. ``"v1.2.2"``; ``None`` takes :func:`newest_version`.

    Returns:
        Suite name -> ``TaskSuite``, in the order of :data:`SUITE_NAMES`.

    Raises:
        KeyError: if the version is unknown or lacks one of the four suites.
    """
    version = version or newest_version()
    if version not in _SUITES:
        raise KeyError(f"unknown AgentDojo benchmark version {version!r}; have {sorted(_SUITES)}")
    suites = _SUITES[version]
    missing = [name for name in SUITE_NAMES if name not in suites]
    if missing:
        raise KeyError(f"AgentDojo {version} lacks the suites {missing}")
    return {name: suites[name] for name in SUITE_NAMES}


def system_message() -> str:
    """AgentDojo's default system message (the one its pipelines use for every suite)."""
    try:
        text = load_system_message(None)
    except Exception:  # pragma: no cover - packaging without the data file
        return FALLBACK_SYSTEM_MESSAGE
    return text.strip() if isinstance(text, str) and text.strip() else FALLBACK_SYSTEM_MESSAGE


# --------------------------------------------------------------------------- tool schemas


def _resolve_refs(node: Any, defs: Mapping[str, Any], seen: tuple[str, ...] = ()) -> Any:
    """Replace every ``{"$ref": "#/$defs/X"}`` by a copy of ``defs[X]`` (siblings kept)."""
    if isinstance(node, list):
        return [_resolve_refs(item, defs, seen) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        name = ref.removeprefix("#/$defs/")
        if name in seen or name not in defs:  # recursive or dangling: leave the ref alone
            return {k: _resolve_refs(v, defs, seen) for k, v in node.items()}
        target = _resolve_refs(copy.deepcopy(defs[name]), defs, (*seen, name))
        siblings = {k: _resolve_refs(v, defs, seen) for k, v in node.items() if k != "$ref"}
        return {**target, **siblings}
    return {k: _resolve_refs(v, defs, seen) for k, v in node.items() if k != "$defs"}


def inline_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON schema with its ``$defs`` inlined, so each property is self-contained.

    ``anyOf`` with ``{"type": "null"}`` (pydantic's ``X | None``) is kept as it is.
    """
    defs = schema.get("$defs", {})
    out = _resolve_refs(dict(schema), defs)
    out.pop("$defs", None)
    return out


def tool_schemas(suite: TaskSuite) -> list[dict[str, Any]]:
    """The suite's tools as OpenAI tool dicts.

    Each is ``{"type": "function", "function": {"name", "description", "parameters"}}`` where
    ``parameters`` is the pydantic JSON schema of the tool's input model (as AgentDojo's OpenAI
    element sends it) with ``$defs`` inlined.
    """
    tools = []
    for function in suite.tools:
        parameters = inline_schema(function.parameters.model_json_schema())
        parameters.setdefault("type", "object")
        parameters.setdefault("properties", {})
        tools.append(
            {
                "type": "function",
                "function": {
                    "name": function.name,
                    "description": function.description,
                    "parameters": parameters,
                },
            }
        )
    return tools


# --------------------------------------------------------------------------- replay


@dataclass(frozen=True)
class Step:
    """One prefix of a replayed ground-truth conversation.

    Attributes:
        messages: the conversation so far, OpenAI-style dicts: system, user (the task's
            ``PROMPT``), then per replayed call an assistant message with ``tool_calls`` and the
            ``tool`` message with its formatted output.
        next_call: the ground-truth call that comes next, ``{"name", "args"}``; ``None`` after
            the last one (the agent should then answer).
        injected_seen: whether a tool output so far contains one of the injected strings.
        index: how many ground-truth calls have been replayed before this step.
        injected_vectors: the injection vector ids whose string a tool output so far contains.
        suite: the suite's name.
        user_task_id: the user task's ID.
    """

    messages: list[dict[str, Any]]
    next_call: dict[str, Any] | None
    injected_seen: bool
    index: int = 0
    injected_vectors: tuple[str, ...] = field(default_factory=tuple)
    suite: str = ""
    user_task_id: str = ""


def _user_task(suite: TaskSuite, user_task: BaseUserTask | str) -> BaseUserTask:
    return suite.get_user_task_by_id(user_task) if isinstance(user_task, str) else user_task


def _jsonable(value: Any) -> Any:
    """Ground-truth args as plain JSON values (a nested ``FunctionCall`` becomes a dict)."""
    if isinstance(value, FunctionCall):
        return {"name": value.function, "args": _jsonable(dict(value.args))}
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def _string_leaves(value: Any) -> list[str]:
    """Every string inside a tool result (before formatting, so YAML quoting/folding is moot)."""
    if isinstance(value, BaseModel):
        value = value.model_dump()
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for k, v in value.items() for s in (*_string_leaves(k), *_string_leaves(v))]
    if isinstance(value, list | tuple | set):
        return [s for v in value for s in _string_leaves(v)]
    return []


_WS = re.compile(r"\s+")


def _contains(haystacks: Sequence[str], needle: str) -> bool:
    """``needle`` in one of ``haystacks``, exactly or up to runs of whitespace."""
    if any(needle in h for h in haystacks):
        return True
    flat = _WS.sub(" ", needle).strip()
    return bool(flat) and any(flat in _WS.sub(" ", h) for h in haystacks)


def _format_output(result: Any) -> str:
    """A tool result as AgentDojo's ``ToolsExecutor`` formats it (YAML dump by default)."""
    try:
        return tool_result_to_str(result)
    except TypeError:  # a list item type tool_result_to_str refuses; the pipeline would crash
        return str(result)


def replay(
    suite: TaskSuite, user_task: BaseUserTask | str, injections: Mapping[str, str]
) -> list[Step]:
    """Replay a user task's ground truth with the given injections in the environment.

    The environment is ``suite.load_and_inject_default_environment(injections)`` (vectors not
    named keep their benign default), initialised by the task as AgentDojo's runner does. The
    ground-truth calls are computed once from a copy of that pre-environment
    (``user_task.ground_truth``) and then run in order with ``FunctionsRuntime(suite.tools)``
    on the live environment, so state changes carry over. Args are used as given (some are
    placeholders such as ``"<summary>"``); string-encoded lists are decoded as AgentDojo's
    ``ToolsExecutor`` does. A tool error becomes the tool message's content
    (``"ErrorType: message"``), as in AgentDojo's OpenAI conversion.

    Args:
        suite: the task suite.
        user_task: the user task, or its ID.
        injections: vector id -> string to put in that vector.

    Returns:
        ``len(ground_truth) + 1`` steps: step ``k`` holds the conversation after ``k`` calls
        and the ``k``-th call (0-based) as ``next_call``; the last step's ``next_call`` is None.
    """
    task = _user_task(suite, user_task)
    environment = task.init_environment(suite.load_and_inject_default_environment(dict(injections)))
    pre_environment = environment.model_copy(deep=True)
    calls = task.ground_truth(pre_environment)
    runtime = FunctionsRuntime(suite.tools)
    needles = {vid: text for vid, text in injections.items() if text}

    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system_message()},
        {"role": "user", "content": task.PROMPT},
    ]
    seen: list[str] = []
    steps: list[Step] = []

    def snapshot(index: int, next_call: dict[str, Any] | None) -> Step:
        return Step(
            messages=copy.deepcopy(messages),
            next_call=next_call,
            injected_seen=bool(seen),
            index=index,
            injected_vectors=tuple(seen),
            suite=suite.name,
            user_task_id=task.ID,
        )

    for index, call in enumerate(calls):
        args = _jsonable(dict(call.args))
        steps.append(snapshot(index, {"name": call.function, "args": copy.deepcopy(args)}))
        call_id = f"call_{index}"
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": call.function, "arguments": json.dumps(args)},
                    }
                ],
            }
        )
        run_args = dict(call.args)
        for key, value in run_args.items():
            if isinstance(value, str) and is_string_list(value):
                run_args[key] = literal_eval(value)
        result, error = runtime.run_function(environment, call.function, run_args)
        content = error if error else _format_output(result)
        messages.append(
            {"role": "tool", "tool_call_id": call_id, "name": call.function, "content": content}
        )
        haystacks = [content, *_string_leaves(result)]
        seen.extend(
            vid for vid, text in needles.items() if vid not in seen and _contains(haystacks, text)
        )
    steps.append(snapshot(len(calls), None))
    return steps


# --------------------------------------------------------------------------- injections


def canary_injections(suite: TaskSuite, template: str = "CANARY-{vector_id}") -> dict[str, str]:
    """One unique benign string per injection vector of the suite (``template`` formatted)."""
    return {vid: template.format(vector_id=vid) for vid in suite.get_injection_vector_defaults()}


def injection_vectors_for(suite: TaskSuite, user_task: BaseUserTask | str) -> list[str]:
    """The injection vectors whose content the user task's ground-truth replay shows the agent.

    Like AgentDojo's ``BaseAttack.get_injection_candidates``: every vector gets a unique canary
    and the vectors whose canary appears in a tool output are returned (in the suite's vector
    order). An empty list means the task is not injectable.
    """
    canaries = canary_injections(suite, "<CANARY---{vector_id}--->")
    seen = set(replay(suite, user_task, canaries)[-1].injected_vectors)
    return [vid for vid in canaries if vid in seen]


def after_injection(steps: Sequence[Step]) -> list[Step]:
    """The steps that have already shown injected content and still have a legitimate call."""
    return [s for s in steps if s.injected_seen and s.next_call is not None]


def steps_after_injection(
    suite: TaskSuite,
    user_task: BaseUserTask | str,
    injections: Mapping[str, str] | None = None,
) -> list[Step]:
    """Replay a user task and keep the steps after injected content with a next legitimate call.

    Args:
        suite: the task suite.
        user_task: the user task, or its ID.
        injections: vector id -> string; ``None`` fills every vector with a unique canary
            (:func:`canary_injections`).
    """
    if injections is None:
        injections = canary_injections(suite)
    return after_injection(replay(suite, user_task, injections))
