"""Risk-controlled decisions on real samples: LTT threshold vs plain MBR vs a naive threshold.

For each recorded samples file (read through the workflow's own loader, beliefs
calibrated by cross-fitting exactly as ``taskcal evaluate`` does: each fold by a map fitted
on the other folds), many random halves: the guard's threshold is chosen on one half and
applied to the other.

- ``mbr``: no guard (λ = 0);
- ``naive``: the most lenient threshold whose empirical risk on the calibration half is
  <= α (no correction: about half the time its true risk is above α);
- ``ltt``: Learn-then-Test at level δ (:func:`taskcal_agents.risk_control.calibrate_risk`;
  when nothing is certified it always guards).

Limitation: the beliefs are cross-fitted once over the whole file and then split, so a
calibration item and a test item are scored by maps fitted partly on each other; the
calibration and test halves are not independent as in a deployment (map fitted on other
data, limit calibrated on held-out items, new items decided). Refitting the map per split
(500 splits, Dirichlet maps with inner cross-validation) was too slow to run here; read
the numbers as a comparison of the three rules on the same beliefs, not as an exact
check of the guarantee (the unit tests check it on sources with known risk).

Columns: the realised risk on the test half (mean over splits, and the share of splits
where it is above α; on a test half of n/2 items this share also counts the test half's
own noise, so it overstates how often the true risk exceeds α — the mean is the cleaner
reading), the coverage (share of test decisions not downgraded), the mean realised cost,
the mean threshold and, for LTT, the share of splits with a certified threshold.

The risk per file: ``tool_call_when_not`` for a task with a ``tool_call`` action,
``answer_wrong`` for answer-or-abstain, ``any_wrong`` for a task with an abstain action
(multiple choice), ``cost`` otherwise (ratings); ``--risk TASK=KIND`` overrides (KIND
without α, e.g. ``stsb=cost``).

Run: .venv/bin/python benchmarks/bench_risk_control.py runs/when2call.n16.samples.jsonl
[more files] [--alphas 0.02 0.05 0.1] [--delta 0.1] [--splits 500] [--calibrator dirichlet]
"""

from __future__ import annotations

import argparse
import math
import time
import warnings
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from taskcal_agents.risk_control import (
    DEFAULT_GRID,
    RiskGuard,
    ltt_select,
    naive_threshold,
    risk_curve,
)
from taskcal_agents.task import Task
from taskcal_agents.workflow import load_eval_arrays
from taskcal_agents.workflow._evaluate import runtime_actions
from taskcal_agents.workflow._fit import crossfit_beliefs


def default_kind(task: Task) -> str:
    """The risk that makes sense for the task (see the module docstring)."""
    actions = task.action_list
    if "tool_call" in actions:
        return "tool_call_when_not"
    if set(actions) == {"answer", "abstain"}:
        return "answer_wrong"
    if task.abstain_action is not None or task.ask_action is not None:
        return "any_wrong"
    return "cost"


def run_file(
    path: Path, kinds: dict[str, str], alphas: list[float], args: argparse.Namespace
) -> list[str]:
    task, _, data = load_eval_arrays(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence warnings of the inner fits
        Q = crossfit_beliefs(data, args.calibrator, folds=args.folds, seed=args.seed)
    actions = runtime_actions(Q, data)
    kind = kinds.get(task.name, default_kind(task))
    n = data.n
    half = n // 2
    rng = np.random.default_rng(args.seed)
    perm = np.argsort(rng.random((args.splits, n)), axis=1)
    cal, test = perm[:, :half], perm[:, half : 2 * half]

    def take(idx: NDArray[np.intp]) -> dict[str, NDArray]:
        return {
            "Q": Q[idx],
            "y": data.y[idx],
            "actions": actions[idx],
            "guardable": data.served[idx],
            "executable": np.asarray(data.executable)[idx],
        }

    grid = np.append(DEFAULT_GRID, math.inf)  # the last column: always guard
    rows = []
    for alpha in alphas:
        guard = RiskGuard(task, f"{kind}:{alpha}")
        c = take(cal)
        t = take(test)
        cal_curve = risk_curve(guard, c.pop("Q"), c.pop("y"), DEFAULT_GRID, **c)
        test_curve = risk_curve(guard, t.pop("Q"), t.pop("y"), grid, **t)
        ltt_index, _, _ = ltt_select(guard.spec, cal_curve, args.delta)
        picks = {
            "mbr": np.full(args.splits, DEFAULT_GRID.size - 1),  # λ = 0: no guard
            "naive": naive_threshold(cal_curve, alpha),
            "ltt": ltt_index,
        }
        rows.append("")
        for name, index in picks.items():
            column = np.where(index >= 0, index, grid.size - 1)  # none: always guard
            at = np.arange(args.splits), column
            risk = test_curve.risk[at]
            lam = grid[column]
            finite = np.isfinite(lam)
            mean_lam = f"{lam[finite].mean():.2f}" if finite.any() else "inf"
            certified = f"{np.mean(index >= 0):.2f}" if name == "ltt" else ""
            rows.append(
                f"{task.name:>14} {n:>4} {guard.spec!s:>24} {name:>6} {risk.mean():>7.4f} "
                f"{np.mean(risk > alpha):>7.3f} {test_curve.coverage[at].mean():>7.3f} "
                f"{test_curve.mean_cost[at].mean():>7.3f} {mean_lam:>6} {certified:>5}"
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("samples", nargs="+", type=Path, help="samples files (taskcal sample)")
    parser.add_argument("--alphas", type=float, nargs="+", default=[0.02, 0.05, 0.1])
    parser.add_argument("--delta", type=float, default=0.1, help="LTT level δ")
    parser.add_argument("--splits", type=int, default=500, help="random calibration/test halves")
    parser.add_argument("--calibrator", default="dirichlet", help="the calibration map")
    parser.add_argument("--folds", type=int, default=5, help="cross-fitting folds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--risk", action="append", default=[], help="TASK=KIND, e.g. stsb=cost (repeatable)"
    )
    args = parser.parse_args()
    kinds = dict(item.split("=", 1) for item in args.risk)
    print(
        f"{args.splits} random halves per file (calibrate on one, test on the other), "
        f"δ = {args.delta}, beliefs: {args.calibrator}, {args.folds}-fold cross-fitted"
    )
    header = (
        f"{'task':>14} {'n':>4} {'risk limit':>24} {'rule':>6} {'risk':>7} {'>α':>7} "
        f"{'cover':>7} {'cost':>7} {'λ':>6} {'cert':>5}"
    )
    print(header)
    print("-" * len(header))
    t0 = time.perf_counter()
    for path in args.samples:
        for row in run_file(path, kinds, args.alphas, args):
            print(row)
    print(f"\n{time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
