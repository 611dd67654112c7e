"""A 1–5 rating decided under L1 cost: the calibrated median, not the most frequent vote.

``rating(k=5)`` has cost C[true, chosen] = |true − chosen|, so the minimum-expected-cost
rating is a median of the calibrated distribution. With votes such as {1: 3, 5: 4, 4: 1}
the mode is 5 but the MBR rating is 4: it hedges between the two camps.

Run against a running OpenAI-compatible server, or let the script start the CPU default::

    python examples/rating_l1.py --base-url http://127.0.0.1:8000/v1
    python examples/rating_l1.py            # starts VLLMServer()
"""

from __future__ import annotations

import argparse
import sys

from langchain_openai import ChatOpenAI

from taskcal_agents import TaskCalibratedRunnable
from taskcal_agents.decision import rating
from taskcal_agents.serving import BASE_URL_ENV, MODEL_ENV, connect, server_from_env

REVIEWS = (
    "Absolutely loved it: fast delivery, great quality, would buy again!",
    "It broke after two days and support never answered. Terrible.",
    "Fine I guess. Does the job, nothing special.",
)

# A short few-shot prompt: the 135M default model follows examples better than rules.
FEW_SHOT = [
    (
        "system",
        "Rate each customer review from 1 (very negative) to 5 (very positive). "
        "Reply with one digit.",
    ),
    ("human", "The worst purchase I ever made."),
    ("ai", "1"),
    ("human", "Good value for the price, works well."),
    ("ai", "4"),
    ("human", "It's okay, nothing special."),
    ("ai", "3"),
]


def main(
    base_url: str, model: str, *, n_samples: int = 8, max_tokens: int = 4, limit: int | None = None
) -> int:
    llm = ChatOpenAI(
        base_url=base_url, model=model, api_key="EMPTY", max_tokens=max_tokens, timeout=300
    )
    task = rating(k=5)  # labels "1".."5", cost |i - j|
    rater = TaskCalibratedRunnable(llm, task, n_samples=n_samples, temperature=1.0)
    reviews = REVIEWS[:limit]
    decisions = rater.batch([[*FEW_SHOT, ("human", review)] for review in reviews])
    for review, decision in zip(reviews, decisions, strict=True):
        counts = {k: int(v) for k, v in decision.counts.items() if v}
        mode = max(decision.calibrated, key=decision.calibrated.__getitem__)
        costs = ", ".join(f"{a}:{c:.2f}" for a, c in decision.expected_cost.items())
        print(f"{review}\n  votes={counts} unparsed={decision.n_unparsed}")
        print(f"  mode={mode}  MBR rating={decision.action}  E[|error|]: {costs}")
        if decision.fallback:
            print(f"  fallback: {decision.fallback_reason}")
    return 0


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", help=f"server URL (default ${BASE_URL_ENV})")
    parser.add_argument("--model", help=f"served model name (default ${MODEL_ENV})")
    parser.add_argument("--n-samples", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=4)
    parser.add_argument("--limit", type=int, default=None, help="only the first LIMIT reviews")
    args = parser.parse_args(argv)
    with connect(*server_from_env(args.base_url, args.model)) as (base_url, model):
        return main(
            base_url, model, n_samples=args.n_samples, max_tokens=args.max_tokens, limit=args.limit
        )


if __name__ == "__main__":
    sys.exit(cli())
