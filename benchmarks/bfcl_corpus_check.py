"""Check the BFCL tool-decision corpus: how many requests each rule kept, a random sample of
asks and no-fits to read by hand, and how well the text alone separates the labels.

    python benchmarks/bfcl_corpus_check.py --source bfcl_eval-2026.3.23-py3-none-any.whl \
        [--show 50] [--split dev|test]

The text-only classifier sees only the request and the offered tools' words (no model
samples): TF-IDF of each, their cosine, the request's length and the number of tools, in a
cross-validated logistic regression fitted on ``train``. It reports one-vs-rest AUCs on
``--split`` (default ``dev``; ``test`` once, for the final tables). An AUC far above 0.65
means the built labels can be told apart without the model, and the evidence says little.
"""

from __future__ import annotations

import argparse
import random
import re
from collections import Counter
from pathlib import Path

import numpy as np
from scipy import sparse
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegressionCV
from sklearn.metrics import roc_auc_score

from taskcal_agents.datasets._bfcl import build_corpus
from taskcal_agents.datasets._bfcl_negatives import tool_text
from taskcal_agents.datasets._bfcl_source import read_requests

LABELS = ("tool_call", "request_for_info", "cannot_answer")


def _text_features(items, request_vec, tools_vec):
    requests = [i.messages[-1]["content"] for i in items]
    tools = [tool_text([t["function"] for t in i.tools]) for i in items]
    r = request_vec.transform(requests)
    t = tools_vec.transform(tools)
    joint = request_vec.transform(tools)
    cosine = np.asarray(r.multiply(joint).sum(axis=1)).ravel()
    dense = np.column_stack(
        [
            cosine,
            np.log1p([len(q.split()) for q in requests]),
            np.log1p([len(i.tools) for i in items]),
            [len(re.findall(r"\d", q)) > 0 for q in requests],
        ]
    )
    return sparse.hstack([r, t, sparse.csr_matrix(dense)]).tocsr()


def text_only_auc(items, split: str) -> dict[str, float]:
    train = [i for i in items if i.meta["split"] == "train"]
    held = [i for i in items if i.meta["split"] == split]
    request_vec = TfidfVectorizer(sublinear_tf=True, min_df=2, ngram_range=(1, 2))
    tools_vec = TfidfVectorizer(sublinear_tf=True, min_df=2)
    request_vec.fit([i.messages[-1]["content"] for i in train])
    tools_vec.fit([tool_text([t["function"] for t in i.tools]) for i in train])
    x_train = _text_features(train, request_vec, tools_vec)
    x_held = _text_features(held, request_vec, tools_vec)
    y_train = np.array([LABELS.index(i.label) for i in train])
    y_held = np.array([LABELS.index(i.label) for i in held])
    model = LogisticRegressionCV(Cs=10, cv=5, max_iter=5000, scoring="neg_log_loss")
    model.fit(x_train, y_train)
    proba = model.predict_proba(x_held)
    out = {label: float(roc_auc_score(y_held == k, proba[:, k])) for k, label in enumerate(LABELS)}
    out["macro"] = float(np.mean(list(out.values())))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, required=True)
    parser.add_argument("--show", type=int, default=50, help="asks and no-fits to print")
    parser.add_argument("--split", choices=("dev", "test"), default="dev")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample shown")
    args = parser.parse_args()

    requests = read_requests(args.source)
    items = build_corpus(args.source)
    keys = {re.sub(r"\W+", " ", r.question.lower()).strip() for r in requests}
    print(f"usable requests (one user message, one right call): {len(requests)}")
    print(f"after de-duplication: {len(keys)}")
    print("corpus:", dict(Counter((i.meta["split"], i.label) for i in items)))
    print("categories:", dict(Counter((i.meta["category"], i.label) for i in items)))
    rng = random.Random(args.seed)
    for label, what in (("request_for_info", "removed"), ("cannot_answer", "right_tool")):
        chosen = [i for i in items if i.label == label]
        rng.shuffle(chosen)
        print(f"\n# {args.show} random {label} items")
        for n, item in enumerate(chosen[: args.show], start=1):
            tools = ", ".join(t["function"]["name"] for t in item.tools)
            print(
                f"{n:2d}. [{item.meta[what]!r}] {item.messages[-1]['content']!r} | tools: {tools}"
            )
    aucs = text_only_auc(items, args.split)
    print(f"\ntext-only classifier, one-vs-rest AUC on {args.split}:")
    for label, auc in aucs.items():
        print(f"  {label:18s} {auc:.3f}")


if __name__ == "__main__":
    main()
