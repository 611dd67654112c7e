"""A ``when`` predicate for LangChain's ``HumanInTheLoopMiddleware``: interrupt on untrusted values.

A task's ``trust`` policy makes the decision itself ask the user to confirm a call whose
values only untrusted sources supply (a tool result, for a prompt injection), or whose
tool nothing the user asked for calls for (a write with no warrant). An agent that
confirms through LangChain's human-in-the-loop interrupt instead gates the tools with
:func:`trust_gate`: the interrupt fires for exactly the calls the policy would not send, and
every other call runs without review.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from taskcal_agents.decision import ToolEffects, effect_resolver
from taskcal_agents.errors import ConfigurationError
from taskcal_agents.parsing import CallGrounding, GroundingContext, TrustPolicy, TrustViolation

__all__ = ["trust_gate", "violations_as_sent"]


def violations_as_sent(call: CallGrounding, policy: TrustPolicy) -> tuple[TrustViolation, ...]:
    """The values of ``call``, sent as it is, that no source the policy trusts supplies.

    Its :attr:`~taskcal_agents.parsing.CallGrounding.violations`, and each optional value no
    message supports where the policy does not take a value from the model: a door drops
    such a value before it sends a call, but a call a reviewer approves (or a decision
    model lets through) is sent as the model wrote it. Empty: the call keeps the policy.
    """
    by_name = {a.name: a for a in call.arguments}
    unsent = []
    for name in call.dropped:
        check = by_name[name]
        allowed, rule = policy.allowed(call.name, name, check.kind)
        if "model" not in allowed:
            unsent.append(TrustViolation(name, check.value, check.kind, (), allowed, rule))
    return (*call.violations, *unsent)


def trust_gate(
    policy: TrustPolicy | Mapping[str, Any] | str,
    tools: Iterable[Any],
    effects: ToolEffects | Mapping[str, Any] | None = None,
) -> Callable[[Any], bool]:
    """Return a ``when`` predicate that interrupts a call whose values the policy does not trust.

    Example:
        ```python
        gate = trust_gate("by_kind", tools)
        HumanInTheLoopMiddleware(interrupt_on={
            "send_money": {"allowed_decisions": ["approve", "reject"], "when": gate}})
        ```

    Args:
        policy: The trust policy (a :class:`~taskcal_agents.parsing.TrustPolicy`, its
            mapping, or ``"by_kind"``).
        tools: The agent's tools (their schemas name each argument's kind).
        effects: The tools' effects, as a task's ``effects``
            (:class:`~taskcal_agents.decision.ToolEffects`), for the policy's warrant rule
            (``None``: what each tool declares, else ``write``).

    Returns:
        ``when(request)``: whether the request's tool call takes a value that no trusted
        source in the agent's conversation (``request.state["messages"]``) supplies (the
        system prompt is not in the state: a value only it states is asked about).

    Raises:
        ConfigurationError: If the policy or the effects are not valid.
    """
    if policy is None:
        msg = "trust_gate parameter 'policy' must be a trust policy, got None."
        raise ConfigurationError(msg)
    try:
        resolved = policy if isinstance(policy, TrustPolicy) else TrustPolicy.model_validate(policy)
    except ValueError as exc:
        msg = f"trust_gate parameter 'policy' is not a valid trust policy: {exc}"
        raise ConfigurationError(msg) from exc
    try:
        table = effects if isinstance(effects, ToolEffects | None) else ToolEffects(**effects)
    except (TypeError, ValueError) as exc:
        msg = f"trust_gate parameter 'effects' is not valid tool effects: {exc}"
        raise ConfigurationError(msg) from exc
    tools = list(tools)

    def when(request: Any) -> bool:
        state = getattr(request, "state", None) or {}
        messages = state.get("messages", []) if isinstance(state, Mapping) else []
        context = GroundingContext(tools, messages)
        effect_of = effect_resolver(table, context)
        call = context.ground_call(request.tool_call, resolved, effect_of=effect_of)
        return bool(violations_as_sent(call, resolved))

    return when
