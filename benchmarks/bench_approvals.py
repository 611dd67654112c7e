"""Confirmations as labels: does a refit on a deployment's own approvals pay, and when not?

The synthetic deployment of ``bench_drift.py`` (its generative model, its fit path, a real
JSONL decision log), deciding with the effect-aware default task
(:func:`~taskcal_agents.decision.tool_decision`: every call a ``write``, so a call short of
its bar is confirmed). Per seed: a calibrator fitted before a change; after it, requests are
decided by the runtime's decision path until ``--n-confirm`` decisions have confirmed a call.
Each confirmation is answered as a user would: approved when the call was right (outcome
``tool_call``), rejected saying why otherwise (outcome ``request_for_info`` or
``cannot_answer``). Only these outcomes are written to the log (what the middleware's
review and a yes on the next turn record); :func:`~taskcal_agents.production.refit_from_records`
then refits on them with its holdout and promotion rule as implemented. Both maps decide
a fresh stream of ``--n-test`` held-back requests: the paired cost difference (refit − old)
on all of them and on those the old map confirmed.

Scenarios:

- ``prior_shift``: impossible requests become more frequent (``--shift`` added to the
  true ``cannot_answer`` logit) and the model does not notice: its calls are confirmed and
  rejected more often than its calibration says;
- ``none``: nothing changes: the approvals agree with the map in force, and a refit has
  nothing to learn (the rule should refuse it);
- ``random``: the users answer at random, whatever the call (labels that carry no
  information about the truth): the holdout, drawn from the same answers, cannot tell
  them from the truth.

Run: .venv/bin/python benchmarks/bench_approvals.py [--seeds 20] [--quick]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from taskcal_agents.decision import Decider, GroundingSpec, Task, resolve_calibrator, tool_decision
from taskcal_agents.production import open_decision_log, refit_from_records
from taskcal_agents.production._decision_log import artefact_id

SCENARIOS = ("prior_shift", "none", "random")


def _drift() -> ModuleType:
    """``bench_drift.py`` as a module (benchmarks are not a package)."""
    path = Path(__file__).resolve().parent / "bench_drift.py"
    spec = importlib.util.spec_from_file_location("bench_drift_for_approvals", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


DRIFT = _drift()


def decider_of(task: Task, art: Any) -> Decider:
    resolved = resolve_calibrator(art, task, owner="bench_approvals")
    return Decider(task, resolved.calibrator, alpha=resolved.alpha)


def run_seed(task: Task, scenario: str, seed: int, tmp: Path, args: Any) -> dict[str, Any]:
    """Fit, collect the confirmations' answers in a log, refit, score on held-back requests."""
    rng = np.random.default_rng([seed, SCENARIOS.index(scenario)])
    before = DRIFT.World(tau=args.tau0, shift=0.0)
    after = DRIFT.World(tau=args.tau0, shift=args.shift if scenario == "prior_shift" else 0.0)
    art = DRIFT.fit_artefact(task, DRIFT.draw(task, before, args.n_fit, rng, args),
                             tmp / "old.json", args)  # fmt: skip
    old = decider_of(task, art)
    log = open_decision_log(tmp / f"{scenario}-{seed}.jsonl")
    answers: list[tuple[str, str]] = []
    confirm = task.action_index(str(task.confirm_action))
    while len(answers) < args.n_confirm:
        items = DRIFT.draw(task, after, 200, rng, args)
        for row, y in zip(items.labels, items.y.tolist(), strict=True):
            decision = old.decide_belief(task.belief_from_labels(row, alpha=args.alpha))
            if decision.action != task.action_list[confirm]:
                continue
            logged = log.log(
                decision, task=task, model_name="synthetic", artefact_id=artefact_id(art)
            )
            label = (
                task.labels[int(rng.integers(len(task.labels)))]
                if scenario == "random"
                else task.labels[y]
            )
            answers.append((str(logged.decision_id), label))
            if len(answers) == args.n_confirm:
                break
    log.import_outcomes(answers)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence warnings of the inner fits
        refit = refit_from_records(list(log.read()), art, z=args.refit_z, seed=seed)
    log.path.unlink()
    new = refit.artefact if refit.artefact is not None else art
    test = DRIFT.draw(task, after, args.n_test, rng, args)
    P, X, _ = DRIFT.beliefs(task, test, args.alpha)
    executable = np.ones((test.y.size, len(task.action_list)), dtype=bool)
    cost, actions = task.cost_matrix(), {}
    for name, artefact in (("old", art), ("new", new)):
        decider = decider_of(task, artefact)
        Q = decider.calibrate(X if decider.reads_features else P)
        actions[name] = decider.choose_actions(Q, executable).actions
    diff = cost[test.y, actions["new"]] - cost[test.y, actions["old"]]
    confirmed = actions["old"] == confirm
    return {
        "seed": seed, "promoted": refit.promoted,
        "old": float(cost[test.y, actions["old"]].mean()),
        "delta": float(diff.mean()), "se": float(diff.std(ddof=1) / np.sqrt(diff.size)),
        "delta_confirmed": float(diff[confirmed].mean()),
        "se_confirmed": float(diff[confirmed].std(ddof=1) / np.sqrt(confirmed.sum())),
    }  # fmt: skip


def table(results: dict[str, list[dict[str, Any]]], args: Any) -> list[str]:
    lines = [
        f"bench_approvals: {args.seeds} seeds, {args.n_confirm} confirmations each, "
        f"{args.n_test} held-back requests (benchmarks/bench_approvals.py"
        f"{' --quick' if args.quick else ''})",
        "",
        "| scenario | promoted | old cost | Δ cost (refit − old), all | Δ, where the old map "
        "confirmed | refits promoted with Δ > 2 SE |",
        "|---|---|---|---|---|---|",
    ]
    for scenario, rows in results.items():
        promoted = [r for r in rows if r["promoted"]]
        worse = sum(r["delta"] > 2 * r["se"] for r in promoted)
        mean = np.mean([r["delta"] for r in rows])
        se = np.std([r["delta"] for r in rows], ddof=1) / np.sqrt(len(rows)) if len(rows) > 1 else 0
        mc = np.mean([r["delta_confirmed"] for r in rows])
        lines.append(
            f"| {scenario} | {len(promoted)}/{len(rows)} | "
            f"{np.mean([r['old'] for r in rows]):.3f} | {mean:+.3f} ± {se:.3f} | {mc:+.3f} | "
            f"{worse}/{len(promoted)} |"
        )
    return lines


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--scenarios", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    parser.add_argument("--n-confirm", type=int, default=300, help="confirmations answered")
    parser.add_argument("--n-fit", type=int, default=500)
    parser.add_argument("--n-test", type=int, default=3000)
    parser.add_argument("--shift", type=float, default=1.5, help="prior_shift: logit added")
    parser.add_argument("--quick", action="store_true", help="three seeds (the smoke test)")
    args = parser.parse_args(argv)
    base = DRIFT.parse_args([])  # the generative model's settings
    for key in ("calibrator", "n_samples", "alpha", "sigma", "unparsed", "tau0", "refit_z"):
        setattr(args, key, getattr(base, key))
    if args.quick:
        args.seeds = 3
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, list[dict[str, Any]]]:
    args = parse_args(argv)
    task = tool_decision(sampled_actions=[], grounding=GroundingSpec())  # simulated beliefs
    results: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for scenario in args.scenarios:
            results[scenario] = [
                run_seed(task, scenario, seed, Path(tmp), args) for seed in range(args.seeds)
            ]
    print("\n".join(table(results, args)))
    return results


if __name__ == "__main__":
    main()
