"""Risk-controlled decisions on real samples: LTT threshold vs plain MBR vs a naive threshold.

For each recorded samples file (read through the workflow's own loader), many random
splits into a calibration half and a test half, each fitted only on what would be served:

- calibration half: calibrated beliefs cross-fitted within the half only (each fold by a map
  fitted on the half's other folds, the workflow's cross-fitting code as ``taskcal fit
  --risk-control`` runs it on its fit data); the rules choose their thresholds on these;
- test half: beliefs from ONE map fitted on the whole calibration half (the map that would
  be served); realised risk, coverage and cost are measured on these.

The test items are never seen by the map or the threshold, so the LTT guarantee holds for
the served map up to the within-half cross-fitting of the calibration beliefs. With
``--calibrator identity`` nothing is fitted: the raw beliefs serve both halves.

- ``mbr``: no guard (λ = 0);
- ``naive``: the most lenient threshold whose empirical risk on the calibration half is
  <= α (no correction: about half the time its true risk is above α);
- ``ltt``: Learn-then-Test at level δ (:func:`taskcal_agents.decision.calibrate_risk`;
  when nothing is certified it always guards).

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
[more files] [--alphas 0.02 0.05 0.1] [--delta 0.1] [--splits 200] [--calibrator dirichlet]
"""

from __future__ import annotations

import argparse
import math
import time
import warnings
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from taskcal_agents.decision import Task
from taskcal_agents.decision._risk_control import (
    DEFAULT_GRID,
    RiskGuard,
    ltt_select,
    naive_threshold,
    risk_curve,
)
from taskcal_agents.workflow._calibrator_specs import (
    CalibratorFactory,
    default_factory,
)
from taskcal_agents.workflow._crossfit import (
    calibrator_inputs,
    crossfit_calibrated,
    stratified_folds,
)
from taskcal_agents.workflow._data import load_eval_arrays
from taskcal_agents.workflow._decoders import runtime_actions
from taskcal_agents.workflow._eval_arrays import EvalArrays


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


def split_beliefs(
    data: EvalArrays,
    X: NDArray[np.float64],
    make: CalibratorFactory,
    cal: NDArray[np.intp],
    test: NDArray[np.intp],
    args: argparse.Namespace,
) -> NDArray[np.float64]:
    """One split's beliefs of every item: cross-fitted within ``cal``, served map on ``test``.

    The calibration rows come from the workflow's cross-fitting restricted to the
    calibration half (each fold by a map fitted on the half's other folds); the test rows
    from one map fitted on the whole calibration half (the map that would be served). An
    item in neither half (odd n) keeps its raw belief; it is never scored.
    """
    fit = data.served[cal]
    Q = data.P.copy()
    Q[cal] = crossfit_calibrated(
        X[cal], data.y[cal], stratified_folds(data.y[cal], args.folds, args.seed), make,
        fit_mask=fit,
    )  # fmt: skip
    served_map = make().fit(X[cal][fit], data.y[cal][fit])
    Q[test] = served_map.predict_proba(X[test])
    return Q


def run_file(
    path: Path, kinds: dict[str, str], alphas: list[float], args: argparse.Namespace
) -> list[str]:
    task, _, data = load_eval_arrays(path)
    kind = kinds.get(task.name, default_kind(task))
    n = data.n
    half = n // 2
    rng = np.random.default_rng(args.seed)
    perm = np.argsort(rng.random((args.splits, n)), axis=1)
    cal, test = perm[:, :half], perm[:, half : 2 * half]
    rows = np.arange(args.splits)[:, None]
    if args.calibrator == "identity":  # nothing is fitted: the raw beliefs serve both halves
        Q = np.broadcast_to(data.P, (args.splits, *data.P.shape))
        actions = np.broadcast_to(runtime_actions(data.P, data), (args.splits, n))
    else:
        X, make, _ = calibrator_inputs(data, default_factory(args.calibrator))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # convergence warnings of the inner fits
            Q = np.stack(
                [split_beliefs(data, X, make, cal[s], test[s], args) for s in range(args.splits)]
            )
        actions = np.stack([runtime_actions(q, data) for q in Q])
    executable = np.asarray(data.executable)

    def take(idx: NDArray[np.intp]) -> dict[str, NDArray]:
        return {
            "Q": Q[rows, idx],
            "y": data.y[idx],
            "actions": actions[rows, idx],
            "guardable": data.served[idx],
            "executable": executable[idx],
        }

    grid = np.append(DEFAULT_GRID, math.inf)  # the last column: always guard
    out = []
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
        out.append("")
        for name, index in picks.items():
            column = np.where(index >= 0, index, grid.size - 1)  # none: always guard
            at = np.arange(args.splits), column
            risk = test_curve.risk[at]
            lam = grid[column]
            finite = np.isfinite(lam)
            mean_lam = f"{lam[finite].mean():.2f}" if finite.any() else "inf"
            certified = f"{np.mean(index >= 0):.2f}" if name == "ltt" else ""
            out.append(
                f"{task.name:>14} {n:>4} {guard.spec!s:>24} {name:>6} {risk.mean():>7.4f} "
                f"{np.mean(risk > alpha):>7.3f} {test_curve.coverage[at].mean():>7.3f} "
                f"{test_curve.mean_cost[at].mean():>7.3f} {mean_lam:>6} {certified:>5}"
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("samples", nargs="+", type=Path, help="samples files (taskcal sample)")
    parser.add_argument("--alphas", type=float, nargs="+", default=[0.02, 0.05, 0.1])
    parser.add_argument("--delta", type=float, default=0.1, help="LTT level δ")
    parser.add_argument("--splits", type=int, default=200, help="random calibration/test splits")
    parser.add_argument("--calibrator", default="dirichlet", help="the calibration map")
    parser.add_argument("--folds", type=int, default=5, help="cross-fitting folds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--risk", action="append", default=[], help="TASK=KIND, e.g. stsb=cost (repeatable)"
    )
    args = parser.parse_args()
    kinds = dict(item.split("=", 1) for item in args.risk)
    print(
        f"{args.splits} random splits per file into a calibration and a test half, "
        f"δ = {args.delta}, beliefs: {args.calibrator}"
        + (
            " (raw, nothing fitted)"
            if args.calibrator == "identity"
            else f" ({args.folds}-fold cross-fitted within the calibration half; "
            "test half: one map fitted on the whole calibration half)"
        )
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
