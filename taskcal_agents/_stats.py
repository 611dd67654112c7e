"""Standard errors of per-item means (layer 0): the workflow's and production's estimates.

:func:`paired_difference` compares two decoders (or two calibrators) on the same items;
:func:`mean_reference` is the shape of the monitor's rate references (``unparsed_rate``),
written at fit time and at refit time.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["mean_reference", "paired_difference"]


def paired_difference(
    baseline: NDArray[np.float64], other: NDArray[np.float64]
) -> tuple[float, float | None]:
    """Mean of ``baseline − other`` per item and its paired standard error.

    The standard error is ``std(ddof=1) / sqrt(n)`` of the per-item differences
    (``None`` for one item): far smaller than the unpaired errors of the two means when
    the costs of the two decoders move together.
    """
    diff = np.asarray(baseline, dtype=np.float64) - np.asarray(other, dtype=np.float64)
    n = diff.size
    return float(diff.mean()), (float(diff.std(ddof=1) / math.sqrt(n)) if n > 1 else None)


def mean_reference(values: Any) -> dict[str, Any]:
    """``{"n", "rate", "se"}`` of per-item values: their mean and its SE (``std / sqrt(n)``).

    The shape of the monitor's rate references (``unparsed_rate``); the SE is infinite
    for fewer than two items.
    """
    arr = np.asarray(values, dtype=np.float64)
    se = float(arr.std(ddof=1) / np.sqrt(arr.size)) if arr.size > 1 else float("inf")
    return {"n": int(arr.size), "rate": float(arr.mean()) if arr.size else 0.0, "se": se}
