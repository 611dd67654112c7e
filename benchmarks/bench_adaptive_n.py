"""Adaptive N's ε as a measured bound: realised change rate among early stops, samples saved.

Two sources, one table:

* ``simulate``: a tool task (call / ask / refuse, plus unparsed samples) with a known
  source that is *not* a Dirichlet (a mixture of settled and torn items whose mode leans to
  calling). Per seed, a Dirichlet map (the workflow's default, ODIR with inner CV) and the
  stopping prior (:func:`~taskcal_agents.decision._stopping_prior.fit_stopping_prior`) are
  fitted on ``--n-cal`` items with N = 16 samples each; ``--n-test`` fresh items are drawn
  in rounds 4, 8, 16.
* ``replay``: recorded N = 16 samples files (``taskcal sample --n 16``), the stored samples
  in order as if drawn in rounds; the Dirichlet map and the stopping prior are cross-fitted
  on 5 stratified folds by the workflow's code, so an item is never decided by a fit on it.

Both run the runtime's own functions: the rule's estimate is
:func:`~taskcal_agents.decision._adaptive.change_probability` (on messages through
:func:`~taskcal_agents.decision._adaptive.message_counts`, for the replay), which
:func:`~taskcal_agents.decision._adaptive.stop_check` compares with ε, here under each prior
named, fitted or not; the decisions are :meth:`Decider.decide` (``decide_belief`` on counts
for the simulation).

Printed per prior and ε: the items that stopped before N, how many of those decisions differ
from the N = 16 decision on the same samples (the realised change rate, with its one-sided
95 % Clopper–Pearson upper bound), the rule's mean estimate at those stops, and the mean
samples drawn per decision. Priors: ``fitted`` (what ``taskcal fit`` stores), ``uniform``
(a = 1, the rule's default before it drew all N without a fitted prior) and ``sparse``
(a = 0.1 on every outcome, the belief's α, which the rule used before).

Run: .venv/bin/python benchmarks/bench_adaptive_n.py simulate --seeds 0 1 2
     .venv/bin/python benchmarks/bench_adaptive_n.py replay runs/q05.w2c.n16.samples.jsonl \
         --task runs/w2c.relabel.task.yaml --data runs/when2call.jsonl
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from taskcal_agents._stats import paired_difference
from taskcal_agents.decision import Decider, GroundingSpec, Task, tool_decision
from taskcal_agents.decision._adaptive import (
    AdaptiveSampling,
    StoppingPrior,
    change_probability,
    fit_stopping_prior,
    message_counts,
)
from taskcal_agents.workflow._calibrator_specs import default_factory
from taskcal_agents.workflow._crossfit import (
    calibrator_inputs,
    crossfit_calibrators,
    stratified_folds,
)
from taskcal_agents.workflow._data import dataset_items, load_eval_arrays, record_context
from taskcal_agents.workflow._runner import message_from_dict

EPSILONS = (0.01, 0.02, 0.05, 0.1)
PRIORS = ("fitted", "uniform", "sparse")
N_MAX = 16
FIRST = 4
ALPHA = 0.1


def make_prior(kind: str, task: Task, counts: NDArray[np.int64]) -> StoppingPrior:
    """The stopping prior of ``kind``, fitted on ``counts`` for ``fitted``."""
    if kind == "fitted":
        return fit_stopping_prior(task, counts)
    if kind == "uniform":
        return StoppingPrior.uniform(task)
    if kind == "sparse":
        return StoppingPrior.uniform(task, ALPHA)
    msg = f"unknown prior {kind!r}; one of {PRIORS}"
    raise SystemExit(msg)


def clopper_pearson_upper(changes: int, n: int, level: float = 0.95) -> float:
    """One-sided upper confidence bound of a binomial rate (1.0 with no trials)."""
    if n == 0:
        return 1.0
    if changes >= n:
        return 1.0
    return float(stats.beta.ppf(level, changes + 1, n - changes))


def early_stop_table(
    p: NDArray[np.float64],
    actions: NDArray[np.intp],
    rounds: Sequence[int],
    eps: float,
    cost: NDArray[np.float64] | None = None,
) -> dict[str, Any]:
    """Stop at the first round whose estimate is below ``eps``; compare with the last round.

    Args:
        p: The rule's estimate after each round, (n, rounds); 0 in the last column.
        actions: The decision at each round's prefix, (n, rounds).
        rounds: The cumulative sample counts.
        eps: ε.
        cost: The realised cost of each round's decision against the item's label.
    """
    stop = np.argmax(p < eps, axis=1)
    idx = np.arange(p.shape[0])
    early = stop < len(rounds) - 1
    changed = actions[idx, stop] != actions[:, -1]
    n_early, n_changed = int(early.sum()), int((changed & early).sum())
    return {
        "epsilon": eps,
        "items": int(p.shape[0]),
        "early": n_early,
        "changed": n_changed,
        "rate": n_changed / n_early if n_early else 0.0,
        "upper": clopper_pearson_upper(n_changed, n_early),
        "estimate": float(p[idx, stop][early].mean()) if n_early else 0.0,
        "mean_samples": float(np.asarray(rounds)[stop].mean()),
        "n_max": int(rounds[-1]),
        **(
            {}
            if cost is None
            else dict(
                zip(
                    ("cost_diff", "cost_se"),
                    paired_difference(cost[idx, stop], cost[:, -1]),
                    strict=True,
                )
            )
        ),
    }


# ------------------------------------------------------------------ simulation


def sim_task() -> Task:
    """The tool task on counts: no sampled action, so every action is executable."""
    return tool_decision(grounding=GroundingSpec()).model_copy(
        update={"sampled_actions": [], "name": "sim_tool"}
    )


def sim_items(rng: np.random.Generator, n: int) -> tuple[NDArray[np.intp], NDArray[np.int64]]:
    """Labels and N = 16 ordered sample outcomes (0..2 labels, 3 unparsed) of ``n`` items.

    Labels call / ask / refuse at 0.4 / 0.35 / 0.25. 55 % of the items are settled: their
    samples take one mode (the label with probability 0.6, else a call with probability
    0.8) but for a Beta(1, 9) share spread over all outcomes; the others are torn,
    p ~ Dirichlet(1.5, 0.75, 0.6, 0.15).
    """
    y = rng.choice(3, size=n, p=[0.4, 0.35, 0.25])
    probs = np.empty((n, 4))
    settled = rng.random(n) < 0.55
    for i in range(n):
        if settled[i]:
            mode = y[i] if rng.random() < 0.6 else 0 if rng.random() < 0.8 else rng.integers(3)
            spread = rng.beta(1, 9)
            probs[i] = spread * rng.dirichlet([1, 1, 1, 0.3])
            probs[i, mode] += 1 - spread
        else:
            probs[i] = rng.dirichlet([1.5, 0.75, 0.6, 0.15])
    seqs = np.stack([rng.choice(4, size=N_MAX, p=row / row.sum()) for row in probs])
    return y, seqs


def _counts(seq: NDArray[np.int64], k: int) -> NDArray[np.int64]:
    return np.bincount(seq, minlength=k).astype(np.int64)


def simulate(seed: int, n_cal: int, n_test: int, priors: Sequence[str]) -> dict[str, Any]:
    """One seed: fit on ``n_cal`` items, replay the rule on ``n_test`` fresh ones."""
    task = sim_task()
    outcomes = [*task.outcomes, None]
    rng = np.random.default_rng(seed)
    y_cal, s_cal = sim_items(rng, n_cal)
    y_test, s_test = sim_items(rng, n_test)
    cost = task.cost_matrix()
    k = len(outcomes)
    cal_counts = np.stack([_counts(s, k) for s in s_cal])

    def belief(c: NDArray[np.int64]) -> Any:
        labels = [o for o, n in zip(outcomes, c.tolist(), strict=True) for _ in range(n)]
        return task.belief_from_outcomes(labels, alpha=ALPHA)

    P = np.stack([belief(c).probs for c in cal_counts])
    calibrator = default_factory("dirichlet")().fit(P, y_cal)
    rounds = AdaptiveSampling(epsilon=0.5, first=FIRST).rounds(N_MAX)
    rule = AdaptiveSampling(epsilon=0.5, first=FIRST)
    out: dict[str, Any] = {"rounds": rounds, "n": n_test, "n_max": N_MAX}
    for kind in priors:
        prior = make_prior(kind, task, cal_counts)
        decider = Decider(task, calibrator, alpha=ALPHA, stopping_prior=prior)
        memo: dict[tuple[int, ...], tuple[float, int]] = {}  # items share count patterns
        p = np.zeros((n_test, len(rounds)))
        actions = np.zeros((n_test, len(rounds)), dtype=np.intp)
        for i, seq in enumerate(s_test):
            for r, m in enumerate(rounds):
                c = _counts(seq[:m], k)
                key = tuple(c.tolist())
                if key not in memo:
                    action = task.action_index(decider.decide_belief(belief(c)).action)
                    estimate = change_probability(decider, c, N_MAX, draws=rule.draws, prior=prior)
                    memo[key] = (estimate, action)
                p[i, r], actions[i, r] = memo[key]
        out[kind] = {"p": p, "actions": actions, "prior": prior, "cost": cost[y_test][
            np.arange(n_test)[:, None], actions]}  # fmt: skip
    return out


# ---------------------------------------------------------------------- replay


def replay(
    path: Path,
    *,
    n_max: int,
    folds: int,
    calibrator: str,
    priors: Sequence[str],
    task_path: Path | None = None,
    data_path: Path | None = None,
) -> dict[str, Any]:
    """Per item and prior: the rule's estimate after each round and the decision at each."""
    task, samples, data = load_eval_arrays(path, task_path, alpha=ALPHA, data=data_path)
    if data.counts is None:
        msg = f"{path}: task {task.name!r} clusters answers; adaptive N refuses it."
        raise SystemExit(msg)
    items = None
    if task.grounding is not None and data_path is not None:
        items = dataset_items(samples, data_path)
    fold = stratified_folds(data.y, folds, seed=0)
    if calibrator == "raw":  # MBR on the raw belief: no calibrator
        fitted: dict[int, Any] = dict.fromkeys(range(folds))
    else:
        X, make, _ = calibrator_inputs(data, default_factory(calibrator))
        fitted = crossfit_calibrators(X, data.y, fold, make, fit_mask=data.served)
    rounds = AdaptiveSampling(epsilon=0.5, first=FIRST).rounds(n_max)
    rule = AdaptiveSampling(epsilon=0.5, first=FIRST)
    out: dict[str, Any] = {"task": task.name, "n": data.n, "rounds": rounds, "n_max": n_max}
    records = []
    for item_id in data.ids:
        record = samples.records[item_id]
        messages = [message_from_dict(m) for m in record["samples"]]
        if len(messages) < n_max:
            msg = f"{path}: item {item_id!r} has {len(messages)} samples, fewer than {n_max}."
            raise SystemExit(msg)
        context = (
            None
            if task.grounding is None
            else record_context(record, items or dataset_items(samples), source=str(path))
        )
        records.append((messages, record.get("tool_names"), context))
    for kind in priors:
        p = np.zeros((data.n, len(rounds)))
        actions = np.zeros((data.n, len(rounds)), dtype=np.intp)
        fold_priors = {f: make_prior(kind, task, data.counts[fold != f]) for f in range(folds)}
        for i, (messages, names, context) in enumerate(records):
            f = int(fold[i])
            decider = Decider(task, fitted[f], alpha=ALPHA, stopping_prior=fold_priors[f])
            for r, m in enumerate(rounds):
                prefix = messages[:m]
                action = decider.decide(prefix, tool_names=names, context=context).action
                actions[i, r] = task.action_index(action)
                if m < n_max:
                    counts, executable = message_counts(
                        decider, prefix, tool_names=names, context=context
                    )
                    p[i, r] = change_probability(
                        decider, counts, n_max, executable=executable, draws=rule.draws,
                        prior=fold_priors[f],
                    )  # fmt: skip
        cost = task.cost_matrix()[data.y][np.arange(data.n)[:, None], actions]
        out[kind] = {"p": p, "actions": actions, "prior": fold_priors[0], "cost": cost}
    return out


