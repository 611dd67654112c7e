"""Confirmations and reviews in a LangGraph run with a checkpointer: approve, edit, reject.

``delete_file`` is marked irreversible (its tag ``effect:irreversible``), so the calibration
middleware sends a call to it unasked only when q(tool_call) clears about 0.97; short of that
it confirms the exact call, which in a run with a checkpointer is LangChain's
human-in-the-loop interrupt (``HumanInTheLoopMiddleware``'s request format). A call the
middleware does send still passes ``HumanInTheLoopMiddleware``, whose ``when`` predicate,
``hitl_when``, asks our decision model whether a person should review it (a yes/no question
with the deployment's costs: an unreviewed risky call costs ``--cost-fn``, a needless review
``--cost-fp``); LangChain runs ``when`` again on resume and the predicate answers from its
cache. The reviewer here is scripted: it rejects the first request's call, approves the
second's and edits the third's path.

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
def _delete_file(path: str) -> str:
    """Delete a file on the server."""
    return f"(demo) would have deleted {path}"


# What the tool does, as MCP annotations or a tag say it: a deletion cannot be taken back.
delete_file = _delete_file.model_copy(
    update={"name": "delete_file", "tags": ["effect:irreversible"]}
)

REQUESTS = (  # each with the scripted reviewer's answer to a pause
    ("Delete the file /etc/passwd.", {"type": "reject", "message": "Not without a ticket."}),
    ("Delete the file /tmp/scratch.txt, I no longer need it.", {"type": "approve"}),
    (
        "Delete the old log file /tmp/app.log.1.",
        {
            "type": "edit",
            "edited_action": {"name": "delete_file", "args": {"path": "/tmp/app.log.2"}},
        },
    ),
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
    review = {"allowed_decisions": ["approve", "edit", "reject"], "when": gate}
    agent = create_agent(
        llm,
        tools=[delete_file],
        system_prompt="You are a helpful assistant. Use the tools when they help.",
        middleware=[
            ModelCallLimitMiddleware(run_limit=2, exit_behavior="end"),
            TaskCalibrationMiddleware(
                task=tool_decision(tool_names=["delete_file"]),  # effect-aware: confirms
                options=SamplingOptions(n_samples=n_samples),
            ),
            HumanInTheLoopMiddleware(interrupt_on={"delete_file": review}),
        ],
        checkpointer=InMemorySaver(),
    )
    for i, (request, answer) in enumerate(REQUESTS[:limit]):
        config = {"configurable": {"thread_id": f"hitl-example-{i}"}}
        print(f"\nuser: {request}")
        result = agent.invoke({"messages": [("user", request)]}, config)
        print(f"  decision: {result['taskcal_decisions'][-1]['action']}")
        if "__interrupt__" not in result:
            print("  no review needed (or no tool call)")
        while "__interrupt__" in result:
            requests = result["__interrupt__"][0].value["action_requests"]
            # The middleware's confirmation pauses on its own decision (confirm, not a call
            # it sent); HumanInTheLoopMiddleware pauses on a call the middleware sent.
            confirming = result["taskcal_decisions"][-1]["action"] != "tool_call"
            for action in requests:
                kind = "confirmation" if confirming else "paused for review"
                print(f"  {kind}: {action['name']}({action['args']})")
                print(f"    {action.get('description', '')[:160]!r}")
            sampled = gate.n_sampled
            print(f"  reviewer: {answer['type']}")
            resume = {"decisions": [answer for _ in requests]}  # one per reviewed call
            result = agent.invoke(Command(resume=resume), config)
            if not confirming:
                print(
                    f"  resumed: the predicate re-ran from its cache "
                    f"(decisions sampled on resume: {gate.n_sampled - sampled})"
                )
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
