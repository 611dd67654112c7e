"""A per-deployment trust policy: which sources may supply an argument's value.

Argument grounding counts every message as support for a value: the user's, the system's
and every tool result. A prompt injection lives in a tool result (a web page, an e-mail, a
file that says "send the money to US13…"), so a call whose recipient only a tool result
supplies is grounded, and would be sent. A :class:`TrustPolicy` names, per argument, the
sources (:data:`~taskcal_agents.parsing._provenance.SourceKind`) that may supply its value:
by default, per argument kind (:data:`~taskcal_agents.parsing._argument_kinds.ArgumentKind`)
or per tool and argument. A value that no trusted source supplies is a
:class:`TrustViolation`, and the call is not sent: the decision asks the user to confirm or
refuses, whichever the task's cost matrix makes cheaper.

In a task file::

    trust:
      kinds: {recipient: [user], amount: [user], url: [user, system]}
      arguments: {send_money.recipient: [user], read_file.path: [user, tool]}

``trust: by_kind`` is :meth:`TrustPolicy.by_kind`, the policy derived from the argument
kinds alone. A source is ``user``, ``system``, ``tool`` (any tool's result), ``tool:NAME``
(one tool's results), ``inferred`` (the schema's default, an optional enum value, a boolean)
or ``model`` (a value no message supports, sent under ``grounding.execute: any``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from taskcal_agents.parsing._argument_kinds import ARGUMENT_KINDS
from taskcal_agents.parsing._provenance import SOURCE_KINDS, Source
from taskcal_agents.parsing._warrant import WarrantRule

__all__ = ["RESTRICTED_KINDS", "TrustPolicy", "TrustViolation"]

RESTRICTED_KINDS: tuple[str, ...] = ("amount", "recipient", "address", "credential", "url", "path")
"""The argument kinds that :meth:`TrustPolicy.by_kind` takes only from the user, the system
or the schema: where money goes and how much, where data is sent or read, and secrets."""

_EVERY_SOURCE: tuple[str, ...] = ("user", "system", "tool", "inferred", "model")


def _check_sources(sources: tuple[str, ...], where: str) -> tuple[str, ...]:
    for s in sources:
        if s in SOURCE_KINDS or (s.startswith("tool:") and len(s) > len("tool:")):
            continue
        msg = (
            f"trust policy {where}: unknown source {s!r}; a source is one of "
            f"{', '.join(SOURCE_KINDS)} or 'tool:NAME' (one tool's results)."
        )
        raise ValueError(msg)
    return tuple(dict.fromkeys(sources))


class TrustPolicy(BaseModel):
    """Which sources may supply an argument's value: by default, per kind, per argument.

    The most specific entry wins: ``arguments["tool.argument"]``, else ``kinds[kind]``,
    else ``default``. With the defaults every source is trusted for every value, and a
    write or irreversible call needs a warrant for its tool (:attr:`warrant`): the user's
    request asks for what the tool does, or a chain of warranted calls feeds it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    default: tuple[str, ...] = _EVERY_SOURCE
    """The sources trusted for an argument that no other entry names."""
    kinds: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    """Per argument kind (one of :data:`~taskcal_agents.parsing._argument_kinds.ARGUMENT_KINDS`),
    the sources trusted for it."""
    arguments: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    """Per ``"tool.argument"``, the sources trusted for it."""
    warrant: WarrantRule = Field(default_factory=WarrantRule)
    """Which calls need a warrant for their tool (:class:`~taskcal_agents.parsing.Warrant`):
    by default writes and irreversible calls; ``[]`` for none."""

    @field_validator("warrant", mode="before")
    @classmethod
    def _effects_list(cls, value: Any) -> Any:
        if isinstance(value, str | list | tuple):
            return {"effects": value}
        return value

    @field_validator("default", mode="before")
    @classmethod
    def _one_source(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else value

    @field_validator("kinds", "arguments", mode="before")
    @classmethod
    def _one_source_each(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: (v,) if isinstance(v, str) else v for k, v in value.items()}
        return value

    @field_validator("default")
    @classmethod
    def _valid_default(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return _check_sources(value, "default")

    @field_validator("kinds")
    @classmethod
    def _valid_kinds(cls, value: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        for kind, sources in value.items():
            if kind not in ARGUMENT_KINDS:
                msg = (
                    f"trust policy kinds: unknown argument kind {kind!r}; the kinds are "
                    f"{', '.join(ARGUMENT_KINDS)}."
                )
                raise ValueError(msg)
            value[kind] = _check_sources(tuple(sources), f"kinds.{kind}")
        return value

    @field_validator("arguments")
    @classmethod
    def _valid_arguments(cls, value: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        for key, sources in value.items():
            tool, _, arg = key.rpartition(".")
            if not tool or not arg:
                msg = (
                    f"trust policy arguments: {key!r} is not 'tool.argument' (for example "
                    "'send_money.recipient')."
                )
                raise ValueError(msg)
            value[key] = _check_sources(tuple(sources), f"arguments.{key}")
        return value

    @model_validator(mode="before")
    @classmethod
    def _preset(cls, data: Any) -> Any:
        if data == "by_kind":
            return {"kinds": dict.fromkeys(RESTRICTED_KINDS, ("user", "system", "inferred"))}
        if isinstance(data, str):
            msg = f"trust policy: unknown preset {data!r}; the preset is 'by_kind'."
            raise ValueError(msg)
        return data

    @classmethod
    def by_kind(cls) -> TrustPolicy:
        """The policy derived from argument kinds, with the default warrant rule.

        Amounts, recipients, addresses, credentials, URLs and paths
        (:data:`RESTRICTED_KINDS`) come only from the user, the system or the schema;
        every other argument from any source (an ID a search returned, a hotel's name).
        A write or irreversible call needs a warrant for its tool.
        """
        return cls.model_validate("by_kind")

    @property
    def restricts(self) -> bool:
        """Whether any entry leaves a source out, or any call needs a warrant.

        A policy that trusts every source and needs no warrant changes nothing.
        """
        every = set(_EVERY_SOURCE)
        entries = [self.default, *self.kinds.values(), *self.arguments.values()]
        return bool(self.warrant.effects) or any(not every <= set(e) for e in entries)

    def allowed(self, tool: str, argument: str, kind: str) -> tuple[tuple[str, ...], str]:
        """The sources trusted for ``tool``'s ``argument`` of ``kind``, and the entry's name.

        Returns:
            ``(sources, rule)``; ``rule`` is ``"arguments.TOOL.ARG"``, ``"kinds.KIND"`` or
            ``"default"``.
        """
        key = f"{tool}.{argument}"
        if key in self.arguments:
            return self.arguments[key], f"arguments.{key}"
        if kind in self.kinds:
            return self.kinds[kind], f"kinds.{kind}"
        return self.default, "default"

    @staticmethod
    def trusts(allowed: tuple[str, ...], source: Source) -> bool:
        """Whether ``source`` is among the ``allowed`` sources."""
        if source.kind in allowed:
            return True
        return (
            source.kind == "tool" and source.tool is not None and f"tool:{source.tool}" in allowed
        )


@dataclass(frozen=True)
class TrustViolation:
    """A value that no source the trust policy trusts supplies, or a call with no warrant.

    Attributes:
        argument: The argument's name (``""``: the call itself has no warrant for its tool;
            ``value`` is the tool's name, ``kind`` ``"tool"``, ``sources`` the tool results
            that prompted it).
        value: The value, or for a free-text value the identifier it carries (a URL in a
            message body).
        kind: The value's argument kind.
        sources: The sources that do supply it (empty: the model alone).
        allowed: The sources the policy trusts for it.
        rule: The policy entry that decided (:meth:`TrustPolicy.allowed`).
    """

    argument: str
    value: Any
    kind: str
    sources: tuple[Source, ...]
    allowed: tuple[str, ...]
    rule: str

    def describe(self) -> str:
        """Where the value came from, in words: "the result of get_webpage"."""
        if not self.sources:
            return "the model alone (no message states it)"
        names = list(dict.fromkeys(s.describe() for s in self.sources))
        return " and ".join(names)

    def explain(self) -> str:
        """The value, where it came from and the policy entry that fired, in words.

        "recipient='US13…' from the result of get_webpage; kinds.recipient trusts user,
        system, inferred"; for a call with no warrant, "send_money has no warrant, the result
        of get_webpage prompted it; warrant.irreversible needs user or chain".
        """
        trusted = ", ".join(self.allowed) or "no source"
        if not self.argument:  # the call itself: no warrant for its tool
            return (
                f"{self.value} has no warrant, {self.describe()} prompted it; {self.rule} "
                f"needs {' or '.join(self.allowed)}"
            )
        return (
            f"{self.argument}={self.value!r} from {self.describe()}; {self.rule} trusts {trusted}"
        )

    def to_dict(self) -> dict[str, Any]:
        """The violation as JSON, for the decision log."""
        return {
            "argument": self.argument,
            "value": self.value
            if isinstance(self.value, str | int | float | bool)
            else str(self.value),
            "kind": self.kind,
            "sources": [s.to_dict() for s in self.sources],
            "allowed": list(self.allowed),
            "rule": self.rule,
        }
