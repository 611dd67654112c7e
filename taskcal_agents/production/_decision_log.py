"""The decision log: every decision a front door takes, and later its true outcome.

Two backends with one interface (:class:`DecisionLog`):

* :class:`JsonlDecisionLog` (``*.jsonl``, the default): one JSON object per line, each
  appended with one ``os.write`` on an ``O_APPEND`` descriptor under an exclusive lock
  (:func:`taskcal_agents._files.lock_exclusive`; writers take turns) and ``fsync``-ed
  before :meth:`~DecisionLog.append` returns (:func:`taskcal_agents._files.append_line`,
  as the samples store appends). Safe under concurrent writer processes; a writer killed
  at any moment loses nothing it already returned an id for. Outcomes are appended as
  ``{"type": "outcome", ...}`` lines; the latest outcome of an id wins. A torn or corrupt
  line is skipped on read and counted (:attr:`JsonlDecisionLog.skipped`), never raised.
* :class:`SqliteDecisionLog` (``*.sqlite``, ``*.sqlite3``, ``*.db``): the standard
  library's ``sqlite3`` in WAL mode with a busy timeout and ``synchronous=FULL``, one
  connection per call (so any thread or process may write); a ``decisions`` table keyed by
  decision id and an ``outcomes`` table.

A record holds: ``id`` (uuid4), ``time`` (UTC ISO 8601), ``task``, ``labels``,
``model_name``, ``artefact_id`` (:func:`artefact_id`), ``artefact_note`` (only where the
artefact was fitted on other weights than the served ones), and the decision's evidence
(``counts``, ``probs``, ``calibrated``, ``expected_cost``, ``action``, ``fallback``,
``fallback_reason``, the guard fields, ``n_samples``, ``n_unparsed``, ...). :meth:`read`
yields them with ``outcome`` and ``outcome_time`` joined (``None`` until recorded).

Logging never fails a decision: the front doors call :meth:`DecisionLog.safe_append`,
which turns an ``OSError`` or ``sqlite3.Error`` (full disk, read-only directory, locked
database) into one :class:`~taskcal_agents.errors.DecisionLogWarning` per kind of error
and a count in :attr:`DecisionLog.failures`.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import uuid
import warnings
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from taskcal_agents._files import (
    append_line,
    decode_line,
    encode_line,
    lock_exclusive,
    split_complete,
)
from taskcal_agents.errors import (
    ConfigurationError,
    DataFileError,
    DecisionLogWarning,
    UnknownDecisionError,
)

if TYPE_CHECKING:
    from taskcal_agents.decision import CalibratorArtefact, Decision, Task

__all__ = [
    "DecisionLog",
    "DecisionLogLike",
    "JsonlDecisionLog",
    "OutcomeReport",
    "SqliteDecisionLog",
    "artefact_id",
    "import_outcomes",
    "model_name_of",
    "open_decision_log",
    "record_belief",
    "record_outcome",
]

SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")
JSONL_SUFFIXES = (".jsonl",)
BUSY_TIMEOUT_S = 30.0
"""How long a SQLite writer waits for a lock held by another writer."""

_EXCLUDED = {"message", "samples", "sample_labels", "decision_id"}


def _now() -> str:
    return datetime.now(UTC).isoformat()


def artefact_id(artefact: CalibratorArtefact | None) -> str | None:
    """A short content hash of a calibrator artefact, or ``None`` without one.

    The artefact's :attr:`~taskcal_agents.decision.CalibratorArtefact.content_id`:
    two artefacts with the same content (task, labels, calibrator, α, risk limit, stopping
    prior, metadata) get the same id, which is stable across loads.
    """
    return None if artefact is None else artefact.content_id


BELIEF_SUM_TOL = 1e-6
"""How far a logged belief's sum may be from 1 (JSON round trips, float sums)."""


