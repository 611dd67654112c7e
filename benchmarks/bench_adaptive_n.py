"""Adaptive N replayed on recorded N = 16 samples: samples saved vs decisions changed.

For each item of a samples file (``taskcal sample --n 16``), the recorded samples are
taken in their stored order as if drawn in rounds (4, 8, 16), the stopping rule of
:mod:`taskcal_agents.decision.adaptive` decides after each round whether to stop, and the decision
at the stop is compared with the decision on all 16 samples. Both decisions are the
runtime's (:meth:`Decider.decide` on the messages) with an honest calibrator: Dirichlet
calibration (the workflow's default, ODIR with inner CV) cross-fitted on 5 stratified
folds of the same file by the workflow's own code (``eval_arrays``, ``stratified_folds``,
``calibrator_inputs``, ``crossfit_calibrators`` on the served items), so an item is never
decided by a map fitted on it (``--calibrator raw``: MBR on the raw belief). No server
is needed.

Printed per ε: mean samples per decision, the share of decisions identical to full-N MBR,
and the mean realised cost (against the item's label) of the adaptive decision minus the
full-N one, with its paired standard error (positive = adaptive N costs more).

Run: .venv/bin/python benchmarks/bench_adaptive_n.py runs/when2call.n16.samples.jsonl ...
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from taskcal_agents.decision.adaptive import AdaptiveSampling, stop_check_messages
from taskcal_agents.decision.decider import Decider
from taskcal_agents.workflow import load_eval_arrays
from taskcal_agents.workflow._calibrator_specs import (
    default_factory,
)
from taskcal_agents.workflow._data import dataset_items, record_context
from taskcal_agents.workflow._evaluate import (
    calibrator_inputs,
    crossfit_calibrators,
    paired_difference,
    stratified_folds,
)
from taskcal_agents.workflow._runner import message_from_dict

EPSILONS = (0.001, 0.005, 0.01, 0.02, 0.05)


def replay(
    path: Path,
    *,
    n_max: int,
    folds: int,
    calibrator: str,
    first: int,
    task_path: Path | None = None,
    data_path: Path | None = None,
) -> dict:
    """Per item: the rule's estimate after each round and the decision at each prefix."""
    task, samples, data = load_eval_arrays(path, task_path, data=data_path)
    items = None
    if task.grounding is not None and data_path is not None:
        items = dataset_items(samples, data_path)
    fold = stratified_folds(data.y, folds, seed=0)
    if calibrator == "raw":  # MBR on the raw belief: no calibrator
        fitted: dict[int, Any] = dict.fromkeys(range(folds))
    else:
        X, make, _ = calibrator_inputs(data, default_factory(calibrator))
        fitted = crossfit_calibrators(X, data.y, fold, make, fit_mask=data.served)
    rounds = AdaptiveSampling(epsilon=0.5, first=first).rounds(n_max)
    cost = task.cost_matrix()
    probs = np.ones((data.n, len(rounds)))  # P(change) after each round (0 at N)
    costs = np.zeros((data.n, len(rounds)))  # realised cost of the decision at each prefix
    actions = np.zeros((data.n, len(rounds)), dtype=int)
    for i, item_id in enumerate(data.ids):
        record = samples.records[item_id]
        messages = [message_from_dict(m) for m in record["samples"]]
        if len(messages) < n_max:
            msg = f"{path}: item {item_id!r} has {len(messages)} samples, fewer than {n_max}."
            raise SystemExit(msg)
        names = record.get("tool_names")
        context = (
            None
            if task.grounding is None
            else record_context(record, items or dataset_items(samples), source=str(path))
        )
        decider = Decider(task, fitted[int(fold[i])], alpha=0.1)
        rule = AdaptiveSampling(epsilon=0.5, first=first)
        for r, m in enumerate(rounds):
            prefix = messages[:m]
            action = decider.decide(prefix, tool_names=names, context=context).action
            actions[i, r] = task.action_index(action)
            costs[i, r] = cost[data.y[i], actions[i, r]]
            if m < n_max:
                check = stop_check_messages(
                    decider, prefix, n_max, rule, tool_names=names, context=context
                )
                probs[i, r] = check.change_probability
            else:
                probs[i, r] = 0.0
    return {"task": task.name, "n": data.n, "rounds": rounds, "p": probs, "cost": costs,
            "actions": actions, "action_names": task.action_list}  # fmt: skip


def table(result: dict, epsilons: tuple[float, ...]) -> list[tuple]:
    """Per ε: mean samples, share identical to full N, cost difference and its paired SE."""
    rounds, p, cost, actions = result["rounds"], result["p"], result["cost"], result["actions"]
    rows = []
    for eps in epsilons:
        stop = np.argmax(p < eps, axis=1)  # the first round whose estimate is below ε
        idx = np.arange(p.shape[0])
        n_used = np.asarray(rounds)[stop]
        same = actions[idx, stop] == actions[:, -1]
        diff, se = paired_difference(cost[idx, stop], cost[:, -1])
        rows.append((eps, float(n_used.mean()), float(same.mean()), diff, se or 0.0))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("samples", nargs="+", type=Path, help="samples files with N >= 16")
    parser.add_argument("--n", type=int, default=16, help="N, the full draw")
    parser.add_argument("--first", type=int, default=4, help="samples in the first round")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument(
        "--calibrator", default="dirichlet", help="a workflow calibrator spec, or raw (none)"
    )
    parser.add_argument("--task", type=Path, default=None, help="task (default: the header's)")
    parser.add_argument("--data", type=Path, default=None, help="dataset, for grounding")
    args = parser.parse_args()
    for path in args.samples:
        start = time.perf_counter()
        result = replay(
            path,
            n_max=args.n,
            folds=args.folds,
            calibrator=args.calibrator,
            first=args.first,
            task_path=args.task,
            data_path=args.data,
        )
        how = "no calibrator" if args.calibrator == "raw" else f"{args.calibrator} cross-fitted"
        print(
            f"\n{path.name}: task {result['task']}, {result['n']} items, rounds "
            f"{result['rounds']}, {how} on {args.folds} folds "
            f"({time.perf_counter() - start:.0f} s)"
        )
        full = np.bincount(result["actions"][:, -1], minlength=len(result["action_names"]))
        shown = ", ".join(f"{a} {c}" for a, c in zip(result["action_names"], full, strict=True))
        print(
            f"full-N actions: {shown}; mean cost at N={args.n}: {result['cost'][:, -1].mean():.4f}"
        )
        print(
            f"| ε | mean samples | saved | identical to N={args.n} | Δ cost vs N={args.n} "
            "(± paired SE) |"
        )
        print("|---|---|---|---|---|")
        for eps, n_used, same, diff, se in table(result, EPSILONS):
            print(
                f"| {eps:g} | {n_used:.2f} | {1 - n_used / args.n:.0%} | {same:.1%} | "
                f"{diff:+.4f} ± {se:.4f} |"
            )


if __name__ == "__main__":
    main()
