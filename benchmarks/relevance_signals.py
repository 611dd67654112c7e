"""Each relevance signal alone: how well it tells ``cannot_answer`` from the other labels.

    python benchmarks/relevance_signals.py runs/q05.bfcl.dev.samples.jsonl [more files ...]

For every samples file of the tool decision (``taskcal sample`` output), per item: the
relevance features as the calibrator gets them (the library's own
:func:`taskcal_agents.decision._decider.item_relevance` on the stored request, tools and
samples), and for comparison the
raw belief's ``cannot_answer`` and ``tool_call`` shares. Printed: the AUC of each against
``cannot_answer`` (a signal of "no tool fits" scores high when it is high, so low-valued
signals such as the lexical fit are scored negated), and the AUC of each against
``request_for_info`` among the items where a tool fits (what tells a missing argument apart).
Read the development split, not the locked test split.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

from taskcal_agents.decision import GroundingSpec, tool_decision
from taskcal_agents.decision._decider import item_relevance
from taskcal_agents.parsing import GroundingContext
from taskcal_agents.parsing._relevance import RELEVANCE_FEATURES
from taskcal_agents.workflow._runner import message_from_dict

TASK = tool_decision(grounding=GroundingSpec(relevance=True))
"""Any task that reads the relevance features: the features do not depend on its costs."""

NEGATED = {"lexical_fit", "call_agreement"}  # high: a tool fits (and the calls agree)


def rows(path: Path) -> tuple[list[str], np.ndarray, list[str]]:
    names = [*RELEVANCE_FEATURES, "p_cannot_answer", "p_tool_call"]
    labels, table = [], []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            record = json.loads(line)
            if record.get("type") != "record" or record.get("label") is None:
                continue
            samples = [message_from_dict(s) for s in record["samples"]]
            parsed = record["labels"]
            context = GroundingContext(record.get("tools") or [], record["messages"])
            features = item_relevance(TASK, samples, parsed, context)
            assert features is not None
            n = max(len(parsed), 1)
            shares = [sum(x == k for x in parsed) / n for k in ("cannot_answer", "tool_call")]
            table.append([*features, *shares])
            labels.append(record["label"])
    return names, np.asarray(table, dtype=float), labels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("samples", type=Path, nargs="+")
    args = parser.parse_args()
    for path in args.samples:
        names, X, labels = rows(path)
        y = np.array([label == "cannot_answer" for label in labels])
        fits = np.array([label != "cannot_answer" for label in labels])
        ask = np.array([label == "request_for_info" for label in labels])[fits]
        print(f"{path}: {len(labels)} items, {int(y.sum())} cannot_answer")
        print(f"  {'signal':20s} {'AUC cannot_answer':>18s} {'AUC ask | fits':>15s} {'mean':>6s}")
        for j, name in enumerate(names):
            score = -X[:, j] if name in NEGATED else X[:, j]
            auc = roc_auc_score(y, score) if 0 < y.sum() < len(y) else float("nan")
            auc_ask = roc_auc_score(ask, X[fits, j]) if 0 < ask.sum() < len(ask) else float("nan")
            print(f"  {name:20s} {auc:18.3f} {auc_ask:15.3f} {X[:, j].mean():6.3f}")


if __name__ == "__main__":
    main()