def record_belief(
    record: Mapping[str, Any], field: str, labels: Sequence[str], *, source: str | None = None
) -> NDArray[np.float64]:
    """A belief of a logged decision (``probs``, ``calibrated``) as a checked array.

    The value is read in the order of *labels* and must be a probability distribution:
    every label present, each finite and non-negative, the sum within
    :data:`BELIEF_SUM_TOL` of 1 (then divided by it). A record that is not is a bad
    record of the log, never silently repaired.

    Args:
        record: A record of :meth:`DecisionLog.read`.
        field: The belief's key.
        labels: The task's labels.
        source: The log it came from, for the error (default ``"<decision log>"``).

    Raises:
        DataFileError: The field is missing or not a distribution over *labels*; the
            message names the log, the decision id and the field.
    """
    where = f"decision {record.get('id')!r}: {field!r}"
    path = source or "<decision log>"
    value = record.get(field)
    if not isinstance(value, Mapping):
        msg = f"decision {record.get('id')!r} has no {field!r} (a belief per label), got {value!r}."
        raise DataFileError(msg, path=path)
    missing = [label for label in labels if label not in value]
    if missing:
        msg = f"{where} lacks label {missing[0]!r} (has {sorted(value)!r})."
        raise DataFileError(msg, path=path)
    try:
        q = np.array([float(value[label]) for label in labels], dtype=np.float64)
    except (TypeError, ValueError) as exc:
        msg = f"{where} holds a non-number ({exc})."
        raise DataFileError(msg, path=path) from exc
    if not np.isfinite(q).all():
        msg = f"{where} is not finite: {dict(zip(labels, q.tolist(), strict=True))!r}."
        raise DataFileError(msg, path=path)
    if (q < 0).any():
        msg = f"{where} has a negative belief: {dict(zip(labels, q.tolist(), strict=True))!r}."
        raise DataFileError(msg, path=path)
    total = float(q.sum())
    if abs(total - 1.0) > BELIEF_SUM_TOL:
        msg = f"{where} does not sum to 1 (sum {total:.6g})."
        raise DataFileError(msg, path=path)
    return q / total


