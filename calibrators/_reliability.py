"""Reliability diagrams: the binned calibration data and, on request, the drawing.

Public as :mod:`calibrators.metrics`; matplotlib is imported only to draw (the ``plot``
extra).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from calibrators._scoring import _binned_gap, _check_n_bins, _check_order
from calibrators._validation import check_consistent_length as _check_consistent_length
from calibrators._validation import check_labels as _check_labels
from calibrators._validation import check_probabilities
from calibrators._validation import check_sample_weight as _check_sample_weight


@dataclass(frozen=True)
class ReliabilityDiagram:
    """Binned calibration data, and the figure when one was drawn.

    Attributes
    ----------
    bin_edges : ndarray of shape (n_bins + 1,)
        Equal-width bin edges of ``[0, 1]``.
    confidence : ndarray of shape (n_bins,)
        Weighted mean predicted probability in each bin (NaN for empty bins).
    frequency : ndarray of shape (n_bins,)
        Weighted observed frequency (accuracy for top-label) in each bin (NaN for
        empty bins).
    weight : ndarray of shape (n_bins,)
        Total sample weight in each bin.
    ece : float
        The expected calibration error of these bins.
    label : str
        ``"top-label"`` or ``"class <j>"``.
    figure : matplotlib.figure.Figure or None
        The drawn figure, or ``None`` when nothing was drawn.
    """

    bin_edges: NDArray[np.float64]
    confidence: NDArray[np.float64]
    frequency: NDArray[np.float64]
    weight: NDArray[np.float64]
    ece: float
    label: str
    figure: Any = None


def reliability_diagram(
    P: ArrayLike,
    y: ArrayLike,
    *,
    n_bins: int = 15,
    class_index: int | None = None,
    sample_weight: ArrayLike | None = None,
    ax: Any = None,
    plot: bool = False,
    title: str | None = None,
) -> ReliabilityDiagram:
    """Bin data of a reliability diagram, and optionally the drawn diagram.

    Parameters
    ----------
    P : array-like of shape (n_samples, n_classes)
        Predicted probabilities; each row sums to 1.
    y : array-like of shape (n_samples,)
        True class indices in ``[0, n_classes)``.
    n_bins : int, default=15
        Number of equal-width bins.
    class_index : int, default=None
        ``None`` for the top-label diagram (confidence vs accuracy); an index ``j``
        for the one-vs-rest diagram of class ``j`` (``q_j`` vs frequency of ``y == j``).
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.
    ax : matplotlib.axes.Axes, default=None
        Axes to draw on; implies ``plot=True``.
    plot : bool, default=False
        Draw the diagram on a new figure when ``ax`` is None.
    title : str, default=None
        Title of the axes.

    Returns
    -------
    diagram : ReliabilityDiagram
        Bin data; ``figure`` is set when a diagram was drawn.

    Raises
    ------
    ImportError
        When drawing is requested and matplotlib is not installed.

    Examples
    --------
    >>> from calibrators.metrics import reliability_diagram
    >>> d = reliability_diagram([[0.9, 0.1], [0.6, 0.4]], [0, 1], n_bins=10)
    >>> d.weight.tolist()
    [0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0]
    """
    _check_n_bins(n_bins)
    _check_order(P, y, "reliability_diagram", "P, y")
    Q = check_probabilities(P, name="P")
    _check_consistent_length(Q, y, sample_weight)
    labels = _check_labels(y, Q.shape[1], name="y")
    w = _check_sample_weight(sample_weight, labels.size)
    if class_index is None:
        pred = np.argmax(Q, axis=1)
        conf = Q[np.arange(labels.size), pred]
        hit = (pred == labels).astype(np.float64)
        label = "top-label"
    else:
        if not 0 <= int(class_index) < Q.shape[1]:
            msg = (
                f"class_index must lie in [0, {Q.shape[1]}) for P with {Q.shape[1]} columns; "
                f"got {class_index!r}."
            )
            raise ValueError(msg)
        conf = Q[:, int(class_index)]
        hit = (labels == int(class_index)).astype(np.float64)
        label = f"class {int(class_index)}"
    mean_conf, freq, weight, gap = _binned_gap(conf, hit, w, n_bins)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    figure = None
    if ax is not None or plot:
        figure = _draw(edges, mean_conf, freq, weight, gap, label, ax, title)
    return ReliabilityDiagram(edges, mean_conf, freq, weight, gap, label, figure)


def _draw(
    edges: NDArray[np.float64],
    mean_conf: NDArray[np.float64],
    freq: NDArray[np.float64],
    weight: NDArray[np.float64],
    gap: float,
    label: str,
    ax: Any,
    title: str | None,
) -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        msg = (
            "reliability_diagram needs matplotlib to draw; install the 'plot' extra: "
            "pip install 'taskcal-agents[plot]'."
        )
        raise ImportError(msg) from exc
    if ax is None:
        figure = Figure(figsize=(4.5, 4.5))
        ax = figure.add_subplot()
    else:
        figure = ax.figure
    width = np.diff(edges)
    filled = weight > 0
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1, label="perfect")
    ax.bar(
        edges[:-1][filled],
        freq[filled],
        width=width[filled],
        align="edge",
        edgecolor="black",
        alpha=0.7,
        label="observed",
    )
    ax.plot(mean_conf[filled], freq[filled], "o", color="black", markersize=3)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("confidence" if label == "top-label" else f"predicted p ({label})")
    ax.set_ylabel("accuracy" if label == "top-label" else "observed frequency")
    ax.set_title(title if title is not None else f"{label} reliability (ECE {gap:.3f})")
    ax.legend(loc="upper left")
    return figure
