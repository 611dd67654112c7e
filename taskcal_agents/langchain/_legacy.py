"""The 0.1 keyword arguments of the agent middleware, kept for one more release.

Each one given warns (``DeprecationWarning``) and names its replacement; the next release
removes this module.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypedDict

from taskcal_agents._validation import check_int
from taskcal_agents.decision import (
    AUTO,
    AdaptiveSampling,
    Auto,
    CalibratorLike,
    SamplingOptions,
    Task,
)
from taskcal_agents.errors import ConfigurationError
from taskcal_agents.langchain._session import unknown_arguments

if TYPE_CHECKING:
    from taskcal_agents.langchain._middleware import ToolResultConfig

__all__ = ["DeprecatedArguments", "Migrated", "migrated"]


class DeprecatedArguments(TypedDict, total=False):
    """The 0.1 keyword arguments of :class:`TaskCalibrationMiddleware`, for one more release.

    ``n_samples``, ``temperature``, ``alpha``, ``adaptive``, ``on_error``, ``max_retries``
    and ``retry_wait`` are ``options=SamplingOptions(...)``; ``tool_result_task`` and
    ``tool_result_calibrator`` are ``tool_result={"task": ..., "calibrator": ...}``;
    ``max_concurrency`` is the run config's (``agent.invoke(..., {"max_concurrency": 4})``);
    ``use_task_prompt=False`` is a task without a prompt; ``judge`` (answer clustering)
    goes to :class:`~taskcal_agents.langchain.TaskCalibratedRunnable`.
    """

    n_samples: int
    temperature: float | None
    alpha: float
    adaptive: AdaptiveSampling | float | None
    on_error: Literal["raise", "fallback"]
    max_retries: int
    retry_wait: float
    tool_result_task: Task | str | os.PathLike[str] | Auto | None
    tool_result_calibrator: CalibratorLike | None
    max_concurrency: int | None
    use_task_prompt: bool
    judge: Any


_OPTIONS = (
    "n_samples",
    "temperature",
    "alpha",
    "adaptive",
    "on_error",
    "max_retries",
    "retry_wait",
)
_REPLACEMENT = {
    **dict.fromkeys(_OPTIONS, "options=SamplingOptions(...)"),
    "tool_result_task": 'tool_result={"task": ...}',
    "tool_result_calibrator": 'tool_result={"calibrator": ...}',
    "max_concurrency": "the run config's max_concurrency",
    "use_task_prompt": "a task without a prompt (task.model_copy(update={'prompt': None}))",
    "judge": "TaskCalibratedRunnable (answer clustering)",
}


class Migrated(NamedTuple):
    """What the 0.1 keyword arguments configure."""

    options: SamplingOptions
    tool_result: ToolResultConfig | Auto | None
    max_concurrency: int | None
    use_task_prompt: bool
    judge: Any


def migrated(
    owner: str,
    options: SamplingOptions | None,
    tool_result: ToolResultConfig | Auto | None,
    old: dict[str, Any],
    known: Iterable[str] = (),
) -> Migrated:
    """The configuration the 0.1 keyword arguments ``old`` give, each with a warning.

    A name that is none of them is an unknown argument (``known``: the current ones).
    """
    unknown = sorted(set(old) - set(_REPLACEMENT))
    if unknown:
        hints = {name: f"options=SamplingOptions({name}=...)" for name in _OPTIONS}
        raise unknown_arguments(owner, unknown, {*known, *_REPLACEMENT} - set(_OPTIONS), hints)
    for name in old:
        warnings.warn(
            f"{owner}({name}=...) is deprecated and goes in the next release; use "
            f"{_REPLACEMENT[name]} instead.",
            DeprecationWarning,
            stacklevel=3,
        )
    # alpha=None was 0.1's "not given" (the artefact's).
    given = {k: old[k] for k in _OPTIONS if k in old and not (k == "alpha" and old[k] is None)}
    if given and options is not None:
        msg = f"{owner} takes {sorted(given)!r} in 'options', not beside it; drop them."
        raise ConfigurationError(msg)
    if given:
        options = SamplingOptions.checked(owner, **given)
    if {"tool_result_task", "tool_result_calibrator"} & set(old):
        if tool_result != AUTO:
            msg = (
                f"{owner} takes the tool-result task and calibrator in 'tool_result', not "
                "beside it; drop tool_result_task / tool_result_calibrator."
            )
            raise ConfigurationError(msg)
        task = old.get("tool_result_task", AUTO)
        calibrator = old.get("tool_result_calibrator")
        config: Any = {} if task in (AUTO, None) else {"task": task}
        tool_result = (
            None if task is None and calibrator is None else {**config, "calibrator": calibrator}
        )
        if task is None and calibrator is not None:
            msg = (
                f"{owner} parameter 'tool_result_calibrator' needs a 'tool_result_task', got "
                "tool_result_task=None; pass the task the calibrator was fitted for."
            )
            raise ConfigurationError(msg)
    max_concurrency = old.get("max_concurrency")
    check_int(max_concurrency, f"{owner} parameter 'max_concurrency'", minimum=1, optional=True)
    return Migrated(
        options or SamplingOptions(), tool_result, max_concurrency,
        bool(old.get("use_task_prompt", True)), old.get("judge"),
    )  # fmt: skip