def model_name_of(model: Any) -> str | None:
    """The model's name, or ``None``.

    Its ``model_name``, ``model`` or ``model_id`` attribute, else LangChain's ``_llm_type``.
    """
    for attr in ("model_name", "model", "model_id", "_llm_type"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return None


@dataclass
class OutcomeReport:
    """What :func:`import_outcomes` did.

    Attributes:
        recorded: How many outcomes were recorded.
        unknown: Ids not in the log.
        bad_labels: ``(id, label)`` pairs whose label is not one of the task's labels.
    """

    recorded: int = 0
    unknown: list[str] = field(default_factory=list)
    bad_labels: list[tuple[str, str]] = field(default_factory=list)

    @property
    def rejected(self) -> int:
        """How many rows were rejected."""
        return len(self.unknown) + len(self.bad_labels)


class DecisionLog(ABC):
    """A log of decisions and their outcomes (see the module docstring).

    Attributes:
        path: The log file.
        failures: How many appends :meth:`safe_append` swallowed.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.failures = 0
        self._warned: set[tuple[str, Any]] = set()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"

    # ---------------------------------------------------------------- writing

    def append(
        self,
        decision: Decision,
        *,
        task: Task | str | None = None,
        model_name: str | None = None,
        artefact_id: str | None = None,
        artefact_note: str | None = None,
    ) -> str:
        """Write one decision and return its new id (on disk when this returns).

        Args:
            decision: The decision.
            task: The task (or its name); default ``decision.task``.
            model_name: The sampled model's name.
            artefact_id: The calibrator artefact's id (:func:`artefact_id`).
            artefact_note: Where the artefact was fitted, when that differs from what is
                served (recorded as ``artefact_note`` only when given).

        Raises:
            OSError: The file cannot be written (see :meth:`safe_append`).
            sqlite3.Error: The database cannot be written.
        """
        name = decision.task if task is None else task if isinstance(task, str) else task.name
        record: dict[str, Any] = {
            "id": str(uuid.uuid4()),
            "time": _now(),
            "task": name,
            "labels": list(decision.probs),
            "model_name": model_name,
            "artefact_id": artefact_id,
            **decision.model_dump(mode="json", exclude=_EXCLUDED),
        }
        record["task"] = name
        if artefact_note is not None:
            record["artefact_note"] = artefact_note
        self._write_decision(record)
        return str(record["id"])

    def safe_append(
        self,
        decision: Decision,
        *,
        task: Task | str | None = None,
        model_name: str | None = None,
        artefact_id: str | None = None,
        artefact_note: str | None = None,
    ) -> str | None:
        """:meth:`append`, but a failure to write warns and counts instead of raising.

        Returns:
            The decision id, or ``None`` when the log could not be written.

        Warns:
            DecisionLogWarning: Once per kind of error (type and errno) per log.
        """
        try:
            return self.append(
                decision, task=task, model_name=model_name, artefact_id=artefact_id,
                artefact_note=artefact_note,
            )  # fmt: skip
        except (OSError, sqlite3.Error) as exc:
            with self._lock:
                self.failures += 1
                kind = (type(exc).__name__, getattr(exc, "errno", None))
                first = kind not in self._warned
                self._warned.add(kind)
            if first:
                msg = (
                    f"decision log {str(self.path)!r} could not be written "
                    f"({type(exc).__name__}: {exc}); the decision stands but is not logged. "
                    "Further errors of this kind are counted in the log's 'failures' only."
                )
                warnings.warn(msg, DecisionLogWarning, stacklevel=2)
            return None

    def log(
        self,
        decision: Decision,
        *,
        task: Task | str | None = None,
        model_name: str | None = None,
        artefact_id: str | None = None,
        artefact_note: str | None = None,
    ) -> Decision:
        """:meth:`safe_append` and return the decision with its ``decision_id`` set.

        What the front doors call after each decision: a failure to write leaves
        ``decision_id`` ``None`` (and warns once per kind of error), never raises.
        """
        decision_id = self.safe_append(
            decision,
            task=task,
            model_name=model_name,
            artefact_id=artefact_id,
            artefact_note=artefact_note,
        )
        return decision.model_copy(update={"decision_id": decision_id})

    def record_outcome(
        self, decision_id: str, label: str, *, task_labels: Sequence[str] | None = None
    ) -> None:
        """Attach the true label to a logged decision (a later outcome replaces it).

        Args:
            decision_id: The id :meth:`append` returned (``Decision.decision_id``).
            label: The true label.
            task_labels: The labels it must be one of; default the logged decision's.

        Raises:
            UnknownDecisionError: The id is not in the log.
            ConfigurationError: The label is not one of the labels.
        """
        report = self.import_outcomes([(decision_id, label)], task_labels=task_labels)
        if report.unknown:
            msg = (
                f"decision id {decision_id!r} is not in the decision log {str(self.path)!r}; "
                "pass the id the front door returned (Decision.decision_id) and the log it "
                "wrote to."
            )
            raise UnknownDecisionError(msg, decision_id=decision_id, path=str(self.path))
        if report.bad_labels:
            labels = list(task_labels) if task_labels is not None else self._labels(decision_id)
            msg = (
                f"outcome label {label!r} for decision {decision_id!r} is not one of the "
                f"task's labels {labels!r}."
            )
            raise ConfigurationError(msg)

    def import_outcomes(
        self, rows: Iterable[tuple[str, str]], *, task_labels: Sequence[str] | None = None
    ) -> OutcomeReport:
        """Record many ``(id, label)`` outcomes; unknown ids and bad labels are reported.

        The log is read once; every accepted row is written, every rejected row listed.
        """
        known = {r["id"]: r.get("labels") or [] for r in self.read()}
        report = OutcomeReport()
        accepted: list[tuple[str, str]] = []
        for decision_id, label in rows:
            if decision_id not in known:
                report.unknown.append(decision_id)
                continue
            labels = list(task_labels) if task_labels is not None else known[decision_id]
            if label not in labels:
                report.bad_labels.append((decision_id, label))
                continue
            accepted.append((decision_id, label))
        if accepted:
            self._write_outcomes(accepted)
        report.recorded = len(accepted)
        return report

    def _labels(self, decision_id: str) -> list[str]:
        for record in self.read():
            if record["id"] == decision_id:
                return list(record.get("labels") or [])
        return []

    @abstractmethod
    def _write_decision(self, record: dict[str, Any]) -> None: ...

    @abstractmethod
    def _write_outcomes(self, rows: Sequence[tuple[str, str]]) -> None: ...

    # ---------------------------------------------------------------- reading

    @abstractmethod
    def read(self) -> Iterator[dict[str, Any]]:
        """The logged decisions in write order, each with ``outcome``/``outcome_time``."""

    def get(self, decision_id: str) -> dict[str, Any]:
        """One record by id.

        Raises:
            UnknownDecisionError: The id is not in the log.
        """
        for record in self.read():
            if record["id"] == decision_id:
                return record
        msg = f"decision id {decision_id!r} is not in the decision log {str(self.path)!r}."
        raise UnknownDecisionError(msg, decision_id=decision_id, path=str(self.path))


class JsonlDecisionLog(DecisionLog):
    """The JSONL backend (see the module docstring).

    Attributes:
        skipped: Torn or corrupt lines skipped by the last :meth:`read`.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(path)
        self.skipped = 0

    def _append_lines(self, lines: Sequence[bytes]) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            lock_exclusive(fd, wait=True)
            append_line(fd, b"".join(lines))
        finally:
            os.close(fd)  # releases the lock

    def _write_decision(self, record: dict[str, Any]) -> None:
        self._append_lines([encode_line({"type": "decision", **record})])

    def _write_outcomes(self, rows: Sequence[tuple[str, str]]) -> None:
        now = _now()
        self._append_lines(
            [
                encode_line({"type": "outcome", "id": i, "label": lab, "time": now})
                for i, lab in rows
            ]
        )

    def read(self) -> Iterator[dict[str, Any]]:
        """The logged decisions with their outcomes; a missing file reads as empty."""
        self.skipped = 0
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        lines, end = split_complete(data)
        self.skipped = int(end < len(data))
        decisions: dict[str, dict[str, Any]] = {}
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            try:
                obj = decode_line(raw, path=self.path, line=number)
            except DataFileError:
                self.skipped += 1
                continue
            if not isinstance(obj.get("id"), str):
                self.skipped += 1
                continue
            kind = obj.pop("type", None)
            if kind == "decision":
                decisions.setdefault(obj["id"], {**obj, "outcome": None, "outcome_time": None})
            elif kind == "outcome" and obj["id"] in decisions:
                decisions[obj["id"]]["outcome"] = obj.get("label")
                decisions[obj["id"]]["outcome_time"] = obj.get("time")
            else:
                self.skipped += 1
        yield from decisions.values()


_SCHEMA = """
CREATE TABLE IF NOT EXISTS decisions (
    id TEXT PRIMARY KEY, time TEXT NOT NULL, task TEXT NOT NULL, record TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS outcomes (
    id TEXT PRIMARY KEY REFERENCES decisions(id), label TEXT NOT NULL, time TEXT NOT NULL
);
"""


class SqliteDecisionLog(DecisionLog):
    """The SQLite backend (see the module docstring)."""

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = BUSY_TIMEOUT_S) -> None:
        super().__init__(path)
        self.timeout = timeout

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        con = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
        try:
            con.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
            con.execute("PRAGMA journal_mode = WAL")
            con.execute("PRAGMA synchronous = FULL")
            con.executescript(_SCHEMA)
            yield con
        finally:
            con.close()

    def _write_decision(self, record: dict[str, Any]) -> None:
        with self._connect() as con:
            con.execute(
                "INSERT INTO decisions (id, time, task, record) VALUES (?, ?, ?, ?)",
                (record["id"], record["time"], record["task"], json.dumps(record)),
            )

    def _write_outcomes(self, rows: Sequence[tuple[str, str]]) -> None:
        now = _now()
        with self._connect() as con:
            con.execute("BEGIN IMMEDIATE")
            con.executemany(
                "INSERT OR REPLACE INTO outcomes (id, label, time) VALUES (?, ?, ?)",
                [(i, lab, now) for i, lab in rows],
            )
            con.execute("COMMIT")

    def read(self) -> Iterator[dict[str, Any]]:
        """The logged decisions with their outcomes; a missing file reads as empty."""
        if not self.path.exists():
            return
        with self._connect() as con:
            rows = con.execute(
                "SELECT d.record, o.label, o.time FROM decisions d "
                "LEFT JOIN outcomes o ON o.id = d.id ORDER BY d.rowid"
            ).fetchall()
        for record, label, time in rows:
            yield {**json.loads(record), "outcome": label, "outcome_time": time}


