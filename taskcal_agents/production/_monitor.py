"""Drift monitor: does the deployed calibrator still predict what happens?

:func:`monitor` reads decision-log records (:meth:`~taskcal_agents.production.DecisionLog.read`)
and, per window of decisions (a count or a duration), compares what the system predicted with
what happened: ``cost_gap`` and ``nll_gap`` (0 for a calibrated system), ``nll``,
``classwise_ece``, ``label_prior:<label>``, ``unparsed_rate`` and ``fallback_rate``, each
against its reference (fit time, theory, or the first window). A metric alarms at
``z > threshold`` (``|z|`` for two-sided metrics) in a window of at least ``min_n`` items.
:func:`monitor_log` runs it on a log file; for streams (the drift benchmark)
:func:`first_alarm` slides a trailing window over the records and returns the index of the
first decision at which it alarms.

What each metric is, its reference and its statistics, with the measured false-alarm rates:
the docs page "In production" (``docs/production.md``), section "What the monitor tests".
The metrics are computed in ``_metrics``, their tests under calibration in ``_null``.
"""

from __future__ import annotations

import math
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from taskcal_agents.errors import ConfigurationError, DataFileError, LabelMismatchError
from taskcal_agents.production._decision_log import record_belief
from taskcal_agents.production._metrics import Engine, Stream
from taskcal_agents.production._monitor_report import MonitorReport, WindowResult

if TYPE_CHECKING:
    from taskcal_agents.decision import CalibratorArtefact, Task

__all__ = [
    "first_alarm",
    "monitor",
    "monitor_log",
    "parse_window",
]

DEFAULT_Z = 3.0
DEFAULT_MIN_N = 30

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def parse_window(window: int | str | None) -> int | float | None:
    """A window as a count of decisions (``int``) or a duration in seconds (``float``).

    Accepts ``None`` (one window: the whole log), a positive int, or a string: digits
    (``"200"``, a count) or digits with a unit ``s``, ``m``, ``h``, ``d``, ``w``
    (``"24h"``, ``"7d"``, a duration).

    Raises:
        ConfigurationError: Anything else.
    """
    if window is None:
        return None
    if isinstance(window, int) and not isinstance(window, bool) and window > 0:
        return window
    if isinstance(window, str):
        match = re.fullmatch(r"\s*(\d+)\s*([smhdw]?)\s*", window.lower())
        if match and int(match[1]) > 0:
            n, unit = int(match[1]), match[2]
            return n if not unit else float(n * _UNITS[unit])
    msg = (
        f"monitor window must be a positive count of decisions (200) or a duration "
        f"(30m, 24h, 7d, 2w), got {window!r}."
    )
    raise ConfigurationError(msg)


# --------------------------------------------------------------------------------------
# arrays


def _time(value: Any) -> float:
    if not isinstance(value, str):
        return math.nan
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return math.nan


def _stream(records: Sequence[Mapping[str, Any]], task: Task, source: str | None = None) -> Stream:
    labels = list(task.labels)
    k, n = len(labels), len(records)
    Q = np.empty((n, k))
    y = np.full(n, -1, dtype=np.intp)
    a = np.empty(n, dtype=np.intp)
    fallback = np.zeros(n, dtype=bool)
    unparsed = np.full(n, np.nan)
    n_samples = np.zeros(n)
    for i, r in enumerate(records):
        where = f"decision {r.get('id')!r} (record {i})"
        if r.get("task") != task.name:
            msg = (
                f"monitor: {where} is for task {r.get('task')!r}, not {task.name!r}; pass the "
                "artefact or task file of the logged task, or a log of this task."
            )
            raise ConfigurationError(msg)
        if list(r.get("labels") or []) != labels:
            msg = (
                f"monitor: {where} has labels {r.get('labels')!r}, but task {task.name!r} has "
                f"{labels!r}; the log was written for other labels (or another label order)."
            )
            raise LabelMismatchError(msg, expected=labels, got=list(r.get("labels") or []))
        Q[i] = record_belief(r, "calibrated", labels, source=source)
        try:
            a[i] = task.action_index(str(r.get("action")))
            if r.get("outcome") is not None:
                y[i] = task.label_index(str(r["outcome"]))
            m = float(r.get("n_samples") or 0)
            u = float(r.get("n_unparsed") or 0)
        except (KeyError, TypeError, ValueError) as exc:
            msg = f"monitor: {where} is not a usable decision record ({exc})."
            raise DataFileError(msg, path=source or "<decision log>") from exc
        if not (math.isfinite(m) and m >= 0 and math.isfinite(u) and 0 <= u <= max(m, 0)):
            msg = f"monitor: {where} has n_unparsed {u:g} of n_samples {m:g}."
            raise DataFileError(msg, path=source or "<decision log>")
        fallback[i] = bool(r.get("fallback"))
        n_samples[i] = m
        if m > 0:
            unparsed[i] = u / m
    times = tuple(r.get("time") for r in records)
    t = np.array([_time(v) for v in times]) if n else np.empty(0)
    cost = np.asarray(task.cost_matrix(), dtype=np.float64)
    return Stream(Q, y, a, fallback, unparsed, n_samples, t, times, cost)


