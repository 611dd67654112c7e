"""Tables, figures and the markdown summary of an evaluation (``taskcal report``).

Everything here reads the evaluation dict written by ``taskcal evaluate`` (see
:func:`~taskcal_agents.workflow._evaluation_json.evaluation_to_dict`), so a report can be
rebuilt without the samples or a server. The tables, the verdict and the markdown summary
are here; the figures (``plot_*``) are drawn in ``_report_figures`` and exported from here.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from taskcal_agents._files import read_json, write_text
from taskcal_agents.errors import DataFileError
from taskcal_agents.workflow._evaluation_json import (
    EVALUATION_FORMAT,
    EVALUATION_FORMAT_VERSION,
)
from taskcal_agents.workflow._report_figures import (
    plot_cost_sweep,
    plot_costs,
    plot_reliability,
    plot_risk_coverage,
    selective_rows,
    target_risk,
)

if TYPE_CHECKING:
    from rich.table import Table

__all__ = [
    "cost_sweep_rich_table",
    "load_evaluation",
    "markdown_summary",
    "markdown_table",
    "plot_cost_sweep",
    "plot_costs",
    "plot_reliability",
    "plot_risk_coverage",
    "rich_table",
    "selective_section",
    "tool_columns",
    "tool_rich_table",
    "tool_section",
    "verdict",
    "write_report",
]

COLUMNS: tuple[tuple[str, str], ...] = (
    ("expected_cost", "cost"),
    ("cost_se", "± se"),
    ("saving_vs_constant", "Δ vs const"),
    ("saving_vs_constant_se", "± se (paired)"),
    ("saving_vs_raw", "Δ vs raw"),
    ("saving_vs_raw_se", "± se (paired)"),
    ("accuracy", "acc"),
    ("macro_f1", "macro-F1"),
    ("nll", "NLL"),
    ("brier", "Brier"),
    ("ece", "ECE"),
    ("classwise_ece", "cw-ECE"),
    ("tce", "TCE (cross-fit)"),
    ("aurc", "AURC"),
)
"""(key, header) of the numeric columns of the decoder table. ``Δ`` columns are paired
savings (baseline cost − this decoder's cost, per item; positive = cheaper) with the
standard error of the per-item differences; ``TCE (cross-fit)`` is signed; ``AURC`` is the
area under the decoder's risk–coverage curve (its ``selective`` block)."""


def _value(row: dict[str, Any], key: str) -> Any:
    """A table cell's value: a row key, or ``aurc`` from the row's ``selective`` block."""
    if key == "aurc":
        return (row.get("selective") or {}).get("aurc")
    return row.get(key)


SIGNIFICANCE = 0.05
"""Level at which the label-shuffle test counts as evidence of signal."""


def load_evaluation(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read an evaluation JSON written by ``taskcal evaluate``.

    Raises:
        DataFileError: Missing file, invalid JSON, or not an evaluation of this version.
    """
    p = Path(path)
    data = read_json(
        p, what="evaluation file", missing_hint="write one with `taskcal evaluate --out`."
    )
    if not isinstance(data, dict) or data.get("format") != EVALUATION_FORMAT:
        msg = f"not an evaluation file: expected format {EVALUATION_FORMAT!r}."
        raise DataFileError(msg, path=str(p))
    if data.get("format_version") != EVALUATION_FORMAT_VERSION:
        msg = (
            f"evaluation format_version must be {EVALUATION_FORMAT_VERSION}, got "
            f"{data.get('format_version')!r}: it was written by an older taskcal whose scores "
            "ignored the runtime's rules; re-run `taskcal evaluate` on the samples file."
        )
        raise DataFileError(msg, path=str(p))
    return data


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.3f}"
    return str(value)


def verdict(evaluation: dict[str, Any]) -> str:
    """One honest paragraph on calibrated MBR vs the best constant action.

    The label-shuffle p-value decides first (signal beyond the label prior or not); the
    paired cost gap and its standard error then describe the size of the difference.
    """
    test = evaluation.get("permutation_test")
    if not test:
        error = evaluation.get("permutation_error")
        return "No label-shuffle test was run" + (f" ({error})." if error else ".")
    gap, se, p = test["statistic"], test.get("gap_se") or 0.0, test["p_value"]
    name = test["calibrator"]
    head = (
        f"MBR + {name} vs the best constant action: paired cost saving {gap:+.3f} ± "
        f"{se:.3f} (positive = calibrated MBR is cheaper), label-shuffle p = {p:.3f} "
        f"({test['n_permutations']} shuffles)."
    )
    if p < SIGNIFICANCE:
        if gap > 2 * se:
            return head + (
                " The beliefs carry signal beyond the label prior, and calibrated MBR saves "
                "cost over the best constant action by more than two paired standard errors."
            )
        return head + (
            " The beliefs carry signal beyond the label prior, but the saving over the best "
            "constant action is within two paired standard errors."
        )
    head += " No evidence of signal beyond the label prior"
    if gap > 2 * se:
        return head + (
            "; the saving over the best constant action exceeds two paired standard errors, "
            "but the shuffle test does not confirm it."
        )
    if gap >= -2 * se:
        return head + (
            "; calibrated MBR stays within two paired standard errors of the best constant "
            "action, as it should for an uninformative model."
        )
    return head + (
        "; calibrated MBR costs more than the best constant action by more than two paired "
        "standard errors: the calibrator overfits this little data; prefer the constant "
        "action or a simpler map."
    )


def markdown_table(evaluation: dict[str, Any]) -> str:
    """The decoder table as GitHub markdown."""
    header = "| decoder | " + " | ".join(h for _, h in COLUMNS) + " |"
    sep = "|---|" + "|".join("---:" for _ in COLUMNS) + "|"
    lines = [header, sep]
    for row in evaluation["decoders"]:
        if row.get("error"):
            lines.append(
                f"| {row['decoder']} | failed: {row['error']} |" + " |" * (len(COLUMNS) - 1)
            )
            continue
        cells = " | ".join(_fmt(_value(row, key)) for key, _ in COLUMNS)
        lines.append(f"| {row['decoder']} | {cells} |")
    return "\n".join(lines)


RICH_COLUMNS: tuple[tuple[str, str | None, str], ...] = (
    ("expected_cost", "cost_se", "cost ± se"),
    ("saving_vs_constant", "saving_vs_constant_se", "Δ vs const ± se"),
    ("saving_vs_raw", "saving_vs_raw_se", "Δ vs raw ± se"),
    ("accuracy", None, "acc"),
    ("macro_f1", None, "macro-F1"),
    ("nll", None, "NLL"),
    ("brier", None, "Brier"),
    ("ece", None, "ECE"),
    ("classwise_ece", None, "cw-ECE"),
    ("tce", None, "TCE (cross-fit)"),
    ("aurc", None, "AURC"),
)
"""(key, se key, header) of the terminal table: :data:`COLUMNS` with each standard error
in the cell of its value (Δ: paired saving, positive = cheaper, paired se)."""


def _fmt_pm(value: Any, se: Any) -> str:
    return _fmt(value) if se is None else f"{_fmt(value)} ± {_fmt(se)}"


def rich_table(
    evaluation: dict[str, Any],
    title: str | None = None,
    *,
    columns: Sequence[str] | None = None,
    actions: bool = True,
) -> Table:
    """The decoder table for the terminal (the cheapest decoder's cost in bold).

    Decoder names are never cut; when the console is too narrow, the other cells wrap or
    fold rather than end in an ellipsis.

    Args:
        evaluation: The evaluation dict.
        title: The table's title.
        columns: Keys of :data:`RICH_COLUMNS` to show, in that order (default: all).
        actions: Whether to show the action counts of each decoder.

    Raises:
        ValueError: A key in *columns* names no column of :data:`RICH_COLUMNS`.
    """
    from rich.table import Table

    by_key = {spec[0]: spec for spec in RICH_COLUMNS}
    unknown = [key for key in columns or () if key not in by_key]
    if unknown:
        msg = f"unknown decoder table column(s) {unknown}; known: {list(by_key)}."
        raise ValueError(msg)
    shown = RICH_COLUMNS if columns is None else tuple(by_key[key] for key in columns)
    keys = [key for key, _, _ in shown]
    table = Table(title=title, show_lines=False)
    table.add_column("decoder", style="bold", no_wrap=True)
    for _, _, header in shown:
        table.add_column(header, justify="right", overflow="fold")
    if actions:
        table.add_column("actions", overflow="fold")
    costs = [r["expected_cost"] for r in evaluation["decoders"] if not r.get("error")]
    best = min(costs) if costs else None
    for row in evaluation["decoders"]:
        if row.get("error"):
            table.add_row(row["decoder"], f"[red]failed: {row['error']}[/red]")
            continue
        cells = [
            _fmt(_value(row, key)) if se_key is None else _fmt_pm(row.get(key), row.get(se_key))
            for key, se_key, _ in shown
        ]
        if best is not None and row["expected_cost"] == best and "expected_cost" in keys:
            at = keys.index("expected_cost")
            cells[at] = f"[bold green]{cells[at]}[/bold green]"
        if actions:
            counts = row.get("action_counts") or {}
            cells.append(" ".join(f"{a}:{c}" for a, c in counts.items()))
        table.add_row(row["decoder"], *cells)
    return table


TOOL_COLUMNS: tuple[tuple[str, str], ...] = (
    ("macro_f1", "macro-F1"),
    ("tool_call_recall", "tool-call recall"),
    ("over_calling_rate", "over-calling"),
    ("cannot_answer_recall", "cannot_answer recall"),
    ("no_tool_call_rate", "no-tool call rate"),
    ("executed_call_correct", "calls correct"),
)
"""(key, header) of the tool-use table of a tool decision (When2Call's metrics and more):
macro-F1 over the labels, the share of ``tool_call`` items answered with a call, the share
of the other items answered with one, the share of ``cannot_answer`` items refused, the
share of items offered no tools answered with a call (When2Call's tool hallucination
rate; only when some item had no tools), and the share of the calls made on items with
BFCL's possible answers that BFCL accepts (only when the items carry them)."""


def tool_columns(evaluation: dict[str, Any]) -> list[tuple[str, str]]:
    """The :data:`TOOL_COLUMNS` the rows carry ([] when the task is no tool decision)."""
    rows = [r for r in evaluation["decoders"] if not r.get("error")]
    if not any("tool_call_recall" in r for r in rows):
        return []
    return [(key, h) for key, h in TOOL_COLUMNS if key == "macro_f1" or any(key in r for r in rows)]


def _tool_caption(evaluation: dict[str, Any], columns: Sequence[tuple[str, str]]) -> str:
    text = (
        "tool-call recall: share of tool_call items where the decoder calls a tool; "
        "over-calling: share of the other items where it does"
    )
    if any(key == "cannot_answer_recall" for key, _ in columns):
        text += "; cannot_answer recall: share of cannot_answer items it refuses"
    if any(key == "executed_call_correct" for key, _ in columns):
        text += (
            "; calls correct: share of its calls on items with a possible answer that "
            "BFCL's AST rules accept"
        )
    if any(key == "no_tool_call_rate" for key, _ in columns):
        n = evaluation.get("n_no_tools")
        items = f"the {n} items" if n is not None else "the items"
        text += f"; no-tool call rate: share of {items} offered no tools where it does"
    return text + "."


def tool_rich_table(
    evaluation: dict[str, Any], title: str | None = "tool-use metrics"
) -> Table | None:
    """The terminal table of When2Call's tool-use metrics, or ``None`` for other tasks."""
    from rich.table import Table

    columns = tool_columns(evaluation)
    if not columns:
        return None
    caption = _tool_caption(evaluation, columns)
    table = Table(title=title, caption=caption, caption_justify="left", show_lines=False)
    table.add_column("decoder", style="bold", no_wrap=True)
    for _, header in columns:
        table.add_column(header, justify="right")
    for row in evaluation["decoders"]:
        if not row.get("error"):
            table.add_row(row["decoder"], *(_fmt(row.get(key)) for key, _ in columns))
    return table


def cost_sweep_rich_table(
    evaluation: dict[str, Any], title: str | None = "what the wrong-call cost buys"
) -> Table | None:
    """The terminal table of the evaluation's cost sweep, or ``None`` without one.

    One row per decoder, one column per wrong-call cost: the expected cost under that
    cost matrix, and the share of items it calls a tool on.
    """
    from rich.table import Table

    sweep = evaluation.get("cost_sweep")
    if not sweep:
        return None
    caption = (
        "Each decoder decided again on its cross-fitted beliefs with the cost of a wrong "
        "call (a tool called where asking or refusing was right) set to each value, the "
        "other costs fixed: expected cost / share of items it calls on."
    )
    table = Table(title=title, caption=caption, caption_justify="left")
    table.add_column("decoder", style="bold", no_wrap=True)
    for c in sweep["wrong_call_cost"]:
        table.add_column(f"{c:g}", justify="right")
    for name, series in sweep["decoders"].items():
        cells = [
            f"{cost:.2f}/{rate:.2f}"
            for cost, rate in zip(series["expected_cost"], series["call_rate"], strict=True)
        ]
        table.add_row(name, *cells)
    return table


def tool_section(evaluation: dict[str, Any]) -> str:
    """The markdown section of the tool-use metrics ("" when the task is no tool decision)."""
    columns = tool_columns(evaluation)
    if not columns:
        return ""
    caption = _tool_caption(evaluation, columns)
    lines = [
        "## Tool use",
        "",
        caption[0].upper() + caption[1:],
        "",
        "| decoder | " + " | ".join(h for _, h in columns) + " |",
        "|---|" + "|".join("---:" for _ in columns) + "|",
    ]
    for row in evaluation["decoders"]:
        if not row.get("error"):
            cells = " | ".join(_fmt(row.get(key)) for key, _ in columns)
            lines.append(f"| {row['decoder']} | {cells} |")
    return "\n".join(lines)


def selective_section(evaluation: dict[str, Any]) -> str:
    """The markdown section on selective prediction ("" when no row carries one).

    A table of AURC, oracle AURC, risk at full coverage and, when a target risk was set,
    the coverage reached at that risk, with one paragraph on how to read it.
    """
    rows = selective_rows(evaluation)
    if not rows:
        return ""
    target = target_risk(rows)
    headers = ["AURC", "oracle AURC", "risk at full coverage"]
    if target is not None:
        headers.append(f"coverage at risk ≤ {target:g}")
    lines = [
        "## Selective prediction",
        "",
        "Each decoder ranks the items by its confidence in its own action (the expected-cost "
        "margin of the best other executable action over the chosen one, under the belief it "
        "decided on) and decides only the most confident ones; risk is the mean cost of the "
        "decided items. AURC averages the risk over all coverages (lower is better); the "
        "oracle AURC is what a perfect ranking would reach with the same costs, so the gap "
        "between the two measures the ranking alone"
        + (
            f", and the last column is the largest fraction of items decided at a mean cost of "
            f"at most {target:g}."
            if target is not None
            else "."
        ),
        "",
        "| decoder | " + " | ".join(headers) + " |",
        "|---|" + "|".join("---:" for _ in headers) + "|",
    ]
    for row in rows:
        block = row["selective"]
        cells = [block.get("aurc"), block.get("oracle_aurc"), block.get("full_risk")]
        if target is not None:
            cells.append(block.get("coverage_at_target"))
        lines.append(f"| {row['decoder']} | " + " | ".join(_fmt(c) for c in cells) + " |")
    return "\n".join(lines)


def markdown_summary(evaluation: dict[str, Any], figures: Sequence[Path] = ()) -> str:
    """The markdown summary: setting, decoders, shuffle test, tool use, selective, figures.

    The tool-use section appears only for a tool decision, the selective-prediction section
    only when the decoder rows carry it.
    """
    task = evaluation["task"]
    meta = evaluation.get("meta") or {}
    lines = [f"# Evaluation: {task.get('name', 'task')}", ""]
    lines.append(
        f"{evaluation['n_items']} items, {evaluation['folds']}-fold stratified cross-fitting "
        f"(seed {evaluation['seed']}). Calibration maps were fitted on the served items only "
        f"({evaluation.get('n_excluded_no_sample', 0)} items without a usable sample were "
        "left out of every fit; they get the fallback action). MBR decoders take the "
        "cheapest action the item's samples can carry out, as the runtime does. "
        "Δ columns are paired savings (positive = cheaper than the baseline) with paired "
        "standard errors; TCE is cross-fitted and signed."
    )
    if meta:
        lines.append("")
        lines.extend(f"- {k}: `{json.dumps(v)}`" for k, v in meta.items())
    lines += ["", f"Labels: {task.get('labels')}; actions: {task.get('actions')}.", ""]
    cost = task.get("cost")
    if cost:
        lines.append("Cost matrix (row = true label, column = action):")
        lines.append("")
        lines.append("| | " + " | ".join(task["actions"]) + " |")
        lines.append("|---|" + "|".join("---:" for _ in task["actions"]) + "|")
        for label, row in zip(task["labels"], cost, strict=True):
            lines.append(f"| {label} | " + " | ".join(f"{c:g}" for c in row) + " |")
        lines.append("")
    lines += ["## Decoders", "", markdown_table(evaluation), "", "## Label-shuffle test", ""]
    lines.append(verdict(evaluation))
    descriptions = [f"- `{r['decoder']}`: {r['description']}" for r in evaluation["decoders"]]
    lines += ["", "Decoders:", "", *descriptions]
    for section in (tool_section(evaluation), selective_section(evaluation)):
        if section:
            lines += ["", section]
    if figures:
        lines += ["", "## Figures", ""]
        lines.extend(f"![{f.stem}]({f.name})" for f in figures)
    return "\n".join(lines) + "\n"


def write_report(evaluation: dict[str, Any], out_dir: str | os.PathLike[str]) -> list[Path]:
    """Write the report's figures and ``summary.md``.

    The figures: ``reliability.png``, ``costs.png``, ``risk_coverage.png`` and
    ``cost_sweep.png``; ``risk_coverage.png`` only when the decoder rows carry risk–coverage blocks,
    ``cost_sweep.png`` only for a tool decision's evaluation (its ``cost_sweep``). Each file
    is written atomically (:func:`~taskcal_agents._files.atomic_path`).

    Returns:
        The written paths (summary last).

    Raises:
        DataFileError: The evaluation has no per-item data (it was written without it).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if "items" not in evaluation:
        msg = "evaluation has no per-item data; re-run `taskcal evaluate` without --no-items."
        raise DataFileError(msg, path=str(out))
    figures = [
        plot_reliability(evaluation, out / "reliability.png"),
        plot_costs(evaluation, out / "costs.png"),
    ]
    if selective_rows(evaluation):
        figures.append(plot_risk_coverage(evaluation, out / "risk_coverage.png"))
    if evaluation.get("cost_sweep"):
        figures.append(plot_cost_sweep(evaluation, out / "cost_sweep.png"))
    summary = write_text(markdown_summary(evaluation, figures), out / "summary.md")
    return [*figures, summary]
