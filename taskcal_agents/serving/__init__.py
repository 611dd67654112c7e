"""Serving: a managed vLLM server, a server run by someone else, and ``connect``.

``VLLMServer`` starts vLLM on a registry name (see :mod:`taskcal_agents.models`, which
prepares it) or any model folder, on the CPU or a GPU, as a context manager;
``ExternalServer`` wraps a server that is already running. Both describe where they answer
with an :class:`~taskcal_agents.endpoint.Endpoint`, which is what samplers take.
"""

from __future__ import annotations

# ``__all__`` (below) is the public surface. The names imported ``as`` themselves stay
# importable from this package outside it: ``LaunchSpec`` (0.1 exported it from here) and
# ``DEFAULT``, the "default for this model" marker of ``VLLMServer``'s arguments (the
# command line passes it), and ``DtypeChoice``, what ``choose_dtype`` returns.
from taskcal_agents._dtype import DtypeChoice as DtypeChoice
from taskcal_agents._dtype import choose_dtype
from taskcal_agents.serving._connect import connect
from taskcal_agents.serving._external import ExternalServer
from taskcal_agents.serving._launch import DEFAULT as DEFAULT
from taskcal_agents.serving._launch import LaunchSpec as LaunchSpec
from taskcal_agents.serving._process import VLLMServer

__all__ = [
    "ExternalServer",
    "VLLMServer",
    "choose_dtype",
    "connect",
]
