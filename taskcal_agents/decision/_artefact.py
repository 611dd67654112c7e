"""What counts as a calibrator, and the calibrator artefact every front door accepts.

A front door (:class:`~taskcal_agents.langchain.TaskCalibratedRunnable`,
:class:`~taskcal_agents.langchain.TaskCalibratedChatModel`,
:class:`~taskcal_agents.langchain.TaskCalibrationMiddleware`,
:class:`~taskcal_agents.langchain.TaskCalibratedDecisionModel`) takes a fitted
:class:`Calibrator`, a :class:`CalibratorArtefact` or the path of an artefact file, and
hands it to :func:`resolve_calibrator`, the one place where it is loaded and checked
against the task (labels and their order, class count, input width, α).

The artefact file is the JSON written by ``taskcal fit``::

    {"format": "taskcal.calibrator", "format_version": 1,
     "task": "when2call", "labels": [...], "actions": [...], "alpha": 0.1,
     "task_spec": {...Task.model_dump()...} or null,
     "calibrator_name": "dirichlet", "calibrator": {...calibrator.to_dict()...},
     "fit_metrics": {...}, "samples": {...}, "created": "2026-01-01T00:00:00+00:00"}

An artefact that carries a risk limit (``taskcal fit --risk-control``) is written as
``format_version`` 2 with one more field, ``"risk_control": {...RiskControl.to_dict()...}``
(see :mod:`taskcal_agents.decision._risk_control`), so that a reader that knows only version 1
refuses it rather than drop the guard; one without is still written as version 1. Both
versions are read.

An artefact fitted on sampled beliefs also carries adaptive N's stopping prior, fitted on
the same samples (``"stopping_prior": {...StoppingPrior.to_dict()...}``, see
:mod:`taskcal_agents.decision._stopping_prior`); it needs no new format version, since a
reader that ignores it only has no fitted prior (its adaptive N draws all N). A prior fitted
for other outcomes than the task's is refused.

A risk limit is certified for one decision setting: when the artefact carries one,
:func:`resolve_calibrator` requires the runtime task to agree with the artefact's task on
actions, cost matrix, ask, abstain and fallback actions, sampled actions and unparsed
policy, and the α in force to be the artefact's; it warns
(:class:`~taskcal_agents.decision._risk_control.RiskSettingsWarning`) when the front door draws
another number of samples than the limit was fitted on.

An artefact is checked the way ``calibrator="auto"`` checks a shipped one (:func:`mismatch`,
the rule of :mod:`taskcal_agents.decision._shipped`) when :func:`resolve_calibrator` is told
how the front door samples (``served``, a :class:`ServedSettings`; or ``n_samples`` alone,
which compares N only): on what the front door knows, and on what the artefact records (a
``record`` from ``taskcal calibrate``: model, N, temperature, ``max_tokens``, default
``tool_choice`` and sampling parameters; else the model, N and temperature of ``taskcal
fit``'s ``samples`` field; plus its α and its task's belief). One fitted for another setting
is still used, since the user chose it, with a :class:`CalibratorMismatchWarning` once per
message; with ``strict=True`` it is refused (``ConfigurationError``). :func:`check_artefact`
is the same check on its own.

A front door given an artefact *path* and ``reload_artefact=True`` holds it in an
:class:`ArtefactReloader`: before each decision one ``os.stat`` of the file; when its
``(st_ino, st_mtime_ns, st_size)`` changed (an atomic replace, e.g. by ``taskcal refit``,
makes a new inode), the file is loaded and resolved again against the same task, and
what the front door builds from it (its Decider, the artefact id it logs) is swapped in
under a lock. A replacement that cannot be loaded or does not fit the task keeps the
artefact in force and warns once (:class:`~taskcal_agents.errors.ArtefactReloadWarning`);
it never fails a decision.

Shipped calibrators record no label names (their ``classes_`` is ``arange(k)``), so a
bare calibrator can be checked for its class count only; an artefact records the labels
in order, and they must equal the task's.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from taskcal_agents._files import read_json, write_json
from taskcal_agents.decision._belief import DEFAULT_ALPHA, check_alpha
from taskcal_agents.decision._risk_control import RiskControl, RiskSettingsWarning
from taskcal_agents.decision._stopping_prior import StoppingPrior
from taskcal_agents.decision._task import Task
from taskcal_agents.errors import (
    ConfigurationError,
    DataFileError,
    LabelMismatchError,
)
from taskcal_agents.parsing import RELEVANCE_FEATURES

__all__ = [
    "ARTEFACT_FORMAT",
    "ARTEFACT_FORMAT_VERSION",
    "ARTEFACT_READ_VERSIONS",
    "BELIEF_FIELDS",
    "UNMATCHED_PARSER_OPTIONS",
    "Calibrator",
    "CalibratorArtefact",
    "CalibratorLike",
    "CalibratorMismatchWarning",
    "ResolvedCalibrator",
    "ServedSettings",
    "as_artefact",
    "check_artefact",
    "check_calibrator",
    "content_sha256",
    "mismatch",
    "resolve_calibrator",
]

ARTEFACT_FORMAT = "taskcal.calibrator"
"""The ``format`` field of a calibrator artefact file."""
ARTEFACT_FORMAT_VERSION = 2
"""The newest ``format_version``: written when the artefact carries a risk control."""
ARTEFACT_READ_VERSIONS = (1, 2)
"""The ``format_version`` values read (1: no risk control)."""


@runtime_checkable
class Calibrator(Protocol):
    """A fitted calibration map, as a front door uses it.

    ``predict_proba`` maps an ``(n, k)`` matrix of beliefs p̂ (or, under the task's
    ``unparsed: other`` policy, an ``(n, k + 1)`` matrix of belief features when its
    ``n_features_in_`` is k + 1) to ``(n, k)`` calibrated probabilities. The class count
    k is read from ``n_classes_`` (or ``len(classes_)``); label names, when the map has
    them, from ``labels_`` (or ``labels``). Every :mod:`calibrators` estimator is one.
    """

    def predict_proba(self, X: ArrayLike) -> NDArray[np.float64]:
        """Return the calibrated probabilities, shape ``(n, k)``."""
        ...


def _n_classes(calibrator: Any) -> int | None:
    n = getattr(calibrator, "n_classes_", None)
    if n is not None:
        return int(n)
    classes = getattr(calibrator, "classes_", None)
    return None if classes is None else len(classes)


def check_calibrator(task: Task, calibrator: Any) -> None:
    """Check that a fitted calibrator matches the task's labels.

    A calibrator needs ``predict_proba`` and ``n_classes_`` (or ``classes_``) equal to the
    number of task labels; if it carries label metadata (``labels_`` or ``labels``), it
    must equal ``task.labels``. Its ``n_features_in_`` (when present) must be k, the
    width of p̂, or, under the ``"other"`` unparsed policy, k + 1, the width of the belief
    features.

    Raises:
        ConfigurationError: If the calibrator is unusable or its class or input count
            differs.
        LabelMismatchError: If its labels differ from the task's.
    """
    if calibrator is None:
        return
    if not callable(getattr(calibrator, "predict_proba", None)):
        msg = (
            f"calibrator for task {task.name!r} must have a predict_proba method, got "
            f"{calibrator!r}; pass a fitted calibrators estimator or None."
        )
        raise ConfigurationError(msg)
    k = len(task.labels)
    n = _n_classes(calibrator)
    if n is None:
        msg = (
            f"calibrator {type(calibrator).__name__} for task {task.name!r} is not fitted "
            "(it has no n_classes_ or classes_); fit it on beliefs of this task first."
        )
        raise ConfigurationError(msg)
    if n != k:
        msg = (
            f"calibrator {type(calibrator).__name__} was fitted on {n} classes but task "
            f"{task.name!r} has {k} labels {task.labels!r}; fit the calibrator on this task's "
            "beliefs."
        )
        raise ConfigurationError(msg)
    n_features = getattr(calibrator, "n_features_in_", None)
    widths = {k, task.n_features} | ({task.n_inputs} if task.reads_relevance else set())
    if n_features is not None and int(n_features) not in widths:
        if task.unparsed_evidence:
            what = f"{k} (p̂) or {task.n_features} (p̂'s counts plus the unparsed share)"
        else:
            what = (
                f"{k} (p̂; {k + 1} inputs, with the unparsed share, need the task's "
                "unparsed: other policy)"
            )
        if task.reads_relevance:
            what += f", or {task.n_inputs} (with the relevance features)"
        msg = (
            f"calibrator {type(calibrator).__name__} was fitted on {int(n_features)} input "
            f"columns but task {task.name!r} (unparsed: {task.unparsed}) feeds it {what}; "
            "fit the calibrator on this task's beliefs."
        )
        raise ConfigurationError(msg)
    for attr in ("labels_", "labels"):
        labels = getattr(calibrator, attr, None)
        if labels is not None and not callable(labels):
            got = [str(label) for label in labels]
            if got != list(task.labels):
                msg = (
                    f"calibrator {type(calibrator).__name__} has labels {got!r} but task "
                    f"{task.name!r} has labels {task.labels!r} (same order required); fit "
                    "the calibrator on this task's beliefs."
                )
                raise LabelMismatchError(msg, expected=list(task.labels), got=got)
            break


@dataclass(kw_only=True)
class CalibratorArtefact:
    """A fitted calibrator with what it was fitted for: labels (in order), α and task.

    Build one with :meth:`load` (a file written by ``taskcal fit``) or directly, and write
    it with :meth:`save`. Every front door accepts it in place of a bare calibrator.

    Attributes:
        calibrator: The fitted calibrator.
        labels: The task labels the calibrator was fitted on, in order.
        alpha: The Dirichlet prior the beliefs were smoothed with, or ``None``.
        task_name: The task's name as recorded, or ``None``.
        task: The full task when recorded (``task_spec``), else ``None``.
        metadata: The other recorded fields (``actions``, ``calibrator_name``,
            ``fit_metrics``, ``samples``, ``created``), as written.
        path: The file it was read from or last saved to, or ``None``.
        risk_control: A calibrated risk limit that the front doors apply (their
            :class:`~taskcal_agents.decision.Decider` guards the MBR action), or ``None``.
        stopping_prior: Adaptive N's stopping prior, fitted on the calibration samples
            (:func:`~taskcal_agents.decision._stopping_prior.fit_stopping_prior`), or ``None``.
    """

    calibrator: Calibrator
    labels: list[str]
    alpha: float | None = None
    task_name: str | None = None
    task: Task | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None
    risk_control: RiskControl | None = None
    stopping_prior: StoppingPrior | None = None

    def __post_init__(self) -> None:
        self.labels = [str(label) for label in self.labels]
        if self.stopping_prior is not None and not isinstance(self.stopping_prior, StoppingPrior):
            msg = (
                f"CalibratorArtefact: stopping_prior must be a StoppingPrior or None, got "
                f"{self.stopping_prior!r}."
            )
            raise ConfigurationError(msg)
        if self.risk_control is not None and not isinstance(self.risk_control, RiskControl):
            msg = (
                f"CalibratorArtefact: risk_control must be a RiskControl or None, got "
                f"{self.risk_control!r}."
            )
            raise ConfigurationError(msg)
        if self.task is None:
            return
        if self.risk_control is not None:
            self.risk_control.guard(self.task)  # the spec must fit the task
        if self.stopping_prior is not None:
            self.stopping_prior.for_task(self.task)  # fitted for the task's outcomes
        if self.task_name is None:
            self.task_name = self.task.name
        if self.task_name != self.task.name:
            msg = (
                f"CalibratorArtefact: task_name {self.task_name!r} differs from its task's name "
                f"{self.task.name!r}; record the task the calibrator was fitted for."
            )
            raise ConfigurationError(msg)
        if self.labels != list(self.task.labels):
            msg = (
                f"CalibratorArtefact: labels {self.labels!r} differ from those of its task "
                f"{self.task.name!r} {self.task.labels!r}; record the task the calibrator was "
                "fitted for."
            )
            raise LabelMismatchError(msg, expected=list(self.task.labels), got=self.labels)

    # ---------------------------------------------------------------- JSON form

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-able artefact (the file format of the module docstring)."""
        to_dict = getattr(self.calibrator, "to_dict", None)
        if not callable(to_dict):
            msg = (
                f"CalibratorArtefact: calibrator {type(self.calibrator).__name__} has no "
                "to_dict(), so it cannot be saved; use a calibrators estimator."
            )
            raise ConfigurationError(msg)
        meta = self.metadata
        actions = meta.get("actions", None if self.task is None else self.task.action_list)
        risk = self.risk_control
        data: dict[str, Any] = {
            "format": ARTEFACT_FORMAT,
            "format_version": 1 if risk is None else ARTEFACT_FORMAT_VERSION,
            "task": self.task_name,
            "labels": list(self.labels),
            "actions": None if actions is None else list(actions),
            "alpha": None if self.alpha is None else float(self.alpha),
            "task_spec": None if self.task is None else self.task.model_dump(mode="json"),
            "calibrator_name": meta.get("calibrator_name", type(self.calibrator).__name__),
            "calibrator": to_dict(),
            "fit_metrics": meta.get("fit_metrics", {}),
            "samples": meta.get("samples") or {},
            "created": meta.get("created")
            or _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            **({} if risk is None else {"risk_control": risk.to_dict()}),
            **(
                {}
                if self.stopping_prior is None
                else {"stopping_prior": self.stopping_prior.to_dict()}
            ),
            **{k: v for k, v in meta.items() if k not in _WRITTEN},
        }
        data["content_sha256"] = content_sha256(data)
        return data

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], *, path: str | os.PathLike[str] | None = None
    ) -> CalibratorArtefact:
        """Rebuild an artefact (and its calibrator) from its JSON form.

        Raises:
            DataFileError: If ``data`` is not a calibrator artefact of this format
                version, or its calibrator, task or α cannot be rebuilt.
        """
        from calibrators import from_dict

        where = "<dict>" if path is None else str(path)
        if not isinstance(data, Mapping) or data.get("format") != ARTEFACT_FORMAT:
            got = data.get("format") if isinstance(data, Mapping) else type(data).__name__
            msg = (
                f"not a calibrator artefact: expected format {ARTEFACT_FORMAT!r}, got {got!r}; "
                "write one with `taskcal fit`."
            )
            raise DataFileError(msg, path=where)
        version = data.get("format_version")
        if isinstance(version, bool) or version not in ARTEFACT_READ_VERSIONS:
            msg = (
                f"format_version must be {' or '.join(map(str, ARTEFACT_READ_VERSIONS))}, got "
                f"{version!r}; refit with this version of taskcal."
            )
            raise DataFileError(msg, path=where)
        if "calibrator" not in data:
            msg = "calibrator artefact has no field 'calibrator'; refit it with `taskcal fit`."
            raise DataFileError(msg, path=where)
        try:
            calibrator = from_dict(data["calibrator"])
        except (KeyError, TypeError, ValueError) as exc:
            msg = f"calibrator artefact field 'calibrator' holds no valid calibrator: {exc}"
            raise DataFileError(msg, path=where) from exc
        raw_labels = data.get("labels")
        if (
            not isinstance(raw_labels, list)
            or len(raw_labels) < 2
            or not all(isinstance(label, str) and label for label in raw_labels)
            or len(set(raw_labels)) != len(raw_labels)
        ):
            msg = (
                "calibrator artefact field 'labels' must list at least 2 distinct non-empty "
                f"label names, in the task's order; got {raw_labels!r}."
            )
            raise DataFileError(msg, path=where)
        labels = list(raw_labels)
        n_classes = getattr(calibrator, "n_classes_", None)
        if n_classes is not None and n_classes != len(labels):
            msg = (
                f"calibrator has {n_classes} classes but the artefact field 'labels' lists "
                f"{labels!r}; the file is inconsistent: refit it."
            )
            raise DataFileError(msg, path=where)
        task: Task | None = None
        spec = data.get("task_spec")
        if isinstance(spec, Mapping):
            fields = {k: v for k, v in spec.items() if k != "format_version"}
            try:
                task = Task.model_validate(fields)
            except ValueError as exc:
                msg = f"calibrator artefact field 'task_spec' is not a valid task: {exc}"
                raise DataFileError(msg, path=where) from exc
        alpha = data.get("alpha")
        if alpha is not None and (
            isinstance(alpha, bool)
            or not isinstance(alpha, int | float)
            or not math.isfinite(alpha)
            or alpha < 0
        ):
            msg = (
                "calibrator artefact field 'alpha' must be a finite number >= 0 or null, got "
                f"{alpha!r}; refit it with `taskcal fit`."
            )
            raise DataFileError(msg, path=where)
        risk_control = None
        if data.get("risk_control") is not None:
            try:
                risk_control = RiskControl.from_dict(data["risk_control"])
                if task is not None:
                    risk_control.guard(task)
            except ConfigurationError as exc:
                msg = f"calibrator artefact field 'risk_control' is invalid: {exc}"
                raise DataFileError(msg, path=where) from exc
        stopping_prior = None
        if data.get("stopping_prior") is not None:
            try:
                stopping_prior = StoppingPrior.from_dict(data["stopping_prior"])
            except ConfigurationError as exc:
                msg = f"calibrator artefact field 'stopping_prior' is invalid: {exc}"
                raise DataFileError(msg, path=where) from exc
        task_name = data.get("task")
        known = {"format", "format_version", "task", "labels", "alpha", "task_spec", "calibrator"}
        known |= {"risk_control", "stopping_prior", "content_sha256"}
        try:
            return cls(
                calibrator=calibrator,
                labels=labels,
                alpha=None if alpha is None else float(alpha),
                task_name=task_name if isinstance(task_name, str) else None,
                task=task,
                metadata={k: v for k, v in data.items() if k not in known},
                path=None if path is None else Path(path),
                risk_control=risk_control,
                stopping_prior=stopping_prior,
            )
        except ConfigurationError as exc:  # fields that disagree with 'task_spec'
            msg = f"calibrator artefact fields disagree with its 'task_spec': {exc}"
            raise DataFileError(msg, path=where) from exc

    # -------------------------------------------------------------------- files

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> CalibratorArtefact:
        """Read an artefact file written by ``taskcal fit`` (or :meth:`save`).

        Raises:
            DataFileError: If the file is missing, not JSON, not a calibrator artefact,
                of another format version, or its calibrator or task cannot be rebuilt.
        """
        p = Path(path)
        data = read_json(
            p,
            what="calibrator artefact",
            missing_hint="write one with `taskcal fit` or check the path.",
        )
        return cls.from_dict(data, path=p)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the artefact as JSON, atomically; return the path (also set on ``path``).

        An artefact that recorded no ``created`` time keeps the one written, so the object
        and the file have the same content (and the same ``artefact_id``).
        """
        if not self.metadata.get("created"):
            self.metadata["created"] = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
        self.path = write_json(self.to_dict(), path)
        return self.path

    @property
    def content_id(self) -> str | None:
        """A short content hash: the first 16 hex digits of :attr:`content_sha256`.

        The id a decision (``Decision.calibrator_id``) and the decision log
        (``artefact_id``) name the artefact by; equal for equal content, stable across loads.
        ``None`` for a calibrator that cannot be written (no ``to_dict``).
        """
        if not callable(getattr(self.calibrator, "to_dict", None)):
            return None
        return self.content_sha256[:16]

    @property
    def content_sha256(self) -> str:
        """The sha256 of the artefact's JSON form (the file's ``content_sha256`` field).

        Over every field but itself, keys sorted; the ``created`` time counts when the
        artefact records one (``taskcal fit`` does), and an artefact without it is not
        stamped with the time of the call.
        """
        data = self.to_dict()
        if not self.metadata.get("created"):
            return content_sha256(data, stamped=True)
        return str(data["content_sha256"])

    # ---------------------------------------------------------------- checking

    def check_for(self, *, task_name: str | None = None, labels: list[str] | None = None) -> None:
        """Check that the artefact was fitted for the task ``task_name`` and ``labels``.

        Raises:
            LabelMismatchError: If it was fitted for another task or other labels.
        """
        where = "" if self.path is None else f" {self.path}"
        if task_name is not None and self.task_name != task_name:
            msg = (
                f"calibrator artefact{where} was fitted for task {self.task_name!r}, not for "
                f"task {task_name!r}; fit one on samples of this task with `taskcal fit`."
            )
            raise LabelMismatchError(msg, expected=list(labels or []), got=self.labels)
        if labels is not None and self.labels != list(labels):
            msg = (
                f"calibrator artefact{where} has labels {self.labels!r}, but the task has "
                f"labels {list(labels)!r}; fit one on samples of this task with `taskcal fit`."
            )
            raise LabelMismatchError(msg, expected=list(labels), got=self.labels)


def content_sha256(data: Mapping[str, Any], *, stamped: bool = False) -> str:
    """The sha256 (hex) of an artefact's JSON form, without its ``content_sha256`` field.

    ``stamped``: its ``created`` field is the time of the call, not content (left out).
    """
    drop = {"content_sha256", "created"} if stamped else {"content_sha256"}
    content = {k: v for k, v in data.items() if k not in drop}
    blob = json.dumps(content, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


_WRITTEN = frozenset(
    {"format", "format_version", "task", "labels", "actions", "alpha", "task_spec"}
    | {"calibrator_name", "calibrator", "fit_metrics", "samples", "created", "risk_control"}
    | {"stopping_prior", "content_sha256"}
)
"""The fields :meth:`CalibratorArtefact.to_dict` writes itself; other metadata follows them."""

CalibratorLike = Calibrator | CalibratorArtefact | str | os.PathLike[str]
"""What a front door's ``calibrator`` parameter accepts (besides ``None``): a calibrator, an
artefact, the path of an artefact file, or ``"auto"`` (a shipped calibrator, see
:mod:`taskcal_agents.decision._shipped`)."""


class ResolvedCalibrator(NamedTuple):
    """What :func:`resolve_calibrator` returns."""

    calibrator: Calibrator | None
    """The calibrator, checked against the task (``None``: decide on the raw belief)."""
    alpha: float
    """The Dirichlet prior to use: the explicit one, else the artefact's, else the default."""
    artefact: CalibratorArtefact | None
    """The artefact, when one was given or loaded."""

    @property
    def risk_control(self) -> RiskControl | None:
        """The artefact's risk control (applied by the front door's Decider), or ``None``."""
        return None if self.artefact is None else self.artefact.risk_control

    def stopping_prior_for(self, task: Task) -> StoppingPrior | None:
        """The artefact's stopping prior when it was fitted for ``task``'s outcomes, else ``None``.

        ``None`` (adaptive N then draws all N samples) also for an artefact
        fitted under other outcomes than the runtime task's (another grounding belief, for
        instance): the prior only matters with adaptive N, and never blocks a front door.
        """
        prior = None if self.artefact is None else self.artefact.stopping_prior
        return prior if prior is not None and prior.outcomes == task.outcomes else None


