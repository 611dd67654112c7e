"""The identity calibration map (a baseline)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from calibrators._base import N_CLASSES_CONSTRAINT, BaseCalibrator

__all__ = ["IdentityCalibrator"]


class IdentityCalibrator(BaseCalibrator):
    """The identity map: ``predict_proba(P)`` returns ``P`` unchanged.

    The baseline against which every other map is judged; ``fit`` only records the
    number of classes, so that inputs with a different number of columns are
    rejected at prediction time.

    Parameters
    ----------
    n_classes : int, default=None
        Number of classes; ``None`` means one class per column of ``P``. This map
        needs one input column per class, so any other value is an error when
        fitting (only :class:`MatrixScaling` and ``DirichletCalibrator(kind="full")``
        read extra input columns).

    Attributes
    ----------
    n_classes_ : int
        Number of classes (columns of ``P``).
    classes_ : ndarray of shape (n_classes,)
        ``np.arange(n_classes_)``.
    n_features_in_ : int
        Equal to ``n_classes_``.

    See Also
    --------
    TemperatureScaling : The simplest map that changes ``P``.

    Examples
    --------
    >>> import numpy as np
    >>> from calibrators import IdentityCalibrator
    >>> P = np.array([[0.7, 0.3], [0.2, 0.8]])
    >>> IdentityCalibrator().fit(P, [0, 1]).predict_proba(P)
    array([[0.7, 0.3],
           [0.2, 0.8]])
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {"n_classes": N_CLASSES_CONSTRAINT}
    _state_attributes: ClassVar[tuple[tuple[str, str], ...]] = ()

    def __init__(self, *, n_classes: int | None = None) -> None:
        self.n_classes = n_classes

    def _fit(
        self,
        P: NDArray[np.float64],
        y: NDArray[np.intp],
        sample_weight: NDArray[np.float64],
        n_classes: int,
    ) -> None:
        return None

    def _predict_proba(self, P: NDArray[np.float64]) -> NDArray[np.float64]:
        return P.copy()
