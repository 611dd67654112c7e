"""Simulated drift: how soon the monitor alarms, how often it cries wolf, what a refit recovers.

A synthetic deployment of the tool-decision task (``tool_call``, ``request_for_info``,
``cannot_answer`` with :data:`~taskcal_agents.decision._presets.FLAT_TOOL_DECISION_COST`; every
action executable, so decisions need no sampled message). Per request: logits
``z ~ N(log prior, σ² I)``; the true label probabilities ``π = softmax(z + δ)``; the
model samples ``N`` labels from ``softmax(z / τ)`` (each unparsed with probability
``u``); the belief p̂ is the task's (:meth:`Task.belief_from_labels`, ``unparsed:
other``) and the outcome ``y ~ π``. Before the change ``τ = τ₀`` and ``δ = 0``; halfway
through the stream:

- ``none``: nothing changes (the false-alarm streams);
- ``overconfident``: the model becomes sharper, ``τ₀ → τ₁``;
- ``prior_shift``: impossible requests become more frequent (``δ`` adds ``--shift`` to
  the ``cannot_answer`` logit of the truth) and the model does not notice.

Per seed: a calibrator (``--calibrator``, default the workflow's Dirichlet) fitted at t=0
on ``--n-fit`` pre-change items by the library's fit path (``fit_calibrator``,
``unparsed_reference``, ``make_artefact``, written and loaded as the JSON artefact
``taskcal fit`` writes); a stream of ``--n-stream`` decisions taken by the runtime's one
decision path (``resolve_calibrator`` → :class:`~taskcal_agents.decision.Decider`
``.decide_belief``, as the front doors) and written to a real JSONL decision log
(:meth:`DecisionLog.log`), outcomes attached with :meth:`DecisionLog.import_outcomes`
(what ``taskcal outcomes import`` does), then read back with :meth:`DecisionLog.read`.

Reported per scenario (means over seeds with their SE):

- alarms: :func:`~taskcal_agents.production._monitor.first_alarm` with tumbling windows
  (``step = window``) against the artefact's fit-time references; ``alarm pre`` is the
  share of streams with an alarm before the change (a false alarm), ``detected`` the
  share with an alarm in a window after the change, ``delay`` the decisions from the
  change to the last decision of the first alarming window after it (at least one
  window), over the detected streams;
- false alarms: on the ``none`` streams, the share of streams with any alarm and the
  share of windows that alarm (:func:`~taskcal_agents.production._monitor.monitor` with the same
  windows);
- refit: :func:`~taskcal_agents.production.refit_from_records` on the logged labelled
  decisions after the change (its time-ordered holdout and promotion rule as
  implemented); ``promoted`` is the share of refits promoted;
- cost: mean realised cost per decision on a fresh post-change test stream of
  ``--n-test`` requests (outcomes drawn from π; the same outcomes for every policy) with
  the old artefact, with the artefact in force after the refit (the new one if promoted,
  else the old one), with the refitted map whether promoted or not (``new map``), with
  the ``best map`` (the same calibrator fitted on ``--n-best`` post-change items: the
  most any refit of this map on p̂ can reach) and with an oracle deciding on the true π
  (MBR, the same kernel; out of reach of any map of p̂ from N samples);
  ``recovered`` = (old − refit) / (old − best map) (and the same for the new map), a
  ratio of means over seeds with its delta-method SE from the paired per-seed
  differences; ``-`` when the gap old − best map is within two SE of 0.

Run: .venv/bin/python benchmarks/bench_drift.py [--seeds 20] [--quick]
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from taskcal_agents._files import write_json
from taskcal_agents.decision import Decider, GroundingSpec, Task, tool_decision
from taskcal_agents.decision._artefact import CalibratorArtefact, resolve_calibrator
from taskcal_agents.decision._presets import FLAT_TOOL_DECISION_COST
from taskcal_agents.production import refit_from_records
from taskcal_agents.production._decision_log import artefact_id, open_decision_log
from taskcal_agents.production._monitor import first_alarm, monitor
from taskcal_agents.production._refit import DEFAULT_Z as REFIT_Z
from taskcal_agents.workflow import EvalArrays, fit_calibrator
from taskcal_agents.workflow._fit import make_artefact, unparsed_reference

SCENARIOS = ("none", "overconfident", "prior_shift")
PRIOR = (0.5, 0.3, 0.2)  # tool_call, request_for_info, cannot_answer


@dataclass(frozen=True)
class World:
    """The generative model of one regime (before or after the change)."""

    tau: float  # the model's temperature on the true logits (< 1: overconfident)
    shift: float  # added to the true cannot_answer logit (the model does not see it)


@dataclass(frozen=True)
class Items:
    """Requests drawn from a world: the model's sample labels, true π and outcomes."""

    labels: list[list[str | None]]
    pi: NDArray[np.float64]
    y: NDArray[np.intp]