def as_artefact(calibrator: CalibratorLike | None) -> CalibratorArtefact | None:
    """Return ``calibrator`` as an artefact: loaded from a path, as is, or ``None``.

    ``None`` also for ``"auto"``, which :func:`resolve_calibrator` resolves.

    Raises:
        DataFileError: If a path cannot be read as an artefact.
    """
    if calibrator == "auto":
        return None
    if isinstance(calibrator, str | os.PathLike):
        return CalibratorArtefact.load(calibrator)
    return calibrator if isinstance(calibrator, CalibratorArtefact) else None


def _effect_costs(task: Task) -> Any:
    """A task's effects and confirm action as compared for a risk limit (``None``: none)."""
    if task.effects is None and task.confirm_action is None:
        return None
    effects = None if task.effects is None else task.effects.model_dump(mode="json")
    return {"effects": effects, "confirm_action": task.confirm_action}


def resolve_calibrator(
    calibrator: CalibratorLike | None,
    task: Task,
    *,
    alpha: float | None = None,
    n_samples: int | None = None,
    owner: str,
    served: ServedSettings | None = None,
    strict: bool = False,
    belief: str = "samples",
) -> ResolvedCalibrator:
    """Turn a front door's ``calibrator`` argument into a calibrator checked for ``task``.

    The one place where a calibrator, an artefact or an artefact path is accepted: a path
    is loaded, an artefact's labels must be the task's labels in the task's order, the
    calibrator's class count (and input width, and labels when it records them) must
    match the task, and α is the explicit one, else the artefact's, else
    :data:`~taskcal_agents.decision._belief.DEFAULT_ALPHA`.

    Args:
        calibrator: A fitted calibrator, a :class:`CalibratorArtefact`, the path of an
            artefact file, or ``None``. (A front door's ``"auto"`` is first turned into
            the shipped artefact it picks, or ``None``, by
            :func:`~taskcal_agents.decision._shipped.auto_artefact`.)
        task: The task it must fit.
        alpha: The Dirichlet prior given explicitly, or ``None`` to take the artefact's.
        n_samples: The samples the front door draws per decision, or ``None``; compared
            with those an artefact's risk limit, and the artefact, were fitted on.
        owner: The front door's name, for error messages.
        served: How the front door samples, or ``None``. Given, an artefact (object or
            path) is checked against it as :func:`check_artefact` does (the belief
            included); without it, but with ``n_samples``, on N alone.
        strict: Refuse an artefact fitted for another setting (``ConfigurationError``)
            instead of warning.
        belief: How the front door reads its belief (``"samples"`` or ``"one_pass"``):
            without ``served``, the artefact is checked for it too.

    Warns:
        RiskSettingsWarning: If the artefact's risk limit was fitted on beliefs from
            another number of samples than ``n_samples``.
        CalibratorMismatchWarning: Once per message, if the artefact was fitted for
            another setting than ``served`` (or ``n_samples``) and ``strict`` is false.

    Raises:
        DataFileError: If a path cannot be read as an artefact.
        LabelMismatchError: If the artefact's (or calibrator's) labels differ from the
            task's, or are in another order.
        ConfigurationError: If the class count, input width or α is invalid, or the
            artefact carries a risk limit certified for other actions, costs, safe
            actions, unparsed policy or α than the runtime task's, or (``strict``) the
            artefact was fitted for another setting.
    """
    if calibrator == "auto":
        msg = (
            f"{owner}: calibrator 'auto' must be resolved by the front door "
            "(taskcal_agents.decision.auto_artefact) before resolve_calibrator."
        )
        raise ConfigurationError(msg)
    artefact = as_artefact(calibrator)
    if artefact is not None:
        if artefact.labels != list(task.labels):
            where = (
                repr(str(artefact.path))
                if artefact.path is not None
                else f"for task {artefact.task_name!r}"
            )
            msg = (
                f"{owner}: calibrator artefact {where} was fitted on labels "
                f"{artefact.labels!r} but task {task.name!r} has labels {task.labels!r}; "
                "fit a calibrator for this task with `taskcal fit`."
            )
            raise LabelMismatchError(msg, expected=list(task.labels), got=artefact.labels)
        read = artefact.metadata.get("relevance_features")
        if read is not None and list(read) != list(RELEVANCE_FEATURES):
            msg = (
                f"{owner}: calibrator artefact {artefact.path or artefact.task_name!r} reads the "
                f"relevance features {list(read)!r}, but this version computes "
                f"{list(RELEVANCE_FEATURES)!r}; refit it (`taskcal refit`, `taskcal fit` or "
                "`taskcal calibrate`)."
            )
            raise ConfigurationError(msg)
        calibrator = artefact.calibrator
        if alpha is None:
            alpha = artefact.alpha
    check_calibrator(task, calibrator)
    value = check_alpha(DEFAULT_ALPHA if alpha is None else alpha, owner=owner)
    if artefact is not None and artefact.risk_control is not None:
        _check_risk_setting(artefact, task, value, n_samples, owner)
    if artefact is not None and served is not None:
        _check_chosen(artefact, task, served, owner=owner, strict=strict, stacklevel=2)
    elif artefact is not None and (n_samples is not None or belief != "samples"):
        # N and the belief alone: the rest is unknown
        n_only = ServedSettings(None, n_samples or 0, None, belief=belief)
        _check_chosen(artefact, None, n_only, owner=owner, strict=strict, stacklevel=2)
    return ResolvedCalibrator(calibrator, value, artefact)  # type: ignore[arg-type]


