"""ModelRouterMiddleware with our calibrated, cost-aware decision model choosing the route.

The router asks one ``Choice`` per run ("fast" or "thorough"); our decision model samples
N answers, calibrates them and takes the minimum-Bayes-risk route under a cost matrix in
which sending a hard request to the fast model costs more than the reverse. Both routes
use the same served model here, with different token budgets.

    python examples/model_router.py --base-url http://127.0.0.1:8000/v1 --model MODEL
"""

from __future__ import annotations

import argparse
import sys

from langchain.agents import create_agent
from langchain.agents.middleware import ModelChoice, ModelRouterMiddleware
from langchain_openai import ChatOpenAI

from taskcal_agents.langchain import MODEL_ROUTER_QUESTION_ID, TaskCalibratedDecisionModel
from taskcal_agents.serving import BASE_URL_ENV, MODEL_ENV, connect, server_from_env

REQUESTS = (
    "Write a Python function that parses ISO 8601 durations, with tests.",
    "Say hello.",
)
# Rows: the right route (fast, thorough); columns: the route taken.
ROUTE_COSTS = [[0.0, 1.0], [4.0, 0.0]]


def main(
    base_url: str, model: str, *, n_samples: int = 8, max_tokens: int = 64, limit: int | None = None
) -> int:
    def llm(tokens: int) -> ChatOpenAI:
        return ChatOpenAI(
            base_url=base_url, model=model, api_key="EMPTY", max_tokens=tokens, timeout=300
        )

    classifier = TaskCalibratedDecisionModel(
        chat_model=llm(6), n_samples=n_samples, costs={MODEL_ROUTER_QUESTION_ID: ROUTE_COSTS}
    )
    router = ModelRouterMiddleware(
        choices={
            "fast": ModelChoice(model=llm(max_tokens), criteria="Short, simple requests."),
            "thorough": ModelChoice(
                model=llm(4 * max_tokens), criteria="Multi-step reasoning, code or analysis."
            ),
        },
        instructions="Choose the least costly model suited to the request.",
        classifier=classifier,
    )
    agent = create_agent(llm(max_tokens), middleware=[router])
    for request in REQUESTS[:limit]:
        result = agent.invoke({"messages": [("user", request)]})
        route = result["model_route"]
        probabilities = ", ".join(f"{k}={v:.2f}" for k, v in route.probabilities.items())
        print(f"\nuser: {request}")
        print(f"  route: {route.choice}  ({probabilities}; confidence={route.confidence:.2f})")
        print(f"  answer: {str(result['messages'][-1].content)[:200]!r}")
    return 0


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", help=f"server URL (default ${BASE_URL_ENV})")
    parser.add_argument("--model", help=f"served model name (default ${MODEL_ENV})")
    parser.add_argument("--n-samples", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--limit", type=int, default=None, help="only the first LIMIT requests")
    args = parser.parse_args(argv)
    with connect(*server_from_env(args.base_url, args.model)) as (base_url, model):
        return main(
            base_url, model, n_samples=args.n_samples, max_tokens=args.max_tokens, limit=args.limit
        )


if __name__ == "__main__":
    sys.exit(cli())
