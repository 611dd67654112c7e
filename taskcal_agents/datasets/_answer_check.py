"""Whether an executed tool call matches a BFCL possible answer.

BFCL's AST rules for one Python call, as its checker applies them (``bfcl-eval``,
``ast_checker.simple_function_checker`` with its type, string, list and dict checkers),
restated for the JSON schema types that :func:`~taskcal_agents.datasets.convert` writes
(``float`` → ``number``, ``dict`` → ``object``, ``tuple`` → ``array``, ``any`` → no type):

- the function name is the answer's; every required parameter is present; no parameter is
  sent that the tool or the answer does not list;
- each value has its declared Python type exactly (an integer passes for a ``number``; a
  value of the answer's own type passes as BFCL's "variable"; an untyped parameter is a
  string); a list's elements have the declared item type;
- strings are compared standardised (spaces and ``,./-_*^`` removed, lower case, ``'`` as
  ``"``), the strings of a list element-wise, an object's values key by key, a list of
  objects object by object; other values by equality with one of the accepted values;
- a parameter the call leaves out must accept ``""`` (BFCL's mark of an optional one, which
  also accepts an empty list).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, cast

_STANDARDISE = re.compile(r"[ ,./\-_*^]")

_PYTHON_TYPES: dict[str | None, type] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
    None: str,  # BFCL's "any", which the conversion leaves untyped
}


def _standard(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    return _STANDARDISE.sub("", value).lower().replace("'", '"')


def _answer_type(accepted: Sequence[Any]) -> type | None:
    return next((type(a) for a in accepted if a != ""), None)


def _items_ok(value: list[Any], nested: type, accepted: Sequence[Any]) -> bool:
    """BFCL's one-level item check: every item of the declared type (or of the answer's).

    As in BFCL, an accepted value that is no list (``""``, say) lets any items pass.
    """
    for option in accepted:
        if not isinstance(option, list):
            return True
        answer_type = _answer_type(option)
        if all(type(v) is nested or type(v) is answer_type for v in value):
            return True
    return False


def _string_ok(value: str, accepted: Sequence[Any]) -> bool:
    return _standard(value) in [_standard(a) for a in accepted if isinstance(a, str)]


def _list_ok(value: list[Any], accepted: Sequence[Any]) -> bool:
    mine = [_standard(v) for v in value]
    options = [[_standard(v) for v in a] for a in accepted if isinstance(a, (list, str))]
    return mine in options  # "" becomes [], so an optional list accepts an empty one


def _dict_ok(value: Mapping[str, Any], accepted: Sequence[Any]) -> bool:
    for option in accepted:
        if not isinstance(option, Mapping):
            continue
        if all(
            k in option
            and isinstance(option[k], list)
            and _standard(v) in [_standard(a) for a in option[k]]
            for k, v in value.items()
        ) and all(k in value or "" in vals for k, vals in option.items()):
            return True
    return False


def _list_of_dicts_ok(value: list[Any], accepted: Sequence[Any]) -> bool:
    return any(  # "" has length 0: an optional list of objects accepts an empty one
        isinstance(option, (list, str))
        and len(option) == len(value)
        and all(
            isinstance(v, Mapping) and _dict_ok(v, [o]) for v, o in zip(value, option, strict=True)
        )
        for option in accepted
    )


def _value_ok(value: Any, schema: Mapping[str, Any], accepted: Sequence[Any]) -> bool:
    """BFCL's checks of one parameter's value (``simple_function_checker``'s loop body)."""
    declared = schema.get("type")
    expected = _PYTHON_TYPES.get(declared if isinstance(declared, str) else None)
    if expected is None:  # a type BFCL's Python checker does not know
        return False
    items = schema.get("items")
    nested = None
    if declared == "array" and isinstance(items, Mapping):
        item_type = items.get("type")
        nested = _PYTHON_TYPES.get(item_type if isinstance(item_type, str) else None)
    if declared == "number" and type(value) is int:
        value = float(value)
    answer_type = _answer_type(accepted)
    # BFCL's "variable": the answer holds values of another type than the declared one
    variable = answer_type is not None and answer_type is not expected
    if type(value) is expected:
        if nested is not None and not _items_ok(cast(list[Any], value), nested, accepted):
            return False
    elif answer_type is not None and type(value) is answer_type:
        variable = True
    else:
        return False
    checked: Any = value  # of the declared type when not BFCL's "variable"
    if not variable:
        if expected is dict:
            return _dict_ok(checked, accepted)
        if expected is list and nested is dict:
            return _list_of_dicts_ok(checked, accepted)
        if expected is str:
            return _string_ok(checked, accepted)
        if expected is list:
            return _list_ok(checked, accepted)
    return checked in accepted


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
        parameters: The tool's JSON schema ``parameters`` (``properties``, ``required``),
            as the tool was offered; ``None`` checks the values alone, each parameter
            untyped (as BFCL's ``any``).

    Returns:
        ``True`` when the call passes BFCL's AST rules (see the module docstring).
    """
    if name not in answer:
        return False
    accepted = answer[name]
    properties = (parameters or {}).get("properties")
    required = (parameters or {}).get("required") or []
    if any(p not in args for p in required):
        return False
    for param, value in args.items():
        if param not in accepted or (properties is not None and param not in properties):
            return False
        schema = (properties or {}).get(param) or {}
        if not _value_ok(value, schema, accepted[param]):
            return False
    return all(p in args or "" in values for p, values in accepted.items())
