"""What a tool declares about its effect: MCP annotations, metadata, tags; bad values refused."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.tools import tool

from taskcal_agents.errors import ConfigurationError
from taskcal_agents.parsing import GroundingContext, ToolEffect, declared_effect


def _tool(**fields: Any) -> Any:
    @tool
    def act(x: str) -> str:
        """Do something with x."""
        return x

    return act.model_copy(update=fields)


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({"readOnlyHint": True}, "read"),
        ({"readOnlyHint": True, "destructiveHint": True}, "read"),  # read-only wins
        ({"readOnlyHint": False, "destructiveHint": False}, "write"),
        ({"readOnlyHint": False}, "irreversible"),  # MCP: unset destructiveHint = destructive
        ({"readOnlyHint": None, "destructiveHint": True}, "irreversible"),
        ({"destructiveHint": False, "idempotentHint": True}, "write"),
    ],
)
def test_mcp_annotations_as_langchain_mcp_adapters_put_them(
    annotations: dict[str, Any], expected: str
) -> None:
    # langchain-mcp-adapters: metadata = {**tool.annotations.model_dump(), "_meta": ...}
    metadata = {"title": None, "openWorldHint": None, "idempotentHint": None, **annotations}
    assert declared_effect(_tool(metadata=metadata)) == ToolEffect(expected, "mcp")  # type: ignore[arg-type]


def test_annotations_without_a_hint_declare_nothing() -> None:
    assert declared_effect(_tool(metadata={"title": "Act", "readOnlyHint": None})) is None
    assert declared_effect(_tool()) is None


def test_mcp_tool_dicts_carry_annotations() -> None:
    mcp = {"name": "delete_file", "inputSchema": {}, "annotations": {"destructiveHint": True}}
    assert declared_effect(mcp) == ToolEffect("irreversible", "mcp")


def test_metadata_then_tags() -> None:
    assert declared_effect(_tool(metadata={"effect": "read"})) == ToolEffect("read", "metadata")
    assert declared_effect(_tool(tags=["x", "effect:irreversible"])) == ToolEffect(
        "irreversible", "tags"
    )
    both = _tool(metadata={"effect": "write"}, tags=["effect:read"])
    assert declared_effect(both) == ToolEffect("write", "metadata")  # metadata before tags


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"metadata": {"effect": "readonly"}}, "declares the effect 'readonly' in its metadata"),
        ({"tags": ["effect:delete"]}, "declares the effect 'delete' in its tags"),
        ({"tags": ["effect:read", "effect:write"]}, "tags of several effects"),
        ({"metadata": {"readOnlyHint": "yes"}}, "readOnlyHint='yes'; it must be true or false"),
    ],
)
def test_bad_declarations_name_the_tool_and_the_value(fields: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigurationError, match="tool 'act'") as raised:
        declared_effect(_tool(**fields))
    assert says in str(raised.value)


def test_the_grounding_context_reads_the_offered_tools_effects() -> None:
    context = GroundingContext([_tool(metadata={"effect": "read"}), "other"], [])
    assert context.effects == {"act": ToolEffect("read", "metadata")}
