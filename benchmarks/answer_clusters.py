"""Agreement of the lexical answer equivalence with hand labels on real answer pairs.

The pairs (tests/data/answer_pairs/pairs.jsonl, see its README) are answers to NQ-open
questions: SmolLM2-135M-Instruct's sampled and greedy completions, the dataset's reference
answers and a few answers written by the labeller, each pair labelled by hand as the same
answer to the question or not. This script scores
:func:`taskcal_agents.answer_clusters.answers_equivalent` (normalisation, numbers, dates and
containment; no model) against those labels: accuracy, and precision and recall of "same",
overall, per tag, and with and without the question (which blocks containment on words that
only repeat the question). It prints the disagreements with --show-errors.

With --base-url and --model it also scores the clustering rule with the served model as the
judge: a pair is the same when it is lexically equivalent or each answer entails the other
(:func:`taskcal_agents.answer_clusters.entailment_judge`, yes/no under a choice constraint;
at most two greedy requests per pair).

Run: PYTHONPATH=. .venv/bin/python benchmarks/answer_clusters.py [--show-errors]
     [--base-url http://127.0.0.1:8000/v1 --model NAME]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from taskcal_agents.answer_clusters import answers_equivalent, entailment_judge

PAIRS = Path(__file__).resolve().parents[1] / "tests" / "data" / "answer_pairs" / "pairs.jsonl"
PAIRS_FORMAT = "taskcal.answer_pairs"


def load_pairs(path: Path = PAIRS) -> list[dict[str, Any]]:
    """The labelled pairs (the header line checked and dropped)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    if header.get("format") != PAIRS_FORMAT or header.get("format_version") != 1:
        msg = f"{path}: expected a {PAIRS_FORMAT!r} version 1 header, got {header!r}."
        raise ValueError(msg)
    pairs = [json.loads(line) for line in lines[1:] if line.strip()]
    if len(pairs) != header.get("count"):
        msg = f"{path}: header says {header.get('count')!r} pairs, the file holds {len(pairs)}."
        raise ValueError(msg)
    return pairs


def agreement(predicted: Sequence[bool], labels: Sequence[bool]) -> dict[str, float | int]:
    """Count, accuracy, and precision/recall of "same" (NaN when undefined)."""
    tp = sum(p and y for p, y in zip(predicted, labels, strict=True))
    fp = sum(p and not y for p, y in zip(predicted, labels, strict=True))
    fn = sum(y and not p for p, y in zip(predicted, labels, strict=True))
    n = len(labels)
    return {
        "n": n,
        "same": sum(labels),
        "accuracy": (n - fp - fn) / n if n else float("nan"),
        "precision": tp / (tp + fp) if tp + fp else float("nan"),
        "recall": tp / (tp + fn) if tp + fn else float("nan"),
    }


def predict(
    pairs: Sequence[dict[str, Any]],
    *,
    with_question: bool,
    judge: Callable[[str], Callable[[str, str], bool]] | None = None,
) -> list[bool]:
    """``answers_equivalent`` on every pair, or'ed with ``judge(question)`` both ways."""
    predicted = []
    for p in pairs:
        same = answers_equivalent(p["a"], p["b"], question=p["question"] if with_question else None)
        if not same and judge is not None:
            entails = judge(p["question"])
            same = entails(p["a"], p["b"]) and entails(p["b"], p["a"])
        predicted.append(same)
    return predicted


def _row(name: str, scores: dict[str, float | int]) -> str:
    return (
        f"{name:<28} {scores['n']:>4} {scores['same']:>5} {scores['accuracy']:>9.3f} "
        f"{scores['precision']:>10.3f} {scores['recall']:>7.3f}"
    )


def main() -> None:
    """Print the agreement table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show-errors", action="store_true", help="list the disagreements")
    parser.add_argument("--base-url", help="OpenAI-compatible server for the judge (.../v1)")
    parser.add_argument("--model", help="the served model name (with --base-url)")
    args = parser.parse_args()
    if args.base_url and not args.model:
        parser.error("--base-url needs --model, the served model name")
    pairs = load_pairs()
    labels = [bool(p["same"]) for p in pairs]
    with_q = predict(pairs, with_question=True)
    without_q = predict(pairs, with_question=False)
    real = [i for i, p in enumerate(pairs) if "constructed" not in p["tags"]]
    print(f"{'subset':<28} {'n':>4} {'same':>5} {'accuracy':>9} {'precision':>10} {'recall':>7}")
    print(_row("all, with question", agreement(with_q, labels)))
    print(_row("all, without question", agreement(without_q, labels)))
    print(
        _row(
            "real answers only",
            agreement([with_q[i] for i in real], [labels[i] for i in real]),
        )
    )
    if args.base_url:
        from taskcal_agents.sampling.openai import OpenAISampler

        with OpenAISampler(args.base_url, args.model) as sampler:
            judged = predict(
                pairs,
                with_question=True,
                judge=lambda question: entailment_judge(sampler, question=question),
            )
        print(_row("all, with served judge", agreement(judged, labels)))
        print(
            _row(
                "real, with served judge",
                agreement([judged[i] for i in real], [labels[i] for i in real]),
            )
        )
    tags = sorted({tag for p in pairs for tag in p["tags"]})
    for tag in tags:
        idx = [i for i, p in enumerate(pairs) if tag in p["tags"]]
        print(_row(f"tag {tag}", agreement([with_q[i] for i in idx], [labels[i] for i in idx])))
    if args.show_errors:
        print("\ndisagreements (with question):")
        for p, pred, label in zip(pairs, with_q, labels, strict=True):
            if pred != label:
                print(f"  {p['id']} label={label} predicted={pred} {p['a']!r} | {p['b']!r}")


if __name__ == "__main__":
    main()