def draw(task: Task, world: World, n: int, rng: np.random.Generator, args: Any) -> Items:
    """*n* requests: logits, the model's *N* sampled labels, the true π and outcomes."""
    k = len(task.labels)
    z = np.log(PRIOR) + rng.normal(0.0, args.sigma, (n, k))
    truth = z.copy()
    truth[:, task.label_index("cannot_answer")] += world.shift
    pi = np.exp(truth - truth.max(axis=1, keepdims=True))
    pi /= pi.sum(axis=1, keepdims=True)
    m = np.exp(z / world.tau - (z / world.tau).max(axis=1, keepdims=True))
    m /= m.sum(axis=1, keepdims=True)
    y = (rng.random((n, 1)) > np.cumsum(pi, axis=1)).sum(axis=1).astype(np.intp)
    sampled = (rng.random((n, args.n_samples, 1)) > np.cumsum(m, axis=1)[:, None, :]).sum(axis=2)
    unparsed = rng.random((n, args.n_samples)) < args.unparsed
    names = task.labels
    labels = [
        [None if u else names[j] for j, u in zip(row, bad, strict=True)]
        for row, bad in zip(sampled.tolist(), unparsed.tolist(), strict=True)
    ]
    return Items(labels, pi, y)


def beliefs(task: Task, items: Items, alpha: float) -> tuple[NDArray, NDArray, NDArray]:
    """p̂, the belief features and the no-usable-sample mask, as the task builds them."""
    bs = [task.belief_from_labels(row, alpha=alpha) for row in items.labels]
    P = np.array([b.probs for b in bs])
    X = np.array([b.features for b in bs])
    return P, X, np.array([b.n_parsed == 0 for b in bs])


def fit_artefact(
    task: Task, items: Items, path: Path, args: Any, *, cv_folds: int = 5
) -> CalibratorArtefact:
    """An artefact by ``taskcal fit``'s path on *items*, written and loaded."""
    P, X, no_sample = beliefs(task, items, args.alpha)
    data = EvalArrays(
        P=P, y=items.y, cost=task.cost_matrix(), labels=tuple(task.labels),
        actions=tuple(task.action_list), greedy=np.full(P.shape[0], -1, dtype=np.intp),
        no_sample=no_sample, fallback=task.action_index(task.default_action),
        X=X if task.unparsed_evidence else None, has_greedy=False,
    )  # fmt: skip
    fitted, metrics = fit_calibrator(data, args.calibrator, cv_folds=cv_folds, seed=0)
    if unparsed := unparsed_reference([{"labels": row} for row in items.labels]):
        metrics["unparsed_rate"] = unparsed
    write_json(
        make_artefact(
            task_name=task.name, labels=list(task.labels), actions=list(task.action_list),
            alpha=args.alpha, calibrator_name=args.calibrator, calibrator=fitted,
            fit_metrics=metrics, task_spec=task.model_dump(mode="json"),
            samples={"path": "synthetic", "n_items": data.n, "n": args.n_samples},
        ),
        path,
    )  # fmt: skip
    return CalibratorArtefact.load(path)


def log_stream(
    task: Task, art: CalibratorArtefact, items: Items, log_path: Path, alpha: float
) -> list[dict[str, Any]]:
    """Decide each request as a front door does, log it, attach outcomes, read the log."""
    resolved = resolve_calibrator(art, task, owner="bench_drift")
    decider = Decider(
        task, resolved.calibrator, alpha=resolved.alpha, risk_control=resolved.risk_control
    )
    log = open_decision_log(log_path)
    aid = artefact_id(art)
    logged = []
    for row in items.labels:
        decision = decider.decide_belief(task.belief_from_labels(row, alpha=alpha))
        logged.append(log.log(decision, task=task, model_name="synthetic", artefact_id=aid))
    outcomes = [
        (d.decision_id, task.labels[y])
        for d, y in zip(logged, items.y.tolist(), strict=True)
        if d.decision_id is not None
    ]
    report = log.import_outcomes(outcomes)
    if report.rejected or log.failures:
        msg = f"decision log {log_path}: {report.rejected} outcomes rejected, {log.failures} lost."
        raise SystemExit(msg)
    return list(log.read())


