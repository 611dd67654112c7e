"""Test helpers shipped with the package: a fake OpenAI-compatible server with faults.

See :mod:`taskcal_agents.testing.fake_openai`.
"""

from taskcal_agents.testing.fake_openai import (
    FAULTS,
    FakeOpenAIServer,
    start_process,
    text_reply,
    tool_call_reply,
)

__all__ = ["FAULTS", "FakeOpenAIServer", "start_process", "text_reply", "tool_call_reply"]
