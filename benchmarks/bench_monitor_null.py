"""False alarms of the drift monitor on stationary streams: per metric, per side, vs nominal.

The monitor's default rule alarms at ``|z| > 3`` (two-sided metrics: 0.27 % of windows if
z were standard normal, 0.135 % on each side) or ``z > 3`` (one-sided, "up": 0.135 %).
This benchmark measures the share of windows that alarm on streams where nothing
changes, for each metric and side, against that nominal rate.

The world is the drift benchmark's before the change (:mod:`bench_drift`: the
tool-decision task, logits ``z ~ N(log prior, σ² I)``, ``N`` sampled labels from
``softmax(z / τ₀)``, each unparsed with probability ``u``; its defaults). Per seed a
calibrator (``--calibrator``, default the workflow's Dirichlet) is fitted at t=0 on
``--n-fit`` items by the library's fit path (``bench_drift.fit_artefact``: the artefact
``taskcal fit`` writes, with its fit-time references); then ``--windows`` tumbling windows
of ``--window`` decisions are decided by the runtime's decision path (the artefact's
:class:`~taskcal_agents.decision.decider.Decider`: calibrate, executable MBR; the fallback
action where no sample is parsed), written as decision records in memory (not through a
log file: the drift benchmark covers that path) and read by
:func:`~taskcal_agents.production.monitor.monitor` with the artefact's references. Two
sources of outcomes:

- ``calibrated``: ``y ~ q``, the logged calibrated belief itself. The null hypothesis of
  the calibration metrics holds exactly, so every alarm of ``cost_gap``, ``nll_gap`` and
  ``classwise_ece`` is false: their rate is the test's own false-alarm rate. (The
  references of ``nll``, ``label_prior`` and the rates come from the fit, on the world's
  own outcomes, so those metrics are not under their null here.)
- ``world``: ``y ~ π``, the world's outcomes (the drift benchmark's ``none`` stream). A
  map fitted on ``--n-fit`` items is not exactly calibrated; its misfit alarms too.

Reported per source and metric: the windows tested (status ``ok`` or ``ALARM``), the
mean and standard deviation of z over them (0 and 1 if z is standard), the share that
alarm and the shares with ``z < −3`` and with ``z > 3`` (an ``up`` metric alarms only on
the upper side), with binomial SEs, and the nominal alarm rate; and the share of windows
in which any metric alarms.

Run: .venv/bin/python benchmarks/bench_monitor_null.py [--seeds 50] [--windows 100]
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
import tempfile
import time
import warnings
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from scipy import stats

from taskcal_agents.decision.artefact import CalibratorArtefact, resolve_calibrator
from taskcal_agents.decision.decider import Decider
from taskcal_agents.decision.presets import tool_decision
from taskcal_agents.decision.task import Task
from taskcal_agents.production.decision_log import artefact_id
from taskcal_agents.production.monitor import DEFAULT_Z, monitor

SOURCES = ("calibrated", "world")
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _bench_drift() -> ModuleType:
    """The drift benchmark's world (its generative model and fit path)."""
    spec = importlib.util.spec_from_file_location(
        "bench_drift", Path(__file__).resolve().parent / "bench_drift.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def stream_records(
    task: Task,
    art: CalibratorArtefact,
    labels: list[list[str | None]],
    y: np.ndarray,
    q_outcomes: bool,
    rng: np.random.Generator,
    bench: ModuleType,
    args: Any,
) -> list[dict[str, Any]]:
    """Decision records of the stream, as the runtime decides and logs them."""
    items = bench.Items(labels, np.empty((len(labels), 0)), y)
    P, X, no_sample = bench.beliefs(task, items, args.alpha)
    resolved = resolve_calibrator(art, task, owner="bench_monitor_null")
    decider = Decider(task, resolved.calibrator, alpha=resolved.alpha)
    Q = np.atleast_2d(decider.calibrate(X if decider.reads_features else P))
    Q[no_sample] = P[no_sample]  # a fallback decision logs the smoothed (uniform) belief
    executable = np.ones((len(labels), len(task.action_list)), dtype=bool)
    actions = decider.choose_actions(Q, executable).actions.copy()
    actions[no_sample] = task.action_index(task.default_action)
    if q_outcomes:
        y = (rng.random((len(labels), 1)) > np.cumsum(Q, axis=1)[:, :-1]).sum(axis=1)
    aid = artefact_id(art)
    names = list(task.labels)
    return [
        {
            "id": f"d{i}",
            "time": (T0 + timedelta(minutes=i)).isoformat(),
            "task": task.name,
            "labels": names,
            "artefact_id": aid,
            "calibrated": dict(zip(names, Q[i].tolist(), strict=True)),
            "action": task.action_list[int(actions[i])],
            "fallback": bool(no_sample[i]),
            "n_samples": args.n_samples,
            "n_unparsed": sum(label is None for label in labels[i]),
            "outcome": names[int(y[i])],
        }
        for i in range(len(labels))
    ]