# --------------------------------------------------------------------------------------
# windows


def _windows(s: Stream, window: int | float | None) -> list[NDArray[np.intp]]:
    n = s.n
    if window is None or n == 0:
        return [np.arange(n, dtype=np.intp)]
    if isinstance(window, int):
        return [np.arange(i, min(i + window, n), dtype=np.intp) for i in range(0, n, window)]
    if np.isnan(s.t).any():
        bad = int(np.flatnonzero(np.isnan(s.t))[0])
        msg = (
            f"monitor: a duration window needs each decision's time; record {bad} has time "
            f"{s.times[bad]!r}. Use a count window (e.g. 200) instead."
        )
        raise ConfigurationError(msg)
    order = np.argsort(s.t, kind="stable")
    bins = np.floor((s.t[order] - s.t[order[0]]) / window).astype(np.int64)
    cuts = np.flatnonzero(np.diff(bins)) + 1
    return [np.asarray(part, dtype=np.intp) for part in np.split(order, cuts)]


def _check(z: float, min_n: int) -> None:
    if not (isinstance(z, int | float) and z > 0 and math.isfinite(z)):
        msg = f"monitor: z must be a positive number of standard errors, got {z!r}."
        raise ConfigurationError(msg)
    if isinstance(min_n, bool) or not isinstance(min_n, int) or min_n < 1:
        msg = f"monitor: min_n must be a positive integer, got {min_n!r}."
        raise ConfigurationError(msg)


def _task_of(task: Task | CalibratorArtefact) -> tuple[Task, Mapping[str, Any] | None]:
    from taskcal_agents.decision import CalibratorArtefact

    if isinstance(task, CalibratorArtefact):
        if task.task is None:
            msg = (
                f"monitor: the artefact {str(task.path or '')!r} records no task (task_spec); "
                "pass the task file as well (--task)."
            )
            raise ConfigurationError(msg)
        return task.task, task.metadata.get("fit_metrics")
    return task, None


def _filter(
    records: Iterable[Mapping[str, Any]], artefact_id: str | None
) -> tuple[list[Mapping[str, Any]], dict[str, int], int]:
    rows = list(records)
    ids = Counter(str(r.get("artefact_id") or "none") for r in rows)
    if artefact_id is None:
        return rows, dict(ids), 0
    kept = [r for r in rows if str(r.get("artefact_id") or "none") == artefact_id]
    return kept, dict(ids), len(rows) - len(kept)


def _of_task(
    rows: list[Mapping[str, Any]], task: Task, *, artefact_id: str | None
) -> tuple[list[Mapping[str, Any]], int]:
    """The records of *task* and how many of other tasks were left out.

    Raises:
        ConfigurationError: Records remain, but none of them is of *task*.
    """
    kept = [r for r in rows if r.get("task") == task.name]
    if rows and not kept:
        names = sorted(Counter(str(r.get("task")) for r in rows).items())
        of = "" if artefact_id is None else f" of artefact id {artefact_id!r}"
        msg = (
            f"monitor: none of the {len(rows)} decisions{of} is for task {task.name!r} (the "
            f"log holds {', '.join(f'{k!r}: {v}' for k, v in names)}); pass the artefact or "
            "task file of a logged task."
        )
        raise ConfigurationError(msg)
    return kept, len(rows) - len(kept)