def _check_risk_setting(
    artefact: CalibratorArtefact, task: Task, alpha: float, n_samples: int | None, owner: str
) -> None:
    """Refuse an artefact's risk limit in a setting it was not certified for."""
    rc = artefact.risk_control
    assert rc is not None
    where = repr(str(artefact.path)) if artefact.path is not None else f"for {artefact.task_name!r}"
    fix = (
        f"refit the limit for this setting with `taskcal fit --risk-control {rc.spec}`, or "
        "drop the guard (use an artefact without risk_control)."
    )
    fitted = artefact.task
    if fitted is None:
        msg = (
            f"{owner}: calibrator artefact {where} carries the risk limit {str(rc.spec)!r} but "
            f"records no task_spec, so it cannot be checked against task {task.name!r}; {fix}"
        )
        raise ConfigurationError(msg)
    differs = [
        f"{what} {ours!r} (certified: {theirs!r})"
        for what, ours, theirs in (
            ("actions", task.action_list, fitted.action_list),
            ("cost matrix", task.cost_matrix().tolist(), fitted.cost_matrix().tolist()),
            # costs by effect: a limit certified under one pricing holds for no other
            ("effects", _effect_costs(task), _effect_costs(fitted)),
            ("ask action", task.ask_action, fitted.ask_action),
            ("abstain action", task.abstain_action, fitted.abstain_action),
            ("fallback action", task.default_action, fitted.default_action),
            ("sampled actions", task.sampled_actions, fitted.sampled_actions),
            ("unparsed policy", task.unparsed, fitted.unparsed),
        )
        if ours != theirs
    ]
    if artefact.alpha is not None and not math.isclose(alpha, artefact.alpha, rel_tol=1e-12):
        differs.append(f"Dirichlet prior α {alpha!r} (certified: {artefact.alpha!r})")
    if differs:
        msg = (
            f"{owner}: calibrator artefact {where} carries the risk limit {str(rc.spec)!r}, "
            f"certified for another setting than task {task.name!r} with "
            + "; ".join(differs)
            + f". The limit does not carry over: {fix}"
        )
        raise ConfigurationError(msg)
    samples = artefact.metadata.get("samples")
    fitted_n = samples.get("n") if isinstance(samples, Mapping) else None
    if (
        n_samples is not None
        and isinstance(fitted_n, int)
        and not isinstance(fitted_n, bool)
        and fitted_n != n_samples
    ):
        msg = (
            f"{owner}: the risk limit {str(rc.spec)!r} of calibrator artefact {where} was "
            f"certified on beliefs from {fitted_n} samples per item, but this front door draws "
            f"{n_samples}; the guarantee holds for {fitted_n} only. Draw {fitted_n} samples or "
            f"{fix}"
        )
        warnings.warn(msg, RiskSettingsWarning, stacklevel=3)


