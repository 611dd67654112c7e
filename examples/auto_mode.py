"""AutoModeMiddleware with our calibrated, cost-aware decision model as its classifier.

AutoMode blocks a guarded tool call when its classifier says P(risky) >= 0.5. With
``risk_classifier`` the answer carries the deployment's costs: letting a risky call through
costs ``--cost-fn``, blocking a safe one ``--cost-fp``, so AutoMode blocks exactly when the
calibrated P(risky) >= cost_fp / (cost_fp + cost_fn). ``TaskCalibrationMiddleware`` goes
ahead of it: small models often write their tool call as JSON in a code fence, which the
server does not return as a tool call, so AutoMode would never be asked; our middleware
turns such replies into real tool calls (and decides call / ask / abstain).

    python examples/auto_mode.py --base-url http://127.0.0.1:8000/v1 --model MODEL
"""

from __future__ import annotations

import argparse
import sys

from langchain.agents import create_agent
from langchain.agents.middleware import AutoModeMiddleware, ModelCallLimitMiddleware
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from taskcal_agents.decision import SamplingOptions, tool_decision
from taskcal_agents.langchain import TaskCalibrationMiddleware, block_threshold, risk_classifier
from taskcal_agents.serving import BASE_URL_ENV, MODEL_ENV, connect, server_from_env


@tool
def delete_file(path: str) -> str:
    """Delete a file on the server."""
    return f"(demo) would have deleted {path}"


@tool
def get_weather(city: str) -> str:
    """Get the current weather in a city."""
    return f"Sunny in {city}, 21 °C."


REQUESTS = ("Delete the file /etc/passwd.", "What's the weather in Paris?")


def main(
    base_url: str,
    model: str,
    *,
    n_samples: int = 8,
    max_tokens: int = 64,
    cost_fn: float = 10.0,
    cost_fp: float = 1.0,
    limit: int | None = None,
) -> int:
    llm = ChatOpenAI(
        base_url=base_url, model=model, api_key="EMPTY", max_tokens=max_tokens, timeout=300
    )
    judge = ChatOpenAI(base_url=base_url, model=model, api_key="EMPTY", max_tokens=6, timeout=300)
    classifier = risk_classifier(
        judge, cost_false_negative=cost_fn, cost_false_positive=cost_fp, n_samples=n_samples
    )
    threshold = block_threshold(cost_false_negative=cost_fn, cost_false_positive=cost_fp)
    print(
        f"costs: c_FN={cost_fn:g}, c_FP={cost_fp:g}: AutoMode blocks when the calibrated "
        f"P(risky) >= {threshold:.3f} (its message shows the cost-weighted probability)"
    )
    agent = create_agent(
        llm,
        tools=[delete_file, get_weather],
        system_prompt="You are a helpful assistant. Use the tools when they help.",
        middleware=[
            ModelCallLimitMiddleware(run_limit=2, exit_behavior="end"),
            TaskCalibrationMiddleware(
                task=tool_decision(tool_names=["delete_file", "get_weather"]),
                options=SamplingOptions(n_samples=n_samples),
            ),
            AutoModeMiddleware(tools=[delete_file, get_weather], classifier=classifier),
        ],
    )
    for request in REQUESTS[:limit]:
        result = agent.invoke({"messages": [("user", request)]})
        print(f"\nuser: {request}")
        print(f"  decision: {result['taskcal_decisions'][-1]['action']}")
        for message in result["messages"][1:]:
            if message.type == "ai" and message.tool_calls:
                for call in message.tool_calls:
                    print(f"  ai -> {call['name']}({call['args']})")
            elif isinstance(message, ToolMessage):
                verdict = "BLOCKED" if message.status == "error" else "ran"
                print(f"  tool {message.name} {verdict}: {str(message.content)[:120]!r}")
            else:
                print(f"  {message.type}: {str(message.content)[:160]!r}")
        print(f"  answer: {str(result['messages'][-1].content)[:160]!r}")
    return 0


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", help=f"server URL (default ${BASE_URL_ENV})")
    parser.add_argument("--model", help=f"served model name (default ${MODEL_ENV})")
    parser.add_argument("--n-samples", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--cost-fn", type=float, default=10.0, help="risky call let through")
    parser.add_argument("--cost-fp", type=float, default=1.0, help="safe call blocked")
    parser.add_argument("--limit", type=int, default=None, help="only the first LIMIT requests")
    args = parser.parse_args(argv)
    with connect(*server_from_env(args.base_url, args.model)) as (base_url, model):
        return main(
            base_url, model, n_samples=args.n_samples, max_tokens=args.max_tokens,
            cost_fn=args.cost_fn, cost_fp=args.cost_fp, limit=args.limit,
        )  # fmt: skip


if __name__ == "__main__":
    sys.exit(cli())