# ------------------------------------------------------------------------ main


def print_table(title: str, results: Sequence[dict[str, Any]], priors: Sequence[str]) -> None:
    """One row per prior and ε, each figure as the range over ``results`` (seeds/files)."""
    print(f"\n{title}")
    print(
        "| prior | ε | early stops | changed | realised rate | 95 % upper | mean estimate "
        "| mean samples | saved | Δ cost vs N (± paired SE) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")

    def span(values: list[float], fmt: Callable[[float], str]) -> str:
        lo, hi = min(values), max(values)
        return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)}–{fmt(hi)}"

    for kind in priors:
        for eps in EPSILONS:
            rows = [
                early_stop_table(
                    r[kind]["p"], r[kind]["actions"], r["rounds"], eps, r[kind]["cost"]
                )
                for r in results
            ]
            costs = "; ".join(f"{x['cost_diff']:+.4f} ± {x['cost_se'] or 0:.4f}" for x in rows)
            pct = lambda v: f"{v:.1%}"  # noqa: E731
            percent = lambda v: f"{v:.0%}"  # noqa: E731
            print(
                f"| {kind} | {eps:g} | {span([x['early'] for x in rows], lambda v: f'{v:.0f}')} "
                f"| {span([x['changed'] for x in rows], lambda v: f'{v:.0f}')} "
                f"| {span([x['rate'] for x in rows], pct)} "
                f"| {span([x['upper'] for x in rows], pct)} "
                f"| {span([x['estimate'] for x in rows], lambda v: f'{v:.4f}')} "
                f"| {span([x['mean_samples'] for x in rows], lambda v: f'{v:.2f}')} "
                f"| {span([1 - x['mean_samples'] / x['n_max'] for x in rows], percent)} "
                f"| {costs} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    sim = sub.add_parser("simulate", help="a known source")
    sim.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    sim.add_argument("--n-cal", type=int, default=600)
    sim.add_argument("--n-test", type=int, default=3000)
    rep = sub.add_parser("replay", help="recorded N = 16 samples files")
    rep.add_argument("samples", nargs="+", type=Path)
    rep.add_argument("--n", type=int, default=N_MAX, help="N, the full draw (default 16)")
    rep.add_argument("--folds", type=int, default=5)
    rep.add_argument("--calibrator", default="dirichlet", help="a calibrator spec, or raw")
    rep.add_argument("--task", type=Path, default=None, help="task (default: the header's)")
    rep.add_argument("--data", type=Path, default=None, help="dataset, for grounding")
    for p in (sim, rep):
        p.add_argument("--priors", nargs="+", default=list(PRIORS), choices=PRIORS)
    args = parser.parse_args()
    start = time.perf_counter()
    if args.mode == "simulate":
        results = [simulate(s, args.n_cal, args.n_test, args.priors) for s in args.seeds]
        fitted = [r["fitted"]["prior"].total for r in results if "fitted" in r]
        print_table(
            f"simulated tool task, seeds {args.seeds}: fit on {args.n_cal} items, "
            f"{args.n_test} test items each, rounds {results[0]['rounds']}; ranges over seeds"
            + (f"; fitted prior total A {min(fitted):.2f}–{max(fitted):.2f}" if fitted else "")
            + f" ({time.perf_counter() - start:.0f} s)",
            results,
            args.priors,
        )
        return
    for path in args.samples:
        result = replay(
            path, n_max=args.n, folds=args.folds, calibrator=args.calibrator, priors=args.priors,
            task_path=args.task, data_path=args.data,
        )  # fmt: skip
        how = "no calibrator" if args.calibrator == "raw" else f"{args.calibrator} cross-fitted"
        full = np.bincount(result[args.priors[0]]["actions"][:, -1], minlength=3)
        extra = ""
        if "fitted" in result:
            prior = result["fitted"]["prior"]
            extra = f"; fitted prior (fold 0) {[round(a, 3) for a in prior.concentration]}"
        print_table(
            f"{path.name}: task {result['task']}, {result['n']} items, rounds "
            f"{result['rounds']}, {how} on {args.folds} folds; N = {args.n} actions "
            f"{full.tolist()}{extra} ({time.perf_counter() - start:.0f} s)",
            [result],
            args.priors,
        )


if __name__ == "__main__":
    main()
