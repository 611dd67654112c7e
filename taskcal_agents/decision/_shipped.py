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

- the served model's name is the record's ``model``;
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

When none matches, :func:`auto_artefact` warns once per reason
(:class:`UncalibratedWarning`: it names the nearest shipped artefact
and what differs) and returns ``None``: the front door decides on the raw belief, as with
``calibrator=None``.
"""

from __future__ import annotations

import functools
import json
import math
import warnings
from collections.abc import Mapping
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Literal, NamedTuple

from taskcal_agents.decision._artefact import CalibratorArtefact, content_sha256
from taskcal_agents.decision._task import Task
from taskcal_agents.errors import DataFileError
from taskcal_agents.parsing import RELEVANCE_FEATURES

__all__ = [
    "AUTO",
    "Auto",
    "ServedSettings",
    "UncalibratedWarning",
    "auto_artefact",
    "load_shipped",
    "mismatch",
    "pick_calibrator",
    "shipped_artefacts",
]

AUTO = "auto"
"""The ``calibrator`` value that picks a shipped calibrator (every front door's default)."""

Auto = Literal["auto"]
"""Its type."""

BELIEF_FIELDS = ("labels", "parser", "unparsed", "grounding", "answer_clusters", "prompt")
"""The task fields that shape the belief a calibrator reads (compared by :func:`mismatch`)."""

UNMATCHED_PARSER_OPTIONS = frozenset({"tool_names"})
"""Parser options not compared: the offered tools decide which calls are grounded."""


class UncalibratedWarning(UserWarning):
    """``calibrator="auto"`` found no shipped calibrator that fits: the raw belief decides."""


class ServedSettings(NamedTuple):
    """How a front door samples: what a shipped calibrator's record must match."""

    model: str | None
    """The served model's name (``None``: unknown, matches nothing)."""
    n_samples: int
    """N, the completions drawn per decision."""
    temperature: float | None
    """The sampling temperature (``None``: unknown, matches nothing)."""
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


def mismatch(artefact: CalibratorArtefact, task: Task, served: ServedSettings) -> str | None:
    """What keeps a shipped ``artefact`` from deciding for ``task`` under ``served``.

    ``None`` when its record matches (see the module docstring); else a short phrase
    naming the first difference.
    """
    record: Mapping[str, Any] = artefact.metadata["record"]  # _check: complete
    sampling: Mapping[str, Any] = record["sampling"]
    model = record["model"]
    if served.model != model:
        return f"it was fitted for model {model!r}, this front door serves {served.model!r}"
    if served.n_samples != sampling["n"]:
        n = sampling["n"]
        return f"it was fitted on N = {n} samples, this front door draws {served.n_samples}"
    temperature = sampling["temperature"]
    if served.temperature is None or not math.isclose(served.temperature, float(temperature)):
        return (
            f"it was fitted at temperature {temperature}, this front door samples at "
            f"{served.temperature}"
        )
    limit = sampling["max_tokens"]
    if served.max_tokens is not None and served.max_tokens < int(limit):
        return (
            f"it was fitted with max_tokens {limit}, this model is limited to {served.max_tokens}"
        )
    if served.tool_choice not in (None, "auto"):
        return f"it was fitted with tool_choice 'auto', this front door sets {served.tool_choice!r}"
    if served.other:
        return (
            f"it was fitted with the server's default {', '.join(served.other)}, this model "
            "sets them"
        )
    if served.alpha is not None and not math.isclose(served.alpha, artefact.alpha or 0.0):
        return f"it was fitted with alpha {artefact.alpha}, this front door sets {served.alpha}"
    fitted = artefact.task
    assert fitted is not None  # _check
    read = artefact.metadata.get("relevance_features")
    if fitted.reads_relevance and list(read or ()) != list(RELEVANCE_FEATURES):
        return (
            f"it reads the relevance features {read!r}, this version {list(RELEVANCE_FEATURES)!r}"
        )
    ours = _belief_view(task, prompt=served.task_prompt)
    theirs = _belief_view(fitted, prompt=True)
    for name in BELIEF_FIELDS:
        if ours[name] != theirs[name]:
            return f"its task has {name} {theirs[name]!r}, this one {ours[name]!r}"
    return None


_WARNED: set[str] = set()
"""The reasons :func:`auto_artefact` has warned about (each once per process)."""


def auto_artefact(task: Task, served: ServedSettings, *, owner: str) -> CalibratorArtefact | None:
    """The shipped calibrator ``calibrator="auto"`` decides by, or ``None`` (raw belief).

    Warns:
        UncalibratedWarning: Once per reason, when no shipped calibrator matches.
    """
    shipped = shipped_artefacts()
    reasons = []
    for artefact in shipped:
        why = mismatch(artefact, task, served)
        if why is None:
            return artefact
        reasons.append((artefact, why))
    same_model = [
        r for r in reasons if (r[0].metadata.get("record") or {}).get("model") == served.model
    ]
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


def pick_calibrator(calibrator: Any, task: Task, served: ServedSettings, *, owner: str) -> Any:
    """A front door's ``calibrator`` as ``resolve_calibrator`` takes it.

    For ``"auto"``, the shipped artefact :func:`auto_artefact` picks (``None``: the raw
    belief, after its warning); anything else as it is
    (:func:`~taskcal_agents.decision._artefact.resolve_calibrator` then checks it).
    """
    return auto_artefact(task, served, owner=owner) if calibrator == AUTO else calibrator
