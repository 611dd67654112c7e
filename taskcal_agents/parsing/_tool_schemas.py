"""The schema dialects of offered tools, read as one: each tool's parameters schema.

:func:`tool_schemas` reads OpenAI tool schemas, bare function blocks (BFCL's
``"type": "dict"`` dialect), Anthropic-style tools (``{"name", "input_schema"}``),
LangChain tools or functions, and tool names alone (no schema: every given argument counts
as required), and gives each tool's JSON Schema object with its ``properties``,
``required`` and the tool's description.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def _openai_function(tool: Any) -> dict[str, Any] | None:
    """The ``function`` block of an offered tool, or ``None`` for a tool without one."""
    if isinstance(tool, str):  # a name only: no schema, no argument known to be required
        return {"name": tool}
    if isinstance(tool, Mapping):
        if isinstance(tool.get("function"), Mapping):
            return dict(tool["function"])
        if isinstance(tool.get("name"), str) and "input_schema" not in tool:
            return dict(tool)  # a bare function block (BFCL style)
        if isinstance(tool.get("name"), str):  # Anthropic style: {"name", "input_schema"}
            from langchain_core.utils.function_calling import convert_to_openai_tool

            return dict(convert_to_openai_tool(dict(tool))["function"])
        return None  # a provider's built-in tool ({"type": "web_search"})
    from langchain_core.utils.function_calling import convert_to_openai_tool

    return dict(convert_to_openai_tool(tool)["function"])


def tool_schemas(tools: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """Map each offered tool's name to its parameters schema (JSON Schema, an object).

    Args:
        tools: OpenAI tool schemas, bare function blocks (BFCL's ``"type": "dict"`` is read
            as ``"object"``), LangChain tools or functions, or tool names (no schema: no
            argument is known to be required, each given one is checked against the
            conversation).

    Returns:
        ``{name: {"properties": {...}, "required": [...], ...}}``; a tool without
        parameters has empty ``properties``.
    """
    out: dict[str, dict[str, Any]] = {}
    for tool in tools:
        function = _openai_function(tool)
        if function is None or not isinstance(function.get("name"), str):
            continue
        params = function.get("parameters")
        unknown = not isinstance(params, Mapping)
        params = dict(params) if isinstance(params, Mapping) else {}
        if unknown:  # a name only: every given argument counts as required
            params["x-unknown-schema"] = True
        props = params.get("properties")
        params["properties"] = dict(props) if isinstance(props, Mapping) else {}
        required = params.get("required")
        params["required"] = (
            [r for r in required if isinstance(r, str)] if isinstance(required, list) else []
        )
        if isinstance(function.get("description"), str):
            params.setdefault("x-tool-description", function["description"])
        out[function["name"]] = params
    return out