# ------------------------------------------------------- how an artefact's beliefs were made


class CalibratorMismatchWarning(UserWarning):
    """An artefact chosen explicitly was fitted for another setting: it is still used."""


class ServedSettings(NamedTuple):
    """How a front door samples: what an artefact's record of its beliefs must match."""

    model: str | None
    """The served model's name (``None``: unknown, matches nothing under ``"auto"``)."""
    n_samples: int
    """N, the completions drawn per decision."""
    temperature: float | None
    """The sampling temperature (``None``: unknown, matches nothing under ``"auto"``)."""
    max_tokens: int | None = None
    """The completion length limit (``None``: unset, the server's own)."""
    task_prompt: bool = True
    """Whether the task's prompt is added to the sampled requests."""
    tool_choice: str | None = None
    """The ``tool_choice`` bound to the model or set per request (``None``: unset)."""
    other: tuple[str, ...] = ()
    """Other sampling parameters set on the model (``top_p``, ``top_k``, penalties, ...),
    which the shipped samples left at the server's defaults."""
    alpha: float | None = None
    """The Dirichlet prior α given explicitly (``None``: the calibrator's)."""
    belief: str = "samples"
    """How the belief is read: ``"samples"`` (N completions) or ``"one_pass"``
    (:attr:`~taskcal_agents.decision.SamplingOptions.belief`)."""
    registry_model: str | None = None
    """The registry model :attr:`model` names (its registry name, or an upstream id such as
    ``Qwen/Qwen2.5-Coder-1.5B-Instruct``; ``taskcal_agents.models.registry_name_of``), or
    ``None``: an artefact fitted for that registry model matches this model name too."""


