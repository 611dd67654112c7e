"""Effect-aware costs: a wrong call is priced by what the call would do.

A task's :class:`ToolEffects` gives each offered tool an effect (``read``, ``write``,
``irreversible``) and the call action's cost column per effect. The effect of a decision is
that of the call it would send (the modal sendable call; a call of several tools takes the
most severe one), resolved by :func:`tool_effect` in order: the task's ``tools`` entry, what
the tool declares itself (MCP annotations, ``metadata``, ``tags``;
:func:`~taskcal_agents.parsing.declared_effect`), else the task's ``default``.

Calibration maps beliefs and does not depend on the costs, so a cost matrix that varies per
decision is still MBR on the same calibrated q: no refit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator

from taskcal_agents.parsing import Effect, GroundingContext, ToolEffect, effect_severity

__all__ = ["ToolEffects", "call_effect", "effect_resolver", "tool_effect"]


class ToolEffects(BaseModel):
    """Which effect each tool has, and what a call costs by its effect (a task's ``effects``).

    In a task file::

        effects:
          default: write                  # a tool nothing else names
          tools: {get_weather: read, send_money: irreversible}
          call_cost:                      # the call action's column, one entry per label
            read: [0, 1, 1]
            write: [0, 4, 4]
            irreversible: [0, 10, 10]

    An effect without a ``call_cost`` entry costs the task's ``cost`` matrix's call column,
    so ``effects`` with no ``call_cost`` is today's flat matrix.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    default: Effect = "write"
    """The effect of a tool that neither the task nor the tool itself names."""
    tools: dict[str, Effect] = Field(default_factory=dict)
    """Effects by tool name; they take precedence over what the tools declare."""
    call_cost: dict[Effect, list[float]] = Field(default_factory=dict)
    """The call action's cost column by effect: one cost per task label (row = true label)."""

    @field_validator("call_cost")
    @classmethod
    def _finite(cls, value: dict[Effect, list[float]]) -> dict[Effect, list[float]]:
        for effect, column in value.items():
            if not all(math.isfinite(c) and c >= 0 for c in column):
                msg = f"call_cost[{effect!r}] must hold finite costs >= 0, got {column!r}."
                raise ValueError(msg)
        return value


def tool_effect(name: str, effects: ToolEffects, context: GroundingContext | None) -> ToolEffect:
    """The effect of tool ``name``: the task's entry, the tool's own, else the default."""
    if name in effects.tools:
        return ToolEffect(effects.tools[name], "task")
    declared = None if context is None else context.declared_effect(name)
    return declared if declared is not None else ToolEffect(effects.default, "default")


def effect_resolver(
    effects: ToolEffects | None, context: GroundingContext | None
) -> Callable[[str], str]:
    """A tool's effect by name, for the trust policy's warrant rule.

    :func:`tool_effect` under ``effects`` (the default :class:`ToolEffects` when ``None``).
    """
    resolved = effects if effects is not None else ToolEffects()

    def effect_of(name: str) -> str:
        return tool_effect(name, resolved, context).effect

    return effect_of


def call_effect(
    names: Sequence[str], effects: ToolEffects, context: GroundingContext | None
) -> ToolEffect:
    """The effect of a call to the tools ``names``: the most severe of theirs.

    No tool (no call to send): the task's default, from the default.
    """
    found = [tool_effect(n, effects, context) for n in names]
    if not found:
        return ToolEffect(effects.default, "default")
    return max(found, key=lambda e: effect_severity(e.effect))
