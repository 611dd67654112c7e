"""The monitor's metrics of one window of decisions against their references.

:class:`Stream` holds the decision-log records as arrays; :class:`Engine` computes each
metric of a window (the gaps and the ECE by their tests under calibration, in ``_null``;
the NLL and the rates as means and shares) and compares it with its reference: recorded at
fit time (``fit_metrics``), theoretical (the gaps' 0), the ECE of calibrated beliefs, or
the first window's value. The metrics and their statistics: ``docs/production.md``
("What the monitor tests").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from calibrators import expected_costs
from taskcal_agents.production._monitor_report import MetricResult, Sided
from taskcal_agents.production._null import Estimate, Reference, ece_estimate, gap_estimate

__all__ = ["EPS", "Engine", "Stream"]

EPS = 1e-12
"""Probabilities are clipped to ``[EPS, 1]`` before the log (as :func:`calibrators.metrics.nll`)."""


@dataclass(frozen=True)
class Stream:
    """The records as arrays (one row per decision, in log order)."""

    Q: NDArray[np.float64]  # calibrated beliefs (n, k)
    y: NDArray[np.intp]  # outcome label index, -1 when unlabelled
    a: NDArray[np.intp]  # action index
    fallback: NDArray[np.bool_]
    unparsed: NDArray[np.float64]  # n_unparsed / n_samples, nan without samples
    n_samples: NDArray[np.float64]
    t: NDArray[np.float64]  # POSIX seconds, nan when unknown
    times: tuple[str | None, ...]
    cost: NDArray[np.float64]  # (k, m)

    @property
    def n(self) -> int:
        return int(self.y.size)


def _mean(x: NDArray[np.float64]) -> Estimate:
    if x.size == 0:
        return Estimate(None, math.nan, 0)
    se = float(x.std(ddof=1) / math.sqrt(x.size)) if x.size > 1 else math.inf
    return Estimate(float(x.mean()), se, int(x.size))


def _share(x: NDArray[np.float64]) -> Estimate:
    """A share (``x`` in [0, 1] per item); SE added later at the pooled share."""
    if x.size == 0:
        return Estimate(None, math.nan, 0)
    return Estimate(float(x.mean()), math.nan, int(x.size))


def _served_labelled(s: Stream, idx: NDArray[np.intp]) -> NDArray[np.intp]:
    return idx[(s.y[idx] >= 0) & ~s.fallback[idx]]


def _item_terms(
    s: Stream, idx: NDArray[np.intp]
) -> tuple[NDArray[np.float64], dict[str, NDArray[np.float64]]]:
    """Per item and outcome label, what each term would be: the NLL and the two gaps, (n, k).

    The observed term of item *i* is its column ``y_i``; under calibration (``y_i ~ q_i``)
    each gap has mean 0 per item.
    """
    Q = s.Q[idx]
    rows = np.arange(idx.size)
    e = expected_costs(Q, s.cost, check_input=False)[rows, s.a[idx]]
    surprise = -np.log(np.clip(Q, EPS, 1.0))
    entropy = np.sum(Q * surprise, axis=1)
    return Q, {
        "cost_gap": s.cost[:, s.a[idx]].T - e[:, None],
        "nll": surprise,
        "nll_gap": surprise - entropy[:, None],
    }


def _estimates(
    s: Stream, idx: NDArray[np.intp], labels: Sequence[str], n_boot: int, seed: int
) -> dict[str, Estimate]:
    lab = _served_labelled(s, idx)
    Q, terms = _item_terms(s, lab)
    y = s.y[lab]
    out = {
        "cost_gap": gap_estimate(Q, terms["cost_gap"], y),
        "nll": _mean(terms["nll"][np.arange(lab.size), y]),
        "nll_gap": gap_estimate(Q, terms["nll_gap"], y),
    }
    out["classwise_ece"] = ece_estimate(y, Q, n_boot, seed)
    labelled = idx[s.y[idx] >= 0]
    for j, label in enumerate(labels):
        out[f"label_prior:{label}"] = _share((s.y[labelled] == j).astype(np.float64))
    u = s.unparsed[idx]
    out["unparsed_rate"] = _mean(u[~np.isnan(u)])
    out["fallback_rate"] = _share(s.fallback[idx].astype(np.float64))
    return out


_SIDED: dict[str, Sided] = {
    "cost_gap": "both",
    "nll": "up",
    "nll_gap": "both",
    "classwise_ece": "up",
    "unparsed_rate": "up",
    "fallback_rate": "up",
}


def _compare(
    name: str,
    est: Estimate,
    ref: Reference | None,
    *,
    sided: Sided,
    z: float,
    min_n: int,
    binomial: bool = False,
    floor: float = 0.0,
) -> MetricResult:
    """One metric vs its reference.

    ``binomial``: a share, SE at the pooled share; ``floor``: the least SE (an all-zero
    window of a rate has sample SE 0).
    """
    if est.value is None:
        return MetricResult(
            name,
            None,
            None,
            None if ref is None else ref.value,
            "-" if ref is None else ref.source,
            None,
            0,
            sided,
            "no data",
        )
    if ref is None:
        return MetricResult(name, est.value, None, None, "-", None, est.n, sided, "reference")
    if binomial:  # a share: binomial SE at the pooled share, ½ count added
        n_ref = ref.n or 0
        pooled = (est.value * est.n + ref.value * n_ref + 0.5) / (est.n + n_ref + 1)
        var = pooled * (1 - pooled)
        se2 = var / est.n + (var / n_ref if n_ref else 0.0)
    else:
        ref_se = ref.se if ref.se is not None else 0.0
        se2 = est.se**2 + ref_se**2
    se = max(math.sqrt(se2), floor) if math.isfinite(se2) else math.inf
    diff = est.value - ref.value
    if est.z is not None:  # a test of its own (the gaps, against their reference 0)
        zval = est.z
    else:
        zval = diff / se if se > 0 else (0.0 if diff == 0 else math.copysign(math.inf, diff))
    too_few = est.n < min_n or (ref.source.startswith("window") and (ref.n or 0) < min_n)
    hit = (zval if sided == "up" else abs(zval)) > z
    status = "too few" if too_few else "ALARM" if hit else "ok"
    return MetricResult(name, est.value, se, ref.value, ref.source, zval, est.n, sided, status)


def _fit_references(
    fit_metrics: Mapping[str, Any] | None, labels: Sequence[str]
) -> dict[str, Reference]:
    """The references recorded at fit time (``fit_metrics`` of the artefact)."""
    refs: dict[str, Reference] = {}
    if not fit_metrics:
        return refs
    for key in ("holdout", "crossval"):  # the fitted map on held-out items, else cross-fit
        scores = fit_metrics.get(key) or {}
        if "nll" not in refs and isinstance(scores.get("nll"), int | float):
            se = scores.get("nll_se")
            refs["nll"] = Reference(
                float(scores["nll"]),
                "fit",
                scores.get("n", fit_metrics.get("n")),
                float(se) if isinstance(se, int | float) else None,
            )
    prior = fit_metrics.get("label_prior") or {}
    shares = prior.get("shares") or {}
    for label in labels:
        if isinstance(shares.get(label), int | float):
            refs[f"label_prior:{label}"] = Reference(float(shares[label]), "fit", prior.get("n"))
    for name in ("unparsed_rate", "fallback_rate"):
        rec = fit_metrics.get(name) or {}
        if isinstance(rec.get("rate"), int | float):
            se = rec.get("se")
            refs[name] = Reference(
                float(rec["rate"]),
                "fit",
                rec.get("n"),
                float(se) if isinstance(se, int | float) else None,
            )
    return refs


class Engine:
    """Metrics of windows of one stream against fixed references."""

    def __init__(
        self,
        s: Stream,
        labels: Sequence[str],
        *,
        fit_metrics: Mapping[str, Any] | None,
        reference: NDArray[np.intp] | None,
        z: float,
        min_n: int,
        n_boot: int,
        seed: int,
    ) -> None:
        self.s, self.labels, self.z, self.min_n = s, list(labels), z, min_n
        self.n_boot, self.seed = n_boot, seed
        self.refs: dict[str, Reference] = {
            "cost_gap": Reference(0.0, "theory"),
            "nll_gap": Reference(0.0, "theory"),
        }
        fit = _fit_references(fit_metrics, labels)
        self.refs.update(fit)
        self.first: dict[str, Estimate] = {}
        if reference is not None:
            first = _estimates(s, reference, self.labels, n_boot, seed)
            for name, est in first.items():
                if name not in self.refs and est.value is not None and est.reference is None:
                    se = self._own_se(name, est)
                    self.refs[name] = Reference(est.value, "window 0", est.n, se)
                    self.first[name] = est

    def _own_se(self, name: str, est: Estimate) -> float | None:
        if name == "fallback_rate" or name.startswith("label_prior:"):
            return None  # binomial at the pooled share
        return est.se

    def window(self, idx: NDArray[np.intp], *, is_reference: bool) -> list[MetricResult]:
        ests = _estimates(self.s, idx, self.labels, self.n_boot, self.seed)
        out = []
        for name, est in ests.items():
            ref = est.reference or self.refs.get(name)
            sided = _SIDED.get(name, "both")
            if is_reference and ref is not None and ref.source == "window 0":
                out.append(
                    MetricResult(
                        name,
                        est.value,
                        None,
                        ref.value,
                        ref.source,
                        None,
                        est.n,
                        sided,
                        "reference" if est.value is not None else "no data",
                    )
                )
                continue
            binomial = name == "fallback_rate" or name.startswith("label_prior:")
            floor = 0.0
            if name == "unparsed_rate" and ref is not None and est.value is not None:
                # the binomial SE of a share of m samples per decision at the pooled rate
                m = max(1.0, float(np.mean(self.s.n_samples[idx])))
                p = (est.value * est.n + ref.value * (ref.n or 0) + 0.5) / (
                    est.n + (ref.n or 0) + 1
                )
                floor = math.sqrt(p * (1 - p) / (m * est.n))
            out.append(
                _compare(
                    name,
                    est,
                    ref,
                    sided=sided,
                    z=self.z,
                    min_n=self.min_n,
                    binomial=binomial,
                    floor=floor,
                )
            )
        return out