BELIEF_FIELDS = ("labels", "parser", "unparsed", "grounding", "answer_clusters", "prompt")
"""The task fields that shape the belief a calibrator reads (compared by :func:`mismatch`)."""

UNMATCHED_PARSER_OPTIONS = frozenset({"tool_names"})
"""Parser options not compared: the offered tools decide which calls are grounded."""


class _Fitted(NamedTuple):
    """What an artefact records about how its beliefs were made (``None``: not recorded)."""

    model: str | None
    n: int | None
    temperature: float | None
    max_tokens: int | None
    belief: str
    """``"samples"`` or ``"one_pass"`` (``"samples"`` where not recorded: the older files)."""
    defaults: bool
    """Whether its samples left ``tool_choice`` at ``"auto"`` and the other sampling
    parameters at the server's defaults (what ``taskcal calibrate`` draws)."""


_BELIEF_NAMES = {
    "samples": "sampled beliefs",
    "one_pass": "one-pass beliefs",
    "logprob": "one-pass beliefs over the task's labels (--belief logprob)",
}


def recorded_belief(value: Any) -> str:
    """The belief a record names: ``"one_pass"``, ``"logprob"`` or ``"samples"``.

    ``"logprob"``: the one-pass belief read over the task's labels, which no front door
    reads; ``"samples"`` also when none is recorded (files written before beliefs were).
    """
    return value if value in ("one_pass", "logprob") else "samples"


