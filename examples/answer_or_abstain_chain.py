"""An LCEL chain that answers a question or abstains, by calibrated expected cost.

``prompt | TaskCalibratedRunnable(llm, answer_or_abstain(...)) | render`` samples N
answers, labels each ``answer`` or ``abstain`` ("I don't know", "not sure", ...), and
answers only when the expected cost of answering (a wrong answer costs
``wrong_answer_cost``) is below that of abstaining (``abstain_cost``).

Run against a running OpenAI-compatible server, or let the script start the CPU default::

    python examples/answer_or_abstain_chain.py --base-url http://127.0.0.1:8000/v1
    python examples/answer_or_abstain_chain.py            # starts VLLMServer()
"""

from __future__ import annotations

import argparse
import sys

from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda
from langchain_openai import ChatOpenAI

from taskcal_agents import Decision, TaskCalibratedRunnable
from taskcal_agents.decision import answer_or_abstain
from taskcal_agents.serving import BASE_URL_ENV, MODEL_ENV, connect, server_from_env

QUESTIONS = (
    "What is the capital of France?",
    "What was the name of the cat of the 14th mayor of Lyon?",
    "How many legs does a spider have?",
)

PROMPT = ChatPromptTemplate.from_messages(
    [
        (
            "system",
            "Answer the question in one short sentence. If you do not know the answer, "
            "say: I don't know.",
        ),
        ("human", "{question}"),
    ]
)


def render(decision: Decision) -> str:
    """The chain's final step: the answer, or the abstention, with its evidence."""
    text = decision.message.content if decision.message is not None else "(no answer)"
    costs = ", ".join(f"{a}={c:.2f}" for a, c in decision.expected_cost.items())
    return (
        f"{decision.action:>7} | p(answer)={decision.calibrated['answer']:.2f} "
        f"E[cost]: {costs} | {str(text).strip()[:120]!r}"
    )


def main(
    base_url: str,
    model: str,
    *,
    n_samples: int = 8,
    max_tokens: int = 32,
    limit: int | None = None,
    calibrator: str | None = None,
) -> int:
    llm = ChatOpenAI(
        base_url=base_url, model=model, api_key="EMPTY", max_tokens=max_tokens, timeout=300
    )
    task = answer_or_abstain(wrong_answer_cost=4.0, abstain_cost=1.0)
    # A calibrator fitted with `taskcal fit` on labelled questions corrects the model's
    # overconfidence; without one the raw (smoothed) belief is used.
    # The artefact's path is enough: its labels are checked and its α is used.
    decider = TaskCalibratedRunnable(
        llm, task, calibrator=calibrator or None, n_samples=n_samples, temperature=1.0
    )
    chain = PROMPT | decider | RunnableLambda(render)
    questions = QUESTIONS[:limit]
    # batch: all questions' samples are drawn concurrently, at most 4 requests at a time
    lines = chain.batch([{"question": q} for q in questions], {"max_concurrency": 4})
    for question, line in zip(questions, lines, strict=True):
        print(f"{question}\n  {line}")
    return 0


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", help=f"server URL (default ${BASE_URL_ENV})")
    parser.add_argument("--model", help=f"served model name (default ${MODEL_ENV})")
    parser.add_argument("--n-samples", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--limit", type=int, default=None, help="only the first LIMIT questions")
    parser.add_argument("--calibrator", default=None, help="calibrator artefact (taskcal fit)")
    args = parser.parse_args(argv)
    with connect(*server_from_env(args.base_url, args.model)) as (base_url, model):
        return main(
            base_url,
            model,
            n_samples=args.n_samples,
            max_tokens=args.max_tokens,
            limit=args.limit,
            calibrator=args.calibrator,
        )


if __name__ == "__main__":
    sys.exit(cli())
