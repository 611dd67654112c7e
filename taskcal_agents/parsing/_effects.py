"""What an offered tool does to the world: ``read``, ``write`` or ``irreversible``.

A tool's effect prices a wrong call to it (a wrong weather lookup costs a wasted turn, a wrong
payment costs money). A task's :class:`~taskcal_agents.decision.ToolEffects` names effects per
tool; otherwise the tool itself may say, and :func:`declared_effect` reads, in order:

1. MCP's tool annotations, as ``langchain-mcp-adapters`` puts them in a LangChain tool's
   ``metadata`` (``readOnlyHint``, ``destructiveHint``), or an MCP tool dict's
   ``annotations``: read-only is ``read``; otherwise destructive is ``irreversible`` and
   non-destructive ``write`` (MCP's default for an unset ``destructiveHint`` is destructive);
2. the tool's own ``metadata["effect"]``;
3. a tag ``"effect:read"`` (``write``, ``irreversible``) among the tool's ``tags``.

A declared value that is not an effect raises :class:`~taskcal_agents.errors.ConfigurationError`
naming the tool, where it was declared and the value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal, NamedTuple, get_args

from taskcal_agents.errors import ConfigurationError

__all__ = [
    "EFFECTS",
    "Effect",
    "EffectSource",
    "ToolEffect",
    "declared_effect",
    "effect_severity",
    "tool_name",
]

Effect = Literal["read", "write", "irreversible"]
"""What a call does: ``read`` (no side effect), ``write`` (changes state, reversibly),
``irreversible`` (payments, deletions, messages sent to others)."""

EFFECTS: tuple[Effect, ...] = get_args(Effect)
"""The effects, from the mildest to the most severe."""

EffectSource = Literal["task", "mcp", "metadata", "tags", "default"]
"""Where a tool's effect came from: the task file, MCP annotations, the tool's ``metadata``,
its ``tags``, or the deployment's default."""

EFFECT_METADATA_KEY = "effect"
"""The key of a LangChain tool's ``metadata`` that states its effect."""

EFFECT_TAG_PREFIX = "effect:"
"""The prefix of a LangChain tool's tag that states its effect (``"effect:read"``)."""


class ToolEffect(NamedTuple):
    """A tool's effect and where it came from."""

    effect: Effect
    source: EffectSource


def effect_severity(effect: str) -> int:
    """0 for ``read``, 1 for ``write``, 2 for ``irreversible``.

    A call of several tools takes its most severe one.
    """
    return [str(e) for e in EFFECTS].index(effect)


def _checked(value: Any, tool: str, where: str) -> Effect:
    if value not in EFFECTS:
        msg = (
            f"tool {tool!r} declares the effect {value!r} in its {where}; an effect is one "
            f"of {list(EFFECTS)!r}."
        )
        raise ConfigurationError(msg)
    return value  # type: ignore[no-any-return,unused-ignore]


def _mcp_effect(annotations: Mapping[str, Any], tool: str) -> Effect | None:
    read_only = annotations.get("readOnlyHint")
    destructive = annotations.get("destructiveHint")
    for key, value in (("readOnlyHint", read_only), ("destructiveHint", destructive)):
        if value is not None and not isinstance(value, bool):
            msg = f"tool {tool!r} has MCP annotation {key}={value!r}; it must be true or false."
            raise ConfigurationError(msg)
    if read_only is None and destructive is None:
        return None
    if read_only:
        return "read"
    return "write" if destructive is False else "irreversible"


def tool_name(tool: Any) -> str | None:
    """The name of an offered tool (a LangChain tool, a function, an OpenAI or MCP dict)."""
    if isinstance(tool, Mapping):
        function = tool.get("function")
        name = function.get("name") if isinstance(function, Mapping) else tool.get("name")
        return name if isinstance(name, str) else None
    name = getattr(tool, "name", None) or getattr(tool, "__name__", None)
    return name if isinstance(name, str) else None


def declared_effect(tool: Any) -> ToolEffect | None:
    """The effect a tool declares itself (see the module docstring), else ``None``.

    Args:
        tool: A LangChain tool, an OpenAI or MCP tool dict, or anything else offered as a
            tool (which declares nothing).

    Raises:
        ConfigurationError: A declared value is not an effect.
    """
    name = tool_name(tool) or repr(tool)
    if isinstance(tool, Mapping):
        metadata = tool.get("metadata")
        annotations = tool.get("annotations")
        tags = tool.get("tags")
    else:
        metadata = getattr(tool, "metadata", None)
        annotations = None
        tags = getattr(tool, "tags", None)
    for hints in (annotations, metadata):
        if isinstance(hints, Mapping):
            effect = _mcp_effect(hints, name)
            if effect is not None:
                return ToolEffect(effect, "mcp")
    if isinstance(metadata, Mapping) and metadata.get(EFFECT_METADATA_KEY) is not None:
        return ToolEffect(_checked(metadata[EFFECT_METADATA_KEY], name, "metadata"), "metadata")
    if isinstance(tags, Iterable) and not isinstance(tags, str | bytes):
        stated = [t[len(EFFECT_TAG_PREFIX) :] for t in tags if isinstance(t, str)
                  and t.startswith(EFFECT_TAG_PREFIX)]  # fmt: skip
        if len(set(stated)) > 1:
            msg = f"tool {name!r} has the tags of several effects, {sorted(set(stated))!r}."
            raise ConfigurationError(msg)
        if stated:
            return ToolEffect(_checked(stated[0], name, "tags"), "tags")
    return None
