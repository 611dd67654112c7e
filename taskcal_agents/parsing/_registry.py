"""The parser registry: built-in parsers by name and custom ones registered by the user.

With the schema parser, which reads one field of structured output.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any

from langchain_core.messages import AIMessage

from taskcal_agents.errors import ConfigurationError
from taskcal_agents.parsing._labels import (
    AnswerOrAbstainParser,
    ChoiceParser,
    LabelParser,
    Parser,
    RatingParser,
    ToolDecisionParser,
)
from taskcal_agents.parsing._text import message_text
from taskcal_agents.parsing._tool_calls import _iter_json_values

__all__ = [
    "LABEL_PARSER",
    "SchemaParser",
    "builtin_parser_names",
    "get_parser",
    "register_parser",
    "registered_parser_names",
]

# ------------------------------------------------------------------------------- schema


_REGISTRY: dict[str, Any] = {}
"""Names registered by the user's code (:func:`register_parser`): factories and models."""
_REGISTRY_LOCK = threading.Lock()
LABEL_PARSER = "taskcal_agents.parsing.labels:LabelParser"
"""The name under which task files hold :class:`LabelParser` (the decision model's g_T): a
stored name, not an import path, so it stays as written when the module became private."""

_OWN: Mapping[str, Any] = MappingProxyType(
    {
        LABEL_PARSER: LabelParser,
        # Task files and artefacts written by 0.1 name it by its module of then.
        "taskcal_agents.decision_model:LabelParser": LabelParser,
    }
)
"""Names of this package's own parsers outside this module (a fixed table, never input)."""


def register_parser(name: str, obj: Any) -> None:
    """Let task files name ``obj``: a parser factory, or a pydantic model for ``schema``.

    A task file (or an artefact's ``task_spec``) refers to a custom parser factory, or to
    the pydantic model of the ``schema`` parser's ``model`` option, by a name; that name
    must have been registered here by the user's code. Nothing is ever imported because a
    file names it. Any string works as the name, e.g. ``"myapp.parsers:make"``.

    Args:
        name: The name a task file uses.
        obj: The factory (called with the parser options) or the pydantic model class.

    Raises:
        ConfigurationError: If ``name`` is empty or a built-in parser's name, or ``obj`` is
            not callable.
    """
    if not isinstance(name, str) or not name or name in _BUILTINS:
        msg = (
            f"register_parser parameter 'name' must be a non-empty string other than the "
            f"built-in parser names {sorted(_BUILTINS)!r}, got {name!r}."
        )
        raise ConfigurationError(msg)
    if not callable(obj):
        msg = f"register_parser parameter 'obj' for {name!r} must be callable, got {obj!r}."
        raise ConfigurationError(msg)
    with _REGISTRY_LOCK:
        _REGISTRY[name] = obj


def registered_parser_names() -> tuple[str, ...]:
    """Return the names registered with :func:`register_parser`, sorted."""
    with _REGISTRY_LOCK:
        return tuple(sorted(_REGISTRY))


def _registered(name: str, what: str) -> Any:
    """The object the user registered as ``name`` (or one of this package's own)."""
    with _REGISTRY_LOCK:
        obj = _REGISTRY.get(name)
    if obj is not None:
        return obj
    own = _OWN.get(name)
    if own is not None:
        return own
    msg = (
        f"{what} {name!r} is not a built-in parser and was not registered; a task file "
        f"cannot make taskcal import code. Built-in parsers: {sorted(_BUILTINS)!r}. Register "
        f"yours in your code first: taskcal_agents.parsing.register_parser({name!r}, obj)."
    )
    raise ConfigurationError(msg)


