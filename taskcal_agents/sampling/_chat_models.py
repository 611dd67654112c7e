"""Draw N completions from any LangChain chat model (or Runnable producing messages).

Two strategies, chosen per model:

* **one call with n** – for ``ChatOpenAI`` and its subclasses (OpenAI-compatible
  servers such as vLLM), alone or under ``bind``/``bind_tools``/``with_config``
  bindings: one ``generate(..., n=N)`` request returns all N choices. (Note that
  ``ChatOpenAI(n=N).invoke`` would return only the first choice.) Bound keyword arguments
  such as ``tools`` are kept; streaming is switched off for this call.
* **N concurrent calls** – for every other model: ``model.batch``/``abatch`` on N copies
  of the input, which honours ``max_concurrency`` from the config. With a ``seed``, sample
  i is drawn with ``seed + i`` so the N samples differ.

Temperature and seed are passed as call keyword arguments; the caller's model object is
never modified. Several inputs can be sampled together (:func:`sample_batch`) so that
``max_concurrency`` bounds all model calls of a batch, not each input separately.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, convert_to_messages
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import Runnable, RunnableBinding, RunnableConfig
from langchain_core.runnables.config import (
    ensure_config,
    get_executor_for_config,
    merge_configs,
    patch_config,
)
from langchain_core.runnables.utils import gather_with_concurrency
from pydantic import ValidationError

from taskcal_agents.errors import ConfigurationError, SamplingError

__all__ = [
    "asample_batch",
    "asample_messages",
    "chat_model_of",
    "sample_batch",
    "sample_messages",
    "supports_n",
    "to_messages",
    "unwrap_binding",
]


def to_messages(input_: LanguageModelInput) -> list[BaseMessage]:
    """Convert chat-model input (string, messages, message-likes, prompt value) to messages."""
    if isinstance(input_, PromptValue):
        return input_.to_messages()
    if isinstance(input_, str):
        return [HumanMessage(content=input_)]
    return convert_to_messages(input_)


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


def bound_tool_names(model: Runnable[Any, Any]) -> tuple[str, ...] | None:
    """The names of the tools bound to ``model`` (``bind_tools``), or ``None`` if none are."""
    from taskcal_agents.parsers import tool_names_of

    tools = unwrap_binding(model)[1].get("tools")
    return None if tools is None else tool_names_of(tools)


def chat_model_of(model: Runnable[Any, Any]) -> BaseChatModel | None:
    """Return the chat model under any ``RunnableBinding`` layers, or ``None``."""
    core = unwrap_binding(model)[0]
    return core if isinstance(core, BaseChatModel) else None


def supports_n(model: Runnable[Any, Any]) -> bool:
    """Whether ``model`` can return N choices from one request (``ChatOpenAI``-like)."""
    core, kwargs, _, factories = unwrap_binding(model)
    if factories:
        return False
    try:
        from langchain_openai.chat_models.base import BaseChatOpenAI
    except ImportError:  # pragma: no cover - langchain-openai is a dependency
        return False
    if not isinstance(core, BaseChatOpenAI):
        return False
    use_responses = getattr(core, "_use_responses_api", None)  # the Responses API has no n
    try:
        return not (callable(use_responses) and use_responses(dict(kwargs)))
    except Exception:
        return False


def _as_ai_message(output: Any) -> AIMessage:
    if isinstance(output, AIMessage):
        return output
    if isinstance(output, str):
        return AIMessage(content=output)
    msg = (
        "the sampled model must return AIMessage (or str) outputs, got "
        f"{type(output).__name__}: {output!r}; wrap a chat model or a chain ending in one."
    )
    raise SamplingError(msg)


@dataclass
class _Plan:
    """How to draw N samples for each of several inputs (shared by sync and async)."""

    model: Runnable[Any, Any]
    inputs: list[Any]
    configs: list[RunnableConfig]
    n: int
    call_kwargs: dict[str, Any]
    seed: int | None
    max_concurrency: int | None
    chat: BaseChatModel | None = None
    bound_configs: list[Any] = field(default_factory=list)

    @property
    def one_call(self) -> bool:
        return self.chat is not None

    def generate_args(self, i: int, n: int) -> tuple[list[list[BaseMessage]], dict[str, Any]]:
        """Arguments of ``chat.generate`` for input i asking for ``n`` choices."""
        cfg = ensure_config(merge_configs(*self.bound_configs, self.configs[i]))
        kwargs = {
            **self.call_kwargs,
            "n": n,
            "stream": False,
            "callbacks": cfg.get("callbacks"),
            "tags": cfg.get("tags"),
            "metadata": cfg.get("metadata"),
            "run_name": cfg.get("run_name"),
        }
        if self.seed is not None:
            kwargs["seed"] = self.seed
        return [to_messages(self.inputs[i])], kwargs

    def flat(self) -> tuple[list[Any], list[RunnableConfig], list[dict[str, Any]]]:
        """N copies of every input with their configs and per-sample kwargs."""
        inputs = [x for x in self.inputs for _ in range(self.n)]
        configs = [
            patch_config(c, max_concurrency=self.max_concurrency)
            for c in self.configs
            for _ in range(self.n)
        ]
        if self.seed is None:
            kwargs = [self.call_kwargs] * len(inputs)
        else:
            kwargs = [
                {**self.call_kwargs, "seed": self.seed + j}
                for _ in self.inputs
                for j in range(self.n)
            ]
        return inputs, configs, kwargs

    def regroup(self, flat: Sequence[Any]) -> list[list[AIMessage] | BaseException]:
        out: list[list[AIMessage] | BaseException] = []
        for i in range(len(self.inputs)):
            chunk = flat[i * self.n : (i + 1) * self.n]
            error = next((x for x in chunk if isinstance(x, BaseException)), None)
            if error is not None:
                out.append(error)
                continue
            try:
                out.append([_as_ai_message(x) for x in chunk])
            except SamplingError as exc:
                out.append(exc)
        return out


def _plan(
    model: Runnable[Any, Any],
    inputs: Sequence[Any],
    *,
    n: int,
    temperature: float | None,
    seed: int | None,
    config: RunnableConfig | Sequence[RunnableConfig] | None,
    use_n: bool | None,
    kwargs: dict[str, Any],
) -> _Plan:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        msg = f"sample_messages parameter 'n' must be an integer >= 1, got {n!r}."
        raise ConfigurationError(msg)
    if isinstance(config, Sequence) and not isinstance(config, dict):
        configs = [ensure_config(c) for c in config]
    else:
        configs = [ensure_config(cast("RunnableConfig | None", config)) for _ in inputs]
    if len(configs) != len(inputs):
        msg = (
            f"sample_batch parameter 'config' must be one config or one per input "
            f"({len(inputs)}), got {len(configs)}."
        )
        raise ConfigurationError(msg)
    chat = chat_model_of(model)
    if chat is None and (temperature is not None or seed is not None):
        msg = (
            f"cannot pass temperature/seed to {type(model).__name__}, which is not a chat "
            "model (or a binding of one); pass temperature=None and seed=None to sample it "
            "with its own settings."
        )
        raise ConfigurationError(msg)
    call_kwargs = dict(kwargs)
    if temperature is not None:
        call_kwargs["temperature"] = temperature
    max_concurrency = configs[0].get("max_concurrency") if configs else None
    plan = _Plan(
        model=model,
        inputs=list(inputs),
        configs=configs,
        n=n,
        call_kwargs=call_kwargs,
        seed=seed,
        max_concurrency=max_concurrency,
    )
    one_call = supports_n(model) if use_n is None else use_n
    if one_call:
        if not supports_n(model):
            msg = (
                f"use_n=True needs a ChatOpenAI-compatible model that returns n choices per "
                f"request, got {type(chat or model).__name__}; pass use_n=None to fall back "
                "to concurrent calls."
            )
            raise ConfigurationError(msg)
        core, bound_kwargs, bound_configs, _ = unwrap_binding(model)
        plan.chat = cast("BaseChatModel", core)
        plan.call_kwargs = {**bound_kwargs, **call_kwargs}
        plan.bound_configs = bound_configs
    return plan


def _choices(result: Any) -> list[AIMessage]:
    return [_as_ai_message(g.message) for g in result.generations[0]]


_MAX_TOP_UPS = 3


def malformed_sample(exc: ValidationError) -> AIMessage:
    """The stand-in for a completion the chat model could not even turn into a message.

    langchain-openai fails the whole ``n``-choice response when one choice is malformed
    (say, tool-call arguments that are a JSON list, not an object). Such a choice is
    redrawn alone; if it fails again it becomes this empty message, which every parser
    leaves unparsed, so it is counted in ``n_unparsed``, never dropped.
    """
    error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return AIMessage(content="", response_metadata={"taskcal_malformed": error})


def _run_one_call(plan: _Plan, i: int) -> list[AIMessage] | BaseException:
    chat = cast("BaseChatModel", plan.chat)
    samples: list[AIMessage] = []
    try:
        for _ in range(_MAX_TOP_UPS + 1):  # a server may return fewer than n choices
            messages, kwargs = plan.generate_args(i, plan.n - len(samples))
            try:
                samples += _choices(chat.generate(messages, **kwargs))
            except ValidationError:  # one malformed choice: draw the rest one by one
                for _ in range(plan.n - len(samples)):
                    messages, kwargs = plan.generate_args(i, 1)
                    try:
                        samples += _choices(chat.generate(messages, **kwargs))
                    except ValidationError as exc:
                        samples.append(malformed_sample(exc))
            if len(samples) >= plan.n:
                return samples[: plan.n]
    except Exception as exc:
        return exc
    return _short(plan, len(samples))


async def _arun_one_call(plan: _Plan, i: int) -> list[AIMessage] | BaseException:
    chat = cast("BaseChatModel", plan.chat)
    samples: list[AIMessage] = []
    try:
        for _ in range(_MAX_TOP_UPS + 1):
            messages, kwargs = plan.generate_args(i, plan.n - len(samples))
            try:
                samples += _choices(await chat.agenerate(messages, **kwargs))
            except ValidationError:  # see _run_one_call
                for _ in range(plan.n - len(samples)):
                    messages, kwargs = plan.generate_args(i, 1)
                    try:
                        samples += _choices(await chat.agenerate(messages, **kwargs))
                    except ValidationError as exc:
                        samples.append(malformed_sample(exc))
            if len(samples) >= plan.n:
                return samples[: plan.n]
    except Exception as exc:
        return exc
    return _short(plan, len(samples))


def _short(plan: _Plan, got: int) -> SamplingError:
    msg = (
        f"{type(plan.chat).__name__} returned {got} of the {plan.n} requested choices after "
        f"{_MAX_TOP_UPS + 1} requests; check that the server supports the 'n' parameter or "
        "pass use_n=False."
    )
    return SamplingError(msg)


def _invoke_one(model: Runnable[Any, Any], x: Any, cfg: RunnableConfig, kw: dict[str, Any]) -> Any:
    try:
        return model.invoke(x, cfg, **kw)
    except Exception as exc:
        return exc


async def _ainvoke_one(
    model: Runnable[Any, Any], x: Any, cfg: RunnableConfig, kw: dict[str, Any]
) -> Any:
    try:
        return await model.ainvoke(x, cfg, **kw)
    except Exception as exc:
        return exc


def _run(plan: _Plan) -> list[list[AIMessage] | BaseException]:
    if plan.one_call:
        if len(plan.inputs) == 1:
            return [_run_one_call(plan, 0)]
        with get_executor_for_config({"max_concurrency": plan.max_concurrency}) as ex:
            return list(ex.map(lambda i: _run_one_call(plan, i), range(len(plan.inputs))))
    inputs, configs, kwargs = plan.flat()
    if plan.seed is None:
        outputs = plan.model.batch(inputs, configs, return_exceptions=True, **plan.call_kwargs)
    else:
        with get_executor_for_config(configs[0]) as ex:
            outputs = list(ex.map(_invoke_one, [plan.model] * len(inputs), inputs, configs, kwargs))
    return plan.regroup(outputs)


async def _arun(plan: _Plan) -> list[list[AIMessage] | BaseException]:
    if plan.one_call:
        return await gather_with_concurrency(
            plan.max_concurrency, *(_arun_one_call(plan, i) for i in range(len(plan.inputs)))
        )
    inputs, configs, kwargs = plan.flat()
    if plan.seed is None:
        outputs = await plan.model.abatch(
            inputs, configs, return_exceptions=True, **plan.call_kwargs
        )
    else:
        outputs = await gather_with_concurrency(
            plan.max_concurrency,
            *(
                _ainvoke_one(plan.model, x, c, k)
                for x, c, k in zip(inputs, configs, kwargs, strict=True)
            ),
        )
    return plan.regroup(outputs)


def sample_batch(
    model: Runnable[Any, Any],
    inputs: Sequence[LanguageModelInput],
    *,
    n: int,
    temperature: float | None = None,
    seed: int | None = None,
    config: RunnableConfig | Sequence[RunnableConfig] | None = None,
    use_n: bool | None = None,
    **kwargs: Any,
) -> list[list[AIMessage] | BaseException]:
    """Draw ``n`` samples for each input; failures are returned, not raised.

    Args:
        model: A chat model, a binding of one (``bind_tools``…), or any Runnable whose
            output is an ``AIMessage`` or a string.
        inputs: The inputs.
        n: Samples per input.
        temperature: Sampling temperature passed per call (``None``: the model's own).
        seed: Base seed passed per call (``None``: none).
        config: One config for all inputs or one per input; ``max_concurrency`` bounds
            all model calls together.
        use_n: ``True`` forces one request with ``n`` (error if unsupported), ``False``
            forces N calls, ``None`` picks automatically.
        **kwargs: Further keyword arguments for the model call (``stop``…).

    Returns:
        Per input, its ``n`` messages or the exception that stopped it.

    Raises:
        ConfigurationError: If the arguments are invalid for this model.
    """
    plan = _plan(
        model, inputs, n=n, temperature=temperature, seed=seed, config=config, use_n=use_n,
        kwargs=kwargs,
    )  # fmt: skip
    return _run(plan)


async def asample_batch(
    model: Runnable[Any, Any],
    inputs: Sequence[LanguageModelInput],
    *,
    n: int,
    temperature: float | None = None,
    seed: int | None = None,
    config: RunnableConfig | Sequence[RunnableConfig] | None = None,
    use_n: bool | None = None,
    **kwargs: Any,
) -> list[list[AIMessage] | BaseException]:
    """Async :func:`sample_batch`."""
    plan = _plan(
        model, inputs, n=n, temperature=temperature, seed=seed, config=config, use_n=use_n,
        kwargs=kwargs,
    )  # fmt: skip
    return await _arun(plan)


def _unwrap_result(result: list[AIMessage] | BaseException) -> list[AIMessage]:
    if isinstance(result, BaseException):
        raise result
    return result


def sample_messages(
    model: Runnable[Any, Any],
    input: LanguageModelInput,
    *,
    n: int,
    temperature: float | None = None,
    seed: int | None = None,
    config: RunnableConfig | None = None,
    use_n: bool | None = None,
    **kwargs: Any,
) -> list[AIMessage]:
    """Draw ``n`` completions for one input (see the module docstring for how).

    Args:
        model: A chat model, a binding of one, or a Runnable producing messages.
        input: The chat input.
        n: The number of samples.
        temperature: Sampling temperature per call (``None``: the model's own).
        seed: Base seed per call (``None``: none).
        config: The runnable config (callbacks, tags, ``max_concurrency``…).
        use_n: Force (``True``) or forbid (``False``) one request with ``n``.
        **kwargs: Further keyword arguments for the model call.

    Returns:
        The ``n`` sampled messages.

    Raises:
        Exception: Whatever the model raised (the first failure).
    """
    return _unwrap_result(
        sample_batch(
            model, [input], n=n, temperature=temperature, seed=seed, config=config,
            use_n=use_n, **kwargs,
        )[0]
    )  # fmt: skip


async def asample_messages(
    model: Runnable[Any, Any],
    input: LanguageModelInput,
    *,
    n: int,
    temperature: float | None = None,
    seed: int | None = None,
    config: RunnableConfig | None = None,
    use_n: bool | None = None,
    **kwargs: Any,
) -> list[AIMessage]:
    """Async :func:`sample_messages`."""
    results = await asample_batch(
        model, [input], n=n, temperature=temperature, seed=seed, config=config, use_n=use_n,
        **kwargs,
    )  # fmt: skip
    return _unwrap_result(results[0])
