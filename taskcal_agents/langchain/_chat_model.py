"""TaskCalibratedChatModel: a drop-in chat model that answers with the decision's message.

It replaces the wrapped model in any chain or agent: its reply is the tool call, the
clarifying question or the abstention chosen by the calibrated MBR decision, with the
:class:`~taskcal_agents.decision.Decision` (as a dict) in
``response_metadata["taskcal_decision"]``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any, Self

from langchain_core.callbacks import (
    AsyncCallbackManager,
    AsyncCallbackManagerForLLMRun,
    CallbackManager,
    CallbackManagerForLLMRun,
)
from langchain_core.language_models import BaseChatModel, LangSmithParams, LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import merge_configs
from langchain_core.tools import BaseTool
from pydantic import ConfigDict, ValidationError
from typing_extensions import override

from taskcal_agents.decision import CalibratorLike, Decision, Task
from taskcal_agents.errors import ConfigurationError
from taskcal_agents.langchain._runnable import TaskCalibratedRunnable
from taskcal_agents.langchain._session import (
    DECISION_METADATA_KEY,
    configuration_error,
    rebuilt,
    reply_for,
    unknown_arguments,
)
from taskcal_agents.sampling import split_retry, unwrap_binding

__all__ = ["DECISION_METADATA_KEY", "TaskCalibratedChatModel"]

_TOOL_KWARGS = frozenset({"tools", "tool_choice", "parallel_tool_calls", "strict"})
_LS_KWARGS = frozenset({"model", "model_name", "temperature", "max_tokens"})
"""The call arguments a chat model's tracing parameters read (bound or per call)."""


_UNSET: Any = object()
"""``calibrator`` not given: ``"auto"`` for a new runnable, nothing to check with ``runnable``."""