def run_seed(task: Task, seed: int, tmp: Path, bench: ModuleType, args: Any) -> dict[str, Any]:
    """One fitted artefact and one stationary stream per source; the monitor's metrics."""
    rng = np.random.default_rng([seed, 7])
    world = bench.World(tau=args.tau0, shift=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence warnings of the inner fits
        art = bench.fit_artefact(task, bench.draw(task, world, args.n_fit, rng, args),
                                 tmp / f"art-{seed}.json", args)  # fmt: skip
    items = bench.draw(task, world, args.windows * args.window, rng, args)
    out: dict[str, Any] = {}
    for source in SOURCES:
        records = stream_records(task, art, items.labels, items.y, source == "calibrated", rng,
                                 bench, args)  # fmt: skip
        report = monitor(records, art, window=args.window, n_boot=args.n_boot, seed=seed)
        out[source] = [
            [(m.name, m.sided, m.status, m.z) for m in w.metrics]
            for w in report.windows
            if w.n_decisions == args.window
        ]
    return out


def tally(results: Sequence[dict[str, Any]], source: str, z: float) -> list[str]:
    """The markdown table of one source: one row per metric, then any metric."""
    count: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # tested, alarm, low, high
    zs: dict[str, list[float]] = defaultdict(list)
    sided: dict[str, str] = {}
    windows = any_alarm = 0
    for seed in results:
        for window in seed[source]:
            windows += 1
            any_alarm += any(status == "ALARM" for _, _, status, _ in window)
            for name, side, status, zval in window:
                if status not in ("ok", "ALARM"):
                    continue
                c = count[name]
                sided[name] = side
                c[0] += 1
                c[1] += status == "ALARM"
                c[2] += zval < -z
                c[3] += zval > z
                if math.isfinite(zval):
                    zs[name].append(zval)
    one = float(stats.norm.sf(z))

    def pct(k: int, n: int) -> str:
        p = k / n if n else math.nan
        return f"{100 * p:.3f} ± {100 * math.sqrt(p * (1 - p) / n):.3f}" if n else "-"

    lines = [
        f"source {source!r}: {windows} windows",
        "",
        f"| metric | sided | windows | mean z | sd z | alarm % | z < −{z:g} % | z > {z:g} % | "
        "nominal alarm % |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in sorted(count):
        n, k, low, high = count[name]
        nominal = 2 * one if sided[name] == "both" else one
        zz = np.asarray(zs[name])
        lines.append(
            f"| {name} | {sided[name]} | {n} | {zz.mean():+.3f} | {zz.std(ddof=1):.3f} | "
            f"{pct(k, n)} | {pct(low, n)} | {pct(high, n)} | {100 * nominal:.3f} |"
        )
    lines.append(f"| any metric | | {windows} | | | {pct(any_alarm, windows)} | | | |")
    return lines


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line (``--quick``: a smoke test); the world is the drift benchmark's."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=50, help="fitted artefacts (streams)")
    parser.add_argument("--windows", type=int, default=100, help="windows per stream")
    parser.add_argument("--window", type=int, default=200, help="decisions per window")
    parser.add_argument("--n-fit", type=int, default=500, help="items of the t=0 fit")
    parser.add_argument("--n-boot", type=int, default=50, help="bootstrap of the ECE's SE")
    parser.add_argument("--calibrator", default="dirichlet", help="a workflow calibrator spec")
    parser.add_argument("--n-samples", type=int, default=10, help="samples per decision (N)")
    parser.add_argument("--alpha", type=float, default=0.1, help="belief smoothing prior α")
    parser.add_argument("--sigma", type=float, default=1.5, help="spread of the true logits")
    parser.add_argument("--unparsed", type=float, default=0.05, help="P(a sample is unparsed)")
    parser.add_argument("--tau0", type=float, default=0.7, help="model temperature")
    parser.add_argument("--quick", action="store_true", help="a few short streams (smoke test)")
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.windows, args.n_fit, args.n_boot = 2, 5, 300, 10
    return args


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Run the benchmark, print the tables, return the per-seed window results."""
    args = parse_args(argv)
    bench = _bench_drift()
    task = tool_decision(sampled_actions=[])
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench_monitor_null.") as tmp:
        results = [run_seed(task, seed, Path(tmp), bench, args) for seed in range(args.seeds)]
    command = " ".join(["benchmarks/bench_monitor_null.py", *(sys.argv[1:] if argv is None
                                                              else argv)])  # fmt: skip
    print(
        f"\n{command}\n{args.seeds} seeds; task {task.name}, {args.calibrator} fitted on "
        f"{args.n_fit} items; {args.windows} tumbling windows of {args.window} decisions per "
        f"source and seed, N={args.n_samples}, τ₀={args.tau0}; monitor at z={DEFAULT_Z:g}, "
        f"ECE bootstrap {args.n_boot} ({time.perf_counter() - started:.0f} s)\n"
    )
    for source in SOURCES:
        print("\n".join(tally(results, source, DEFAULT_Z)) + "\n")
    return results


if __name__ == "__main__":
    main()
