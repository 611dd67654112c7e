"""When2Call: what argument grounding sees in a samples file, and the questions it asks.

For a samples file of a tool-decision task (``taskcal sample`` on When2Call), with the task
that grounds its calls (``taskcal data convert when2call --task-out``, or any task with
``grounding``), this prints:

1. per true label, the sampled calls (samples g_T reads as ``tool_call``) and the share
   that is grounded (:mod:`taskcal_agents.parsing._grounding`, through the Decider's own
   :meth:`~taskcal_agents.decision.Decider.ground`);
2. the AUC with which the per-item share of grounded calls, and the plain share of calls,
   separate ``tool_call`` items from ``request_for_info`` items;
3. on the ``request_for_info`` items, how often the question the runtime would ask
   (:meth:`~taskcal_agents.decision.Decider.ask_message`: a sampled question that names a
   missing argument, else one built from the schema) names the item's ``held_out_param``
   (the required argument When2Call deleted from the question), and how often any
   question is built at all.

Run::

    python benchmarks/when2call_grounding.py --samples S.jsonl --task T.yaml [--data D.jsonl]
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import numpy as np

from taskcal_agents.decision import Decider, Task
from taskcal_agents.parsing._grounding import mentions
from taskcal_agents.workflow._data import dataset_items, record_context
from taskcal_agents.workflow._runner import message_from_dict
from taskcal_agents.workflow._store import read_samples


def _auc(pos: list[float], neg: list[float]) -> float:
    """P(score of a positive > score of a negative), ties counted half."""
    a, b = np.asarray(pos)[:, None], np.asarray(neg)[None, :]
    return float(np.mean((a > b) + 0.5 * (a == b)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=Path, required=True)
    ap.add_argument("--task", type=Path, required=True, help="a task with grounding")
    ap.add_argument("--data", type=Path, default=None, help="the dataset (default: header's)")
    args = ap.parse_args()
    task = Task.from_file(args.task)
    if task.grounding is None:
        raise SystemExit(f"task {args.task} has no grounding; use one that grounds its calls.")
    samples = read_samples(args.samples)
    items = dataset_items(samples, args.data)
    decider = Decider(task)
    calls: Counter[tuple[str, bool]] = Counter()
    share: dict[str, list[tuple[float, float]]] = {label: [] for label in task.labels}
    named = asked = built = 0
    n_rfi = 0
    for rid, record in sorted(samples.records.items()):
        messages = [message_from_dict(m) for m in record.get("samples", [])]
        labels = list(record.get("labels") or [])
        if len(labels) != len(messages) or not messages:
            continue
        context = record_context(record, items, source=str(args.samples))
        groundings = decider.ground(messages, context) or []
        truth = str(record["label"])
        n_calls = n_grounded = 0
        for label, g in zip(labels, groundings, strict=True):
            if label == "tool_call":
                n_calls += 1
                n_grounded += g.grounded
                if g.calls:
                    calls[(truth, g.grounded)] += 1
        share[truth].append((n_grounded / len(messages), n_calls / len(messages)))
        if truth == "request_for_info":
            n_rfi += 1
            held = (items[rid].meta or {}).get("held_out_param") if rid in items else None
            message, needed = decider.ask_message(messages, labels, groundings)
            text = str(message.content)
            asked += bool(needed)
            built += text != task.ask_text
            named += bool(held) and mentions(text, str(held))
    print(f"{args.samples}: {len(samples.records)} items, task {task.name!r} {task.grounding}")
    print("\nsampled complete calls by true label:")
    for label in task.labels:
        g, u = calls[(label, True)], calls[(label, False)]
        total = g + u
        rate = f"{g / total:.2f}" if total else "—"
        print(f"  {label:18s} {total:5d} calls, grounded {g:4d} ({rate})")
    pos, neg = share.get("tool_call", []), share.get("request_for_info", [])
    if pos and neg:
        print(
            "\nAUC tool_call vs request_for_info items: grounded-call share "
            f"{_auc([p[0] for p in pos], [n[0] for n in neg]):.3f}, call share "
            f"{_auc([p[1] for p in pos], [n[1] for n in neg]):.3f}"
        )
    if n_rfi:
        print(
            f"\nrequest_for_info items: {n_rfi}; the ask message names the held-out parameter "
            f"on {named} ({named / n_rfi:.0%}); it asks for named arguments on {asked} "
            f"({asked / n_rfi:.0%}); it is not the generic ask_text on {built} "
            f"({built / n_rfi:.0%})."
        )


if __name__ == "__main__":
    main()
