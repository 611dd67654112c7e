"""Fit time and held-out quality of every calibration map, next to scikit-learn.

Synthetic miscalibrated source with k = 10 classes: true logits z ~ N(0, 1.5^2) per
class plus a class prior; labels are drawn from softmax(z); the reported
probabilities are overconfident, biased and mix classes:
P = softmax(2.2 * z @ M + b) with M = I + 0.15 * noise. 20,000 rows fit each map and
another 20,000 rows measure it.

The reference is scikit-learn's multinomial LogisticRegression without penalty
(C=inf, lbfgs, default tol) on ln P features: the same model as the unregularised
full Dirichlet map. Fit times are the best of --repeats runs (the machine may be
shared; scikit-learn is timed with its default threading and with BLAS limited to
one thread, as the calibrators fit, and ratios use the faster of the two). Target:
DirichletCalibrator(kind="full", reg_lambda=0) fits no slower than
scikit-learn at equal held-out NLL (within 1e-4).

Run: .venv/bin/python benchmarks/bench_calibrators.py
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression

from calibrators import (
    DirichletCalibrator,
    HistogramBinning,
    IdentityCalibrator,
    IsotonicCalibrator,
    MatrixScaling,
    TemperatureScaling,
    VectorScaling,
)
from calibrators._validation import single_blas_thread
from calibrators.metrics import classwise_ece, ece, nll


def softmax(Z: np.ndarray) -> np.ndarray:
    Z = Z - Z.max(axis=1, keepdims=True)
    E = np.exp(Z)
    return E / E.sum(axis=1, keepdims=True)


def make_data(n: int, k: int, rng: np.random.Generator, M: np.ndarray, b: np.ndarray):
    prior = np.linspace(-0.5, 0.5, k)
    Z = rng.normal(size=(n, k)) * 1.5 + prior
    truth = softmax(Z)
    u = rng.random(n)[:, None]
    y = np.minimum((u > np.cumsum(truth, axis=1)).sum(axis=1), k - 1)
    P = softmax(2.2 * Z @ M + b)
    return P, y


class SklearnLogistic:
    """LogisticRegression on ln P, wrapped to take probabilities like the calibrators."""

    def __init__(self, eps: float = 1e-12, single_thread: bool = False, **kwargs: Any) -> None:
        self.eps = eps
        self.single_thread = single_thread
        self.kwargs = kwargs

    def fit(self, P: np.ndarray, y: np.ndarray) -> SklearnLogistic:
        X = np.log(np.maximum(P, self.eps))
        self.model_ = LogisticRegression(C=np.inf, **self.kwargs)
        if self.single_thread:
            with single_blas_thread():
                self.model_.fit(X, y)
        else:
            self.model_.fit(X, y)
        return self

    def predict_proba(self, P: np.ndarray) -> np.ndarray:
        return self.model_.predict_proba(np.log(np.maximum(P, self.eps)))


def best_time(make: Callable[[], Any], P: np.ndarray, y: np.ndarray, repeats: int):
    best, fitted = np.inf, None
    for _ in range(repeats):
        est = make()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a ConvergenceWarning is reported as n_iter
            t0 = time.perf_counter()
            est.fit(P, y)
            elapsed = time.perf_counter() - t0
        if elapsed < best:
            best, fitted = elapsed, est
    return best, fitted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000, help="rows to fit and rows to test")
    parser.add_argument("--k", type=int, default=10, help="number of classes")
    parser.add_argument("--repeats", type=int, default=3, help="timing repeats (best is kept)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    k = args.k
    M = np.eye(k) + 0.15 * rng.normal(size=(k, k))
    b = rng.normal(size=k) * 0.5
    P, y = make_data(args.n, k, rng, M, b)
    P_test, y_test = make_data(args.n, k, rng, M, b)

    entries: list[tuple[str, Callable[[], Any]]] = [
        ("sklearn LogisticRegression(C=inf)", lambda: SklearnLogistic(max_iter=10_000)),
        (
            "sklearn LogisticRegression(C=inf), 1 BLAS thread",
            lambda: SklearnLogistic(max_iter=10_000, single_thread=True),
        ),
        ("IdentityCalibrator", IdentityCalibrator),
        ("TemperatureScaling", TemperatureScaling),
        ("VectorScaling", VectorScaling),
        ("MatrixScaling", MatrixScaling),
        ("Dirichlet full, reg_lambda=0", DirichletCalibrator),
        (
            "Dirichlet full, ODIR 1e-3/1e-3",
            lambda: DirichletCalibrator(reg_lambda=1e-3, reg_mu=1e-3),
        ),
        ("Dirichlet full, L2->I 1e-2", lambda: DirichletCalibrator(reg_lambda=1e-2)),
        ("Dirichlet diagonal", lambda: DirichletCalibrator(kind="diagonal")),
        ("Dirichlet fixed_diagonal", lambda: DirichletCalibrator(kind="fixed_diagonal")),
        ("Dirichlet full, reg_lambda=auto", lambda: DirichletCalibrator(reg_lambda="auto")),
        ("IsotonicCalibrator", IsotonicCalibrator),
        ("HistogramBinning(15)", HistogramBinning),
    ]

    rows = []
    for name, make in entries:
        repeats = 1 if "auto" in name else args.repeats
        seconds, est = best_time(make, P, y, repeats)
        Q = est.predict_proba(P_test)
        n_iter = getattr(est, "n_iter_", None)
        if n_iter is None and hasattr(est, "model_"):
            n_iter = int(np.max(est.model_.n_iter_))
        rows.append(
            {
                "name": name,
                "seconds": seconds,
                "n_iter": n_iter,
                "train_nll": nll(y, est.predict_proba(P)),
                "test_nll": nll(y_test, Q),
                "ece": ece(y_test, Q),
                "cw_ece": classwise_ece(y_test, Q),
                "acc": float(np.mean(np.argmax(Q, axis=1) == y_test)),
            }
        )

    # Ratios are against the faster of the two scikit-learn runs (the conservative choice:
    # on a busy machine multi-threaded BLAS can make the default run much slower).
    ref = min(rows[:2], key=lambda r: r["seconds"])
    print(
        f"n_fit = n_test = {args.n}, k = {k}, best of {args.repeats} fits "
        f"(auto: 1 fit; 7 values x 5 folds), seed {args.seed}; "
        f"'x sklearn' = time / time of '{ref['name']}'"
    )
    header = (
        f"{'map':<50} {'fit s':>8} {'x sklearn':>9} {'iter':>5} {'train NLL':>10} "
        f"{'test NLL':>10} {'ECE':>7} {'cw-ECE':>7} {'acc':>6}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        it = "" if r["n_iter"] is None else str(r["n_iter"])
        print(
            f"{r['name']:<50} {r['seconds']:>8.3f} {r['seconds'] / ref['seconds']:>9.2f} "
            f"{it:>5} {r['train_nll']:>10.6f} {r['test_nll']:>10.6f} {r['ece']:>7.4f} "
            f"{r['cw_ece']:>7.4f} {r['acc']:>6.4f}"
        )

    ours = next(r for r in rows if r["name"] == "Dirichlet full, reg_lambda=0")
    d_train = ours["train_nll"] - ref["train_nll"]
    d_test = ours["test_nll"] - ref["test_nll"]
    faster = ours["seconds"] <= ref["seconds"]
    equal = abs(d_test) <= 1e-4
    print()
    print(
        f"Target (Dirichlet full, reg_lambda=0 vs {ref['name']}): "
        f"time ratio {ours['seconds'] / ref['seconds']:.2f} ({'OK' if faster else 'SLOWER'}), "
        f"train NLL diff {d_train:+.2e}, test NLL diff {d_test:+.2e} "
        f"({'OK' if equal else 'NOT EQUAL'}) -> {'MET' if faster and equal else 'NOT MET'}"
    )


if __name__ == "__main__":
    main()