def monitor(
    records: Iterable[Mapping[str, Any]],
    task: Task | CalibratorArtefact,
    *,
    fit_metrics: Mapping[str, Any] | None = None,
    window: int | str | None = None,
    z: float = DEFAULT_Z,
    min_n: int = DEFAULT_MIN_N,
    artefact_id: str | None = None,
    n_boot: int = 100,
    seed: int = 0,
    source: str | None = None,
) -> MonitorReport:
    """Monitor decision-log records window by window (see the module docstring).

    Records of other tasks (a middleware under ``decide_on="every_call"`` logs tool-result
    turns as task ``after_tool_result`` into the same log) are left out and counted
    (``n_other_task``), as decisions of other artefact ids are with *artefact_id*. The
    label prior and the labelled metrics are computed on the **labelled** decisions
    only: when outcomes arrive for some decisions only (a review queue that sees the
    uncertain ones, a tool that reports failures), they are not a random sample and
    their label prior is biased. Without labelled decisions the report says so
    (``warnings``) and only the rates are tested.

    Args:
        records: Decision-log records in log order (``DecisionLog.read()``), with outcomes.
        task: The task (its cost matrix and labels), or a calibrator artefact that records
            it; an artefact also supplies ``fit_metrics``.
        fit_metrics: Fit-time references (an artefact's ``fit_metrics``); overrides the
            artefact's. Without them the first window is the reference.
        window: ``None`` (the whole log), a count of decisions, or a duration (``"24h"``).
        z: The alarm threshold in standard errors.
        min_n: The fewest labelled decisions (decisions, for the rates) a window needs to
            alarm.
        artefact_id: Only decisions of this artefact id (``"none"``: decisions without).
        n_boot: Bootstrap resamples for the SE of the classwise ECE.
        seed: Seed of the bootstrap (the report is deterministic given it).
        source: Where the records came from (the log's path), named in errors.

    Returns:
        The report; ``report.alarm`` says whether any metric of any window alarms.

    Raises:
        ConfigurationError: No record of the task among records of other tasks, a bad
            window, *z* or *min_n*.
        DataFileError: A bad record of the task: its ``calibrated`` belief missing, not
            finite, negative or not summing to 1 (:func:`record_belief`), an action or
            outcome outside the task, bad sample counts.
        LabelMismatchError: A record of the task with other labels than the task's.
    """
    _check(z, min_n)
    spec = parse_window(window)
    task_obj, art_metrics = _task_of(task)
    rows, ids, excluded = _filter(records, artefact_id)
    rows, other_task = _of_task(rows, task_obj, artefact_id=artefact_id)
    s = _stream(rows, task_obj, source)
    parts = _windows(s, spec)
    metrics = fit_metrics if fit_metrics is not None else art_metrics
    engine = Engine(
        s,
        task_obj.labels,
        fit_metrics=metrics,
        reference=parts[0],
        z=z,
        min_n=min_n,
        n_boot=n_boot,
        seed=seed,
    )
    results = []
    for i, idx in enumerate(parts):
        ms = engine.window(idx, is_reference=i == 0)
        first, last = (int(idx.min()), int(idx.max())) if idx.size else (0, -1)
        times = [s.times[j] for j in idx] if idx.size else []
        known = sorted(t for t in times if t is not None)
        results.append(
            WindowResult(
                index=i,
                start=first,
                stop=last + 1,
                time_from=known[0] if known else None,
                time_to=known[-1] if known else None,
                n_decisions=int(idx.size),
                n_labelled=int((s.y[idx] >= 0).sum()),
                metrics=tuple(ms),
            )
        )
    warnings: list[str] = []
    if not (s.y >= 0).any():
        warnings.append(
            f"no labelled decisions among the {s.n} of task {task_obj.name!r}: the "
            "calibration metrics, cost and label prior were not tested (record outcomes "
            "with `taskcal outcomes import`)."
        )
    return MonitorReport(
        task=task_obj.name,
        labels=tuple(task_obj.labels),
        window=spec,
        z=float(z),
        min_n=min_n,
        n_records=s.n,
        artefact_ids=ids,
        n_excluded=excluded,
        windows=tuple(results),
        n_other_task=other_task,
        warnings=tuple(warnings),
    )


