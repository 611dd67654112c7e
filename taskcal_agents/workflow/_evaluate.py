"""Cross-fitted comparison of decoders, on plain arrays (no model, no files).

Inputs: the raw beliefs ``P`` (n, k) built from the parsed samples, the true label indices
``y`` (n,), the greedy completion's label index (-1 when unparsed or missing), a mask of
items with no usable sample, and the task's cost matrix ``C`` (k, m), row = true label,
column = action.

Decoders (one row each):

``constant``
    The best constant action: MBR on the label prior estimated in the training folds,
    argmin_a Σ_ℓ π(ℓ) C[ℓ, a] — what a model with no signal should do.
``greedy``
    The action named by the greedy (temperature 0) completion's label.
``majority``
    Majority vote over the samples: the action named by the MAP label of the raw belief.
``mbr_raw``
    MBR on the raw belief.
``mbr_<calibrator>``
    MBR on the belief calibrated by a map fitted on the other folds (cross-fitting).

``greedy`` and ``majority`` turn a label into the action of the same name; they are only
defined when every label is also an action. Decoders that read samples fall back to the
task's fallback action on items without any usable sample, as the runtime does.

Folds are stratified by label and seeded, so every decoder and calibrator sees the same
splits. The label-shuffle test permutes ``y`` against ``P`` and recomputes the whole
cross-fitted cost gap (best constant − calibrated MBR): its p-value says whether the gain
of calibrated MBR over the best constant action is more than chance.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from taskcal_agents.errors import ConfigurationError

DEFAULT_CALIBRATORS = ("temperature", "vector", "matrix", "dirichlet", "isotonic", "histogram")
"""Calibration maps evaluated by default (``identity`` is ``mbr_raw``)."""

PRIOR_PSEUDOCOUNT = 0.5
"""Pseudo-count added per label to the in-fold label prior (Jeffreys), so that its NLL
stays finite when a label is missing from a training fold."""

DECODER_DESCRIPTIONS = {
    "constant": "best constant action (MBR on the in-fold label prior)",
    "greedy": "greedy completion (temperature 0)",
    "majority": "majority vote (MAP of the raw belief)",
    "mbr_raw": "MBR on the raw belief",
}


@dataclass(frozen=True)
class EvalArrays:
    """Everything the evaluation needs, as arrays.

    Attributes:
        P: Raw beliefs, shape (n, k), rows sum to 1.
        y: True label indices, shape (n,).
        cost: Cost matrix, shape (k, m), row = true label, column = action.
        labels: The k label names.
        actions: The m action names.
        greedy: Label index of the greedy completion, -1 when unparsed or missing, (n,).
        no_sample: Items without any usable sample (they get the fallback action), (n,).
        fallback: Index of the fallback action.
        ids: Item ids (for the per-item output).
    """

    P: NDArray[np.float64]
    y: NDArray[np.intp]
    cost: NDArray[np.float64]
    labels: tuple[str, ...]
    actions: tuple[str, ...]
    greedy: NDArray[np.intp]
    no_sample: NDArray[np.bool_]
    fallback: int
    ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        n, k = self.P.shape
        m = len(self.actions)
        problems = []
        if self.cost.shape != (k, m) or len(self.labels) != k:
            problems.append(
                f"cost has shape {self.cost.shape}, expected (k, m) = ({k}, {m}) for "
                f"{len(self.labels)} labels and {m} actions"
            )
        if self.y.shape != (n,) or self.greedy.shape != (n,) or self.no_sample.shape != (n,):
            problems.append(
                f"y, greedy and no_sample must have shape ({n},), got {self.y.shape}, "
                f"{self.greedy.shape} and {self.no_sample.shape}"
            )
        elif n and (self.y.min() < 0 or self.y.max() >= k):
            problems.append(f"y must hold label indices in [0, {k}), got {sorted(set(self.y))}")
        if not 0 <= self.fallback < m:
            problems.append(f"fallback must be an action index in [0, {m}), got {self.fallback}")
        if problems:
            msg = "EvalArrays are inconsistent: " + "; ".join(problems) + "."
            raise ConfigurationError(msg)

    @property
    def n(self) -> int:
        """The number of items."""
        return int(self.P.shape[0])

    def label_to_action(self) -> NDArray[np.intp] | None:
        """Action index of each label (same name), or ``None`` when a label has no action."""
        index = {a: j for j, a in enumerate(self.actions)}
        if not all(label in index for label in self.labels):
            return None
        return np.array([index[label] for label in self.labels], dtype=np.intp)


# --------------------------------------------------------------------------------------
# building blocks


def stratified_folds(y: NDArray[np.intp], n_folds: int, seed: int) -> NDArray[np.intp]:
    """Assign each item to one of *n_folds* folds, stratified by label, seeded.

    Within each label the items are shuffled and dealt to the folds in turn, continuing
    where the previous label stopped, so fold sizes differ by at most one and every label
    is spread as evenly as its count allows (no warning for rare labels).

    Args:
        y: Label indices, shape (n,).
        n_folds: The number of folds (2 <= n_folds <= n).
        seed: The shuffling seed.

    Returns:
        The fold index of each item, shape (n,).

    Raises:
        ConfigurationError: *n_folds* is below 2 or above the number of items.
    """
    y = np.asarray(y)
    n = y.shape[0]
    if not 2 <= n_folds <= n:
        msg = f"folds must be between 2 and the number of items ({n}), got {n_folds!r}."
        raise ConfigurationError(msg)
    rng = np.random.default_rng(seed)
    folds = np.empty(n, dtype=np.intp)
    offset = 0
    for label in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == label))
        folds[idx] = (offset + np.arange(idx.size)) % n_folds
        offset += idx.size
    return folds


def mbr(Q: NDArray[np.float64], cost: NDArray[np.float64]) -> NDArray[np.intp]:
    """MBR actions: argmin_a Σ_ℓ Q[i, ℓ] C[ℓ, a] per row (ties → first action)."""
    return np.argmin(Q @ cost, axis=1).astype(np.intp)


def in_fold_prior(y: NDArray[np.intp], folds: NDArray[np.intp], k: int) -> NDArray[np.float64]:
    """Per item, the label prior of the *other* folds (with :data:`PRIOR_PSEUDOCOUNT`)."""
    out = np.empty((y.shape[0], k))
    for f in np.unique(folds):
        train = folds != f
        counts = np.bincount(y[train], minlength=k) + PRIOR_PSEUDOCOUNT
        out[folds == f] = counts / counts.sum()
    return out


CalibratorFactory = Callable[[], Any]


def crossfit_calibrated(
    P: NDArray[np.float64],
    y: NDArray[np.intp],
    folds: NDArray[np.intp],
    make: CalibratorFactory,
) -> NDArray[np.float64]:
    """Calibrate each fold with a map fitted on the other folds.

    Args:
        P: Raw beliefs, (n, k).
        y: True label indices, (n,).
        folds: Fold index per item, (n,).
        make: Returns a fresh, unfitted calibrator (``fit(P, y)``, ``predict_proba(P)``).

    Returns:
        The cross-fitted calibrated beliefs, (n, k).
    """
    Q = np.empty_like(P)
    for f in np.unique(folds):
        test = folds == f
        calibrator = make().fit(P[~test], y[~test])
        Q[test] = calibrator.predict_proba(P[test])
    return Q


# --------------------------------------------------------------------------------------
# scores


def _probability_scores(
    Q: NDArray[np.float64], y: NDArray[np.intp], cost: NDArray[np.float64]
) -> dict[str, float]:
    from calibrators import metrics

    return {
        "nll": float(metrics.nll(y, Q)),
        "brier": float(metrics.brier(y, Q)),
        "ece": float(metrics.ece(y, Q)),
        "classwise_ece": float(metrics.classwise_ece(y, Q)),
        "tce": float(metrics.tce(Q, y, cost)),
    }


def _macro_f1(y_true: NDArray[np.intp], y_pred: NDArray[np.intp], m: int) -> float:
    scores = []
    for c in range(m):
        tp = float(np.sum((y_pred == c) & (y_true == c)))
        fp = float(np.sum((y_pred == c) & (y_true != c)))
        fn = float(np.sum((y_pred != c) & (y_true == c)))
        denom = 2 * tp + fp + fn
        scores.append(2 * tp / denom if denom else 0.0)
    return float(np.mean(scores))


def score_actions(
    actions: NDArray[np.intp],
    data: EvalArrays,
    probs: NDArray[np.float64] | None = None,
) -> dict[str, Any]:
    """Score one decoder's actions (and the probabilities it decided on, if any).

    Args:
        actions: Action index per item, (n,).
        data: The evaluation arrays.
        probs: The beliefs behind the actions, (n, k), for NLL, Brier, ECE and TCE.

    Returns:
        ``expected_cost`` (mean realised cost), ``cost_se`` (its standard error),
        ``accuracy`` and ``macro_f1`` (when every label is an action; else ``None``), the
        probability scores (``None`` without *probs*), and ``action_counts``.
    """
    realised = data.cost[data.y, actions]
    n = data.n
    row: dict[str, Any] = {
        "expected_cost": float(realised.mean()),
        "cost_se": float(realised.std(ddof=1) / math.sqrt(n)) if n > 1 else None,
    }
    l2a = data.label_to_action()
    if l2a is not None:
        target = l2a[data.y]
        row["accuracy"] = float(np.mean(actions == target))
        row["macro_f1"] = _macro_f1(target, actions, len(data.actions))
    else:
        row["accuracy"] = row["macro_f1"] = None
    if probs is not None:
        row.update(_probability_scores(probs, data.y, data.cost))
    else:
        row.update(dict.fromkeys(("nll", "brier", "ece", "classwise_ece", "tce")))
    counts = np.bincount(actions, minlength=len(data.actions))
    row["action_counts"] = {a: int(c) for a, c in zip(data.actions, counts, strict=True)}
    return row


# --------------------------------------------------------------------------------------
# the evaluation


@dataclass
class PermutationTest:
    """Label-shuffle test of "calibrated MBR beats the best constant action".

    Attributes:
        calibrator: The calibrator of the tested MBR decoder.
        statistic: Observed cross-fitted gap, cost(constant) − cost(MBR + calibrator).
        gap_se: Standard error of the observed gap (paired over items).
        p_value: (1 + #{permuted gap >= observed}) / (1 + n_permutations).
        n_permutations: The number of label shuffles.
        seed: The seed of the shuffles.
        null: The permuted gaps.
    """

    calibrator: str
    statistic: float
    gap_se: float | None
    p_value: float
    n_permutations: int
    seed: int
    null: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (the null distribution summarised by its quantiles)."""
        null = np.asarray(self.null)
        return {
            "calibrator": self.calibrator,
            "statistic": self.statistic,
            "gap_se": self.gap_se,
            "p_value": self.p_value,
            "n_permutations": self.n_permutations,
            "seed": self.seed,
            "null_quantiles": {
                q: float(np.quantile(null, float(q))) for q in ("0.5", "0.9", "0.95", "0.99")
            }
            if null.size
            else {},
        }


@dataclass
class Evaluation:
    """The result of :func:`evaluate_arrays`.

    Attributes:
        rows: One dict per decoder (``decoder``, ``description``, scores, ``error``).
        probs: Cross-fitted beliefs per probabilistic decoder (``raw``, ``constant``,
            calibrator names), each (n, k).
        actions: Action indices per decoder, each (n,).
        permutation: The label-shuffle test, or ``None`` when not run.
        n_folds: The number of folds.
        seed: The fold seed.
    """

    rows: list[dict[str, Any]]
    probs: dict[str, NDArray[np.float64]]
    actions: dict[str, NDArray[np.intp]]
    permutation: PermutationTest | None
    n_folds: int
    seed: int

    def row(self, decoder: str) -> dict[str, Any]:
        """The row of *decoder*."""
        for row in self.rows:
            if row["decoder"] == decoder:
                return row
        msg = f"no decoder {decoder!r}; decoders are {[r['decoder'] for r in self.rows]!r}."
        raise KeyError(msg)


def _with_fallback(actions: NDArray[np.intp], data: EvalArrays) -> NDArray[np.intp]:
    out = actions.copy()
    out[data.no_sample] = data.fallback
    return out


def _gap(
    P: NDArray[np.float64],
    y: NDArray[np.intp],
    data: EvalArrays,
    n_folds: int,
    seed: int,
    make: CalibratorFactory,
) -> tuple[float, NDArray[np.float64]]:
    """Cross-fitted cost(constant) − cost(MBR + calibrator), and the per-item differences."""
    folds = stratified_folds(y, n_folds, seed)
    k = P.shape[1]
    const = mbr(in_fold_prior(y, folds, k), data.cost)
    Q = crossfit_calibrated(P, y, folds, make)
    cal = _with_fallback(mbr(Q, data.cost), data)
    diff = data.cost[y, const] - data.cost[y, cal]
    return float(diff.mean()), diff


def permutation_test(
    data: EvalArrays,
    make: CalibratorFactory,
    *,
    calibrator: str,
    n_folds: int = 5,
    fold_seed: int = 0,
    n_permutations: int = 200,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
) -> PermutationTest:
    """Label-shuffle test of the cross-fitted gap between best constant and calibrated MBR.

    Under the null hypothesis the beliefs carry no information about the labels, so
    shuffling ``y`` against ``P`` leaves the gap's distribution unchanged.

    Args:
        data: The evaluation arrays.
        make: Returns a fresh calibrator.
        calibrator: Its name (for the report).
        n_folds: Folds of the cross-fitting.
        fold_seed: Seed of the folds (the same for the observed and permuted labels).
        n_permutations: The number of shuffles.
        seed: Seed of the shuffles.
        progress: Called with 1 after each shuffle.

    Returns:
        The test result.
    """
    observed, diff = _gap(data.P, data.y, data, n_folds, fold_seed, make)
    rng = np.random.default_rng(seed)
    null = []
    for _ in range(n_permutations):
        y_perm = data.y[rng.permutation(data.n)]
        null.append(_gap(data.P, y_perm, data, n_folds, fold_seed, make)[0])
        if progress is not None:
            progress(1)
    exceed = sum(g >= observed - 1e-12 for g in null)
    return PermutationTest(
        calibrator=calibrator,
        statistic=observed,
        gap_se=float(diff.std(ddof=1) / math.sqrt(data.n)) if data.n > 1 else None,
        p_value=(1 + exceed) / (1 + n_permutations),
        n_permutations=n_permutations,
        seed=seed,
        null=null,
    )


def parse_calibrator_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """Split ``"name:key=value:key=value"`` into the name and its parameters.

    Values are read as JSON when they parse (``0.01``, ``null``, ``true``), else kept as
    strings (``auto``). ``"dirichlet:reg_lambda=auto"`` → ``("dirichlet",
    {"reg_lambda": "auto"})``.

    Raises:
        ConfigurationError: A parameter is not ``key=value``.
    """
    import json

    name, *pairs = spec.split(":")
    params: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            msg = (
                f"calibrator spec {spec!r}: parameters must be key=value, got {pair!r}; "
                "write e.g. 'dirichlet:reg_lambda=0.01'."
            )
            raise ConfigurationError(msg)
        try:
            params[key] = json.loads(raw)
        except json.JSONDecodeError:
            params[key] = raw
    return name.strip(), params


def default_factory(spec: str, **params: Any) -> CalibratorFactory:
    """A factory of fresh calibrators from a spec (see :func:`parse_calibrator_spec`).

    Raises:
        ConfigurationError: The name or a parameter is unknown.
    """
    from calibrators import make_calibrator

    name, spec_params = parse_calibrator_spec(spec)
    merged = {**spec_params, **params}
    try:
        make_calibrator(name, **merged)
    except (ValueError, TypeError) as exc:
        msg = f"cannot make calibrator {spec!r} with parameters {merged!r}: {exc}"
        raise ConfigurationError(msg) from exc

    def make() -> Any:
        return make_calibrator(name, **merged)

    return make


def evaluate_arrays(
    data: EvalArrays,
    *,
    calibrators: Sequence[str] = DEFAULT_CALIBRATORS,
    n_folds: int = 5,
    seed: int = 0,
    n_permutations: int = 200,
    test_calibrator: str | None = "dirichlet",
    factory: Callable[[str], CalibratorFactory] = default_factory,
    progress: Callable[[int], None] | None = None,
) -> Evaluation:
    """Evaluate every decoder with cross-fitted calibration.

    Args:
        data: The evaluation arrays.
        calibrators: Calibrator specs to cross-fit (one ``mbr_<spec>`` row each), names of
            :func:`calibrators.make_calibrator` optionally with parameters
            (``"dirichlet:reg_lambda=auto"``, see :func:`parse_calibrator_spec`).
        n_folds: The number of stratified folds.
        seed: Seed of the folds and of the label shuffles.
        n_permutations: Label shuffles of the permutation test (0 skips it).
        test_calibrator: The calibrator whose MBR the test compares with the best constant
            action; ``None`` skips the test. It need not be in *calibrators*.
        factory: Maps a calibrator spec to a factory of fresh calibrators.
        progress: Called with a step count as work completes (for a progress bar).

    Returns:
        The rows, the cross-fitted beliefs and actions, and the permutation test. A
        calibrator that fails to fit gets a row with ``error`` set and no scores.

    Raises:
        ConfigurationError: Bad *n_folds* (see :func:`stratified_folds`), a negative
            *n_permutations*, or an unknown calibrator name or parameter.
    """
    if n_permutations < 0:
        msg = f"permutations must be >= 0, got {n_permutations!r}."
        raise ConfigurationError(msg)
    folds = stratified_folds(data.y, n_folds, seed)
    k = data.P.shape[1]
    tick = progress or (lambda _: None)
    rows: list[dict[str, Any]] = []
    probs: dict[str, NDArray[np.float64]] = {"raw": data.P}
    actions: dict[str, NDArray[np.intp]] = {}

    def add(name: str, acts: NDArray[np.intp], Q: NDArray[np.float64] | None) -> None:
        actions[name] = acts
        description = DECODER_DESCRIPTIONS.get(name) or f"MBR on the {name[4:]}-calibrated belief"
        rows.append({"decoder": name, "description": description, "error": None})
        rows[-1].update(score_actions(acts, data, Q))

    prior = in_fold_prior(data.y, folds, k)
    probs["constant"] = prior
    add("constant", mbr(prior, data.cost), prior)
    l2a = data.label_to_action()
    if l2a is not None:
        greedy = np.where(data.greedy >= 0, l2a[np.clip(data.greedy, 0, None)], data.fallback)
        add("greedy", greedy.astype(np.intp), None)
        add("majority", _with_fallback(l2a[np.argmax(data.P, axis=1)], data), data.P)
    add("mbr_raw", _with_fallback(mbr(data.P, data.cost), data), data.P)
    tick(1)
    factories = {name: factory(name) for name in calibrators}
    test_factory = factory(test_calibrator) if test_calibrator and n_permutations else None
    for name in calibrators:
        decoder = f"mbr_{name}"
        try:
            Q = crossfit_calibrated(data.P, data.y, folds, factories[name])
        except (ValueError, RuntimeError, np.linalg.LinAlgError) as exc:
            rows.append(
                {
                    "decoder": decoder,
                    "description": f"MBR on the {name}-calibrated belief",
                    "error": f"{type(exc).__name__}: {exc}",
                }
            )
        else:
            probs[name] = Q
            add(decoder, _with_fallback(mbr(Q, data.cost), data), Q)
        tick(1)
    test = None
    if test_factory is not None and test_calibrator is not None:
        test = permutation_test(
            data,
            test_factory,
            calibrator=test_calibrator,
            n_folds=n_folds,
            fold_seed=seed,
            n_permutations=n_permutations,
            seed=seed,
            progress=progress,
        )
    return Evaluation(
        rows=rows, probs=probs, actions=actions, permutation=test, n_folds=n_folds, seed=seed
    )


# --------------------------------------------------------------------------------------
# JSON

EVALUATION_FORMAT = "taskcal.evaluation"
EVALUATION_FORMAT_VERSION = 1


def evaluation_to_dict(
    evaluation: Evaluation,
    data: EvalArrays,
    *,
    task: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
    include_items: bool = True,
) -> dict[str, Any]:
    """The JSON-able evaluation (what ``taskcal evaluate --out`` writes and ``report`` reads).

    Args:
        evaluation: The result of :func:`evaluate_arrays`.
        data: Its input arrays.
        task: Task summary (name, labels, actions, cost).
        meta: Anything else worth recording (samples path, alpha, settings).
        include_items: Add per-item ids, labels, beliefs and actions (for ``report``).

    Returns:
        ``{"format", "format_version", "task", "n_items", "folds", "seed", "decoders",
        "permutation_test", "meta", "items"}``.
    """
    out: dict[str, Any] = {
        "format": EVALUATION_FORMAT,
        "format_version": EVALUATION_FORMAT_VERSION,
        "task": task
        or {
            "labels": list(data.labels),
            "actions": list(data.actions),
            "cost": data.cost.tolist(),
        },
        "n_items": data.n,
        "folds": evaluation.n_folds,
        "seed": evaluation.seed,
        "decoders": evaluation.rows,
        "permutation_test": evaluation.permutation.to_dict() if evaluation.permutation else None,
        "meta": meta or {},
    }
    if include_items:
        out["items"] = {
            "ids": list(data.ids),
            "y": data.y.tolist(),
            "no_sample": data.no_sample.tolist(),
            "probs": {name: Q.tolist() for name, Q in evaluation.probs.items()},
            "actions": {name: a.tolist() for name, a in evaluation.actions.items()},
        }
    return out
