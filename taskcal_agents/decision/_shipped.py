"""Calibrators shipped with the package, and what ``calibrator="auto"`` picks.

A shipped calibrator is an ordinary calibrator artefact (:mod:`taskcal_agents.decision._artefact`)
in the package's ``data/calibrators`` folder, written by ``taskcal calibrate`` for a registry
model. Besides the fields every artefact has, it carries a ``record`` of how its beliefs were
made::

    "record": {
      "model": "qwen2.5-coder-0.5b-instruct",     # the served model name
      "sampling": {"task": "bfcl", "n": 16, "temperature": 1.0, "max_tokens": 256,
                   "prompt": "...", "dtype": "bfloat16"},
      "data": {"corpus": "bfcl", "source": "bfcl_eval-2026.3.23-py3-none-any.whl",
               "source_sha256": "...", "split": "train", "n_items": 630, "items_sha256": "..."},
      "command": "taskcal calibrate --base-url URL --model ... ",
      "taskcal_version": "0.x"
    }

and its own ``content_sha256``, checked when it is loaded.

``calibrator="auto"`` (the default of every front door) hands the front door's task and
its sampling settings (:class:`ServedSettings`) to :func:`auto_artefact`, which returns the
first shipped artefact whose record matches:

- the served model's name is the record's ``model``, or names the same registry model
  (:attr:`ServedSettings.registry_model`: an upstream id such as
  ``Qwen/Qwen2.5-Coder-1.5B-Instruct``, or a local folder named like one; a quantised
  upstream variant, ``...-AWQ`` or ``...-GGUF``, and another organisation's model of the
  same name do not);
- N and the temperature are the record's; the completion length limit is the record's
  ``max_tokens`` or longer, or unset (a longer limit only lets a completion finish that
  the record's limit would have cut off);
- the task makes the same belief: the same labels, parser (its ``tool_names`` option
  aside: the offered tools decide which calls are grounded), unparsed policy, grounding
  (which calls are sent, ``execute``, aside), answer clustering and prompt (``None`` when
  the front door does not add the task's prompt);
- no ``tool_choice`` other than ``"auto"``, no other sampling parameter (``top_p``,
  ``top_k``, penalties) set on the model, and no explicit α other than the artefact's.

The cost matrix, the actions and their texts may differ: the calibrator maps beliefs to
probabilities, and the costs act after it. The dtype the model was served in is recorded,
not matched: on STS-B, bf16 and float32 beliefs of Qwen2.5-Coder-0.5B differ by a mean
total variation of 0.013, and a map fitted in one dtype and served in the other changed the
saving over the best constant by −0.022 ± 0.015 and +0.016 ± 0.019 (paired).

A shipped artefact was fitted on the registry's weights (the wheels' quantised GGUF,
dequantised to the record's dtype); picked for an upstream name, which serves the
full-precision weights, it decides without a warning, and :func:`fitted_on`'s sentence
(logged once at INFO) says that its calibration there is unmeasured.

The same rule checks an artefact the user chose (:func:`check_artefact`, and
``resolve_calibrator(..., served=...)``): on what the front door knows and what the
artefact records; one that does not fit is still used, with a
:class:`CalibratorMismatchWarning` (refused with ``strict=True``).

When none matches, :func:`auto_artefact` warns once per reason
(:class:`UncalibratedWarning`: it names the nearest shipped artefact
and what differs) and returns ``None``: the front door decides on the raw belief, as with
``calibrator=None``.
"""

from __future__ import annotations

import functools
import json
import logging
import warnings
from collections.abc import Mapping
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Literal

from taskcal_agents.decision._artefact import (
    BELIEF_FIELDS,
    UNMATCHED_PARSER_OPTIONS,
    CalibratorArtefact,
    CalibratorMismatchWarning,
    ServedSettings,
    check_artefact,
    content_sha256,
    mismatch,
)
from taskcal_agents.decision._task import Task
from taskcal_agents.errors import DataFileError

__all__ = [
    "AUTO",
    "BELIEF_FIELDS",
    "UNMATCHED_PARSER_OPTIONS",
    "Auto",
    "CalibratorMismatchWarning",
    "ServedSettings",
    "UncalibratedWarning",
    "auto_artefact",
    "check_artefact",
    "fitted_on",
    "load_shipped",
    "mismatch",
    "shipped_artefacts",
]

logger = logging.getLogger(__name__)

AUTO = "auto"
"""The ``calibrator`` value that picks a shipped calibrator (every front door's default)."""

Auto = Literal["auto"]
"""Its type."""


class UncalibratedWarning(UserWarning):
    """``calibrator="auto"`` found no shipped calibrator that fits: the raw belief decides."""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check(data: Mapping[str, Any], where: str) -> CalibratorArtefact:
    """A shipped artefact file: its hash checked, its record complete."""
    recorded = data.get("content_sha256")
    if recorded != content_sha256(data):
        msg = (
            f"shipped calibrator {where} does not match its content_sha256 ({recorded!r}): the "
            "file was changed after it was written; reinstall taskcal-agents."
        )
        raise DataFileError(msg, path=where)
    artefact = CalibratorArtefact.from_dict(data, path=where)
    record = artefact.metadata.get("record")
    sampling = record.get("sampling") if isinstance(record, Mapping) else None
    if (
        artefact.task is None
        or not isinstance(record, Mapping)
        or not isinstance(record.get("model"), str)
        or not isinstance(sampling, Mapping)
        or not _is_int(sampling.get("n"))
        or not _is_int(sampling.get("max_tokens"))
        or not isinstance(sampling.get("temperature"), int | float)
        or sampling.get("prompt") != artefact.task.prompt
        or artefact.risk_control is not None
    ):
        msg = (
            "shipped calibrator has no complete record (task_spec, record.model, "
            "record.sampling with n, temperature, max_tokens and the task's prompt) or carries "
            "a risk limit (certified for one cost matrix, so no shipped default)."
        )
        raise DataFileError(msg, path=where)
    return artefact


