"""HumanInTheLoopMiddleware that asks a person only when calibrated MBR says so.

``hitl_when`` is the ``when`` predicate: it asks our decision model whether a person should
review the tool call (a yes/no question with the deployment's costs: an unreviewed risky
call costs ``--cost-fn``, a needless review ``--cost-fp``) and interrupts on yes. LangChain
runs ``when`` again on resume; the predicate answers from its cache (and seeds its
sampling from the call), so the reviewer's answer applies to the same decision. The
reviewer here is scripted: it rejects every call it is shown.

    python examples/hitl.py --base-url http://127.0.0.1:8000/v1 --model MODEL
"""

from __future__ import annotations

import argparse
import sys

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware, ModelCallLimitMiddleware
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from taskcal_agents.decision import SamplingOptions, tool_decision
from taskcal_agents.langchain import (
    HITL_QUESTION_ID,
    TaskCalibrationMiddleware,
    hitl_when,
    risk_classifier,
)
from taskcal_agents.serving import BASE_URL_ENV, MODEL_ENV, connect, server_from_env


@tool
def delete_file(path: str) -> str:
    """Delete a file on the server."""
    return f"(demo) would have deleted {path}"


REQUESTS = (
    "Delete the file /etc/passwd.",
    "Delete the file /tmp/scratch.txt, I no longer need it.",
)


def main(
    base_url: str,
    model: str,
    *,
    n_samples: int = 8,
    max_tokens: int = 64,
    cost_fn: float = 20.0,
    cost_fp: float = 1.0,
    limit: int | None = None,
) -> int:
    llm = ChatOpenAI(
        base_url=base_url, model=model, api_key="EMPTY", max_tokens=max_tokens, timeout=300
    )
    judge = ChatOpenAI(base_url=base_url, model=model, api_key="EMPTY", max_tokens=6, timeout=300)
    classifier = risk_classifier(
        judge,
        cost_false_negative=cost_fn,
        cost_false_positive=cost_fp,
        question_id=HITL_QUESTION_ID,
        n_samples=n_samples,
    )
    gate = hitl_when(classifier)
    review = {"allowed_decisions": ["approve", "reject"], "when": gate}
    agent = create_agent(
        llm,
        tools=[delete_file],
        system_prompt="You are a helpful assistant. Use the tools when they help.",
        middleware=[
            ModelCallLimitMiddleware(run_limit=2, exit_behavior="end"),
            TaskCalibrationMiddleware(
                task=tool_decision(tool_names=["delete_file"]),
                options=SamplingOptions(n_samples=n_samples),
            ),
            HumanInTheLoopMiddleware(interrupt_on={"delete_file": review}),
        ],
        checkpointer=InMemorySaver(),
    )
    for i, request in enumerate(REQUESTS[:limit]):
        config = {"configurable": {"thread_id": f"hitl-example-{i}"}}
        print(f"\nuser: {request}")
        result = agent.invoke({"messages": [("user", request)]}, config)
        print(f"  decision: {result['taskcal_decisions'][-1]['action']}")
        if "__interrupt__" in result:
            for action in result["__interrupt__"][0].value["action_requests"]:
                print(f"  paused for review: {action['name']}({action['args']})")
            sampled = gate.n_sampled
            print("  reviewer: reject")
            requests = result["__interrupt__"][0].value["action_requests"]
            reject = {"type": "reject", "message": "Not without a ticket."}
            resume = {"decisions": [reject for _ in requests]}  # one per reviewed call
            result = agent.invoke(Command(resume=resume), config)
            print(
                f"  resumed: the predicate re-ran from its cache "
                f"(decisions sampled on resume: {gate.n_sampled - sampled})"
            )
        else:
            print("  no review needed (or no tool call)")
        for message in result["messages"][1:]:
            if message.type == "ai" and message.tool_calls:
                for call in message.tool_calls:
                    print(f"  ai -> {call['name']}({call['args']})")
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
    parser.add_argument("--cost-fn", type=float, default=20.0, help="risky call not reviewed")
    parser.add_argument("--cost-fp", type=float, default=1.0, help="needless review")
    parser.add_argument("--limit", type=int, default=None, help="only the first LIMIT requests")
    args = parser.parse_args(argv)
    with connect(*server_from_env(args.base_url, args.model)) as (base_url, model):
        return main(
            base_url, model, n_samples=args.n_samples, max_tokens=args.max_tokens,
            cost_fn=args.cost_fn, cost_fp=args.cost_fp, limit=args.limit,
        )  # fmt: skip


if __name__ == "__main__":
    sys.exit(cli())