def monitor_log(
    log: str | os.PathLike[str] | Any,
    *,
    artefact: CalibratorArtefact | str | os.PathLike[str] | None = None,
    task: Task | str | os.PathLike[str] | None = None,
    **kwargs: Any,
) -> MonitorReport:
    """:func:`monitor` on a decision log (a path or a ``DecisionLog``).

    Args:
        log: The log.
        artefact: The calibrator artefact (or its path): the task and fit-time references.
        task: The task (or a task file path) when no artefact is given, or to supply the
            task an artefact does not record.
        **kwargs: Passed to :func:`monitor`.

    Raises:
        ConfigurationError: Neither *artefact* nor *task*, or the artefact's task differs
            from *task*; and as :func:`monitor` (whose errors name the log).
        DataFileError: The artefact cannot be read.
    """
    from taskcal_agents.decision import CalibratorArtefact, Task
    from taskcal_agents.production._decision_log import open_decision_log

    if isinstance(task, str | os.PathLike):
        task = Task.from_file(Path(task))
    art = CalibratorArtefact.load(artefact) if isinstance(artefact, str | os.PathLike) else artefact
    if art is None and task is None:
        msg = (
            "monitor needs the task: pass the calibrator artefact (--artefact) or a task "
            "file (--task)."
        )
        raise ConfigurationError(msg)
    target: Task | CalibratorArtefact
    if art is not None:
        if task is not None:
            art.check_for(task_name=task.name, labels=list(task.labels))
            kwargs.setdefault("fit_metrics", art.metadata.get("fit_metrics"))
            target = task
        else:
            target = art
    else:
        assert task is not None
        target = task
    opened = open_decision_log(log)
    kwargs.setdefault("source", str(opened.path))
    return monitor(opened.read(), target, **kwargs)


def first_alarm(
    records: Sequence[Mapping[str, Any]],
    task: Task | CalibratorArtefact,
    *,
    window: int = 200,
    step: int = 1,
    start: int | None = None,
    fit_metrics: Mapping[str, Any] | None = None,
    z: float = DEFAULT_Z,
    min_n: int = DEFAULT_MIN_N,
    n_boot: int = 50,
    seed: int = 0,
) -> int | None:
    """The index of the first decision at which a trailing window alarms, or ``None``.

    A stream monitor for the drift benchmark: after each *step* decisions (from index
    ``start - 1``, default ``window - 1``) the trailing *window* decisions ending there are
    compared with the references (fit-time *fit_metrics*, else the first *window*
    decisions, which are then never tested). The records' outcomes must already be set.

    Returns:
        The index of the last decision of the first alarming window, or ``None``.
    """
    _check(z, min_n)
    if isinstance(window, bool) or not isinstance(window, int) or window < 1 or step < 1:
        msg = f"first_alarm: window and step must be positive integers, got {window!r}, {step!r}."
        raise ConfigurationError(msg)
    task_obj, art_metrics = _task_of(task)
    s = _stream(records, task_obj)
    metrics = fit_metrics if fit_metrics is not None else art_metrics
    reference = None if metrics else np.arange(min(window, s.n), dtype=np.intp)
    engine = Engine(
        s,
        task_obj.labels,
        fit_metrics=metrics,
        reference=reference,
        z=z,
        min_n=min_n,
        n_boot=n_boot,
        seed=seed,
    )
    end = start if start is not None else window if metrics else 2 * window
    for stop in range(max(end, 1), s.n + 1, step):
        idx = np.arange(max(0, stop - window), stop, dtype=np.intp)
        if any(m.alarm for m in engine.window(idx, is_reference=False)):
            return stop - 1
    return None
