"""What a Runnable binds: the chat model under its bindings, their tools and settings.

``bind``, ``bind_tools``, ``with_config`` and ``with_retry`` wrap a chat model in
``RunnableBinding`` layers; the front doors read through them to find the model they
sample, the tools it offers, how it is served (:func:`served_settings`, what
``calibrator="auto"`` matches) and a ``with_retry()`` policy to apply per draw
(:func:`split_retry`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable, RunnableBinding
from langchain_core.runnables.base import RunnableBindingBase
from langchain_core.runnables.retry import RunnableRetry

if TYPE_CHECKING:
    from taskcal_agents.decision import ServedSettings

__all__ = [
    "bound_tool_names",
    "bound_tools",
    "chat_model_of",
    "served_settings",
    "split_retry",
    "unwrap_binding",
]


def unwrap_binding(
    model: Runnable[Any, Any],
) -> tuple[Runnable[Any, Any], dict[str, Any], list[Any], bool]:
    """Peel ``RunnableBinding`` layers off ``model``.

    Returns:
        The innermost runnable, the merged bound kwargs (outer bindings win), the bound
        configs (innermost first) and whether any binding has config factories.
    """
    kwargs: dict[str, Any] = {}
    configs: list[Any] = []
    factories = False
    while isinstance(model, RunnableBinding):
        kwargs = {**model.kwargs, **kwargs}  # the outer binding wins
        configs.insert(0, model.config)
        factories = factories or bool(model.config_factories)
        model = model.bound
    return model, kwargs, configs, factories


def bound_tools(model: Runnable[Any, Any]) -> list[Any] | None:
    """The tools bound to ``model`` (``bind_tools``) as bound, or ``None`` if none are."""
    tools = unwrap_binding(model)[1].get("tools")
    return None if tools is None else list(tools)


def bound_tool_names(model: Runnable[Any, Any]) -> tuple[str, ...] | None:
    """The names of the tools bound to ``model`` (``bind_tools``), or ``None`` if none are."""
    from taskcal_agents.parsing import tool_names_of

    tools = unwrap_binding(model)[1].get("tools")
    return None if tools is None else tool_names_of(tools)


def chat_model_of(model: Runnable[Any, Any]) -> BaseChatModel | None:
    """Return the chat model under any ``RunnableBinding`` layers, or ``None``."""
    core = unwrap_binding(model)[0]
    return core if isinstance(core, BaseChatModel) else None


_OTHER_SAMPLING = (
    "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty",
)  # fmt: skip
"""Sampling parameters a shipped calibrator's samples left at the server's defaults."""


def served_settings(
    model: Runnable[Any, Any],
    *,
    n_samples: int,
    temperature: float | None,
    task_prompt: bool = True,
    alpha: float | None = None,
    request_settings: Mapping[str, Any] | None = None,
    tool_choice: Any = None,
    belief: str = "samples",
) -> ServedSettings:
    """How a front door samples ``model``: what ``calibrator="auto"`` matches.

    The chat model's name (``model_name`` or ``model``), its completion length limit
    (``max_tokens`` / ``max_completion_tokens``), ``tool_choice`` and other sampling
    parameters it sets (bound, per request in ``request_settings`` / ``tool_choice``, or its
    own), and ``temperature`` when given, else the model's own. The registry model the name
    names (:func:`~taskcal_agents.models.registry_name_of`: the registry name, an upstream
    id, or a local folder named like one) is its ``registry_model``.
    """
    from taskcal_agents.decision import ServedSettings
    from taskcal_agents.models import registry_name_of

    core, bound, _, _ = unwrap_binding(model)
    kwargs = {**bound, **(request_settings or {})}
    if tool_choice is not None:
        kwargs["tool_choice"] = tool_choice
    chat = core if isinstance(core, BaseChatModel) else None

    def setting(*names: str) -> Any:
        for name in names:
            if kwargs.get(name) is not None:
                return kwargs[name]
        for name in names:
            if getattr(chat, name, None) is not None:
                return getattr(chat, name)
        return None

    name = setting("model_name", "model")
    limit = setting("max_tokens", "max_completion_tokens")
    if temperature is None:
        temperature = setting("temperature")
    choice = setting("tool_choice")
    served_name = name if isinstance(name, str) and name else None
    return ServedSettings(
        model=served_name,
        n_samples=n_samples,
        temperature=float(temperature) if isinstance(temperature, int | float) else None,
        max_tokens=int(limit) if isinstance(limit, int) and not isinstance(limit, bool) else None,
        task_prompt=task_prompt,
        tool_choice=None if choice is None else str(choice),
        other=tuple(p for p in _OTHER_SAMPLING if setting(p) is not None),
        alpha=alpha,
        belief=belief,
        registry_model=registry_name_of(served_name),
    )


def split_retry(
    model: Runnable[Any, Any],
) -> tuple[Runnable[Any, Any], RunnableRetry[Any, Any] | None]:
    """Take the ``with_retry()`` layer out of ``model``'s bindings.

    ``llm.with_retry()`` is a ``RunnableRetry`` (a ``RunnableBindingBase``, which the
    sampler does not look through), and ``llm.bind_tools(...).with_retry()`` puts it under
    the tool binding.

    Returns:
        ``model`` with every ``RunnableRetry`` layer among its bindings replaced by a plain
        ``RunnableBinding`` (bound keyword arguments and config kept; the other layers
        copied), so the sampler finds the chat model and its ``n`` support; and the
        outermost ``RunnableRetry`` (whose policy the caller applies), or ``None``.
    """
    layers: list[RunnableBindingBase[Any, Any]] = []
    retry: RunnableRetry[Any, Any] | None = None
    core = model
    while isinstance(core, RunnableBindingBase):
        if retry is None and isinstance(core, RunnableRetry):
            retry = core
        layers.append(core)
        core = core.bound
    if retry is None:
        return model, None
    for layer in reversed(layers):
        if not isinstance(layer, RunnableRetry):
            core = layer.model_copy(update={"bound": core})
            continue
        core = RunnableBinding(
            bound=core,
            kwargs=layer.kwargs,
            config=layer.config,
            config_factories=layer.config_factories,
            custom_input_type=layer.custom_input_type,
            custom_output_type=layer.custom_output_type,
        )
    return core, retry
