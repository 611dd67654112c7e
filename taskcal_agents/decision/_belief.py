"""Belief: the empirical label distribution p̂ over N samples, Dirichlet-smoothed.

With counts c_ℓ over k labels and a symmetric Dirichlet prior α,

    p̂(ℓ) = (c_ℓ + α) / (Σ_ℓ' c_ℓ' + k·α).

The default α = 0.1 (:data:`DEFAULT_ALPHA`) keeps every probability strictly positive, so
calibrators that work on log-probabilities (Dirichlet, matrix or temperature scaling) stay
finite, while moving p̂ by at most α·k/N from the raw frequencies (≈ 2 points at N = 16,
k = 3). Fit the calibrator with the same α you deploy with: the calibration map is learned
on p̂, so α is part of the model.

Unparsed samples (the task's ``unparsed`` policy) enter in one of three ways:

``"drop"``
    They are counted in ``n_unparsed`` only; p̂ is the formula above over the parsed
    samples, so one usable sample out of eight weighs as much as eight out of eight.
``"as:<label>"``
    They are counted as that label.
``"other"``
    They are evidence. With u unparsed samples out of N (parsed ones included):

    - the raw belief spreads the unparsed mass uniformly over the labels,
      p̂(ℓ) = (c_ℓ + α + u/k) / (N + k·α), so it sees N, not only the parsed count: one
      ``tool_call`` and seven unparsed samples of eight give p̂(tool_call) ≈ 0.41 (k = 3,
      α = 0.1), not the 0.85 of ``"drop"``;
    - the calibrator input :attr:`Belief.features` gets one more column, the smoothed
      unparsed share: (c_1, …, c_k, u) + α over N + (k + 1)·α, shape (k + 1,). A
      calibrator fitted on these inputs (k + 1 inputs → k labels: matrix scaling or full
      Dirichlet calibration) learns what a high unparsed share says about the label
      (e.g. that the model cannot answer).

    A belief with no parsed sample at all still takes the task's fallback action (see
    :class:`taskcal_agents.decision.Decider`), as under ``"drop"``.

Under ``"drop"`` and ``"as:<label>"``, :attr:`Belief.features` is p̂ itself.

Grounded tool decisions (a task's ``grounding`` with ``belief: features``, see
:class:`~taskcal_agents.decision.GroundingSpec`) split one label's count in the features: the
``tool_call`` samples whose calls the conversation does not support (``ungrounded``) get a
column of their own, after the k label columns and before the unparsed one. p̂ still
counts them as calls (the raw belief is g_T's), so raw MBR is unchanged; a calibrator
fitted on the features learns what an invented argument says about the label.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from taskcal_agents.errors import ConfigurationError

__all__ = ["DEFAULT_ALPHA", "Belief", "check_alpha"]

DEFAULT_ALPHA = 0.1
"""Default symmetric Dirichlet smoothing prior α added to each label count."""


def check_alpha(alpha: float, owner: str = "Belief") -> float:
    """Return ``alpha`` as a float after checking that it is finite and >= 0.

    Raises:
        ConfigurationError: If ``alpha`` is negative, not finite or not a number.
    """
    try:
        value = float(alpha)
    except (TypeError, ValueError):
        value = float("nan")
    if isinstance(alpha, bool) or not np.isfinite(value) or value < 0:
        msg = (
            f"{owner} parameter 'alpha' must be a finite number >= 0, got {alpha!r}; "
            f"use alpha={DEFAULT_ALPHA} (the default) or 0 for raw frequencies."
        )
        raise ConfigurationError(msg)
    return value


class Belief:
    """Label counts over N samples and the smoothed distribution p̂ they imply.

    Attributes:
        labels: The ordered label set (k labels).
        counts: Counts per label, shape ``(k,)``. With the ``"drop"`` and ``"other"``
            unparsed policies they sum to ``n - n_unparsed``; with ``"as:<label>"`` to
            ``n``.
        n: The number of samples, unparsed ones included.
        n_unparsed: The number of samples the parser could not map to a task label.
        alpha: The symmetric Dirichlet prior added to each count.
        unparsed_evidence: Whether unparsed samples are evidence (the ``"other"`` policy):
            ``probs`` spreads them over the labels and ``features`` gets their share as
            one more column.
        split_label: The label whose ungrounded samples get a feature column of their own
            (``"tool_call"`` under grounded features), or ``None``.
        n_ungrounded: How many of that label's samples are ungrounded calls (counted in
            ``counts`` as the label; 0 without ``split_label``).
    """

    __slots__ = (
        "alpha",
        "counts",
        "labels",
        "n",
        "n_ungrounded",
        "n_unparsed",
        "split_label",
        "unparsed_evidence",
    )

    def __init__(
        self,
        counts: Sequence[float] | NDArray[np.float64],
        labels: Sequence[str],
        *,
        n: int | None = None,
        n_unparsed: int = 0,
        alpha: float = DEFAULT_ALPHA,
        unparsed_evidence: bool = False,
        split_label: str | None = None,
        n_ungrounded: int = 0,
    ) -> None:
        """Create a belief from counts.

        Args:
            counts: Non-negative count per label.
            labels: The ordered label set, one per count.
            n: The number of samples (default: the sum of counts plus ``n_unparsed``).
            n_unparsed: The number of unparsed samples.
            alpha: The symmetric Dirichlet prior (>= 0).
            unparsed_evidence: Treat the unparsed samples as evidence (the ``"other"``
                policy, see the module docstring).
            split_label: Give this label's ungrounded samples a feature column of their
                own (see the module docstring).
            n_ungrounded: How many of ``split_label``'s counted samples are ungrounded.

        Raises:
            ConfigurationError: If the counts do not match the labels or are negative, or
                ``split_label``/``n_ungrounded`` do not fit them.
        """
        arr = np.asarray(counts, dtype=np.float64)
        if arr.shape != (len(labels),) or not np.all(np.isfinite(arr)) or np.any(arr < 0):
            msg = (
                f"Belief parameter 'counts' must hold {len(labels)} finite counts >= 0 (one "
                f"per label in {list(labels)!r}), got {arr.tolist()!r}."
            )
            raise ConfigurationError(msg)
        self.labels: tuple[str, ...] = tuple(labels)
        self.counts: NDArray[np.float64] = arr
        self.n_unparsed = int(n_unparsed)
        self.n = round(float(arr.sum())) + self.n_unparsed if n is None else int(n)
        self.alpha = check_alpha(alpha)
        self.unparsed_evidence = bool(unparsed_evidence)
        self.split_label = split_label
        self.n_ungrounded = int(n_ungrounded)
        if split_label is None and self.n_ungrounded:
            msg = (
                f"Belief got n_ungrounded={n_ungrounded!r} without split_label; name the label "
                "the ungrounded samples are counted as (split_label='tool_call')."
            )
            raise ConfigurationError(msg)
        if split_label is not None and (
            split_label not in self.labels
            or not 0 <= self.n_ungrounded <= arr[self.labels.index(split_label)]
        ):
            msg = (
                f"Belief parameter 'split_label' must be one of {list(self.labels)!r} with "
                f"0 <= n_ungrounded <= its count, got split_label={split_label!r}, "
                f"n_ungrounded={n_ungrounded!r} and counts {arr.tolist()!r}."
            )
            raise ConfigurationError(msg)

    @classmethod
    def from_labels(
        cls,
        labels: Sequence[str | None],
        label_set: Sequence[str],
        alpha: float = DEFAULT_ALPHA,
        *,
        unparsed_as: str | None = None,
        unparsed_evidence: bool = False,
    ) -> Belief:
        """Count parsed labels; ``None`` entries are unparsed samples.

        Args:
            labels: One parsed label per sample, ``None`` where the parser failed.
            label_set: The task's ordered labels.
            alpha: The symmetric Dirichlet prior.
            unparsed_as: Count unparsed samples as this label (the ``"as:<label>"``
                policy); ``None`` leaves them out of the counts (they still count in
                ``n_unparsed``).
            unparsed_evidence: Treat unparsed samples as evidence (the ``"other"``
                policy); needs ``unparsed_as=None``.

        Returns:
            The belief.

        Raises:
            ConfigurationError: If a label is not in ``label_set``, or both
                ``unparsed_as`` and ``unparsed_evidence`` are given.
        """
        if unparsed_as is not None and unparsed_evidence:
            msg = (
                f"Belief.from_labels got unparsed_as={unparsed_as!r} and "
                "unparsed_evidence=True; an unparsed sample either counts as a label or is "
                "evidence of its own: pass one of them."
            )
            raise ConfigurationError(msg)
        index = {label: i for i, label in enumerate(label_set)}
        counts = np.zeros(len(index), dtype=np.float64)
        n_unparsed = 0
        for label in labels:
            if label is None:
                n_unparsed += 1
                if unparsed_as is None:
                    continue
                label = unparsed_as
            i = index.get(label)
            if i is None:
                msg = (
                    f"Belief.from_labels got label {label!r}, which is not in the label set "
                    f"{list(label_set)!r}; map it to a task label or pass None for unparsed."
                )
                raise ConfigurationError(msg)
            counts[i] += 1.0
        return cls(
            counts,
            label_set,
            n=len(labels),
            n_unparsed=n_unparsed,
            alpha=alpha,
            unparsed_evidence=unparsed_evidence,
        )

    @property
    def n_parsed(self) -> int:
        """The number of samples that count towards a label."""
        return round(float(self.counts.sum()))

    @property
    def probs(self) -> NDArray[np.float64]:
        """The smoothed distribution p̂, shape ``(k,)``, summing to 1 (uniform if empty).

        Under the ``"other"`` policy the unparsed samples are spread uniformly over the
        labels: p̂(ℓ) = (c_ℓ + α + u/k) / (N + k·α).
        """
        k = len(self.labels)
        smoothed = self.counts + self.alpha
        if self.unparsed_evidence:
            smoothed = smoothed + self.n_unparsed / k
        total = smoothed.sum()
        if total <= 0:
            return np.full(k, 1.0 / k)
        return smoothed / total

    @property
    def features(self) -> NDArray[np.float64]:
        """The calibrator input, summing to 1 (uniform if empty).

        Under the ``"other"`` policy: the smoothed counts and unparsed share,
        (c_1, …, c_k, u) + α over N + (k + 1)·α, shape ``(k + 1,)``. With a
        ``split_label``, its ungrounded samples move from its column to one of their own
        after the k label columns (one more column). Otherwise :attr:`probs`, shape
        ``(k,)``.
        """
        if not self.unparsed_evidence and self.split_label is None:
            return self.probs
        columns = self.counts.copy()
        if self.split_label is not None:
            columns[self.labels.index(self.split_label)] -= self.n_ungrounded
            columns = np.append(columns, float(self.n_ungrounded))
        if self.unparsed_evidence:
            columns = np.append(columns, float(self.n_unparsed))
        smoothed = columns + self.alpha
        total = smoothed.sum()
        if total <= 0:
            return np.full(smoothed.size, 1.0 / smoothed.size)
        return smoothed / total

    def as_dict(self) -> dict[str, float]:
        """Return p̂ keyed by label."""
        return dict(zip(self.labels, self.probs.tolist(), strict=True))

    def __repr__(self) -> str:
        counts = dict(zip(self.labels, self.counts.tolist(), strict=True))
        extra = ", unparsed_evidence=True" if self.unparsed_evidence else ""
        if self.split_label is not None:
            extra += f", split_label={self.split_label!r}, n_ungrounded={self.n_ungrounded}"
        return (
            f"Belief(counts={counts!r}, n={self.n}, n_unparsed={self.n_unparsed}, "
            f"alpha={self.alpha}{extra})"
        )
