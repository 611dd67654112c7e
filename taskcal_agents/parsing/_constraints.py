"""Structured-output constraints for vLLM (``structured_outputs`` request field).

Pure builders and one check, shared by the samplers (:mod:`taskcal_agents.sampling`), the
entailment judge (:mod:`taskcal_agents.parsing._answer_clusters`) and the one-pass belief: exactly
one constraint kind per request, ``{"choice": [...]}``, ``{"json": schema}``, ``{"regex": ...}``,
``{"grammar": ...}``, plus vLLM's options. The old ``guided_*`` request fields are silently
ignored by current vLLM; :data:`LEGACY_GUIDED_FIELDS` names them so the samplers refuse them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from taskcal_agents.errors import ConfigurationError

__all__ = [
    "LEGACY_GUIDED_FIELDS",
    "STRUCTURED_OUTPUT_KINDS",
    "check_structured_outputs",
    "choice_constraint",
    "json_constraint",
]

STRUCTURED_OUTPUT_KINDS = ("choice", "json", "regex", "grammar", "json_object", "structural_tag")
"""The constraint keys of vLLM's ``structured_outputs`` (exactly one per request)."""

STRUCTURED_OUTPUT_OPTIONS = ("disable_any_whitespace", "disable_additional_properties")
"""The options that may stand beside the constraint."""

LEGACY_GUIDED_FIELDS = ("guided_choice", "guided_json", "guided_regex", "guided_grammar")
"""Request fields that current vLLM silently ignores (use ``structured_outputs``)."""


def choice_constraint(labels: Sequence[str]) -> dict[str, Any]:
    """``structured_outputs`` that force the completion to be exactly one of *labels*.

    Raises:
        ConfigurationError: *labels* is empty, has duplicates or non-strings.
    """
    labels = list(labels)
    if not labels or not all(isinstance(label, str) and label for label in labels):
        msg = f"choice_constraint: labels must be non-empty strings, got {labels!r}."
        raise ConfigurationError(msg)
    if len(set(labels)) != len(labels):
        msg = f"choice_constraint: labels must be distinct, got {labels!r}."
        raise ConfigurationError(msg)
    return {"choice": labels}


def json_constraint(schema: Mapping[str, Any] | type[BaseModel]) -> dict[str, Any]:
    """``structured_outputs`` that force a JSON object following *schema* (or a pydantic model)."""
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return {"json": schema.model_json_schema()}
    return {"json": dict(schema)}


def check_structured_outputs(
    constraint: Mapping[str, Any], *, owner: str = "check_structured_outputs"
) -> dict[str, Any]:
    """Validate vLLM ``structured_outputs``: exactly one constraint kind, known options only.

    Args:
        constraint: The constraint.
        owner: Who was given it, named in the error (``"OpenAISampler.sample"``).

    Raises:
        ConfigurationError: No kind, several kinds, or an unknown key.
    """
    kinds = [key for key in constraint if key in STRUCTURED_OUTPUT_KINDS]
    unknown = [
        key
        for key in constraint
        if key not in STRUCTURED_OUTPUT_KINDS and key not in STRUCTURED_OUTPUT_OPTIONS
    ]
    if len(kinds) != 1 or unknown:
        msg = (
            f"{owner}: structured_outputs must hold exactly one of "
            f"{list(STRUCTURED_OUTPUT_KINDS)!r} (plus the options "
            f"{list(STRUCTURED_OUTPUT_OPTIONS)!r}), got keys {list(constraint)!r}."
        )
        raise ConfigurationError(msg)
    return dict(constraint)