@functools.cache
def shipped_artefacts() -> tuple[CalibratorArtefact, ...]:
    """The calibrators shipped with the package (:func:`load_shipped`, read once).

    Raises:
        DataFileError: If a shipped file is not a valid artefact with a record, or its
            content does not match its ``content_sha256``.
    """
    return load_shipped(resources.files("taskcal_agents").joinpath("data", "calibrators"))


def load_shipped(folder: Traversable | Path) -> tuple[CalibratorArtefact, ...]:
    """The artefacts in ``folder`` (``*.json``, in name order), each checked as shipped.

    Raises:
        DataFileError: If a file is not a valid artefact with a record, or its content
            does not match its ``content_sha256``.
    """
    if not folder.is_dir():
        return ()
    found = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".json"):
            continue
        where = f"calibrators/{entry.name}"
        try:
            data = json.loads(entry.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            msg = f"shipped calibrator cannot be read: {exc}"
            raise DataFileError(msg, path=where) from exc
        if not isinstance(data, Mapping):
            msg = "shipped calibrator is not a JSON object."
            raise DataFileError(msg, path=where)
        found.append(_check(data, where))
    return tuple(found)


def fitted_on(artefact: CalibratorArtefact, served: ServedSettings) -> str | None:
    """The note on an artefact picked for an upstream name of its record's model, or ``None``.

    A shipped artefact was fitted on the registry's weights of its record's model: the
    wheels' quantised GGUF, dequantised and served in the record's dtype. A server of the
    upstream model (``vllm serve Qwen/Qwen2.5-Coder-1.5B-Instruct``) serves its
    full-precision weights, whose beliefs may differ; this one sentence, for the decision
    log and the info log, says so.

    Returns:
        ``None`` when ``served.model`` is the record's model, when ``served`` does not name
        it through :attr:`~ServedSettings.registry_model`, or when the artefact has no
        ``record``; else the sentence.
    """
    record = artefact.metadata.get("record")
    model = record.get("model") if isinstance(record, Mapping) else None
    if not isinstance(model, str) or served.model == model or served.registry_model != model:
        return None
    sampling = record.get("sampling") if isinstance(record, Mapping) else None
    dtype = sampling.get("dtype") if isinstance(sampling, Mapping) else None
    how = f"GGUF, dequantised and served in {dtype}" if isinstance(dtype, str) else "GGUF"
    name = artefact.content_id or "the shipped calibrator"
    return (
        f"The calibrator {name} was fitted on the registry's quantised weights of {model!r} "
        f"({how}); this front door serves {served.model!r}, so its calibration on the "
        "full-precision upstream weights is unmeasured."
    )


_WARNED: set[str] = set()
"""The reasons :func:`auto_artefact` has warned about (each once per process)."""

_NOTED: set[str] = set()
"""The notes :func:`auto_artefact` has logged (:func:`fitted_on`, each once per process)."""


def auto_artefact(task: Task, served: ServedSettings, *, owner: str) -> CalibratorArtefact | None:
    """The shipped calibrator ``calibrator="auto"`` decides by, or ``None`` (raw belief).

    An artefact picked through an upstream name of its record's model (``served.model``
    is not the record's, ``served.registry_model`` is) is logged once at INFO with the
    note of :func:`fitted_on`; no warning.

    Warns:
        UncalibratedWarning: Once per reason, when no shipped calibrator matches.
    """
    shipped = shipped_artefacts()
    reasons = []
    for artefact in shipped:
        why = mismatch(artefact, task, served)
        if why is None:
            note = fitted_on(artefact, served)
            if note is not None and note not in _NOTED:
                _NOTED.add(note)
                logger.info("%s", note)
            return artefact
        reasons.append((artefact, why))
    names = {served.model, served.registry_model} - {None}
    same_model = [r for r in reasons if (r[0].metadata.get("record") or {}).get("model") in names]
    if same_model:
        artefact, why = same_model[0]
        nearest = f"the shipped calibrator {artefact.content_id} does not fit: {why}"
    else:
        models = sorted({str((a.metadata.get("record") or {}).get("model")) for a in shipped})
        nearest = (
            f"calibrators are shipped for {', '.join(models)}" if models else "none is shipped"
        )
    msg = (
        f"{owner}: calibrator='auto' found no shipped calibrator for task {task.name!r} on "
        f"model {served.model!r} ({nearest}), so it decides on the raw belief. Fit one for "
        "this setting with `taskcal calibrate --base-url URL --model NAME` (tool decisions) "
        "or `taskcal fit`, or pass calibrator=None to decide on the raw belief silently."
    )
    if msg not in _WARNED:
        _WARNED.add(msg)
        warnings.warn(msg, UncalibratedWarning, stacklevel=3)
    return None
