"""Draw N completions from any LangChain chat model (or Runnable producing messages).

Two strategies, chosen per model:

* **one call with n** – for ``ChatOpenAI`` and its subclasses (OpenAI-compatible
  servers such as vLLM), alone or under ``bind``/``bind_tools``/``with_config``
  bindings: one ``generate(..., n=N)`` request returns all N choices. (Note that
  ``ChatOpenAI(n=N).invoke`` would return only the first choice.) Bound keyword arguments
  such as ``tools`` are kept; streaming is switched off for this call. Not at temperature 0
  (greedy sampling), where vLLM refuses ``n`` > 1 (HTTP 400): unless ``use_n=True`` forces
  it, such a model gets N concurrent calls.
* **N concurrent calls** – for every other model: ``model.batch``/``abatch`` on N copies
  of the input, which honours ``max_concurrency`` from the config. With a ``seed``, sample
  i is drawn with ``seed + i`` so the N samples differ.

Temperature and seed are passed as call keyword arguments; the caller's model object is
never modified. Several inputs can be sampled together (:func:`sample_batch`) so that
``max_concurrency`` bounds all model calls of a batch, not each input separately.

The sync and async paths share everything but the calls themselves: a plan
(:class:`_Plan`) splits the work into units, each a sans-IO protocol that yields
:class:`_Call` requests (``generate``, ``invoke`` or ``batch``), and the two drivers make the
calls (``generate`` or ``agenerate``…) with threads or tasks. :class:`ChatModelSampler` is
the :class:`~taskcal_agents.sampling.Sampler` over a chat model.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import (
    ensure_config,
    get_executor_for_config,
    merge_configs,
    patch_config,
)
from langchain_core.runnables.utils import gather_with_concurrency
from pydantic import ValidationError

from taskcal_agents._validation import check_int
from taskcal_agents.errors import ConfigurationError, SamplingError
from taskcal_agents.sampling._bindings import chat_model_of, unwrap_binding
from taskcal_agents.sampling._choices import is_malformed_choice, malformed_message
from taskcal_agents.sampling._drive import adrive, drive
from taskcal_agents.sampling._messages import to_messages
from taskcal_agents.sampling._openai_server import SERVER_FAULTS, translate_error

__all__ = [
    "ChatModelSampler",
    "asample_batch",
    "asample_messages",
    "sample_batch",
    "sample_messages",
    "supports_n",
]


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


_GREEDY_BELOW = 1e-5
"""vLLM samples greedily below this temperature, and there refuses ``n`` > 1 (HTTP 400)."""


def _greedy(model: Runnable[Any, Any], call_kwargs: dict[str, Any]) -> bool:
    """Whether ``model`` samples at temperature 0 when called with ``call_kwargs``.

    The temperature sent is the call's, else the one bound to ``model``, else the chat
    model's own (``None``, the server's default: not known to be greedy).
    """
    core, bound, _, _ = unwrap_binding(model)
    for temperature in (
        call_kwargs.get("temperature"),
        bound.get("temperature"),
        getattr(core, "temperature", None),
    ):
        if temperature is not None:
            return isinstance(temperature, int | float) and temperature < _GREEDY_BELOW
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


@dataclass(frozen=True)
class _Call:
    """One model call, named by its sync method; the async driver calls ``a`` + method."""

    target: Runnable[Any, Any]
    method: str  # "generate", "invoke" or "batch"
    args: tuple[Any, ...]
    kwargs: dict[str, Any]

    def run(self) -> Any:
        return getattr(self.target, self.method)(*self.args, **self.kwargs)

    async def arun(self) -> Any:
        return await getattr(self.target, "a" + self.method)(*self.args, **self.kwargs)


_Unit = Generator[_Call, Any, Any]
"""A unit of work: a sans-IO protocol yielding model calls, returning its outcome."""

_MAX_TOP_UPS = 3

_Results = list[list[AIMessage] | BaseException]
"""Per input, its ``n`` messages or the exception that stopped it."""


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

    def generate(self, i: int, n: int) -> _Call:
        """The ``chat.generate`` call for input i asking for ``n`` choices."""
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
        chat = cast("BaseChatModel", self.chat)
        return _Call(chat, "generate", ([to_messages(self.inputs[i])],), kwargs)

    def units(self) -> tuple[list[_Unit], Callable[[list[Any]], _Results]]:
        """The units to run concurrently and how their outcomes become the results."""
        if self.chat is not None:  # one request with n per input, topped up
            return [_top_ups(self, i) for i in range(len(self.inputs))], list
        inputs = [x for x in self.inputs for _ in range(self.n)]
        configs = [
            patch_config(c, max_concurrency=self.max_concurrency)
            for c in self.configs
            for _ in range(self.n)
        ]
        if self.seed is None:  # one batch call over N copies of every input
            kwargs = {"return_exceptions": True, **self.call_kwargs}
            batch = _Call(self.model, "batch", (inputs, configs), kwargs)
            return [_one(batch, catch=False)], lambda outcomes: self.regroup(outcomes[0])
        seeds = [self.seed + j for _ in self.inputs for j in range(self.n)]
        calls = [
            _Call(self.model, "invoke", (x, c), {**self.call_kwargs, "seed": s})
            for x, c, s in zip(inputs, configs, seeds, strict=True)
        ]
        return [_one(call) for call in calls], self.regroup

    def regroup(self, flat: Sequence[Any]) -> _Results:
        out: _Results = []
        for i in range(len(self.inputs)):
            chunk = [  # a malformed output is one unparsed sample, not a failed item
                malformed_message(x) if is_malformed_choice(x) else x
                for x in flat[i * self.n : (i + 1) * self.n]
            ]
            error = next((x for x in chunk if isinstance(x, BaseException)), None)
            if error is not None:
                out.append(error)
                continue
            try:
                out.append([_as_ai_message(x) for x in chunk])
            except SamplingError as exc:
                out.append(exc)
        return out

    def short(self, got: int) -> SamplingError:
        msg = (
            f"{type(self.chat).__name__} returned {got} of the {self.n} requested choices "
            f"after {_MAX_TOP_UPS + 1} requests; check that the server supports the 'n' "
            "parameter or pass use_n=False."
        )
        return SamplingError(msg)


def _one(call: _Call, *, catch: bool = True) -> _Unit:
    """The unit of one call: its result, or (with *catch*) the exception it raised."""
    try:
        return (yield call)
    except Exception as exc:
        if not catch:
            raise
        return exc


def _choices(result: Any) -> list[AIMessage]:
    return [_as_ai_message(g.message) for g in result.generations[0]]


def _top_ups(plan: _Plan, i: int) -> _Unit:
    """Input i's n choices from requests with ``n``, topped up when a server returns fewer.

    langchain-openai fails a whole ``n``-choice response over one malformed choice (say,
    tool-call arguments that are a JSON list): the rest is then drawn one by one, and a
    choice that fails again becomes :func:`~taskcal_agents.sampling._choices.malformed_message`.
    """
    samples: list[AIMessage] = []
    try:
        for _ in range(_MAX_TOP_UPS + 1):  # a server may return fewer than n choices
            try:
                samples += _choices((yield plan.generate(i, plan.n - len(samples))))
            except ValidationError as exc:  # one malformed choice: draw the rest one by one
                if not is_malformed_choice(exc):
                    raise
                for _ in range(plan.n - len(samples)):
                    try:
                        samples += _choices((yield plan.generate(i, 1)))
                    except ValidationError as again:
                        if not is_malformed_choice(again):
                            raise
                        samples.append(malformed_message(again))
            if len(samples) >= plan.n:
                return samples[: plan.n]
    except Exception as exc:
        return _server_error(plan.chat, exc)
    return plan.short(len(samples))


def _server_error(chat: Any, exc: Exception) -> Exception:
    """A failure of an OpenAI-compatible server as the :class:`ServerError` naming its URL.

    The ``ChatOpenAI`` path (the only one reaching here with openai errors) leaves openai's
    "Connection error." or a bare ``JSONDecodeError`` otherwise; other errors pass unchanged.
    """
    if not isinstance(exc, SERVER_FAULTS):
        return exc
    base_url = getattr(chat, "openai_api_base", None) or "https://api.openai.com/v1"
    error = translate_error(exc, str(base_url), owner=type(chat).__name__)
    error.__cause__ = exc
    return error


def _plan(
    model: Runnable[Any, Any],
    inputs: Sequence[Any],
    *,
    n: int,
    temperature: float | None = None,
    seed: int | None = None,
    config: RunnableConfig | Sequence[RunnableConfig] | None = None,
    use_n: bool | None = None,
    **kwargs: Any,
) -> _Plan:
    check_int(n, "sample_messages parameter 'n'", minimum=1, kind="an integer")
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
    call_kwargs = _openai_fields(model, dict(kwargs))
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
    if use_n is None and one_call and n > 1 and _greedy(model, call_kwargs):
        one_call = False  # vLLM refuses n > 1 under greedy sampling: N requests of n=1
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


def _openai_fields(model: Runnable[Any, Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The ``logprobs`` and ``structured_outputs`` sample parameters as ChatOpenAI's arguments.

    ``logprobs=k`` becomes ``logprobs=True, top_logprobs=k``; ``structured_outputs`` goes
    into ``extra_body`` (vLLM's), merged over the model's own and the bound ``extra_body``.
    Other arguments pass unchanged.

    Raises:
        ConfigurationError: ``logprobs`` or ``structured_outputs`` for a model that is not
            ``ChatOpenAI``-compatible (it has no way to send them).
    """
    top = kwargs.get("logprobs")
    counted = isinstance(top, int) and not isinstance(top, bool)  # ChatOpenAI's own: a bool
    wanted = [k for k, on in (("logprobs", counted),
                              ("structured_outputs", kwargs.get("structured_outputs") is not None))
              if on]  # fmt: skip
    if not wanted:
        return kwargs
    core, bound, _, _ = unwrap_binding(model)
    try:
        from langchain_openai.chat_models.base import BaseChatOpenAI
    except ImportError:  # pragma: no cover - langchain-openai is a dependency
        BaseChatOpenAI = ()  # type: ignore[assignment,misc]
    if not isinstance(core, BaseChatOpenAI):
        msg = (
            f"{' and '.join(wanted)} (the one-pass belief: log-probabilities under a choice "
            "constraint) need an OpenAI-compatible chat model, ChatOpenAI on a vLLM server; "
            f"{type(chat_model_of(model) or model).__name__} cannot send them. Use "
            "belief='samples'."
        )
        raise ConfigurationError(msg)
    out = dict(kwargs)
    if counted:
        out["logprobs"] = True
        out["top_logprobs"] = int(top)  # type: ignore[arg-type]
    constraint = out.pop("structured_outputs", None)
    if constraint is not None:
        out["extra_body"] = {
            **(getattr(core, "extra_body", None) or {}),
            **(bound.get("extra_body") or {}),
            **(out.get("extra_body") or {}),
            "structured_outputs": dict(constraint),
        }
    return out