def artefact_belief(artefact: CalibratorArtefact) -> str:
    """The belief ``artefact`` was fitted on (:func:`recorded_belief` of its record)."""
    return _fitted(artefact).belief


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _fitted(artefact: CalibratorArtefact) -> _Fitted:
    """The artefact's ``record`` (``taskcal calibrate``), else its ``samples`` (``taskcal fit``)."""
    record = artefact.metadata.get("record")
    sampling = record.get("sampling") if isinstance(record, Mapping) else None
    source: Mapping[str, Any]
    if isinstance(record, Mapping) and isinstance(sampling, Mapping):
        source, defaults = {**sampling, "model": record.get("model")}, True
    else:
        samples = artefact.metadata.get("samples")
        source, defaults = (samples if isinstance(samples, Mapping) else {}), False
    model, n, temperature = source.get("model"), source.get("n"), source.get("temperature")
    limit = source.get("max_tokens") if defaults else None
    return _Fitted(
        belief=recorded_belief(source.get("belief")),
        model=model if isinstance(model, str) and model else None,
        n=n if _is_int(n) else None,
        temperature=(
            float(temperature)
            if isinstance(temperature, int | float) and not isinstance(temperature, bool)
            else None
        ),
        max_tokens=limit if _is_int(limit) else None,
        defaults=defaults,
    )