class TaskCalibratedChatModel(BaseChatModel):
    """A chat model whose reply is a calibrated, cost-aware decision.

    Construct it like :class:`~taskcal_agents.langchain.TaskCalibratedRunnable`
    (``TaskCalibratedChatModel(model, task, calibrator, n_samples=16, ...)``) or from one
    (``runnable=...``). Keyword arguments that are fields of the runnable go to it; the
    chat model's own (``callbacks``, ``tags``, ``cache``, ``streaming``…) to the chat model;
    any other name is a :class:`~taskcal_agents.errors.ConfigurationError`: the wrapped
    model's settings (``max_tokens``, ``timeout``, ``stop``, ``api_key``…) are set on that
    model, not here. ``bind_tools`` binds the tools to the wrapped model and returns a new
    ``TaskCalibratedChatModel``. ``calibrator`` is a fitted calibrator, a
    :class:`~taskcal_agents.decision.CalibratorArtefact` or the path of an artefact
    file, as for the runnable.

    When the chosen action has no message to send (an action no sample expressed), the
    reply is the one every front door gives (:meth:`PendingDecision.reply
    <taskcal_agents.langchain.PendingDecision.reply>`): after a tool result a
    report of what the tools returned, else the decided label (a rating, a choice); the
    decision is in its metadata either way.
    Streaming yields the reply as one chunk once the decision is taken.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    runnable: TaskCalibratedRunnable
    """The decision runnable (wrapped model, task, calibrator, sampling settings)."""
    streaming: bool = False
    """LangChain's ``streaming`` switch, read by ``BaseChatModel`` when it is given:
    ``True`` makes ``invoke`` go through ``_stream`` (``on_llm_new_token`` gets the
    decision as its one chunk); ``False`` makes ``stream`` yield the ``invoke`` reply. The
    reply is the same message either way."""

    def __init__(
        self,
        model: Runnable[Any, Any] | None = None,
        task: Task | None = None,
        calibrator: CalibratorLike | None = _UNSET,
        *,
        runnable: TaskCalibratedRunnable | None = None,
        **kwargs: Any,
    ) -> None:
        own = set(type(self).model_fields)
        runnable_kwargs = {
            k: kwargs.pop(k)
            for k in list(kwargs)
            if k in TaskCalibratedRunnable.model_fields and k not in own
        }
        unknown = sorted(set(kwargs) - own)
        if unknown:
            known = own | set(TaskCalibratedRunnable.model_fields)
            raise unknown_arguments(type(self).__name__, unknown, known)
        if runnable is None:
            if model is None or task is None:
                msg = (
                    "TaskCalibratedChatModel needs either 'model' and 'task' or 'runnable', "
                    f"got model={model!r}, task={task!r}."
                )
                raise ConfigurationError(msg)
            runnable = TaskCalibratedRunnable(
                model, task, "auto" if calibrator is _UNSET else calibrator, **runnable_kwargs
            )
        elif model is not None or task is not None or calibrator is not _UNSET or runnable_kwargs:
            given = [*runnable_kwargs, *(["calibrator"] if calibrator is not _UNSET else [])]
            given += [name for name, v in (("model", model), ("task", task)) if v is not None]
            msg = (
                "TaskCalibratedChatModel takes either 'runnable' or model/task/calibrator and "
                f"sampling options, not both; got runnable and {sorted(given)!r}."
            )
            raise ConfigurationError(msg)
        # pydantic validates this model's fields; mypy types BaseChatModel's
        # dataclass-transform __init__ with its own fields only.
        try:
            super().__init__(runnable=runnable, **kwargs)  # type: ignore[call-arg]
        except ValidationError as exc:
            raise configuration_error(type(self).__name__, exc, own) from exc

    @override
    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A new chat model from this one's parameters with ``update`` applied.

        ``update`` may name the runnable's parameters too (``calibrator``, ``n_samples``,
        ``model``, ``task``, ...), as the constructor takes them: the runnable is then
        rebuilt with them (:meth:`TaskCalibratedRunnable.model_copy`), so the copy's
        calibrator is resolved anew for its settings.
        """
        update = dict(update or {})
        own = set(type(self).model_fields)
        inner = {k: update.pop(k) for k in list(update) if k not in own}
        unknown = sorted(set(inner) - set(TaskCalibratedRunnable.model_fields))
        if unknown:
            known = own | set(TaskCalibratedRunnable.model_fields)
            owner = f"{type(self).__name__}.model_copy"
            raise unknown_arguments(owner, unknown, known)
        if inner or deep:
            runnable = update.get("runnable", self.runnable)
            update["runnable"] = runnable.model_copy(update=inner, deep=deep)
        return rebuilt(self, update)

    def __copy__(self) -> Self:
        return self.model_copy()

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Self:
        return self.model_copy(deep=True)

    @property
    def task(self) -> Task:
        """The task."""
        return self.runnable.task

    @property
    @override
    def _llm_type(self) -> str:
        return "taskcal"

    @property
    @override
    def _identifying_params(self) -> dict[str, Any]:
        r = self.runnable
        decider = r.decider
        return {
            "task": r.task.name,
            "model": type(r.model).__name__,
            "calibrator": None if decider.calibrator is None else type(decider.calibrator).__name__,
            "n_samples": r.n_samples,
            "temperature": r.temperature,
            "alpha": decider.alpha,
        }

    @override
    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        """The tracing parameters: provider ``taskcal``, the wrapped chat model's name.

        LangChain's fallback names no model here (this class has no ``model`` string). The
        name is the wrapped chat model's own ``ls_model_name`` (with a per-call or bound
        ``model`` override), else its class name; the temperature is the sampling one.
        """
        sampled, _ = split_retry(self.runnable.model)
        core, bound, _, _ = unwrap_binding(sampled)
        call = {k: v for k, v in {**bound, **kwargs}.items() if k in _LS_KWARGS}
        inner = core._get_ls_params(**call) if isinstance(core, BaseChatModel) else {}
        params = LangSmithParams(
            ls_provider=self._llm_type,
            ls_model_name=inner.get("ls_model_name") or type(core).__name__,
            ls_model_type="chat",
        )
        # Sent per sample: a per-call temperature, else the runnable's, else the model's own.
        temperature = kwargs.get("temperature", self.runnable.temperature)
        if temperature is None:
            temperature = inner.get("ls_temperature")
        if temperature is not None:
            params["ls_temperature"] = temperature
        if inner.get("ls_max_tokens") is not None:
            params["ls_max_tokens"] = inner["ls_max_tokens"]
        if stop:
            params["ls_stop"] = stop
        return params

    def _result(self, decision: Decision, messages: list[BaseMessage]) -> ChatResult:
        """The decision's reply (as every front door gives it), its record attached."""
        message = reply_for(decision, messages)
        return ChatResult(
            generations=[ChatGeneration(message=message)],
            llm_output={DECISION_METADATA_KEY: message.response_metadata[DECISION_METADATA_KEY]},
        )

    @staticmethod
    def _call_args(
        stop: list[str] | None,
        run_manager: CallbackManagerForLLMRun | AsyncCallbackManagerForLLMRun | None,
        kwargs: dict[str, Any],
    ) -> tuple[RunnableConfig, dict[str, Any]]:
        config: RunnableConfig = {}
        if run_manager is not None:
            # LLM run managers have no get_child(); build the child manager the way
            # ParentRunManager.get_child does, so the decision run nests under this run.
            manager = (
                AsyncCallbackManager(handlers=[], parent_run_id=run_manager.run_id)
                if isinstance(run_manager, AsyncCallbackManagerForLLMRun)
                else CallbackManager(handlers=[], parent_run_id=run_manager.run_id)
            )
            manager.set_handlers(run_manager.inheritable_handlers)
            manager.add_tags(run_manager.inheritable_tags)
            manager.add_metadata(run_manager.inheritable_metadata)
            config["callbacks"] = manager
        return config, ({**kwargs, "stop": stop} if stop else kwargs)

    @override
    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        config, call_kwargs = self._call_args(stop, run_manager, kwargs)
        return self._result(self.runnable.invoke(messages, config, **call_kwargs), messages)

    @override
    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        config, call_kwargs = self._call_args(stop, run_manager, kwargs)
        return self._result(await self.runnable.ainvoke(messages, config, **call_kwargs), messages)

    @staticmethod
    def _chunk(result: ChatResult) -> ChatGenerationChunk:
        message = result.generations[0].message
        chunk = AIMessageChunk(**message.model_dump(exclude={"type"}), chunk_position="last")
        return ChatGenerationChunk(message=chunk)

    @override
    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        """The decision's message as one ``AIMessageChunk`` (``chunk_position="last"``).

        A decision is taken on all its samples, so nothing streams before it; streaming
        (``stream``, ``stream_events``, LangGraph's message stream) gets that one chunk.
        ``BaseChatModel`` reports it to ``on_llm_new_token``.
        """
        yield self._chunk(self._generate(messages, stop, run_manager, **kwargs))

    @override
    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        """The decision's message as one chunk (see :meth:`_stream`)."""
        yield self._chunk(await self._agenerate(messages, stop, run_manager, **kwargs))

    def with_model(self, model: Runnable[Any, Any]) -> TaskCalibratedChatModel:
        """Return a copy that wraps ``model`` instead (same task, calibrator, settings).

        The copy's calibrator is resolved anew for ``model`` (``"auto"`` picks the one
        shipped for its name and ``tool_choice``).
        """
        return self.model_copy(update={"model": model})

    @override
    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind ``tools`` to the wrapped model; return a new ``TaskCalibratedChatModel``.

        Tools already bound to the wrapped model are replaced; its other bound keyword
        arguments and config are kept.

        Raises:
            ConfigurationError: If the wrapped model does not support ``bind_tools``.
        """
        sampled, retry = split_retry(self.runnable.model)
        core, bound_kwargs, bound_configs, _ = unwrap_binding(sampled)
        if not isinstance(core, BaseChatModel):
            msg = (
                f"TaskCalibratedChatModel.bind_tools needs a wrapped chat model, got "
                f"{type(core).__name__}; wrap the chat model itself, not a chain."
            )
            raise ConfigurationError(msg)
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        try:
            inner: Runnable[Any, Any] = core.bind_tools(tools, **kwargs)
        except NotImplementedError as exc:
            msg = (
                f"TaskCalibratedChatModel.bind_tools: the wrapped {type(core).__name__} does "
                "not support tool calling; wrap a model that implements bind_tools."
            )
            raise ConfigurationError(msg) from exc
        rest = {k: v for k, v in bound_kwargs.items() if k not in _TOOL_KWARGS}
        if rest:
            inner = inner.bind(**rest)
        config = merge_configs(*bound_configs)
        if config:
            inner = inner.with_config(config)
        if retry is not None:  # keep the with_retry() policy
            inner = retry.model_copy(update={"bound": inner, "kwargs": {}, "config": {}})
        return self.with_model(inner)
