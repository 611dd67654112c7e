"""Test helpers shipped with the package: a fake OpenAI-compatible server with faults.

:class:`FakeOpenAIServer` answers on 127.0.0.1 in a thread or a process
(``python -m taskcal_agents.testing``), with fixed latency and injected faults.
"""

# ``__all__`` (below) is the public surface. The names imported ``as`` themselves are not
# part of it (0.1 exported them from here): the faults, the process starter and the reply
# builders.
from taskcal_agents.testing._fake_openai import FAULTS as FAULTS
from taskcal_agents.testing._fake_openai import FakeOpenAIServer
from taskcal_agents.testing._fake_openai import start_process as start_process
from taskcal_agents.testing._fake_openai import text_reply as text_reply
from taskcal_agents.testing._fake_openai import tool_call_reply as tool_call_reply

__all__ = ["FakeOpenAIServer"]
