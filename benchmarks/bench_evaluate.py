"""Time of the default evaluation (`taskcal evaluate`): cross-fitted table plus shuffle test.

`evaluate_arrays` with the CLI's defaults: the maps temperature, vector, matrix, dirichlet,
isotonic and histogram cross-fitted over 5 stratified folds (plus the cross-fitted TCE
column), then the label-shuffle test, which refits the served ODIR Dirichlet map, with its
inner 3-fold selection of (reg_lambda, reg_mu) over the 4 x 2 grid, in every fold of every
shuffle (200 by default).

Data: STS-B-like, k = 6 ratings 0-5, L1 cost, beliefs as flat as the one-pass logprob
beliefs of Qwen2.5-Coder-0.5B on 150 STS-B items (mean belief and label counts of that
run, a weak ordinal signal, log-normal noise). --samples PATH times a real samples file
(through the workflow's own loading) instead.

The "before" columns are the CPU seconds measured at commit 1db30a0 (L-BFGS-B solver,
one fit per candidate from scratch per split) on the same data, per shuffle and for the
table; "before (200)" projects the table plus 201 cross-fits (observed + shuffles). CPU
seconds are reported because wall times swing by several times between runs on a
machine whose cores a vLLM server shares.

Target: 150 items, 200 shuffles well under 60 s on 2 cores; 1,000 items in a few minutes.

Run: .venv/bin/python benchmarks/bench_evaluate.py [--n 150 1000] [--permutations 200]
[--jobs 2] [--samples runs/qwen05.stsb150.logprob.samples.jsonl]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from taskcal_agents.workflow import EvalArrays
from taskcal_agents.workflow._data import load_eval_arrays
from taskcal_agents.workflow._evaluate import evaluate_arrays

MEAN_BELIEF = np.array([0.045, 0.103, 0.119, 0.235, 0.289, 0.209])
LABEL_COUNTS = np.array([28, 38, 33, 20, 19, 12])

BEFORE_CPU_S: dict[str, tuple[float, float]] = {
    # case: (table, one shuffle's cross-fit, median of 3), CPU seconds at commit 1db30a0
    "synthetic n=150": (8.1, 4.1),
    "synthetic n=1000": (9.2, 4.4),
    "qwen05.stsb150": (10.7, 6.1),
}
"""The same quantities measured before the Newton solver (see the module docstring)."""


def stsb_like(n: int, seed: int = 0, signal: float = 0.15, noise: float = 0.12) -> EvalArrays:
    """STS-B-like evaluation arrays: flat beliefs over 6 ratings with a weak signal."""
    rng = np.random.default_rng(seed)
    k = len(MEAN_BELIEF)
    y = rng.choice(k, size=n, p=LABEL_COUNTS / LABEL_COUNTS.sum())
    ratings = np.arange(k)
    Z = np.log(MEAN_BELIEF) + noise * rng.normal(size=(n, k))
    Z += signal * np.outer((y - 2.5) / 2.5, (ratings - 2.5) / 2.5)
    P = np.exp(Z - Z.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    labels = tuple(str(r) for r in ratings)
    return EvalArrays(
        P=P,
        y=y.astype(np.intp),
        cost=np.abs(ratings[:, None] - ratings[None, :]).astype(np.float64),
        labels=labels,
        actions=labels,
        greedy=np.full(n, -1, dtype=np.intp),
        no_sample=np.zeros(n, dtype=bool),
        fallback=2,
        ids=tuple(f"item{i}" for i in range(n)),
    )


def timed(data: EvalArrays, permutations: int, jobs: int) -> tuple[float, float, float | None]:
    """Wall and CPU seconds of one evaluation (CPU of this process only), and p."""
    t0, c0 = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence warnings are not timed
        result = evaluate_arrays(data, n_permutations=permutations, n_jobs=jobs)
    p = result.permutation.p_value if result.permutation else None
    return time.perf_counter() - t0, time.process_time() - c0, p


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[150, 1000], help="item counts")
    parser.add_argument("--permutations", type=int, default=200, help="label shuffles")
    parser.add_argument("--jobs", type=int, default=1, help="processes for the shuffles")
    parser.add_argument("--samples", help="a samples file to time instead of synthetic data")
    args = parser.parse_args()

    cases: list[tuple[str, EvalArrays]] = []
    if args.samples:
        _, _, data = load_eval_arrays(args.samples)
        name = args.samples.rsplit("/", 1)[-1].split(".logprob")[0].split(".samples")[0]
        cases.append((name, data))
    else:
        cases += [(f"synthetic n={n}", stsb_like(n)) for n in args.n]
    timed(stsb_like(30), 0, 1)  # imports and first-call costs are not timed

    header = (
        f"{'case':<18} {'n':>5} {'shuffles':>8} {'jobs':>4} {'table s':>8} {'total s':>8} "
        f"{'total CPU s':>11} {'CPU s/shuffle':>13} {'before CPU s':>12} {'speed-up':>8} "
        f"{'p':>6}"
    )
    print(header)
    print("-" * len(header))
    for name, data in cases:
        table_wall, table_cpu, _ = timed(data, 0, 1)
        wall, cpu, p = timed(data, args.permutations, args.jobs)
        serial = args.jobs == 1
        # With workers, this process's CPU time misses theirs: compare wall times then.
        measured = cpu if serial else wall
        per_shuffle = f"{(cpu - table_cpu) / (args.permutations + 1):>13.3f}" if serial else ""
        before = BEFORE_CPU_S.get(name)
        if before is not None:
            projected = before[0] + (args.permutations + 1) * before[1]
            before_text, ratio = f"{projected:>12.0f}", f"{projected / measured:>7.0f}x"
        else:
            before_text, ratio = f"{'':>12}", f"{'':>8}"
        p_text = "" if p is None else f"{p:.3f}"
        print(
            f"{name:<18} {data.n:>5} {args.permutations:>8} {args.jobs:>4} {table_wall:>8.1f} "
            f"{wall:>8.1f} {cpu:>11.1f} {per_shuffle:>13} {before_text} {ratio} {p_text:>6}"
        )
    print()
    print(
        "table s: the evaluation without shuffles (wall); total s: with them (wall). "
        "before: table + (shuffles + 1) cross-fits at the CPU seconds measured at 1db30a0; "
        "speed-up: before / total CPU s (/ total s with --jobs > 1, whose workers' CPU "
        "time this process does not see)."
    )


if __name__ == "__main__":
    main()
