"""False alarms of the drift monitor on stationary streams: per metric, per side, vs nominal.

The monitor's default rule alarms at ``|z| > 3`` (two-sided metrics: 0.27 % of windows if
z were standard normal, 0.135 % on each side) or ``z > 3`` (one-sided, "up": 0.135 %).
This benchmark measures the share of windows that alarm on streams where nothing
changes, for each metric and side, against that nominal rate.

The world is the drift benchmark's before the change (:mod:`bench_drift`: the
tool-decision task, integer costs, logits ``z ~ N(log prior, σ² I)``, ``N`` sampled labels
from ``softmax(z / τ₀)``, each unparsed with probability ``u``; its defaults). Per seed a
calibrator (``--calibrator``, default the workflow's Dirichlet) is fitted at t=0 on
``--n-fit`` items by the library's fit path (``bench_drift.fit_artefact``: the artefact
``taskcal fit`` writes, with its fit-time references); then ``--windows`` tumbling windows
of ``--window`` decisions are decided by the runtime's decision path (the artefact's
:class:`~taskcal_agents.decision.Decider`: calibrate, executable MBR; the fallback
action where no sample is parsed), written as decision records in memory (not through a
log file: the drift benchmark covers that path) and read by
:func:`~taskcal_agents.production._monitor.monitor` with the artefact's references. Two
sources of outcomes:

- ``calibrated``: ``y ~ q``, the logged calibrated belief itself. This is the null model
  of the ``cost_gap`` and ``nll_gap`` tests themselves (their z is the tail probability
  of the window's sum under ``y_i ~ q_i``), so it checks the tests' arithmetic and
  approximation (the saddlepoint tail, a lattice sum, the switch near the mean), not
  whether real outcomes follow ``q``: every alarm of ``cost_gap``, ``nll_gap`` and
  ``classwise_ece`` is false, and their rate is the test's own false-alarm rate. (The
  references of ``nll``, ``label_prior`` and the rates come from the fit, on the world's
  own outcomes, so those metrics are not under their null here.)
- ``world``: ``y ~ π``, the world's outcomes (the drift benchmark's ``none`` stream). A
  map fitted on ``--n-fit`` items is not exactly calibrated; its misfit alarms too. All
  windows of one seed share one fitted map (and its misfit), so the SEs of this source's
  rates are clustered by seed.

The gaps are also tested with the plain z of a mean, ``mean / (std / sqrt(n))`` of the
window's observed terms (the sample standard deviation), and with the normal z at the
null SE, ``mean / se`` (the ``se`` the report shows), computed from the same records in
the same run: the columns ``plain`` and ``normal`` of the gap table.

The ``calibrated`` source's gaps are further tested on ``--null-windows`` windows
(default 50,000) without a fit or a decision record: the beliefs and actions of each
seed's ``calibrated`` stream with outcomes drawn again from ``q``, as many times as it
takes, and the gaps' terms and z computed as the monitor does (``_null.gap_estimate``:
the same function; the main run checks that it reproduces the report's z). These windows
share their beliefs ``--null-windows / (seeds × windows)`` times over, not their
outcomes; their SEs are clustered by seed too.

Reported per source and metric: the windows tested (status ``ok`` or ``ALARM``), the
mean and standard deviation of z over them (0 and 1 if z is standard), the share that
alarm and the shares with ``z < −3`` and with ``z > 3`` (an ``up`` metric alarms only on
the upper side), with SEs clustered by seed, and the nominal alarm rate; and the share of
windows in which any metric alarms. Then the gap table: per source and gap, the alarm
shares of the saddlepoint z, the plain z and the normal z, and the share of windows in
which any metric alarms with each z for the gaps.

Run: .venv/bin/python benchmarks/bench_monitor_null.py [--seeds 50] [--first-seed 0] [--windows 100]
[--null-windows 50000] (the defaults; 4 min of CPU)
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
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from calibrators import expected_costs
from taskcal_agents.decision import Decider, Task, tool_decision
from taskcal_agents.decision._artefact import CalibratorArtefact, resolve_calibrator
from taskcal_agents.production._decision_log import artefact_id
from taskcal_agents.production._metrics import EPS
from taskcal_agents.production._monitor import DEFAULT_Z, monitor
from taskcal_agents.production._null import gap_estimate

SOURCES = ("calibrated", "world")
GAPS = ("cost_gap", "nll_gap")
KINDS = ("saddlepoint", "plain", "normal")  # the gaps' z: the monitor's, mean/(std/√n), mean/se
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


def draw_from(Q: NDArray[np.float64], rng: np.random.Generator) -> NDArray[np.intp]:
    """One outcome per row of *Q*, ``y_i ~ Q_i``."""
    return (rng.random((Q.shape[0], 1)) > np.cumsum(Q, axis=1)[:, :-1]).sum(axis=1)


def decide(
    task: Task,
    art: CalibratorArtefact,
    labels: list[list[str | None]],
    bench: ModuleType,
    args: Any,
) -> tuple[NDArray[np.float64], NDArray[np.intp], NDArray[np.bool_]]:
    """The logged beliefs, actions and fallback flags, as the runtime decides."""
    items = bench.Items(labels, np.empty((len(labels), 0)), np.zeros(len(labels), np.intp))
    P, X, no_sample = bench.beliefs(task, items, args.alpha)
    resolved = resolve_calibrator(art, task, owner="bench_monitor_null")
    decider = Decider(task, resolved.calibrator, alpha=resolved.alpha)
    Q = np.atleast_2d(decider.calibrate(X if decider.reads_features else P))
    Q[no_sample] = P[no_sample]  # a fallback decision logs the smoothed (uniform) belief
    executable = np.ones((len(labels), len(task.action_list)), dtype=bool)
    actions = decider.choose_actions(Q, executable).actions.copy()
    actions[no_sample] = task.action_index(task.default_action)
    return Q, actions, no_sample


def stream_records(
    task: Task,
    art: CalibratorArtefact,
    labels: list[list[str | None]],
    decided: tuple[NDArray[np.float64], NDArray[np.intp], NDArray[np.bool_]],
    y: NDArray[np.intp],
    args: Any,
) -> list[dict[str, Any]]:
    """Decision records of the stream, as the runtime logs them."""
    Q, actions, no_sample = decided
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


def gap_terms(
    Q: NDArray[np.float64], actions: NDArray[np.intp], cost: NDArray[np.float64]
) -> dict[str, NDArray[np.float64]]:
    """Each gap's term per item and outcome label, (n, k), as the monitor defines them."""
    rows = np.arange(Q.shape[0])
    e = expected_costs(Q, cost, check_input=False)[rows, actions]
    surprise = -np.log(np.clip(Q, EPS, 1.0))
    entropy = np.sum(Q * surprise, axis=1)
    return {
        "cost_gap": cost[:, actions].T - e[:, None],
        "nll_gap": surprise - entropy[:, None],
    }


