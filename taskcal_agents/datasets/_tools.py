"""Tool schemas in BFCL's dialect (When2Call stores its tools so too) as OpenAI tool schemas."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from taskcal_agents.errors import DataFileError

_JSON_SCHEMA_TYPES = {"dict": "object", "float": "number", "tuple": "array", "int": "integer"}


def _to_json_schema(node: Any) -> Any:
    """Map BFCL's type names (``dict``, ``float``, ``tuple``, ``any``) to JSON Schema ones."""
    if isinstance(node, list):
        return [_to_json_schema(v) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "type" and isinstance(value, str):
            if value == "any":
                continue
            out[key] = _JSON_SCHEMA_TYPES.get(value, value)
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: _to_json_schema(v) for name, v in value.items()}
        else:
            out[key] = _to_json_schema(value)
    return out


def bfcl_tool(raw: Any, *, path: Path, line: int) -> dict[str, Any]:
    try:
        spec = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError as exc:
        msg = f"a tool is not valid JSON: {exc.msg}; got {str(raw)[:80]!r}."
        raise DataFileError(msg, path=str(path), line=line) from exc
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        msg = f"a tool must be an object with a 'name', got {str(raw)[:80]!r}."
        raise DataFileError(msg, path=str(path), line=line)
    function: dict[str, Any] = {"name": spec["name"]}
    if "description" in spec:
        function["description"] = spec["description"]
    params = spec.get("parameters") or {"type": "object", "properties": {}}
    function["parameters"] = _to_json_schema(params)
    return {"type": "function", "function": function}
