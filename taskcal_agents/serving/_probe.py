"""Readiness: one probe of an OpenAI-compatible server, and one loop that waits on it.

A server is ready when ``GET {base_url}/models`` answers 200 and lists the wanted model (any
model when none is named); a managed vLLM server must also answer ``GET /health`` with 200
first. :class:`~taskcal_agents.serving.VLLMServer` waits on its child with :func:`poll` (and a
check that the child still runs); :func:`wait_for_server` and
:class:`~taskcal_agents.serving.ExternalServer` wait on someone else's server with the same
probe.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from taskcal_agents.errors import ServerStartupError

POLL_INTERVAL = 0.5
"""Seconds between two probes."""

PROBE_TIMEOUT = 5.0
"""Seconds one HTTP request of a probe may take."""


@dataclass(frozen=True)
class Probe:
    """What one look at a server found.

    Attributes:
        ready: It answered and lists the wanted model.
        model_ids: The model ids it lists (empty when it did not answer).
        detail: What was wrong (``""`` when ready), for error messages.
    """

    ready: bool
    model_ids: list[str]
    detail: str = ""


def probe(
    client: httpx.Client, base_url: str, model_name: str | None = None, *, health: bool = False
) -> Probe:
    """Look at the server at *base_url* once (never raises on a bad answer).

    Args:
        client: The HTTP client (carries the bearer token, if any).
        base_url: ``http://host:port/v1``.
        model_name: The model that must be listed; ``None`` accepts any answer.
        health: Require ``GET /health`` (beside ``/v1``) to answer 200 first (vLLM's own).
    """
    base_url = base_url.rstrip("/")
    try:
        if health:
            status = client.get(base_url.removesuffix("/v1") + "/health").status_code
            if status != 200:
                return Probe(ready=False, model_ids=[], detail=f"/health answered {status}")
        response = client.get(base_url + "/models")
        response.raise_for_status()
        ids = [entry["id"] for entry in response.json()["data"]]
    except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return Probe(ready=False, model_ids=[], detail=f"{type(exc).__name__}: {exc}")
    if model_name is None or model_name in ids:
        return Probe(ready=True, model_ids=ids)
    return Probe(ready=False, model_ids=ids, detail=f"it lists {ids!r}")


def poll(
    base_url: str,
    model_name: str | None = None,
    *,
    timeout: float,
    api_key: str | None = None,
    health: bool = False,
    check: Callable[[], None] | None = None,
) -> Probe:
    """:func:`probe` every :data:`POLL_INTERVAL` seconds until ready or *timeout* has passed.

    Always probes at least once. Returns the last probe (``ready`` is false on a timeout).

    Args:
        base_url: ``http://host:port/v1``.
        model_name: The model that must be listed; ``None`` accepts any.
        timeout: Seconds to keep trying.
        api_key: Bearer token, if the server needs one.
        health: See :func:`probe`.
        check: Called before every probe; raises to stop waiting (a server process died).
    """
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=PROBE_TIMEOUT, headers=headers) as client:
        while True:
            if check is not None:
                check()
            found = probe(client, base_url, model_name, health=health)
            if found.ready or time.monotonic() > deadline:
                return found
            time.sleep(POLL_INTERVAL)


def wait_for_server(
    base_url: str,
    model_name: str | None = None,
    *,
    timeout: float = 30.0,
    api_key: str | None = None,
) -> list[str]:
    """Wait until an OpenAI-compatible server at *base_url* lists its models.

    Args:
        base_url: ``http://host:port/v1``.
        model_name: If given, wait until this model is listed.
        timeout: Seconds to keep trying.
        api_key: Bearer token, if the server needs one.

    Returns:
        The model ids the server lists.

    Raises:
        ServerStartupError: No answer (or no *model_name*) within *timeout*.
    """
    found = poll(base_url, model_name, timeout=timeout, api_key=api_key)
    if not found.ready:
        wanted = "" if model_name is None else f" with model {model_name!r}"
        msg = (
            f"wait_for_server: no OpenAI-compatible server{wanted} at {base_url!r} "
            f"within {timeout:g} s (last: {found.detail}); start one or fix the URL."
        )
        raise ServerStartupError(msg)
    return found.model_ids


__all__ = ["POLL_INTERVAL", "PROBE_TIMEOUT", "Probe", "poll", "probe", "wait_for_server"]
