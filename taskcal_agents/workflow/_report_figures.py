"""The figures of an evaluation report (matplotlib, the ``plot`` extra).

Reliability diagrams, costs and paired savings per decoder, risk–coverage curves and the
wrong-call cost sweep, each drawn from the evaluation dict written by ``taskcal evaluate``
and saved as a PNG. Public through :mod:`taskcal_agents.workflow._report`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from taskcal_agents._files import save_figure
from taskcal_agents.errors import DataFileError

__all__ = [
    "plot_cost_sweep",
    "plot_costs",
    "plot_reliability",
    "plot_risk_coverage",
    "selective_rows",
    "target_risk",
]


def _figure(**kwargs: Any) -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - matplotlib is a dev dependency
        msg = (
            "taskcal report draws figures with matplotlib, which is not installed; "
            "install it with: pip install 'taskcal-agents[plot]'."
        )
        raise ImportError(msg) from exc
    return Figure(**kwargs)


def plot_reliability(
    evaluation: dict[str, Any],
    path: str | os.PathLike[str],
    *,
    sources: Sequence[str] | None = None,
    n_bins: int = 10,
) -> Path:
    """Reliability diagrams before (raw belief) and after calibration (cross-fitted).

    One column per belief source (default: raw, temperature, and the tested calibrator),
    one row for the top-label diagram and one per label (one-vs-rest), up to six labels.

    Returns:
        The PNG path.
    """
    from calibrators.metrics import reliability_diagram

    items = evaluation["items"]
    probs = items["probs"]
    y = np.asarray(items["y"])
    labels = evaluation["task"]["labels"]
    if sources is None:
        test = (evaluation.get("permutation_test") or {}).get("calibrator")
        sources = [
            s for s in dict.fromkeys(["raw", "temperature", test]) if s is not None and s in probs
        ]
    rows = [None, *range(len(labels))] if len(labels) <= 6 else [None]
    fig = _figure(figsize=(3.2 * len(sources), 3.0 * len(rows)), layout="constrained")
    axes = fig.subplots(len(rows), len(sources), squeeze=False)
    for j, source in enumerate(sources):
        Q = np.asarray(probs[source])
        for i, class_index in enumerate(rows):
            name = "top label" if class_index is None else f"{labels[class_index]}"
            diagram = reliability_diagram(
                Q,
                y,
                n_bins=n_bins,
                class_index=class_index,
                ax=axes[i][j],
                title=f"{source}: {name}",
            )
            _annotate_bin_counts(axes[i][j], diagram)
    fig.suptitle(
        f"Reliability before/after calibration — {evaluation['task'].get('name', '')} "
        f"(n = {y.size})"
    )
    out = Path(path)
    return save_figure(fig, out, dpi=110)


def _annotate_bin_counts(ax: Any, diagram: Any) -> Any:
    """Label the top edge of a reliability diagram with the item count of each bin.

    The counts sit on a secondary x axis above the plot (one tick per non-empty bin), so
    they never hide a bar, a marker or the legend.

    Returns:
        The secondary axis.
    """
    edges = diagram.bin_edges
    centres = (edges[:-1] + edges[1:]) / 2
    filled = diagram.weight > 0
    top = ax.secondary_xaxis("top")
    top.set_xticks(centres[filled], labels=[f"{w:.0f}" for w in diagram.weight[filled]])
    top.tick_params(labelsize=7, length=2, pad=1)
    top.set_xlabel("items per bin", fontsize=7, labelpad=2)
    return top


def plot_costs(evaluation: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """Cost per decoder (left) and paired savings (right).

    Left: expected cost per decoder with ±1.96 se bars (unpaired; the dashed line marks
    the best constant action). Right: the paired saving over the best constant action
    and over ``mbr_raw`` with ±2 paired se bars; a bar clear of 0 is a difference beyond
    noise (the unpaired bars on the left overstate the uncertainty of a difference).

    Returns:
        The PNG path.
    """
    rows = [r for r in evaluation["decoders"] if not r.get("error")]
    names = [r["decoder"] for r in rows]
    costs = np.array([r["expected_cost"] for r in rows])
    errs = np.array([1.96 * (r.get("cost_se") or 0.0) for r in rows])
    fig = _figure(figsize=(11.0, 0.45 * len(rows) + 1.6), layout="constrained")
    ax, ax_saving = fig.subplots(1, 2, sharey=True)
    colors = ["tab:gray" if n == "constant" else "tab:blue" for n in names]
    ax.barh(names, costs, xerr=errs, color=colors, capsize=3)
    ax.invert_yaxis()
    constant = next((r["expected_cost"] for r in rows if r["decoder"] == "constant"), None)
    if constant is not None:
        ax.axvline(constant, color="black", linestyle="--", linewidth=1, label="best constant")
        ax.legend(loc="lower right")
    ax.set_xlabel("expected cost per decision (lower is better)")
    ax.set_title("cost ± 1.96 se")
    y = np.arange(len(rows))
    height = 0.38
    for offset, key, label, color in (
        (-height / 2, "constant", "vs best constant", "tab:green"),
        (height / 2, "raw", "vs mbr_raw", "tab:orange"),
    ):
        saving = np.array([r.get(f"saving_vs_{key}") or 0.0 for r in rows])
        se = np.array([2 * (r.get(f"saving_vs_{key}_se") or 0.0) for r in rows])
        ax_saving.barh(y + offset, saving, height=height, xerr=se, color=color, capsize=2,
                       label=label)  # fmt: skip
    ax_saving.axvline(0.0, color="black", linewidth=1)
    ax_saving.set_xlabel("paired cost saving (positive = cheaper)")
    ax_saving.set_title("paired saving ± 2 paired se")
    ax_saving.legend(loc="lower right")
    fig.suptitle(
        f"Cost by decoder — {evaluation['task'].get('name', '')} (n = {evaluation['n_items']})"
    )
    out = Path(path)
    return save_figure(fig, out, dpi=110)


def selective_rows(evaluation: dict[str, Any]) -> list[dict[str, Any]]:
    """The decoder rows that carry a risk–coverage block."""
    return [r for r in evaluation["decoders"] if not r.get("error") and r.get("selective")]


def target_risk(rows: Sequence[dict[str, Any]]) -> float | None:
    """The target risk the risk–coverage blocks of *rows* were computed at, if one was set."""
    targets = [r["selective"].get("target_risk") for r in rows]
    return next((t for t in targets if t is not None), None)


def plot_risk_coverage(evaluation: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """Risk–coverage curves, one per decoder, with AURC in the legend.

    Reads ``row["selective"]["curve"]`` of each decoder row (rows without it are
    skipped); the user's target risk, when set, is drawn as a horizontal line.

    Returns:
        The PNG path.

    Raises:
        DataFileError: No decoder row carries a risk–coverage block.
    """
    out = Path(path)
    rows = selective_rows(evaluation)
    if not rows:
        msg = (
            "evaluation has no risk–coverage curves (no decoder row has a 'selective' "
            "block); re-run `taskcal evaluate` with a version that writes them."
        )
        raise DataFileError(msg, path=str(out))
    fig = _figure(figsize=(7.0, 4.6), layout="constrained")
    ax = fig.subplots()
    for row in rows:
        block = row["selective"]
        constant = row["decoder"] == "constant"
        ax.plot(
            block["curve"]["coverage"],
            block["curve"]["risk"],
            label=f"{row['decoder']} (AURC {block['aurc']:.3f})",
            color="tab:gray" if constant else None,
            linestyle="--" if constant else "-",
            marker="." if len(block["curve"]["coverage"]) <= 20 else None,
            linewidth=1.4,
        )
    target = target_risk(rows)
    if target is not None:
        ax.axhline(
            target, color="black", linestyle=":", linewidth=1, label=f"target risk {target:g}"
        )
    ax.set_xlim(0, 1.02)
    ax.set_xlabel("coverage (fraction of items decided, most confident first)")
    ax.set_ylabel("risk (mean cost of the decided items)")
    ax.set_title(
        f"Risk–coverage — {evaluation['task'].get('name', '')} (n = {evaluation['n_items']})"
    )
    ax.legend(fontsize=8, loc="best")
    return save_figure(fig, out, dpi=110)


def plot_cost_sweep(evaluation: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """Expected cost (left) and call / ask / refuse rates (right) against the wrong-call cost.

    One colour per decoder; on the right, circles and solid lines are calls, squares and
    dotted lines asks, triangles and dashed lines refusals.

    Returns:
        The PNG path.
    """
    sweep = evaluation["cost_sweep"]
    costs = np.asarray(sweep["wrong_call_cost"])
    fig = _figure(figsize=(11.0, 4.2), layout="constrained")
    ax, ax_rate = fig.subplots(1, 2)
    colors = iter(f"C{i}" for i in range(10))
    for name, series in sweep["decoders"].items():
        color = "black" if name == "constant" else next(colors)
        style = "--" if name == "constant" else "-"
        ax.plot(costs, series["expected_cost"], marker="o", label=name, color=color,
                linestyle=style)  # fmt: skip
        if name == "constant":
            continue
        for key, marker, line in (
            ("call_rate", "o", "-"), ("ask_rate", "s", ":"), ("refuse_rate", "^", "--")
        ):  # fmt: skip
            if any(v is not None for v in series[key]):
                ax_rate.plot(costs, series[key], marker=marker, linestyle=line, color=color,
                             label=f"{name} {key[:-5]}")  # fmt: skip
    ax.set_xlabel("cost of a wrong tool call")
    ax.set_ylabel("expected cost per decision")
    ax.legend(fontsize="small")
    ax_rate.set_xlabel("cost of a wrong tool call")
    ax_rate.set_ylabel("share of items")
    ax_rate.legend(fontsize="x-small", ncol=2)
    fig.suptitle(
        f"What the cost matrix buys — {evaluation['task'].get('name', '')} "
        f"(n = {evaluation['n_items']})"
    )
    return save_figure(fig, Path(path), dpi=110)