def _belief_view(task: Task, *, prompt: bool) -> dict[str, Any]:
    view = task.model_dump(mode="json", include=set(BELIEF_FIELDS))
    options = view["parser"].get("options") or {}
    view["parser"]["options"] = {
        k: v for k, v in options.items() if k not in UNMATCHED_PARSER_OPTIONS
    }
    if view["grounding"] is not None:
        view["grounding"].pop("execute", None)  # what is sent, not what the belief sees
    if not prompt:
        view["prompt"] = None
    return view


def mismatch(
    artefact: CalibratorArtefact,
    task: Task | None,
    served: ServedSettings,
    *,
    known_only: bool = False,
) -> str | None:
    """What keeps ``artefact`` from deciding for ``task`` under ``served``, or ``None``.

    The rule of :mod:`taskcal_agents.decision._shipped` (what ``calibrator="auto"``
    matches), applied to what the artefact records: a ``record`` (``taskcal calibrate``)
    says the model, N, temperature, ``max_tokens`` and that ``tool_choice`` and the other
    sampling parameters were left at their defaults; without one, the ``samples`` field
    (``taskcal fit``) says the model, N and temperature of the samples file when it
    recorded them, and nothing else about sampling is compared. The model matches when
    ``served.model`` or ``served.registry_model`` is the recorded one.

    Args:
        artefact: The artefact.
        task: The runtime task, or ``None``: the belief (the task's fields that shape it)
            is not compared.
        served: How the front door samples.
        known_only: Leave out what the front door does not know (``served.model`` or
            ``served.temperature`` ``None``). ``False`` (``"auto"``): an unknown value
            matches nothing.

    Returns:
        ``None`` when it matches; else a short phrase naming the first difference.
    """
    fitted = _fitted(artefact)
    model = fitted.model
    if (
        model is not None
        and not (known_only and served.model is None)
        and model not in (served.model, served.registry_model)
    ):
        return f"it was fitted for model {model!r}, this front door serves {served.model!r}"
    if fitted.belief != served.belief:
        return (
            f"it was fitted on {_BELIEF_NAMES[fitted.belief]}, this front door reads "
            f"{_BELIEF_NAMES.get(served.belief, served.belief)}"
        )
    if fitted.belief == "samples" and fitted.n is not None and served.n_samples != fitted.n:
        return f"it was fitted on N = {fitted.n} samples, this front door draws {served.n_samples}"
    temperature = fitted.temperature
    if (
        temperature is not None
        and not (known_only and served.temperature is None)
        and (served.temperature is None or not math.isclose(served.temperature, temperature))
    ):
        return (
            f"it was fitted at temperature {temperature}, this front door samples at "
            f"{served.temperature}"
        )
    limit = fitted.max_tokens
    if limit is not None and served.max_tokens is not None and served.max_tokens < limit:
        return (
            f"it was fitted with max_tokens {limit}, this model is limited to {served.max_tokens}"
        )
    if fitted.defaults and served.tool_choice not in (None, "auto"):
        return f"it was fitted with tool_choice 'auto', this front door sets {served.tool_choice!r}"
    if fitted.defaults and served.other:
        return (
            f"it was fitted with the server's default {', '.join(served.other)}, this model "
            "sets them"
        )
    if (
        served.alpha is not None
        and not (known_only and artefact.alpha is None)
        and not math.isclose(served.alpha, artefact.alpha or 0.0)
    ):
        return f"it was fitted with alpha {artefact.alpha}, this front door sets {served.alpha}"
    fitted_task = artefact.task
    if task is None or fitted_task is None:
        return None
    read = artefact.metadata.get("relevance_features")
    unrecorded = known_only and read is None  # an explicit artefact that does not say
    if (
        fitted_task.reads_relevance
        and not unrecorded
        and list(read or ()) != list(RELEVANCE_FEATURES)
    ):
        return (
            f"it reads the relevance features {read!r}, this version {list(RELEVANCE_FEATURES)!r}"
        )
    ours = _belief_view(task, prompt=served.task_prompt)
    theirs = _belief_view(fitted_task, prompt=True)
    for name in BELIEF_FIELDS:
        if ours[name] != theirs[name]:
            return f"its task has {name} {theirs[name]!r}, this one {ours[name]!r}"
    return None


