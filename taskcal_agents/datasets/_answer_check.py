"""Whether an executed tool call matches a BFCL possible answer.

BFCL's AST rules for one Python call, as its checker applies them (``bfcl-eval``,
``ast_checker.simple_function_checker``), restated for the JSON schema types that
:func:`~taskcal_agents.datasets.convert` writes (``float`` → ``number``, ``dict`` →
``object``, ``tuple`` → ``array``):

- the function name is the answer's;
- every required parameter is present, and no parameter is sent that the answer does not
  list;
- each value has its declared type (an integer passes for a ``number``);
- strings are compared standardised (spaces and ``,./-_*^`` removed, lower case), lists
  element-wise so, objects key by key (a key may be missing where ``""`` is accepted);
  other values by equality with one of the accepted values;
- a parameter the call leaves out must accept ``""`` (BFCL's mark of an optional one).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

_STANDARDISE = re.compile(r"[ ,./\-_*^]")

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list, tuple),
    "object": (dict,),
}


def _standard(value: Any) -> Any:
    if isinstance(value, str):
        return _STANDARDISE.sub("", value).lower().replace("'", '"')
    if isinstance(value, (list, tuple)):
        return [_standard(v) for v in value]
    return value


def _has_type(value: Any, declared: Any) -> bool:
    allowed = _TYPES.get(declared) if isinstance(declared, str) else None
    if allowed is None:  # "any", a missing or unknown type: BFCL's values decide
        return True
    if isinstance(value, bool) and bool not in allowed:
        return False
    return isinstance(value, allowed)


def _dict_matches(value: Mapping[str, Any], accepted: Sequence[Any]) -> bool:
    for option in accepted:
        if not isinstance(option, Mapping):
            continue
        if any(k not in option or _standard(v) not in map(_standard, option[k])
               for k, v in value.items()):  # fmt: skip
            continue
        if all(k in value or "" in vals for k, vals in option.items()):
            return True
    return False


def _value_matches(value: Any, accepted: Sequence[Any]) -> bool:
    if isinstance(value, Mapping):
        return _dict_matches(value, accepted)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, Mapping) for v in value):
        return any(
            isinstance(option, list)
            and len(option) == len(value)
            and all(_dict_matches(v, [o]) for v, o in zip(value, option, strict=True))
            for option in accepted
        )
    return _standard(value) in [_standard(a) for a in accepted]


def call_matches_answer(
    name: str,
    args: Mapping[str, Any],
    answer: Mapping[str, Mapping[str, Sequence[Any]]],
    parameters: Mapping[str, Any] | None = None,
) -> bool:
    """Whether the call ``name(**args)`` is one of BFCL's accepted answers.

    Args:
        name: The called tool's name.
        args: The arguments it is sent with.
        answer: BFCL's possible answer, ``{function: {param: [accepted values]}}`` (one
            function; ``""`` among a parameter's values marks it optional).
        parameters: The tool's JSON schema ``parameters`` (``properties``, ``required``);
            ``None`` checks values only.

    Returns:
        ``True`` when the call passes BFCL's AST rules (see the module docstring).
    """
    if name not in answer:
        return False
    accepted = answer[name]
    properties = (parameters or {}).get("properties") or {}
    required = (parameters or {}).get("required") or []
    if any(p not in args for p in required):
        return False
    for param, value in args.items():
        if param not in accepted or (properties and param not in properties):
            return False
        declared = (properties.get(param) or {}).get("type")
        if not _has_type(value, declared) or not _value_matches(value, accepted[param]):
            return False
    return all(p in args or "" in values for p, values in accepted.items())
