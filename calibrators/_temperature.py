"""Temperature scaling of log-probabilities."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import minimize_scalar

from calibrators._base import EPS_CONSTRAINT, N_CLASSES_CONSTRAINT, BaseCalibrator, softmax
from calibrators._validation import clipped_log

__all__ = ["TemperatureScaling"]

_LOG_TEMPERATURE_BOUNDS = (-10.0, 10.0)
"""Search interval of ``ln T`` (the temperature lies in ``[4.5e-5, 2.2e4]``)."""


def _weighted_nll(Z: NDArray[np.float64], y: NDArray[np.intp], w: NDArray[np.float64]) -> float:
    """Weighted mean NLL of ``softmax(Z)`` (rows of logits); ``w`` sums to 1."""
    Z = Z - Z.max(axis=1, keepdims=True)
    lse = np.log(np.exp(Z).sum(axis=1))
    return float(w @ (lse - Z[np.arange(y.size), y]))


class TemperatureScaling(BaseCalibrator):
    """Temperature scaling: ``q = softmax(ln p / T)``.

    A single positive temperature ``T``, fitted by minimising the weighted mean
    negative log-likelihood over ``ln T`` with a bounded scalar optimiser (Brent's
    method on ``[-10, 10]``). ``T > 1`` softens overconfident probabilities, ``T < 1``
    sharpens underconfident ones. The argmax, and hence the accuracy, never changes.

    Parameters
    ----------
    eps : float, default=1e-12
        Probabilities are clipped to ``[eps, 1]`` before taking ``ln``.
    n_classes : int, default=None
        Number of classes; ``None`` means one class per column of ``P``. This map
        needs one input column per class, so any other value is an error when
        fitting (only :class:`MatrixScaling` and ``DirichletCalibrator(kind="full")``
        read extra input columns).

    Attributes
    ----------
    temperature_ : float
        The fitted temperature ``T``.
    n_classes_ : int
        Number of classes (columns of ``P``).
    classes_ : ndarray of shape (n_classes,)
        ``np.arange(n_classes_)``.
    n_features_in_ : int
        Equal to ``n_classes_``.

    See Also
    --------
    DirichletCalibrator : ``kind="fixed_diagonal"`` is the same family.
    VectorScaling : One scale and one bias per class.

    References
    ----------
    .. [1] C. Guo, G. Pleiss, Y. Sun, K. Q. Weinberger, "On Calibration of Modern
       Neural Networks", ICML 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from calibrators import TemperatureScaling
    >>> P = np.array([[0.99, 0.01], [0.98, 0.02], [0.03, 0.97], [0.95, 0.05]])
    >>> y = np.array([0, 1, 1, 0])
    >>> TemperatureScaling().fit(P, y).temperature_ > 1
    True
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "eps": [EPS_CONSTRAINT],
        "n_classes": N_CLASSES_CONSTRAINT,
    }
    _state_attributes: ClassVar[tuple[tuple[str, str], ...]] = (("temperature_", "float"),)

    def _state_problem(self) -> str | None:
        if not self.temperature_ > 0:
            return f"'temperature_' must be > 0, got {self.temperature_!r}"
        return None

    def __init__(self, *, eps: float = 1e-12, n_classes: int | None = None) -> None:
        self.eps = eps
        self.n_classes = n_classes

    def _fit(
        self,
        P: NDArray[np.float64],
        y: NDArray[np.intp],
        sample_weight: NDArray[np.float64],
        n_classes: int,
    ) -> None:
        L = clipped_log(P, self.eps)
        L -= L.max(axis=1, keepdims=True)
        w = sample_weight / sample_weight.sum()

        def loss(log_t: float) -> float:
            return _weighted_nll(L * np.exp(-log_t), y, w)

        result = minimize_scalar(
            loss,
            bounds=_LOG_TEMPERATURE_BOUNDS,
            method="bounded",
            options={"xatol": 64 * np.finfo(np.float64).eps, "maxiter": 500},
        )
        if not result.success:
            msg = (
                "TemperatureScaling failed to fit. Reason from "
                f"scipy.optimize.minimize_scalar: {result.message}"
            )
            raise RuntimeError(msg)
        self.temperature_ = float(np.exp(result.x))

    def _init_state(self, n_classes: int) -> None:
        """Set the fitted attributes to the identity map (``T = 1``)."""
        self.temperature_ = 1.0
        self.n_classes_ = n_classes
        self.classes_ = np.arange(n_classes)
        self.n_features_in_ = n_classes

    def _predict_proba(self, P: NDArray[np.float64]) -> NDArray[np.float64]:
        return softmax(clipped_log(P, self.eps) / self.temperature_)