_MISMATCH_WARNED: set[str] = set()
"""The messages :func:`check_artefact` has warned (each once per process)."""


def _named(artefact: CalibratorArtefact) -> str:
    """The artefact as a message names it: its path and content id, whichever it has."""
    named = [repr(str(artefact.path))] if artefact.path is not None else []
    if artefact.content_id is not None:
        named.append(artefact.content_id if not named else f"({artefact.content_id})")
    return " ".join(named) or f"for task {artefact.task_name!r}"


def _check_chosen(
    artefact: CalibratorArtefact,
    task: Task | None,
    served: ServedSettings,
    *,
    owner: str,
    strict: bool,
    stacklevel: int,
) -> str | None:
    why = mismatch(artefact, task, served, known_only=True)
    if why is None:
        return None
    head = f"{owner}: calibrator artefact {_named(artefact)} does not fit this front door: {why}."
    one_pass = " --belief one_pass" if served.belief == "one_pass" else ""
    fit = (
        f"fit one for this setting with `taskcal calibrate --base-url URL --model NAME"
        f"{one_pass}` (tool decisions) or `taskcal fit`"
    )
    if strict:
        msg = f"{head} It was refused (strict=True): {fit}, or pass strict=False to use it anyway."
        raise ConfigurationError(msg)
    msg = (
        f"{head} It is still used, because it was chosen explicitly: {fit}, pass strict=True to "
        "refuse it, or ignore CalibratorMismatchWarning to use it silently."
    )
    if msg not in _MISMATCH_WARNED:
        _MISMATCH_WARNED.add(msg)
        warnings.warn(msg, CalibratorMismatchWarning, stacklevel=stacklevel + 1)
    return msg


def check_artefact(
    artefact: CalibratorArtefact,
    task: Task | None,
    served: ServedSettings,
    *,
    owner: str,
    strict: bool = False,
) -> str | None:
    """Check an artefact the user chose against how the front door samples.

    The rule ``calibrator="auto"`` applies to a shipped artefact (:func:`mismatch`), with
    two differences: only what the front door knows is compared (an unknown model name
    or temperature, ``None`` in ``served``, is left out), and only what the artefact
    records (a ``record`` from ``taskcal calibrate``; else the model, N and temperature in
    ``samples`` from ``taskcal fit``; an artefact that records neither is compared on its
    α and task only). The artefact is still used when it does not fit: the user chose it.

    Args:
        artefact: The artefact chosen.
        task: The runtime task, or ``None`` not to compare the belief.
        served: How the front door samples.
        owner: The front door's name, for the message.
        strict: Refuse an artefact that does not fit instead of warning.

    Returns:
        ``None`` when it fits; else the message warned.

    Warns:
        CalibratorMismatchWarning: Once per message, when it does not fit (and not
            ``strict``).

    Raises:
        ConfigurationError: If it does not fit and ``strict`` is true.
    """
    return _check_chosen(artefact, task, served, owner=owner, strict=strict, stacklevel=2)
