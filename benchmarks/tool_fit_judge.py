"""Relevance candidate (c): a one-pass judge of whether any offered tool fits the request.

    python benchmarks/tool_fit_judge.py prepare runs/bfcl.dev.jsonl runs/judge.dev
    taskcal sample --task runs/judge.dev.task.yaml --data runs/judge.dev.jsonl \
        --base-url URL --model MODEL --belief one_pass --choices yes,no --no-greedy \
        --out runs/q05.judge.dev.samples.jsonl
    python benchmarks/tool_fit_judge.py auc runs/q05.judge.dev.samples.jsonl

``prepare`` writes, for each tool-decision item, one yes/no question to the served model:
the offered tools (name and description) in the system prompt, "Can one of these tools do
what the user asks?", and the user's request; the label is ``yes`` unless the item's label
is ``cannot_answer``. ``auc`` prints the AUC of the judge's p(no) against
``cannot_answer`` (one forward pass per item, read from ``top_logprobs`` under a choice
constraint by the library's one-pass sampler).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

from taskcal_agents.datasets import DatasetItem, read_dataset
from taskcal_agents.datasets import write_dataset as write_dataset
from taskcal_agents.decision import ParserSpec, Task

JUDGE_PROMPT = (
    "You check whether a request can be served by the tools below.\n\nTools:\n{tools}\n\n"
    "Can one of these tools do what the user asks? Answer yes or no."
)


def _tools(item: DatasetItem) -> str:
    lines = []
    for tool in item.tools:
        function = tool["function"]
        lines.append(f"- {function['name']}: {function.get('description', '')}".strip())
    return "\n".join(lines) or "(none)"


def prepare(data: Path, stem: Path) -> None:
    items = read_dataset(data)
    judged = [
        DatasetItem(
            id=item.id,
            messages=[
                {"role": "system", "content": JUDGE_PROMPT.format(tools=_tools(item))},
                *[m for m in item.messages if m.get("role") == "user"],
            ],
            label="no" if item.label == "cannot_answer" else "yes",
            meta={"tool_label": item.label},
        )
        for item in items
    ]
    data_out, task_out = Path(f"{stem}.jsonl"), Path(f"{stem}.task.yaml")
    write_dataset(judged, data_out)
    Task(
        name="tool_fit_judge",
        labels=["yes", "no"],
        cost=[[0.0, 1.0], [1.0, 0.0]],
        parser=ParserSpec(name="choice", options={"labels": ["yes", "no"]}),
    ).to_file(task_out)
    print(f"wrote {len(judged)} items to {data_out} and the task to {task_out}")


def auc(samples: Path) -> None:
    scores, labels = [], []
    with samples.open(encoding="utf-8") as fh:
        for line in fh:
            record = json.loads(line)
            if record.get("type") != "record" or "probs" not in record:
                continue
            p = np.asarray(record["probs"], dtype=float)
            scores.append(p[1] / p.sum())
            labels.append(record["label"] == "no")
    y = np.asarray(labels)
    print(f"{samples}: {y.size} items, {int(y.sum())} no tool fits")
    print(f"  AUC of the judge's p(no) against cannot_answer: {roc_auc_score(y, scores):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("data", type=Path)
    p.add_argument("stem", type=Path)
    a = sub.add_parser("auc")
    a.add_argument("samples", type=Path)
    args = parser.parse_args()
    if args.command == "prepare":
        prepare(args.data, args.stem)
    else:
        auc(args.samples)


if __name__ == "__main__":
    main()
