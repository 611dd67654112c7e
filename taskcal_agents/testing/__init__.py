"""Test helpers shipped with the package: a fake OpenAI-compatible server with faults.

See :mod:`taskcal_agents.testing.fake_openai`.
"""

# ``__all__`` (below) is the public surface. The names imported ``as`` themselves stay
# importable from this package outside it (0.1 exported them from here); each is public in
# :mod:`taskcal_agents.testing.fake_openai`.
from taskcal_agents.testing.fake_openai import FAULTS as FAULTS
from taskcal_agents.testing.fake_openai import FakeOpenAIServer
from taskcal_agents.testing.fake_openai import start_process as start_process
from taskcal_agents.testing.fake_openai import text_reply as text_reply
from taskcal_agents.testing.fake_openai import tool_call_reply as tool_call_reply

__all__ = ["FakeOpenAIServer"]
