"""Do beliefs served in float32 and in bfloat16 agree, and does a map fitted on one serve the other?

Reads two samples files of the same items drawn from one model in two dtypes (the demo's
STS-B files, for instance: ``taskcal demo`` serves float32 on an AVX2 CPU and bfloat16 on one
with ``avx512_bf16``) and prints, on the items both hold:

- how far the raw beliefs are apart (mean total variation, share of items with the same
  most likely label);
- the cost per decision of calibrated (Dirichlet) MBR when the map of each fold is fitted on
  file A and serves the held-out items of A, and of B: the paired difference says what
  serving a calibrator in the other dtype costs (5 folds, the evaluation's own functions).

Usage::

    python benchmarks/dtype_agreement.py A.samples.jsonl B.samples.jsonl
"""

from __future__ import annotations

import argparse

import numpy as np

from taskcal_agents.workflow._calibrator_specs import default_factory
from taskcal_agents.workflow._crossfit import (
    apply_calibrators,
    calibrator_inputs,
    crossfit_calibrators,
    stratified_folds,
)
from taskcal_agents.workflow._data import eval_arrays, resolve_task
from taskcal_agents.workflow._decoders import runtime_actions
from taskcal_agents.workflow._store import read_samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", help="samples file A (the calibrators are fitted on it)")
    parser.add_argument("b", help="samples file B (same items, the other dtype)")
    parser.add_argument("--folds", type=int, default=5)
    args = parser.parse_args()
    files = [read_samples(args.a), read_samples(args.b)]
    task = resolve_task(files[0], None)
    ids = sorted(set(files[0].records) & set(files[1].records))
    A, B = (eval_arrays(task, f, ids=ids) for f in files)
    assert (A.y == B.y).all()
    tv = 0.5 * np.abs(A.P - B.P).sum(axis=1)
    same = (A.P.argmax(axis=1) == B.P.argmax(axis=1)).mean()
    print(
        f"{len(ids)} items in both; raw beliefs: mean total variation {tv.mean():.3f} "
        f"(90th percentile {np.quantile(tv, 0.9):.3f}); same most likely label {same:.1%}"
    )
    XA, make, _ = calibrator_inputs(A, default_factory("dirichlet"))
    XB, _, _ = calibrator_inputs(B, default_factory("dirichlet"))
    folds = stratified_folds(A.y, args.folds, 0)
    fitted = crossfit_calibrators(XA, A.y, folds, make, fit_mask=A.served)
    costs = {}
    for name, data, X in (("A", A, XA), ("B", B, XB)):
        actions = runtime_actions(apply_calibrators(X, folds, fitted), data)
        costs[name] = data.cost[data.y, actions]
    const = A.cost[A.y].mean(axis=0).argmin()
    base = A.cost[A.y, const]
    diff = costs["B"] - costs["A"]
    se = diff.std(ddof=1) / np.sqrt(len(diff))
    print(f"best constant action: {base.mean():.3f}")
    print(
        f"Dirichlet MBR, maps fitted on A: on A {costs['A'].mean():.3f}, on B "
        f"{costs['B'].mean():.3f}; B - A {diff.mean():+.3f} ± {se:.3f} (paired se)"
    )
    for name in ("A", "B"):
        saving = base - costs[name]
        print(
            f"  saving over the constant on {name}: {saving.mean():+.3f} ± "
            f"{saving.std(ddof=1) / np.sqrt(len(saving)):.3f}"
        )


if __name__ == "__main__":
    main()