@dataclass(frozen=True)
class SchemaParser:
    """g_T for structured output: the value of ``field`` in a JSON object.

    The object is taken from, in order: the first tool call's arguments (function-calling
    structured output), ``additional_kwargs["parsed"]`` (``ChatOpenAI`` structured output),
    or the first JSON object in the content (fences and surrounding text are fine). When
    ``model`` is given (a pydantic model class, or the name it was registered under with
    :func:`register_parser`), the object must validate against it. The value is turned into
    a string and mapped through ``mapping`` when given; out-of-task values are counted as
    unparsed by the task.

    Args:
        field: The field that holds the label.
        model: Optional pydantic model (class or registered name) to validate the object.
        mapping: Optional map from field values to labels.
    """

    field: str = "label"
    model: Any = None
    mapping: Mapping[str, str] | None = None
    labels: tuple[str, ...] | None = dataclasses.field(init=False, default=None)

    def __post_init__(self) -> None:
        model = self.model
        if isinstance(model, str):
            model = _registered(model, "SchemaParser option 'model'")
        if model is not None and not hasattr(model, "model_validate"):
            msg = (
                "SchemaParser option 'model' must be a pydantic model class or the name of "
                f"one registered with register_parser, got {self.model!r}."
            )
            raise ConfigurationError(msg)
        object.__setattr__(self, "model", model)
        if self.mapping is not None:
            mapping = MappingProxyType({str(k): str(v) for k, v in self.mapping.items()})
            object.__setattr__(self, "mapping", mapping)
            object.__setattr__(self, "labels", tuple(dict.fromkeys(mapping.values())))

    def _object(self, message: AIMessage) -> Any:
        if message.tool_calls:
            return message.tool_calls[0]["args"]
        parsed = message.additional_kwargs.get("parsed")
        if parsed is not None:
            return parsed
        text = message_text(message)
        for value in _iter_json_values(text):
            if isinstance(value, dict):
                return value
        return None

    def __call__(self, message: AIMessage) -> str | None:
        """Return the (mapped) value of ``field`` or ``None``."""
        obj = self._object(message)
        if obj is None:
            return None
        if self.model is not None:
            try:
                obj = self.model.model_validate(obj)
            except ValueError:
                return None
        value = getattr(obj, self.field, None) if not isinstance(obj, dict) else obj.get(self.field)
        if value is None or isinstance(value, dict | list):
            return None
        value = getattr(value, "value", value)  # enums
        key = str(value).strip()
        if self.mapping is not None:
            return self.mapping.get(key)
        return key


# ----------------------------------------------------------------------------- registry

_BUILTINS: Mapping[str, Callable[..., Parser]] = MappingProxyType(
    {
        "tool_decision": ToolDecisionParser,
        "answer_or_abstain": AnswerOrAbstainParser,
        "rating": RatingParser,
        "choice": ChoiceParser,
        "schema": SchemaParser,
    }
)

_TUPLE_OPTIONS = frozenset(
    {"tool_names", "refusal_patterns", "question_patterns", "abstain_patterns", "labels", "texts"}
)


def builtin_parser_names() -> tuple[str, ...]:
    """Return the names of the built-in parsers."""
    return tuple(_BUILTINS)


def get_parser(name: str, **options: Any) -> Parser:
    """Build a parser from its name and options.

    Args:
        name: A built-in name (``"tool_decision"``, ``"answer_or_abstain"``, ``"rating"``,
            ``"choice"``, ``"schema"``) or a name registered with :func:`register_parser`
            (a callable that returns a parser when called with ``options``).
        **options: The parser's options (see each parser class).

    Returns:
        The parser.

    Raises:
        ConfigurationError: If the name is unknown or an option is invalid.
    """
    factory = _BUILTINS.get(name)
    if factory is None:
        factory = _registered(name, "parser name")
    else:
        accepted = {f.name for f in fields(factory) if f.init}  # type: ignore[arg-type]
        unknown = sorted(set(options) - accepted)
        if unknown:
            msg = (
                f"parser {name!r} got unknown option(s) {unknown!r}; accepted options are "
                f"{sorted(accepted)!r}."
            )
            raise ConfigurationError(msg)
        options = {
            k: (tuple(v) if k in _TUPLE_OPTIONS and isinstance(v, list | tuple) else v)
            for k, v in options.items()
        }
    try:
        parser = factory(**options)
    except re.error as exc:
        msg = f"parser {name!r} got an invalid regular expression in its options: {exc}."
        raise ConfigurationError(msg) from exc
    except TypeError as exc:  # an option of the wrong type, e.g. a number for a name list
        msg = f"parser {name!r} got options it cannot use: {exc}; options were {options!r}."
        raise ConfigurationError(msg) from exc
    if not callable(parser):
        msg = f"parser factory {name!r} returned {parser!r}, which is not callable."
        raise ConfigurationError(msg)
    return parser
