"""Serving: a managed vLLM server, a server run by someone else, and ``connect``.

``VLLMServer`` starts vLLM on a registry name (see :mod:`taskcal_agents.models`, which
prepares it) or any model folder, on the CPU or a GPU, as a context manager;
``ExternalServer`` wraps a server that is already running; :func:`connect` gives either,
reusing a running server named by :data:`BASE_URL_ENV` and :data:`MODEL_ENV`
(:func:`server_from_env`). Each describes where it answers with an :class:`Endpoint`, which
is what samplers take.
"""

from __future__ import annotations

# ``__all__`` (below) is the public surface. The names imported ``as`` themselves are not
# part of it: ``LaunchSpec`` (0.1 exported it from here), ``DEFAULT``, the "default for this
# model" marker of ``VLLMServer``'s arguments (the command line passes it), and
# ``DtypeChoice``, what ``choose_dtype`` returns.
from taskcal_agents._dtype import DtypeChoice as DtypeChoice
from taskcal_agents._dtype import choose_dtype
from taskcal_agents._endpoint import BASE_URL_ENV, MODEL_ENV, Endpoint, server_from_env
from taskcal_agents.serving._connect import connect
from taskcal_agents.serving._external import ExternalServer
from taskcal_agents.serving._launch import DEFAULT as DEFAULT
from taskcal_agents.serving._launch import LaunchSpec as LaunchSpec
from taskcal_agents.serving._process import VLLMServer

__all__ = [
    "BASE_URL_ENV",
    "MODEL_ENV",
    "Endpoint",
    "ExternalServer",
    "VLLMServer",
    "choose_dtype",
    "connect",
    "server_from_env",
]
