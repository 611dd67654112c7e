"""What the drift monitor found, as data (``to_dict``: the monitor JSON) and as a table.

:class:`MonitorReport` holds one :class:`WindowResult` per window of decisions, each with
one :class:`MetricResult` per metric; :meth:`MonitorReport.to_table` renders it for the
terminal (``taskcal monitor``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from rich.table import Table

__all__ = [
    "MONITOR_FORMAT",
    "MONITOR_FORMAT_VERSION",
    "MetricResult",
    "MonitorReport",
    "Sided",
    "WindowResult",
]


MONITOR_FORMAT = "taskcal.monitor"


MONITOR_FORMAT_VERSION = 1


Sided = Literal["up", "both"]


@dataclass(frozen=True)
class MetricResult:
    """One metric in one window.

    Attributes:
        name: The metric (``cost_gap``, ``nll``, ``label_prior:<label>``, ...).
        value: Its value in the window, or ``None`` without data.
        se: The SE of ``value - reference`` (for ``cost_gap`` and ``nll_gap`` the SE
            under calibration, outcomes drawn from the beliefs), or ``None``.
        reference: What it is compared with, or ``None``.
        source: Where the reference comes from: ``"theory"``, ``"fit"``, ``"window 0"``.
        z: ``(value - reference) / se`` (for the two gaps the normal quantile of the
            window's tail probability under calibration, a saddlepoint approximation
            that allows for their skew), or ``None``.
        n: Items in the window behind ``value``.
        sided: ``"up"`` (only a rise alarms) or ``"both"``.
        status: ``"ok"``, ``"ALARM"``, ``"too few"``, ``"reference"`` or ``"no data"``.
    """

    name: str
    value: float | None
    se: float | None
    reference: float | None
    source: str
    z: float | None
    n: int
    sided: Sided
    status: str

    @property
    def alarm(self) -> bool:
        """Whether this metric alarms."""
        return self.status == "ALARM"

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (infinite z as a string)."""
        z = self.z if self.z is None or math.isfinite(self.z) else str(self.z)
        return {
            "name": self.name,
            "value": self.value,
            "se": self.se,
            "reference": self.reference,
            "source": self.source,
            "z": z,
            "n": self.n,
            "sided": self.sided,
            "status": self.status,
            "alarm": self.alarm,
        }


@dataclass(frozen=True)
class WindowResult:
    """One window of decisions (``start <= index < stop`` in log order).

    Attributes:
        index: The window number.
        start: Index of its first decision.
        stop: One past its last decision.
        time_from: Time of its first decision (ISO 8601), or ``None``.
        time_to: Time of its last decision, or ``None``.
        n_decisions: Decisions in it.
        n_labelled: Of those, with an outcome.
        metrics: One result per metric.
    """

    index: int
    start: int
    stop: int
    time_from: str | None
    time_to: str | None
    n_decisions: int
    n_labelled: int
    metrics: tuple[MetricResult, ...]

    @property
    def alarm(self) -> bool:
        """Whether any metric alarms."""
        return any(m.alarm for m in self.metrics)

    def metric(self, name: str) -> MetricResult:
        """The result of metric *name*.

        Raises:
            KeyError: No such metric.
        """
        for m in self.metrics:
            if m.name == name:
                return m
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "index": self.index,
            "start": self.start,
            "stop": self.stop,
            "time_from": self.time_from,
            "time_to": self.time_to,
            "n_decisions": self.n_decisions,
            "n_labelled": self.n_labelled,
            "alarm": self.alarm,
            "metrics": [m.to_dict() for m in self.metrics],
        }


@dataclass(frozen=True)
class MonitorReport:
    """What :func:`monitor` found.

    Attributes:
        task: The task's name.
        labels: Its labels.
        window: The window: a count, a duration in seconds, or ``None`` (the whole log).
        z: The alarm threshold.
        min_n: The fewest items a window needs to alarm.
        n_records: Decisions monitored (after the artefact-id and task filters).
        artefact_ids: Decisions per logged artefact id in the whole input (``None`` key
            as ``"none"``), so a mix of calibrators is visible.
        n_excluded: Decisions left out by the artefact-id filter.
        windows: One result per window.
        n_other_task: Decisions of other tasks left out (e.g. tool-result turns that a
            middleware logs as task ``after_tool_result`` into the same log).
        warnings: What the report cannot show (e.g. no labelled decisions: no labelled
            metric was tested).
    """

    task: str
    labels: tuple[str, ...]
    window: int | float | None
    z: float
    min_n: int
    n_records: int
    artefact_ids: dict[str, int]
    n_excluded: int
    windows: tuple[WindowResult, ...] = field(default_factory=tuple)
    n_other_task: int = 0
    warnings: tuple[str, ...] = ()

    @property
    def alarm(self) -> bool:
        """Whether any window alarms."""
        return any(w.alarm for w in self.windows)

    def alarms(self) -> list[tuple[int, MetricResult]]:
        """``(window index, metric)`` for each alarming metric."""
        return [(w.index, m) for w in self.windows for m in w.metrics if m.alarm]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form with ``format`` and ``format_version``."""
        return {
            "format": MONITOR_FORMAT,
            "format_version": MONITOR_FORMAT_VERSION,
            "task": self.task,
            "labels": list(self.labels),
            "window": self.window,
            "z": self.z,
            "min_n": self.min_n,
            "n_records": self.n_records,
            "artefact_ids": dict(self.artefact_ids),
            "n_excluded": self.n_excluded,
            "n_other_task": self.n_other_task,
            "warnings": list(self.warnings),
            "alarm": self.alarm,
            "windows": [w.to_dict() for w in self.windows],
        }

    def to_table(self, *, last: int | None = 6) -> Table:
        """A rich table: one row per metric, one column per window (the *last* ones).

        Each cell shows ``value (z)``; an alarm is red and marked ``!``, a window with
        too few items shows ``…``, the reference window ``ref``.
        """
        from rich.table import Table

        windows = self.windows[-last:] if last else self.windows
        mixed = (
            f", {len(self.artefact_ids)} artefact ids mixed" if len(self.artefact_ids) > 1 else ""
        )
        table = Table(
            title=f"taskcal monitor: {self.task}, {self.n_records} decisions{mixed} "
            f"(alarm: z > {self.z:g}, n >= {self.min_n})"
        )
        table.add_column("metric")
        table.add_column("reference", justify="right")
        for w in windows:
            span = f"{w.start}-{w.stop - 1}" if w.stop > w.start else "empty"
            table.add_column(
                f"w{w.index} [{span}]\nn={w.n_labelled}/{w.n_decisions}", justify="right"
            )
        names = [m.name for m in windows[0].metrics] if windows else []
        for name in names:
            cells = [w.metric(name) for w in windows]
            ref = next((c for c in cells if c.reference is not None), cells[0])
            row = [name, "-" if ref.reference is None else f"{ref.reference:.3f} ({ref.source})"]
            for c in cells:
                row.append(_cell(c))
            table.add_row(*row)
        return table


def _cell(m: MetricResult) -> str:
    if m.value is None:
        return "-"
    text = f"{m.value:.3f}"
    if m.status == "reference":
        return f"{text} ref"
    if m.status == "too few":
        return f"{text} …"
    z = "" if m.z is None else f" ({m.z:+.1f})"
    return f"[bold red]{text}{z} ![/bold red]" if m.alarm else f"{text}{z}"
