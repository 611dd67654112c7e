"""g_T: from one sampled completion to a task label, and what the samples say besides.

``text`` (a completion's text), ``tool_calls`` (tool calls written as text), ``labels`` (the
built-in label parsers), ``registry`` (parsers by name; custom ones), ``grounding`` (are a
call's arguments stated by the user?), ``answer_clusters`` (free-text answers grouped by
meaning), ``tool_turns`` (the turn after a tool result), ``constraints`` (structured-output
constraints for the server), ``grading`` (answers against gold).

The package exports the entry points; every other name is public in its module (the
built-in parser classes in ``labels`` and ``registry``, for instance).
"""

from __future__ import annotations

from taskcal_agents.parsing.answer_clusters import cluster_answers
from taskcal_agents.parsing.grounding import GroundingContext
from taskcal_agents.parsing.labels import Parser
from taskcal_agents.parsing.registry import get_parser, register_parser
from taskcal_agents.parsing.tool_calls import extract_tool_calls, parse_tool_calls

__all__ = [
    "GroundingContext",
    "Parser",
    "cluster_answers",
    "extract_tool_calls",
    "get_parser",
    "parse_tool_calls",
    "register_parser",
]