DecisionLogLike = DecisionLog | str | os.PathLike[str]
"""A decision log or the path of one (the suffix picks the backend)."""


def open_decision_log(log: DecisionLogLike) -> DecisionLog:
    """Return ``log`` as a :class:`DecisionLog`: as is, or by the path's suffix.

    ``.jsonl`` → :class:`JsonlDecisionLog`; ``.sqlite``, ``.sqlite3``, ``.db`` →
    :class:`SqliteDecisionLog`. Nothing is opened until the first write or read.

    Raises:
        ConfigurationError: If the suffix is neither.
    """
    if isinstance(log, DecisionLog):
        return log
    if not isinstance(log, str | os.PathLike):
        msg = f"decision_log must be a DecisionLog or a path, got {log!r}."
        raise ConfigurationError(msg)
    path = Path(log)
    suffix = path.suffix.lower()
    if suffix in JSONL_SUFFIXES:
        return JsonlDecisionLog(path)
    if suffix in SQLITE_SUFFIXES:
        return SqliteDecisionLog(path)
    msg = (
        f"decision log {str(path)!r} must end in one of "
        f"{[*JSONL_SUFFIXES, *SQLITE_SUFFIXES]!r} (the suffix picks the backend)."
    )
    raise ConfigurationError(msg)


def record_outcome(
    log: DecisionLogLike,
    decision_id: str,
    label: str,
    *,
    task_labels: Sequence[str] | None = None,
) -> None:
    """Attach the true label to a logged decision (see :meth:`DecisionLog.record_outcome`).

    Raises:
        UnknownDecisionError: The id is not in the log.
        ConfigurationError: The label is not one of the task's labels, or the log path's
            suffix is unknown.
    """
    open_decision_log(log).record_outcome(decision_id, label, task_labels=task_labels)


def import_outcomes(
    log: DecisionLogLike,
    rows: Iterable[tuple[str, str]],
    *,
    task_labels: Sequence[str] | None = None,
) -> OutcomeReport:
    """Record many ``(id, label)`` outcomes (see :meth:`DecisionLog.import_outcomes`)."""
    return open_decision_log(log).import_outcomes(rows, task_labels=task_labels)
