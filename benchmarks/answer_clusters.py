"""Agreement of the lexical answer equivalence with hand labels on real answer pairs.

The pairs (tests/data/answer_pairs/pairs.jsonl, see its README) are answers to NQ-open
questions: SmolLM2-135M-Instruct's sampled and greedy completions, the dataset's reference
answers and a few answers written by the labeller, each pair labelled by hand as the same
answer to the question or not. The pairs file stores no dataset text: the questions and the
reference answers are read from NQ-open in the shared data folder (``$TASKCAL_SHARED_DATA``,
else ``../shared/data``; or --source) and checked against the hashes the file stores.
This script scores
:func:`taskcal_agents.parsing._answer_clusters.answers_equivalent` (normalisation, numbers,
dates and containment; no model) against those labels: accuracy, and precision and recall of "same",
overall, per tag, and with and without the question (which blocks containment on words that
only repeat the question). It prints the disagreements with --show-errors.

With --base-url and --model it also scores the clustering rule with the served model as the
judge: a pair is the same when it is lexically equivalent or each answer entails the other
(:func:`taskcal_agents.parsing._answer_clusters.entailment_judge`, yes/no under a choice constraint;
at most two greedy requests per pair).

Run: PYTHONPATH=. .venv/bin/python benchmarks/answer_clusters.py [--show-errors]
     [--source NQ-open.dev.jsonl] [--base-url http://127.0.0.1:8000/v1 --model NAME]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from taskcal_agents.datasets import CONVERTERS, convert
from taskcal_agents.datasets._shared_data import shared_data_dir
from taskcal_agents.errors import DataFileError
from taskcal_agents.parsing._answer_clusters import answers_equivalent, entailment_judge

PAIRS = Path(__file__).resolve().parents[1] / "tests" / "data" / "answer_pairs" / "pairs.jsonl"
PAIRS_FORMAT = "taskcal.answer_pairs"
PAIRS_FORMAT_VERSION = 2
HASH_CHARS = 12


def text_sha256(text: str) -> str:
    """The first :data:`HASH_CHARS` hex digits of the SHA-256 of *text* (UTF-8)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:HASH_CHARS]


def load_pairs(
    path: Path = PAIRS, *, source: str | os.PathLike[str] | None = None
) -> list[dict[str, Any]]:
    """The labelled pairs, with questions and reference answers read from the data set.

    The pairs file stores no dataset text: each pair names its item by the id the converter
    assigns (``nq-open-0020``) and the SHA-256 prefix of its question, and a reference answer
    by ``{"reference": K, "sha256": PREFIX}`` (the K-th reference of the item). This reads the
    data set, checks every hash and returns the pairs with ``question``, ``a`` and ``b`` as
    text.

    Args:
        path: The pairs file.
        source: The data set file; ``None`` uses its place in the shared data folder
            (``$TASKCAL_SHARED_DATA``, else ``../shared/data``).

    Returns:
        The pairs in file order (the header dropped).

    Raises:
        DataFileError: The data set file is missing, or the pairs file is malformed or does
            not match the data set (another version of it).
    """
    lines = path.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0]) if lines else None
    if (
        not isinstance(header, dict)
        or header.get("format") != PAIRS_FORMAT
        or header.get("format_version") != PAIRS_FORMAT_VERSION
        or header.get("dataset") not in CONVERTERS
    ):
        msg = (
            f"expected a {PAIRS_FORMAT!r} version {PAIRS_FORMAT_VERSION} header naming a "
            f"dataset of {sorted(CONVERTERS)}, got {header!r}."
        )
        raise DataFileError(msg, path=str(path), line=1)
    pairs = [(n, json.loads(line)) for n, line in enumerate(lines[1:], start=2) if line.strip()]
    if len(pairs) != header.get("count"):
        msg = f"header says {header.get('count')!r} pairs, the file holds {len(pairs)}."
        raise DataFileError(msg, path=str(path), line=1)
    dataset = header["dataset"]
    data_path = (
        Path(source)
        if source is not None
        else shared_data_dir() / CONVERTERS[dataset].default_source
    )
    wanted = f"{dataset} data ({header.get('source', 'source not named')})"
    items = {item.id: item for item in convert(dataset, data_path)}
    resolved = []
    for line, pair in pairs:
        where = f"pair {pair.get('id')!r} (item {pair.get('item')!r})"
        item = items.get(pair.get("item"))
        if item is None:
            msg = (
                f"{where}: {data_path} has no such item ({len(items)} items); the pairs need "
                f"the {wanted}."
            )
            raise DataFileError(msg, path=str(path), line=line)
        question = item.meta["question"]
        if text_sha256(question) != pair.get("question_sha256"):
            msg = (
                f"{where}: the question in {data_path} has SHA-256 prefix "
                f"{text_sha256(question)!r}, the pair expects {pair.get('question_sha256')!r}; "
                f"the pairs need the {wanted}."
            )
            raise DataFileError(msg, path=str(path), line=line)
        texts = {}
        for side in ("a", "b"):
            answer = pair.get(side)
            if isinstance(answer, str):
                texts[side] = answer
                continue
            k = answer.get("reference") if isinstance(answer, dict) else None
            if not isinstance(k, int) or isinstance(k, bool):
                msg = (
                    f"{where}: {side} must be an answer (a string) or "
                    f"{{'reference': K, 'sha256': PREFIX}}, got {answer!r}."
                )
                raise DataFileError(msg, path=str(path), line=line)
            refs = item.meta["references"]
            found = text_sha256(refs[k]) if 0 <= k < len(refs) else None
            if found is None or found != answer.get("sha256"):
                msg = (
                    f"{where}: {side} is reference {k} with SHA-256 prefix "
                    f"{answer.get('sha256')!r}, but in {data_path} the item has {len(refs)} "
                    f"references and reference {k} has prefix {found!r}; the pairs need the "
                    f"{wanted}."
                )
                raise DataFileError(msg, path=str(path), line=line)
            texts[side] = refs[k]
        resolved.append({**pair, "question": question, **texts})
    return resolved


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
    parser.add_argument(
        "--source", help="NQ-open.dev.jsonl (default: its place in $TASKCAL_SHARED_DATA)"
    )
    args = parser.parse_args()
    if args.base_url and not args.model:
        parser.error("--base-url needs --model, the served model name")
    try:
        pairs = load_pairs(source=args.source)
    except DataFileError as exc:
        sys.exit(f"answer_clusters: {exc}")
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
        from taskcal_agents.sampling import OpenAISampler

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