def plain_z(observed: NDArray[np.float64]) -> float:
    """``mean / (std / sqrt(n))`` of the observed terms (the sample standard deviation)."""
    mean, sd = float(observed.mean()), float(observed.std(ddof=1))
    if sd == 0:
        return 0.0 if mean == 0 else math.copysign(math.inf, mean)
    return mean / (sd / math.sqrt(observed.size))


def gap_zs(
    Q: NDArray[np.float64], x: NDArray[np.float64], y: NDArray[np.intp]
) -> tuple[float, float, float, float]:
    """One window's gap: its mean and its saddlepoint, plain and normal (null SE) z."""
    est = gap_estimate(Q, x, y)
    observed = x[np.arange(y.size), y]
    assert est.value is not None and est.z is not None
    return est.value, est.z, plain_z(observed), est.value / est.se


def run_seed(task: Task, seed: int, tmp: Path, bench: ModuleType, args: Any) -> dict[str, Any]:
    """One fitted artefact and one stationary stream per source; the monitor's metrics.

    Per source, per full window: ``(name, sided, status, z, z_plain, z_normal)`` per
    metric (the last two ``None`` but for the gaps); under ``"null"`` the gaps' z of the
    ``calibrated`` source's outcomes drawn again (``--null-windows``): per gap an array of
    rows ``(saddlepoint, plain, normal)``.
    """
    rng = np.random.default_rng([seed, 7])
    world = bench.World(tau=args.tau0, shift=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence warnings of the inner fits
        art = bench.fit_artefact(task, bench.draw(task, world, args.n_fit, rng, args),
                                 tmp / f"art-{seed}.json", args)  # fmt: skip
    items = bench.draw(task, world, args.windows * args.window, rng, args)
    decided = decide(task, art, items.labels, bench, args)
    Q, actions, no_sample = decided
    terms = gap_terms(Q, actions, np.asarray(task.cost_matrix(), dtype=np.float64))
    out: dict[str, Any] = {}
    for source in SOURCES:
        y = draw_from(Q, rng) if source == "calibrated" else items.y
        records = stream_records(task, art, items.labels, decided, y, args)
        report = monitor(records, art, window=args.window, n_boot=args.n_boot, seed=seed)
        rows = []
        for w in report.windows:
            if w.n_decisions != args.window:
                continue
            served = np.arange(w.start, w.stop)[~no_sample[w.start : w.stop]]
            row = []
            for m in w.metrics:
                plain = normal = None
                if m.name in GAPS:
                    x = terms[m.name][served]
                    value, z, plain, normal = gap_zs(Q[served], x, y[served])
                    # the same terms and z as the report's (the null pass relies on it)
                    assert m.value is not None and m.z is not None
                    assert math.isclose(value, m.value, rel_tol=1e-9, abs_tol=1e-12)
                    assert math.isclose(z, m.z, rel_tol=1e-9, abs_tol=1e-9), (z, m.z)
                row.append((m.name, m.sided, m.status, m.z, plain, normal))
            rows.append(row)
        out[source] = rows
    served = np.flatnonzero(~no_sample)
    per_seed = args.windows * args.window
    repeats = max(0, math.ceil(args.null_windows / (args.seeds * args.windows)))
    null: dict[str, list[tuple[float, float, float]]] = {gap: [] for gap in GAPS}
    for _ in range(repeats):
        y = draw_from(Q, rng)
        for start in range(0, per_seed, args.window):
            idx = served[(served >= start) & (served < start + args.window)]
            if idx.size < args.min_n:
                continue  # as the monitor: "too few", not tested
            for gap in GAPS:
                null[gap].append(gap_zs(Q[idx], terms[gap][idx], y[idx])[1:])
    out["null"] = {gap: np.asarray(rows, dtype=np.float64).reshape(-1, 3)
                   for gap, rows in null.items()}  # fmt: skip
    return out


def pct(counts: ArrayLike, sizes: ArrayLike) -> str:
    """A share of windows in % with its SE clustered by seed (one cluster per seed).

    The ratio estimator's SE, ``sqrt(S/(S-1) · Σ_s (k_s − p n_s)²) / N``, over the seeds'
    alarm counts ``k_s`` of ``n_s`` windows: windows of one seed share a fitted map (and
    under ``null`` their beliefs), so they are not independent.
    """
    k, n = np.asarray(counts, dtype=np.float64), np.asarray(sizes, dtype=np.float64)
    total = float(n.sum())
    if total == 0:
        return "-"
    p = float(k.sum()) / total
    s = int(np.count_nonzero(n))
    se = math.sqrt(s / (s - 1) * float(np.sum((k - p * n) ** 2))) / total if s > 1 else math.nan
    return f"{100 * p:.3f} ± {100 * se:.3f}"


def tally(results: Sequence[dict[str, Any]], source: str, z: float) -> list[str]:
    """The markdown table of one source: one row per metric, then any metric."""
    # per metric, per seed: tested, alarm, low, high
    count: dict[str, NDArray[np.int64]] = defaultdict(lambda: np.zeros((len(results), 4), np.int64))
    zs: dict[str, list[float]] = defaultdict(list)
    sided: dict[str, str] = {}
    windows = np.zeros(len(results), np.int64)
    any_alarm = np.zeros(len(results), np.int64)
    for i, seed in enumerate(results):
        for window in seed[source]:
            windows[i] += 1
            any_alarm[i] += any(status == "ALARM" for _, _, status, *_ in window)
            for name, side, status, zval, *_ in window:
                if status not in ("ok", "ALARM"):
                    continue
                c = count[name][i]
                sided[name] = side
                c += (1, status == "ALARM", zval < -z, zval > z)
                if math.isfinite(zval):
                    zs[name].append(zval)
    one = float(stats.norm.sf(z))
    lines = [
        f"source {source!r}: {int(windows.sum())} windows",
        "",
        f"| metric | sided | windows | mean z | sd z | alarm % | z < −{z:g} % | z > {z:g} % | "
        "nominal alarm % |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in sorted(count):
        c = count[name]
        n = c[:, 0]
        nominal = 2 * one if sided[name] == "both" else one
        zz = np.asarray(zs[name])
        lines.append(
            f"| {name} | {sided[name]} | {int(n.sum())} | {zz.mean():+.3f} | "
            f"{zz.std(ddof=1):.3f} | {pct(c[:, 1], n)} | {pct(c[:, 2], n)} | "
            f"{pct(c[:, 3], n)} | {100 * nominal:.3f} |"
        )
    lines.append(f"| any metric | | {int(windows.sum())} | | | {pct(any_alarm, windows)} | | | |")
    return lines


def _rates(zs: Sequence[NDArray[np.float64]], z: float) -> str:
    """``alarm % (z < −z % / z > z %)`` of per-seed z arrays, SEs clustered by seed."""
    n = [a.size for a in zs]
    alarm = pct([int(np.sum(np.abs(a) > z)) for a in zs], n)
    low = pct([int(np.sum(a < -z)) for a in zs], n).split(" ±")[0]
    high = pct([int(np.sum(a > z)) for a in zs], n).split(" ±")[0]
    return f"{alarm} ({low} / {high})"


def gap_table(results: Sequence[dict[str, Any]], z: float) -> list[str]:
    """The gaps with the saddlepoint, plain and normal z side by side, per source."""
    nominal = f"{200 * float(stats.norm.sf(z)):.3f}"
    lines = [
        f"gaps, alarm % (z < −{z:g} % / z > {z:g} %): the monitor's saddlepoint z; the plain z "
        "mean / (std / √n); the normal z mean / se (null SE)",
        "",
        "| source | metric | windows | nominal % | saddlepoint | plain | normal |",
        "|---|---|---|---|---|---|---|",
    ]
    for source in SOURCES:
        anyz: dict[str, list[int]] = {kind: [0] * len(results) for kind in KINDS}
        per_seed: dict[str, dict[str, list[NDArray[np.float64]]]] = {
            gap: {kind: [] for kind in KINDS} for gap in GAPS
        }
        sizes = []
        for i, seed in enumerate(results):
            sizes.append(len(seed[source]))
            cols: dict[str, dict[str, list[float]]] = {g: {k: [] for k in KINDS} for g in GAPS}
            for window in seed[source]:
                other = any(status == "ALARM" for name, _, status, *_ in window if name not in GAPS)
                hit = dict.fromkeys(KINDS, other)
                for name, _, status, zval, plain, normal in window:
                    if name not in GAPS or status not in ("ok", "ALARM"):
                        continue
                    for kind, value in zip(KINDS, (zval, plain, normal), strict=True):
                        cols[name][kind].append(value)
                        hit[kind] = hit[kind] or abs(value) > z
                for kind in KINDS:
                    anyz[kind][i] += hit[kind]
            for gap in GAPS:
                for kind in KINDS:
                    per_seed[gap][kind].append(np.asarray(cols[gap][kind]))
        for gap in GAPS:
            n = sum(a.size for a in per_seed[gap]["saddlepoint"])
            cells = " | ".join(_rates(per_seed[gap][kind], z) for kind in KINDS)
            lines.append(f"| {source} | {gap} | {n} | {nominal} | {cells} |")
        cells = " | ".join(pct(anyz[kind], sizes) for kind in KINDS)
        lines.append(f"| {source} | any metric | {sum(sizes)} | | {cells} |")
    for gap in GAPS:
        arrays = [seed["null"][gap] for seed in results]
        n = sum(a.shape[0] for a in arrays)
        if n == 0:
            continue
        cells = " | ".join(_rates([a[:, j] for a in arrays], z) for j, _ in enumerate(KINDS))
        lines.append(f"| calibrated, outcomes redrawn | {gap} | {n} | {nominal} | {cells} |")
    return lines


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line (``--quick``: a smoke test); the world is the drift benchmark's."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=50, help="fitted artefacts (streams)")
    parser.add_argument("--first-seed", type=int, default=0, help="the first seed's number")
    parser.add_argument("--windows", type=int, default=100, help="windows per stream")
    parser.add_argument("--window", type=int, default=200, help="decisions per window")
    parser.add_argument("--null-windows", type=int, default=50_000,
                        help="calibrated gap windows, outcomes redrawn (at least)")  # fmt: skip
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
        args.null_windows = 40
    args.min_n = 30  # the monitor's default: fewer labelled decisions are "too few"
    return args


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Run the benchmark, print the tables, return the per-seed window results."""
    args = parse_args(argv)
    bench = _bench_drift()
    task = tool_decision(sampled_actions=[])
    started = time.perf_counter()
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    with tempfile.TemporaryDirectory(prefix="bench_monitor_null.") as tmp:
        results = [run_seed(task, seed, Path(tmp), bench, args) for seed in seeds]
    command = " ".join(["benchmarks/bench_monitor_null.py", *(sys.argv[1:] if argv is None
                                                              else argv)])  # fmt: skip
    print(
        f"\n{command}\nseeds {seeds.start}–{seeds.stop - 1}; task {task.name}, "
        f"{args.calibrator} fitted on {args.n_fit} items; {args.windows} tumbling windows of "
        f"{args.window} decisions per source and seed, N={args.n_samples}, τ₀={args.tau0}; "
        f"monitor at z={DEFAULT_Z:g}, ECE bootstrap {args.n_boot}; SEs clustered by seed "
        f"({time.perf_counter() - started:.0f} s)\n"
    )
    for source in SOURCES:
        print("\n".join(tally(results, source, DEFAULT_Z)) + "\n")
    print("\n".join(gap_table(results, DEFAULT_Z)) + "\n")
    return results


if __name__ == "__main__":
    main()