def policy_costs(
    task: Task, arts: Sequence[CalibratorArtefact | None], items: Items, args: Any
) -> list[float]:
    """Mean realised cost per decision of each artefact (``None``: the oracle on π)."""
    P, X, no_sample = beliefs(task, items, args.alpha)
    cost = task.cost_matrix()
    executable = np.ones((items.y.size, len(task.action_list)), dtype=bool)
    out = []
    for art in arts:
        if art is None:
            actions = Decider(task).choose_actions(items.pi, executable).actions
        else:
            r = resolve_calibrator(art, task, owner="bench_drift")
            decider = Decider(task, r.calibrator, alpha=r.alpha, risk_control=r.risk_control)
            Q = decider.calibrate(X if decider.reads_features else P)
            actions = decider.choose_actions(Q, executable).actions.copy()
            actions[no_sample] = task.action_index(task.default_action)
        out.append(float(cost[items.y, actions].mean()))
    return out


def run_seed(task: Task, scenario: str, seed: int, tmp: Path, args: Any) -> dict[str, Any]:
    """One stream: fit at t=0, log decisions, monitor, refit, score on a fresh test stream."""
    rng = np.random.default_rng([seed, SCENARIOS.index(scenario)])
    before = World(tau=args.tau0, shift=0.0)
    after = {
        "none": before,
        "overconfident": World(tau=args.tau1, shift=0.0),
        "prior_shift": World(tau=args.tau0, shift=args.shift),
    }[scenario]
    art = fit_artefact(task, draw(task, before, args.n_fit, rng, args), tmp / "old.json", args)
    change = args.n_stream // 2
    pre, post = draw(task, before, change, rng, args), draw(task, after, change, rng, args)
    stream = Items(pre.labels + post.labels, np.vstack([pre.pi, post.pi]),
                   np.concatenate([pre.y, post.y]))  # fmt: skip
    log_path = tmp / f"{scenario}-{seed}.jsonl"
    records = log_stream(task, art, stream, log_path, args.alpha)
    w = args.window
    out: dict[str, Any] = {"seed": seed}
    if scenario == "none":
        report = monitor(records, art, window=w, n_boot=args.n_boot)
        flags = [win.alarm for win in report.windows if win.n_decisions == w]
        out["any_alarm"] = any(flags)
        out["window_alarms"], out["windows"] = sum(flags), len(flags)
    first = first_alarm(records, art, window=w, step=w, n_boot=args.n_boot)
    out["alarm_pre"] = first is not None and first < change
    after_change = first_alarm(records, art, window=w, step=w, start=change + w, n_boot=args.n_boot)
    out["delay"] = None if after_change is None else after_change - change + 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence warnings of the inner fits
        refit = refit_from_records(
            records[change:], art, z=args.refit_z, seed=seed, source=str(log_path)
        )
    out["promoted"] = refit.promoted
    new = refit.artefact if refit.artefact is not None else art
    served = new if refit.promoted else art
    best = fit_artefact(
        task, draw(task, after, args.n_best, rng, args), tmp / "best.json", args, cv_folds=0
    )
    test = draw(task, after, args.n_test, rng, args)
    costs = policy_costs(task, [art, served, new, best, None], test, args)
    out["old"], out["refit"], out["new"], out["best"], out["oracle"] = costs
    log_path.unlink()
    return out


def mean_se(x: Sequence[float]) -> tuple[float, float]:
    """Mean and its SE (``std / sqrt(n)``; nan for fewer than two values)."""
    a = np.asarray(x, dtype=np.float64)
    if a.size == 0:
        return math.nan, math.nan
    return float(a.mean()), float(a.std(ddof=1) / math.sqrt(a.size)) if a.size > 1 else math.nan


def share(flags: Sequence[bool]) -> str:
    """A share with its binomial SE."""
    p = float(np.mean(flags))
    return f"{p:.2f} ± {math.sqrt(p * (1 - p) / len(flags)):.2f}"


def recovered(rows: Sequence[dict[str, Any]], key: str) -> tuple[float, float]:
    """(old − key) / (old − best) as a ratio of means, with its delta-method SE."""
    a = np.array([r["old"] - r[key] for r in rows])
    b = np.array([r["old"] - r["best"] for r in rows])
    if b.mean() <= 2 * np.std(b, ddof=1) / math.sqrt(b.size):  # no gap to recover
        return math.nan, math.nan
    ratio = float(a.mean() / b.mean())
    se = float(np.std(a - ratio * b, ddof=1) / math.sqrt(a.size) / b.mean()) if a.size > 1 else 0
    return ratio, se