def _run_unit(unit: _Unit) -> Any:
    return drive(unit, _Call.run)


async def _arun_unit(unit: _Unit) -> Any:
    return await adrive(unit, _Call.arun)


def _run(plan: _Plan) -> _Results:
    """The sync driver: units in threads (at most ``max_concurrency``), one unit inline."""
    units, finish = plan.units()
    if len(units) == 1:
        return finish([_run_unit(units[0])])
    with get_executor_for_config({"max_concurrency": plan.max_concurrency}) as ex:
        return finish(list(ex.map(_run_unit, units)))


async def _arun(plan: _Plan) -> _Results:
    """The async driver: units as tasks, at most ``max_concurrency`` at a time."""
    units, finish = plan.units()
    outcomes = await gather_with_concurrency(plan.max_concurrency, *map(_arun_unit, units))
    return finish(list(outcomes))


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
            forces N calls, ``None`` picks automatically: one request for a
            ``ChatOpenAI``-compatible model, unless it samples at temperature 0 (the call's,
            else the bound or the model's own), where vLLM refuses ``n`` > 1.
        **kwargs: Further keyword arguments for the model call (``stop``…).

    Returns:
        Per input, its ``n`` messages or the exception that stopped it.

    Raises:
        ConfigurationError: If the arguments are invalid for this model.
    """
    plan = _plan(
        model, inputs, n=n, temperature=temperature, seed=seed, config=config, use_n=use_n,
        **kwargs,
    )  # fmt: skip
    return _run(plan)


async def asample_batch(
    model: Runnable[Any, Any], inputs: Sequence[LanguageModelInput], *, n: int, **options: Any
) -> list[list[AIMessage] | BaseException]:
    """Async :func:`sample_batch`, with the same keyword arguments (``temperature``…)."""
    return await _arun(_plan(model, inputs, n=n, **options))


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
    model: Runnable[Any, Any], input: LanguageModelInput, *, n: int, **options: Any
) -> list[AIMessage]:
    """Async :func:`sample_messages`, with the same keyword arguments (``temperature``…)."""
    return _unwrap_result((await asample_batch(model, [input], n=n, **options))[0])


class ChatModelSampler:
    """The :class:`~taskcal_agents.sampling.Sampler` over a LangChain chat model.

    ``sample``/``asample`` are :func:`sample_messages`/:func:`asample_messages` with this
    sampler's model, config and ``use_n``.

    Args:
        model: A chat model, a binding of one, or a Runnable producing messages.
        config: The runnable config of every call (callbacks, ``max_concurrency``…).
        use_n: Force (``True``) or forbid (``False``) one request with ``n``.
    """

    def __init__(
        self,
        model: Runnable[Any, Any],
        *,
        config: RunnableConfig | None = None,
        use_n: bool | None = None,
    ) -> None:
        self.model = model
        self.config = config
        self.use_n = use_n

    def sample(self, messages: Any, *, n: int = 1, **params: Any) -> list[AIMessage]:
        """Draw ``n`` completions (``params``: ``temperature``, ``seed``, model kwargs)."""
        return sample_messages(self.model, messages, n=n, **self._options(params))

    async def asample(self, messages: Any, *, n: int = 1, **params: Any) -> list[AIMessage]:
        """Async :meth:`sample`."""
        return await asample_messages(self.model, messages, n=n, **self._options(params))

    def _options(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"config": self.config, "use_n": self.use_n, **params}

    def __repr__(self) -> str:
        return f"ChatModelSampler(model={self.model!r})"
