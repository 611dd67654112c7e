"""``connect``: a running server's address, or a registry model started for a block."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from taskcal_agents.models import DEFAULT_MODEL_NAME

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def connect(
    base_url: str | None = None, model: str | None = None, **server_kwargs: Any
) -> Iterator[tuple[str, str]]:
    """Yield ``(base URL, model name)`` of a server to talk to.

    With ``base_url`` that server is used as it is (``model`` defaults to the embedded
    default's served name); without it a :class:`~taskcal_agents.serving.VLLMServer` on
    ``model`` (a registry name or a model folder; default: the CPU default model) is
    started for the block and stopped after it.

    Args:
        base_url: An OpenAI-compatible base URL such as ``http://127.0.0.1:8000/v1``.
        model: The served model name, or, when a server is started, the model to serve.
        **server_kwargs: Passed to ``VLLMServer`` when one is started.
    """
    if base_url:
        yield base_url, model or DEFAULT_MODEL_NAME
        return
    from taskcal_agents.serving._process import VLLMServer

    logger.warning("no base URL given: starting %s with VLLMServer", model or DEFAULT_MODEL_NAME)
    with VLLMServer(model=model, **server_kwargs) as server:
        yield server.base_url, server.model_name
