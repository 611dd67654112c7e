"""Multinomial logistic regression on log-probabilities and raw extra features."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray
from sklearn.model_selection import check_cv

from calibrators._base import EPS_CONSTRAINT, N_CLASSES_CONSTRAINT, BaseCalibrator
from calibrators._linear import linear_state_problem
from calibrators._linear_objective import LinearObjective, Regularizer, predict_linear
from calibrators._linear_solver import fit_linear, minimise_linear
from calibrators._validation import (
    Integral,
    Interval,
    Real,
)

__all__ = ["LogisticCalibrator"]

_DEFAULT_C_RANGE = (-4.0, 4.0)
"""``Cs=n`` tries ``n`` values of ``C`` log-spaced from ``1e-4`` to ``1e4`` (as scikit-learn's
``LogisticRegressionCV``)."""

_CV_RANDOM_STATE = 0
"""Seed of the row order within each class in the stratified folds (deterministic)."""


@dataclass(frozen=True)
class _CoefL2(Regularizer):
    """``strength * ||W||_F**2``: an L2 penalty on the weights towards 0; ``b`` is free."""

    strength: float = 0.0

    def is_zero(self) -> bool:
        """Whether the penalty vanishes identically."""
        return self.strength == 0.0

    def weights(
        self, k: int, d: int
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """Return the penalty as weights and targets of ``(W, b)`` (see ``Regularizer``)."""
        return np.full((k, d), self.strength), np.zeros((k, d)), np.zeros(k)


def _penalty(C: float, weight_sum: float) -> _CoefL2:
    """Return the penalty ``||W||**2 / (2 C)`` on the summed weighted NLL, per unit of weight.

    The optimiser minimises the weighted *mean* NLL, so the penalty is divided by the sum
    of the weights, as scikit-learn's ``LogisticRegression`` does.
    """
    return _CoefL2(strength=1.0 / (2.0 * C * weight_sum))


def _stratified_folds(
    y: NDArray[np.intp], n_splits: int
) -> list[tuple[NDArray[np.intp], NDArray[np.intp]]]:
    """Deterministic stratified K-fold split, valid for any class counts.

    Rows are shuffled with a fixed seed, grouped by class, and dealt to the folds in
    turn: each class is spread over the folds as evenly as possible (counts differ by at
    most one), and so are the fold sizes. Unlike ``StratifiedKFold`` this neither warns
    nor fails when a class has fewer rows than folds (a rare action is common here).
    """
    rng = np.random.default_rng(_CV_RANDOM_STATE)
    order = rng.permutation(y.size)
    order = order[np.argsort(y[order], kind="stable")]
    fold = np.empty(y.size, dtype=np.intp)
    fold[order] = np.arange(y.size) % n_splits
    return [(np.flatnonzero(fold != f), np.flatnonzero(fold == f)) for f in range(n_splits)]


class LogisticCalibrator(BaseCalibrator):
    """Multinomial logistic regression on ``ln p`` and raw extra features.

    ``q = softmax(W z + b)`` with ``z = [ln(clip(p, eps, 1)), x]``: the first
    ``k = n_classes`` columns of the input are a probability row ``p`` over the classes,
    and the ``d - k`` columns after them are raw features ``x`` (any finite numbers,
    typically shares in ``[0, 1]`` such as the share of samples that called a tool that
    was not offered, or an agreement score). With ``n_classes=None`` there are no extra
    columns (``d = k``).

    The map minimises the weighted negative log-likelihood plus ``||W||_F**2 / (2 C)``
    (``b`` is not penalised), like scikit-learn's multinomial ``LogisticRegression`` on
    ``z``, with Newton's method (scipy's L-BFGS-B for maps of more than 128 parameters)
    started at the identity map ``W = [I | 0]``, ``b = 0``. ``C`` is in units of summed
    sample weight: doubling every weight has the effect of doubling ``C``. With
    ``C=None`` it is chosen from the grid ``Cs`` by the cross-validated weighted NLL
    (stratified ``cv``-fold split with a fixed seed; ties go to the smaller ``C``), then
    the map is refitted on all rows. The fit is deterministic.

    Parameters
    ----------
    Cs : int or sequence of float, default=10
        Candidate inverse penalty strengths: an int ``n`` means ``n`` values log-spaced
        from ``1e-4`` to ``1e4``; a sequence is used as given (positive floats).
    C : float, default=None
        Fixed inverse penalty strength; ``None`` chooses it from ``Cs`` by
        cross-validation.
    cv : int, cross-validation generator or iterable, default=5
        Splits for choosing ``C``: an int is the number of stratified folds (at most the
        number of samples) with a fixed seed; a splitter or an iterable of
        ``(train, test)`` index arrays is used as given.
    eps : float, default=1e-12
        Probabilities are clipped to ``[eps, 1]`` before taking ``ln``.
    max_iter : int, default=1000
        Maximum number of optimiser iterations per fit (Newton steps; L-BFGS-B
        iterations for maps of more than 128 parameters).
    tol : float, default=1e-7
        Gradient tolerance of the optimiser (on standardised features).
    n_classes : int, default=None
        Number of classes ``k``: the first ``k`` columns of ``P`` are probabilities (each
        row sums to 1), the others raw features. ``None`` means one class per column.

    Attributes
    ----------
    C_ : float
        The ``C`` of the final fit (chosen from ``Cs`` when ``C`` is ``None``).
    coef_ : ndarray of shape (n_classes, n_features_in)
        Weight matrix ``W``: one column per ``ln p`` column, then one per raw feature.
    intercept_ : ndarray of shape (n_classes,)
        Bias ``b`` (defined up to a constant added to every entry).
    cv_results_ : dict or None
        With ``C=None``: ``{"C": array, "nll": array}``, the cross-validated NLL of each
        candidate (ascending ``C``); otherwise ``None``. Not serialised.
    n_iter_ : int
        Number of optimiser iterations of the final fit.
    n_classes_ : int
        Number of classes (``n_classes``, or the number of columns of ``P``).
    classes_ : ndarray of shape (n_classes,)
        ``np.arange(n_classes_)``.
    n_features_in_ : int
        Number of input columns of ``P`` seen in ``fit``.

    See Also
    --------
    MatrixScaling : The same map without penalty, on probability columns only.
    DirichletCalibrator : Penalties towards the identity map (L2) or ODIR.

    Notes
    -----
    For ``k >= 3`` classes the objective is that of
    ``sklearn.linear_model.LogisticRegression(C=C)`` fitted on ``z``. For two classes
    scikit-learn fits one weight vector ``w = W_1 - W_0``; the minimiser here has
    ``W_1 = -W_0``, so its penalty is ``||w||**2 / (4 C)``: that of ``LogisticRegression``
    at ``2 C``.

    Examples
    --------
    >>> import numpy as np
    >>> from calibrators import LogisticCalibrator
    >>> rng = np.random.default_rng(0)
    >>> P = rng.dirichlet(np.ones(3), size=300)
    >>> y = np.array([rng.choice(3, p=p) for p in P])
    >>> share = rng.uniform(size=(300, 2))  # two raw features per row
    >>> X = np.hstack([P, share])
    >>> cal = LogisticCalibrator(n_classes=3).fit(X, y)
    >>> cal.coef_.shape, cal.predict_proba(X).shape
    ((3, 5), (300, 3))
    >>> bool(cal.C_ in cal.cv_results_["C"])
    True
    >>> LogisticCalibrator(C=1.0, n_classes=3).fit(X, y).C_
    1.0
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "Cs": [Interval(Integral, 1, None, closed="left"), "array-like"],
        "C": [Interval(Real, 0.0, None, closed="neither"), None],
        "cv": ["cv_object"],
        "eps": [EPS_CONSTRAINT],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0.0, None, closed="left")],
        "n_classes": N_CLASSES_CONSTRAINT,
    }
    _state_attributes: ClassVar[tuple[tuple[str, str], ...]] = (
        ("coef_", "array"),
        ("intercept_", "array"),
        ("n_iter_", "int"),
        ("C_", "float"),
    )
    _transient_attributes: ClassVar[tuple[str, ...]] = ("cv_results_",)

    def _state_problem(self) -> str | None:
        if not self.C_ > 0:
            return f"'C_' must be > 0, got {self.C_!r}"
        return linear_state_problem(self)

    def __init__(
        self,
        *,
        Cs: int | Sequence[float] = 10,
        C: float | None = None,
        cv: Any = 5,
        eps: float = 1e-12,
        max_iter: int = 1000,
        tol: float = 1e-7,
        n_classes: int | None = None,
    ) -> None:
        self.Cs = Cs
        self.C = C
        self.cv = cv
        self.eps = eps
        self.max_iter = max_iter
        self.tol = tol
        self.n_classes = n_classes

    @property
    def reads_extra_columns(self) -> bool:
        """Whether the map can read more input columns than it has classes (always).

        Returns
        -------
        bool
            ``True``: the columns after the ``n_classes`` class columns are raw features.
        """
        return True

    @property
    def reads_raw_columns(self) -> bool:
        """Whether the columns after the class columns may be any finite numbers (always).

        Returns
        -------
        bool
            ``True``: only the first ``n_classes`` columns must be probability rows. The
            other maps that read extra columns need the whole row to sum to 1.
        """
        return True

    # Implementation ------------------------------------------------------------

    def _features(self, P: NDArray[np.float64], n_classes: int) -> NDArray[np.float64]:
        """``z = [ln(clip(p, eps, 1)), x]`` of each row."""
        Z = P.copy()
        np.log(np.clip(P[:, :n_classes], self.eps, 1.0), out=Z[:, :n_classes])
        return Z

    def _fit(
        self,
        P: NDArray[np.float64],
        y: NDArray[np.intp],
        sample_weight: NDArray[np.float64],
        n_classes: int,
    ) -> None:
        Z = self._features(P, n_classes)
        cv_results = None
        if self.C is None:
            C, cv_results = self._select_C(Z, y, sample_weight, n_classes)
        else:
            C = float(self.C)
        fitted = fit_linear(
            Z,
            y,
            sample_weight,
            kind="full",
            reg=_penalty(C, float(sample_weight.sum())),
            max_iter=self.max_iter,
            tol=self.tol,
            owner=type(self).__name__,
            n_classes=n_classes,
        )
        self.coef_ = fitted.coef
        self.intercept_ = fitted.intercept
        self.n_iter_ = fitted.n_iter
        self.C_ = C
        self.cv_results_ = cv_results

    def _init_state(self, n_classes: int, n_features: int | None = None) -> None:
        """Set the fitted attributes to the optimiser's starting point (identity)."""
        d = n_classes if n_features is None else n_features
        self.coef_ = np.eye(n_classes, d)
        self.intercept_ = np.zeros(n_classes)
        self.n_iter_ = 0
        self.C_ = 1.0 if self.C is None else float(self.C)
        self.cv_results_ = None
        self.n_classes_ = n_classes
        self.classes_ = np.arange(n_classes)
        self.n_features_in_ = d

    def _predict_proba(self, P: NDArray[np.float64]) -> NDArray[np.float64]:
        Z = self._features(P, self.n_classes_)
        return predict_linear(Z, self.coef_, self.intercept_)

    def _grid(self) -> NDArray[np.float64]:
        """Return the candidate ``C`` values, ascending (strongest penalty first)."""
        if isinstance(self.Cs, Integral):
            return np.logspace(*_DEFAULT_C_RANGE, int(self.Cs))
        values = np.asarray(self.Cs, dtype=np.float64).ravel()
        if values.size == 0 or not np.all(np.isfinite(values)) or np.any(values <= 0):
            msg = (
                "The 'Cs' parameter of LogisticCalibrator must be an int >= 1 or a non-empty "
                f"sequence of finite positive floats; got {self.Cs!r}."
            )
            raise ValueError(msg)
        return np.unique(values)

    def _select_C(
        self,
        Z: NDArray[np.float64],
        y: NDArray[np.intp],
        weights: NDArray[np.float64],
        n_classes: int,
    ) -> tuple[float, dict[str, NDArray[np.float64]]]:
        """Choose ``C`` by the cross-validated weighted NLL.

        Candidates are tried strongest penalty first, each fit warm-started from the
        previous one; ties go to the strongest.
        """
        Cs = self._grid()
        n = Z.shape[0]
        folds: Iterable[tuple[NDArray[np.intp], NDArray[np.intp]]]
        if isinstance(self.cv, Integral):
            n_splits = min(int(self.cv), n)
            if n_splits < 2:
                msg = (
                    f"LogisticCalibrator with C=None needs at least 2 samples to choose C by "
                    f"cross-validation; got {n}. Pass a number for C."
                )
                raise ValueError(msg)
            folds = _stratified_folds(y, n_splits)
        else:
            folds = check_cv(self.cv).split(Z, y)
        owner = type(self).__name__
        total = np.zeros(Cs.size)
        for train, test in folds:
            w_train = weights[train]
            if not w_train.any():
                continue
            weight_sum = float(w_train.sum())
            objective = LinearObjective(
                Z[train], y[train], w_train, "full", _penalty(Cs[0], weight_sum), n_classes
            )
            init = None
            for j, C in enumerate(Cs):
                objective.set_reg(_penalty(float(C), weight_sum))
                fitted = minimise_linear(
                    objective, max_iter=self.max_iter, tol=self.tol, owner=owner, init=init
                )
                init = (fitted.coef, fitted.intercept)
                Q = predict_linear(Z[test], fitted.coef, fitted.intercept)
                q_true = np.maximum(Q[np.arange(test.size), y[test]], np.finfo(np.float64).tiny)
                total[j] += float(weights[test] @ -np.log(q_true))
        cv_nll = total / weights.sum()
        best = int(np.argmin(cv_nll))  # ascending C: ties go to the stronger penalty
        return float(Cs[best]), {"C": Cs.copy(), "nll": cv_nll}
