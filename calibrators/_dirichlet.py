"""Dirichlet calibration (Kull et al., 2019)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray
from sklearn.model_selection import KFold, check_cv

from calibrators._base import EPS_CONSTRAINT, N_CLASSES_CONSTRAINT
from calibrators._linear import _LinearCalibrator
from calibrators._linear_objective import KINDS, LinearObjective, Regularizer, predict_linear
from calibrators._linear_solver import fit_linear, minimise_linear
from calibrators._validation import Integral, Interval, Real, StrOptions, clipped_log

__all__ = ["DEFAULT_REG_GRID", "DirichletCalibrator"]

DEFAULT_REG_GRID: tuple[float, ...] = (0.0, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0)
"""Values of ``reg_lambda`` tried by ``reg_lambda="auto"`` when ``reg_grid`` is None, and
of ``reg_mu`` tried by ``reg_mu="auto"`` when ``reg_mu_grid`` is None."""

_CV_RANDOM_STATE = 0
"""Seed of the shuffled K-fold split used by ``reg_lambda="auto"`` (deterministic)."""


class DirichletCalibrator(_LinearCalibrator):
    """Dirichlet calibration: ``q = softmax(W ln p + b)``.

    ``ln p`` is clipped at ``ln(eps)``. The map is fitted by minimising the weighted
    mean negative log-likelihood plus a regulariser with Newton's method (exact Hessian;
    scipy's L-BFGS-B for maps of more than 128 parameters) and the identity map
    (``W = [I | 0]``, ``b = 0``) as starting point; the fit is deterministic.

    With ``kind="full"``, ``W`` has shape (k, d): ``P`` may carry ``d - k`` extra input
    columns after the ``k = n_classes`` class columns (such as the share of unparsed
    samples), which the map reads but does not predict. The other kinds need
    ``d = k``.

    Regularisation (``I`` is the (k, d) identity ``[I | 0]``):

    - ``reg_mu`` set (ODIR, off-diagonal and intercept regularisation):
      ``reg_lambda * sum_{i != j} W_ij**2 / (k (d - 1)) + reg_mu * sum_j b_j**2 / k``;
      the weights of extra columns count as off-diagonal, so they shrink towards
      ignoring those columns.
    - ``reg_mu=None``: L2 towards the identity map,
      ``reg_lambda * (||W - I||_F**2 + ||b||**2) / (k (d + 1))``.

    Both divide by the number of penalised entries; with ``d = k`` they are the
    formulas of Kull et al. (2019).

    With ``reg_lambda=0`` and ``kind="full"`` the map is multinomial logistic
    regression on ``ln p`` without penalty (matrix scaling). With
    ``reg_lambda="auto"`` the strength is chosen from ``reg_grid`` by the
    cross-validated negative log-likelihood (shuffled ``cv``-fold split, fixed seed).
    With ``reg_mu="auto"`` (ODIR) ``reg_mu`` is chosen the same way from
    ``reg_mu_grid``; with both ``"auto"`` the pair is chosen jointly over the product
    of the two grids (``len(reg_grid) * len(reg_mu_grid)`` fits per split).
    The :meth:`score` method (negative mean log-loss) also lets ``GridSearchCV``
    tune ``reg_lambda`` and ``reg_mu``.

    Parameters
    ----------
    kind : {"full", "diagonal", "fixed_diagonal"}, default="full"
        Shape of ``W``: any (k, d) matrix; a diagonal matrix; or ``a * I`` with
        ``b = 0`` (the Dirichlet form of temperature scaling).
    reg_lambda : float or "auto", default=0.0
        Strength of the penalty on ``W`` (see above), or ``"auto"``.
    reg_mu : float, "auto" or None, default=None
        Strength of the penalty on ``b``; setting it selects ODIR. ``"auto"`` chooses
        it by cross-validation from ``reg_mu_grid``.
    reg_grid : sequence of float, default=None
        Candidate values for ``reg_lambda="auto"``; ``None`` means
        ``(0, 1e-4, 1e-3, 1e-2, 0.1, 1, 10)``.
    reg_mu_grid : sequence of float, default=None
        Candidate values for ``reg_mu="auto"``; ``None`` means the same default grid
        as ``reg_grid``.
    cv : int, cross-validation generator or iterable, default=5
        Splits for ``reg_lambda="auto"`` or ``reg_mu="auto"``: an int is the number
        of shuffled K-fold splits with a fixed seed (at most the number of samples);
        a splitter or an iterable of ``(train, test)`` index arrays is used as given.
    eps : float, default=1e-12
        Probabilities are clipped to ``[eps, 1]`` before taking ``ln``.
    max_iter : int, default=1000
        Maximum number of optimiser iterations (Newton steps; L-BFGS-B iterations for
        maps of more than 128 parameters).
    tol : float, default=1e-7
        Gradient tolerance of the optimiser (on standardised features).
    n_classes : int, default=None
        Number of classes ``k``; ``None`` means one class per column of ``P``. With
        ``kind="full"`` it may be below the number of columns (extra input columns);
        the other kinds need one input column per class.

    Attributes
    ----------
    coef_ : ndarray of shape (n_classes, n_features_in)
        Weight matrix ``W``.
    intercept_ : ndarray of shape (n_classes,)
        Bias ``b``.
    reg_lambda_ : float
        The ``reg_lambda`` used for the final fit (chosen when ``"auto"``).
    reg_mu_ : float or None
        The ``reg_mu`` used for the final fit (chosen when ``"auto"``).
    cv_results_ : dict or None
        With ``reg_lambda="auto"``: ``{"reg_lambda": array, "nll": array}``, the
        cross-validated NLL of each candidate (ascending ``reg_lambda``); with
        ``reg_mu="auto"`` also ``"reg_mu"``, one entry per ``(reg_lambda, reg_mu)``
        candidate (ascending ``reg_lambda``, then ascending ``reg_mu``); otherwise
        ``None``. Not serialised.
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
    MatrixScaling : The unregularised full map.
    VectorScaling : The unregularised diagonal map.
    TemperatureScaling : A single temperature.

    References
    ----------
    .. [1] M. Kull, M. Perello-Nieto, M. Kängsepp, T. Silva Filho, H. Song,
       P. Flach, "Beyond temperature scaling: Obtaining well-calibrated multi-class
       probabilities with Dirichlet calibration", NeurIPS 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from calibrators import DirichletCalibrator
    >>> rng = np.random.default_rng(0)
    >>> P = rng.dirichlet(np.ones(3), size=200)
    >>> y = np.array([rng.choice(3, p=p) for p in P])
    >>> cal = DirichletCalibrator(reg_lambda=1e-3, reg_mu=1e-3).fit(P, y)
    >>> cal.coef_.shape, cal.intercept_.shape
    ((3, 3), (3,))
    >>> bool(np.allclose(cal.predict_proba(P).sum(axis=1), 1.0))
    True
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "kind": [StrOptions(set(KINDS))],
        "reg_lambda": [Interval(Real, 0.0, None, closed="left"), StrOptions({"auto"})],
        "reg_mu": [Interval(Real, 0.0, None, closed="left"), StrOptions({"auto"}), None],
        "reg_grid": ["array-like", None],
        "reg_mu_grid": ["array-like", None],
        "cv": ["cv_object"],
        "eps": [EPS_CONSTRAINT],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0.0, None, closed="left")],
        "n_classes": N_CLASSES_CONSTRAINT,
    }
    _state_attributes: ClassVar[tuple[tuple[str, str], ...]] = (
        *_LinearCalibrator._state_attributes,
        ("reg_lambda_", "float"),
        ("reg_mu_", "float_or_none"),
    )
    _transient_attributes: ClassVar[tuple[str, ...]] = ("cv_results_",)

    def _state_problem(self) -> str | None:
        if not (self.reg_lambda_ >= 0 and (self.reg_mu_ is None or self.reg_mu_ >= 0)):
            return "'reg_lambda_' and 'reg_mu_' must be >= 0"
        return super()._state_problem()

    def __init__(
        self,
        *,
        kind: str = "full",
        reg_lambda: float | str = 0.0,
        reg_mu: float | str | None = None,
        reg_grid: Sequence[float] | None = None,
        reg_mu_grid: Sequence[float] | None = None,
        cv: Any = 5,
        eps: float = 1e-12,
        max_iter: int = 1000,
        tol: float = 1e-7,
        n_classes: int | None = None,
    ) -> None:
        self.kind = kind
        self.reg_lambda = reg_lambda
        self.reg_mu = reg_mu
        self.reg_grid = reg_grid
        self.reg_mu_grid = reg_mu_grid
        self.cv = cv
        self.eps = eps
        self.max_iter = max_iter
        self.tol = tol
        self.n_classes = n_classes

    @property
    def reads_extra_columns(self) -> bool:
        """Whether the map can read more input columns than it has classes.

        Returns
        -------
        bool
            ``True`` for ``kind="full"`` (``W`` of shape (n_classes, n_features)).
        """
        return self.kind == "full"

    def _fit(
        self,
        P: NDArray[np.float64],
        y: NDArray[np.intp],
        sample_weight: NDArray[np.float64],
        n_classes: int,
    ) -> None:
        L = clipped_log(P, self.eps)
        cv_results = None
        if isinstance(self.reg_lambda, str) or isinstance(self.reg_mu, str):
            lam, mu, cv_results = self._select_reg(L, y, sample_weight, n_classes)
        else:
            lam = float(self.reg_lambda)
            mu = None if self.reg_mu is None else float(self.reg_mu)
        fitted = fit_linear(
            L,
            y,
            sample_weight,
            kind=self.kind,
            reg=Regularizer(lam=lam, mu=mu),
            max_iter=self.max_iter,
            tol=self.tol,
            owner=type(self).__name__,
            n_classes=n_classes,
        )
        self.coef_ = fitted.coef
        self.intercept_ = fitted.intercept
        self.n_iter_ = fitted.n_iter
        self.reg_lambda_ = lam
        self.reg_mu_ = mu
        self.cv_results_ = cv_results

    def _init_state(self, n_classes: int, n_features: int | None = None) -> None:
        super()._init_state(n_classes, n_features)
        self.reg_lambda_ = 0.0 if isinstance(self.reg_lambda, str) else float(self.reg_lambda)
        self.reg_mu_ = 0.0 if isinstance(self.reg_mu, str) else self.reg_mu
        self.cv_results_ = None

    def _grid(self, name: str = "reg_grid") -> NDArray[np.float64]:
        raw = getattr(self, name)
        grid = DEFAULT_REG_GRID if raw is None else raw
        values = np.asarray(grid, dtype=np.float64).ravel()
        if values.size == 0 or not np.all(np.isfinite(values)) or np.any(values < 0):
            msg = (
                f"The {name!r} parameter of DirichletCalibrator must be a non-empty sequence "
                f"of finite non-negative floats; got {raw!r}."
            )
            raise ValueError(msg)
        return np.unique(values)[::-1]  # strongest first: warm starts from simpler maps

    def _select_reg(
        self,
        L: NDArray[np.float64],
        y: NDArray[np.intp],
        weights: NDArray[np.float64],
        n_classes: int,
    ) -> tuple[float, float | None, dict[str, NDArray[np.float64]]]:
        """Choose the ``"auto"`` strength(s) by cross-validated weighted NLL.

        Candidates are tried strongest penalty first (``reg_lambda`` outer, ``reg_mu``
        inner), each fit warm-started from the previous one; ties go to the strongest.
        """
        auto_lam = isinstance(self.reg_lambda, str)
        auto_mu = isinstance(self.reg_mu, str)
        lams = self._grid("reg_grid") if auto_lam else np.array([float(self.reg_lambda)])
        if auto_mu:
            mus: list[float | None] = [float(v) for v in self._grid("reg_mu_grid")]
        else:
            mus = [None if self.reg_mu is None else float(self.reg_mu)]
        candidates = [(float(lam), mu) for lam in lams for mu in mus]
        n = L.shape[0]
        if isinstance(self.cv, Integral):
            n_splits = min(int(self.cv), n)
            if n_splits < 2:
                which = "reg_lambda" if auto_lam else "reg_mu"
                msg = (
                    f"DirichletCalibrator with {which}='auto' needs at least 2 samples for "
                    f"cross-validation; got {n}. Pass a number for {which}."
                )
                raise ValueError(msg)
            splitter: Any = KFold(n_splits=n_splits, shuffle=True, random_state=_CV_RANDOM_STATE)
        else:
            splitter = check_cv(self.cv)
        total = np.zeros(len(candidates))
        for train, test in splitter.split(L, y):
            w_train = weights[train]
            if not w_train.any():
                continue
            objective = LinearObjective(
                L[train], y[train], w_train, self.kind, Regularizer(), n_classes
            )
            init = None
            for j, (lam, mu) in enumerate(candidates):
                objective.set_reg(Regularizer(lam=lam, mu=mu))
                fitted = minimise_linear(
                    objective,
                    max_iter=self.max_iter,
                    tol=self.tol,
                    owner=type(self).__name__,
                    init=init,
                )
                init = (fitted.coef, fitted.intercept)
                Q = predict_linear(L[test], fitted.coef, fitted.intercept)
                q_true = np.maximum(Q[np.arange(test.size), y[test]], np.finfo(np.float64).tiny)
                total[j] += float(weights[test] @ -np.log(q_true))
        cv_nll = total / weights.sum()
        best = int(np.argmin(cv_nll))  # candidates descend: ties go to the stronger penalty
        lam, mu = candidates[best]
        results = {"reg_lambda": np.array([c[0] for c in candidates[::-1]]), "nll": cv_nll[::-1]}
        if auto_mu:
            results["reg_mu"] = np.array([c[1] for c in candidates[::-1]], dtype=np.float64)
        return lam, mu, results
