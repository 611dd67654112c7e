"""``python -m taskcal_agents.testing``: the fake OpenAI-compatible server as a process."""

from taskcal_agents.testing._fake_openai import main

main()