def table(results: dict[str, list[dict[str, Any]]], args: Any) -> list[str]:
    """The markdown table: one row per scenario."""
    lines = [
        "| scenario | streams | alarm pre | detected | delay (decisions) | false alarms: "
        "streams / windows | promoted | cost old | cost refit | cost new map | cost best map | "
        "cost oracle | recovered: refit / new map |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for scenario, rows in results.items():
        delays = [r["delay"] for r in rows if r["delay"] is not None]
        if scenario == "none":
            windows = sum(r["windows"] for r in rows)
            per_window = sum(r["window_alarms"] for r in rows) / max(windows, 1)
            fa = f"{share([r['any_alarm'] for r in rows])} / {per_window:.3f} of {windows}"
            detected = delay = "-"
        else:
            fa = "-"
            detected = share([r["delay"] is not None for r in rows])
            d, d_se = mean_se(delays)
            delay = f"{d:.0f} ± {d_se:.0f}" if delays else "-"
        costs = {
            key: mean_se([r[key] for r in rows])
            for key in ("old", "refit", "new", "best", "oracle")
        }
        fracs = [recovered(rows, key) for key in ("refit", "new")]
        lines.append(
            f"| {scenario} | {len(rows)} | {share([r['alarm_pre'] for r in rows])} | "
            f"{detected} | {delay} | {fa} | {share([r['promoted'] for r in rows])} | "
            + " | ".join(f"{m:.3f} ± {s:.3f}" for m, s in costs.values())
            + " | "
            + " / ".join("-" if math.isnan(f) else f"{f:.2f} ± {se:.2f}" for f, se in fracs)
            + " |"
        )
    return lines


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line (``--quick`` shrinks everything for the smoke test)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=20, help="streams per scenario")
    parser.add_argument("--scenarios", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    parser.add_argument("--n-fit", type=int, default=500, help="pre-change items of the t=0 fit")
    parser.add_argument("--n-stream", type=int, default=2000, help="decisions; change halfway")
    parser.add_argument("--n-test", type=int, default=2000, help="post-change test requests")
    parser.add_argument(
        "--n-best", type=int, default=5000, help="post-change items of the best map's fit"
    )
    parser.add_argument(
        "--refit-z", type=float, default=REFIT_Z, help="the refit promotion rule's z"
    )
    parser.add_argument("--window", type=int, default=200, help="monitor window (decisions)")
    parser.add_argument("--n-boot", type=int, default=50, help="bootstrap of the ECE's SE")
    parser.add_argument("--calibrator", default="dirichlet", help="a workflow calibrator spec")
    parser.add_argument("--n-samples", type=int, default=10, help="samples per decision (N)")
    parser.add_argument("--alpha", type=float, default=0.1, help="belief smoothing prior α")
    parser.add_argument("--sigma", type=float, default=1.5, help="spread of the true logits")
    parser.add_argument("--unparsed", type=float, default=0.05, help="P(a sample is unparsed)")
    parser.add_argument("--tau0", type=float, default=0.7, help="model temperature before")
    parser.add_argument("--tau1", type=float, default=0.2, help="overconfident: after")
    parser.add_argument("--shift", type=float, default=1.0, help="prior_shift: logit added")
    parser.add_argument("--log-dir", type=Path, default=None, help="where the temporary logs go")
    parser.add_argument("--quick", action="store_true", help="a few small streams (smoke test)")
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.n_fit, args.n_stream, args.n_test, args.n_best = 3, 400, 1200, 600, 2000
    if args.n_stream // 2 % args.window:
        parser.error("--n-stream / 2 must be a multiple of --window (the change on a boundary)")
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, list[dict[str, Any]]]:
    """Run the benchmark, print the table, return the per-seed results."""
    args = parse_args(argv)
    task = tool_decision(  # simulated beliefs only; the flat matrix this benchmark reports under
        sampled_actions=[], grounding=GroundingSpec(), cost=FLAT_TOOL_DECISION_COST
    )
    started = time.perf_counter()
    shm = Path("/dev/shm")  # the log fsyncs each append: keep it off the disk if we can
    log_dir = args.log_dir or (shm if shm.is_dir() else None)
    results: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench_drift.", dir=log_dir) as tmp:
        for scenario in args.scenarios:
            results[scenario] = [
                run_seed(task, scenario, seed, Path(tmp), args) for seed in range(args.seeds)
            ]
    command = " ".join(["benchmarks/bench_drift.py", *(sys.argv[1:] if argv is None else argv)])
    print(
        f"\n{command}\n{args.seeds} seeds per scenario; task {task.name}, {args.calibrator} "
        f"fitted on {args.n_fit} pre-change items; {args.n_stream} logged decisions (change "
        f"after {args.n_stream // 2}), N={args.n_samples}, τ₀={args.tau0}, τ₁={args.tau1}, "
        f"shift={args.shift}; monitor windows of {args.window} (tumbling, z=3); refit on "
        f"the {args.n_stream // 2} post-change decisions (promotion z={args.refit_z:g}); best "
        f"map fitted on {args.n_best} post-change items; cost on {args.n_test} fresh "
        f"post-change requests ({time.perf_counter() - started:.0f} s)\n"
    )
    print("\n".join(table(results, args)))
    return results


if __name__ == "__main__":
    main()
