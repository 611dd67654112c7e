"""Reload a calibrator artefact when its file is replaced (atomically: ``taskcal refit``)."""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

from taskcal_agents.decision import (
    CalibratorArtefact,
    ResolvedCalibrator,
    ServedSettings,
    Task,
    resolve_calibrator,
)
from taskcal_agents.errors import (
    ArtefactReloadWarning,
    ConfigurationError,
)

__all__ = [
    "ArtefactReloader",
    "check_reload",
]

T = TypeVar("T")

_StatKey = tuple[int, int, int]
_UNSET = object()
"""No failed file version (a missing file fails as the version ``None``)."""


def _stat_key(path: Path) -> _StatKey | None:
    """``(st_ino, st_mtime_ns, st_size)`` of the file, or ``None`` when it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def check_reload(calibrator: Any, reload_artefact: bool, owner: str) -> None:
    """Refuse ``reload_artefact=True`` unless the calibrator is given as an artefact path.

    Raises:
        ConfigurationError: If reloading is on and ``calibrator`` is not a path.
    """
    if reload_artefact and (calibrator == "auto" or not isinstance(calibrator, str | os.PathLike)):
        shown = "'auto'" if calibrator == "auto" else type(calibrator).__name__
        msg = (
            f"{owner} parameter 'reload_artefact' needs 'calibrator' to be the path of an "
            f"artefact file (to watch), got {shown}; pass the path or reload_artefact=False."
        )
        raise ConfigurationError(msg)


class ArtefactReloader(Generic[T]):
    """An artefact file and what a front door builds from it, rebuilt when the file changes.

    The one hot-reload holder of the front doors (see the module docstring). It loads
    and resolves the file at construction (errors raise, as without reloading) and calls
    ``build`` on the :class:`ResolvedCalibrator`; :meth:`current` returns the value in
    force after a cheap ``os.stat``, reloading when the file was replaced. A failed
    reload (missing file, bad JSON, labels or classes that do not fit the task, a failing
    ``build``) keeps the value in force and warns once per replacement; the same file
    version is not retried. Safe to call from many threads: the swap is under a lock.

    Args:
        path: The artefact file.
        task: The task it must fit (the same on every reload).
        build: Makes the front door's value (e.g. its Decider and the artefact id it
            logs) from a resolved calibrator.
        alpha: The explicit Dirichlet prior, or ``None`` for the artefact's.
        n_samples: The samples drawn per decision (for the risk-limit check).
        owner: The front door's name, for messages.
        served: How the front door samples, when it is known: each load is checked
            against it (:func:`~taskcal_agents.decision.check_artefact`).
        strict: Refuse a load that does not match ``served`` (a replacement is then not
            swapped in) instead of warning.

    Attributes:
        path: The artefact file.
        reloads: How many replacements were swapped in.
        failures: How many replacements could not be loaded.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        task: Task,
        build: Callable[[ResolvedCalibrator], T],
        *,
        alpha: float | None = None,
        n_samples: int | None = None,
        owner: str,
        served: ServedSettings | None = None,
        strict: bool = False,
    ) -> None:
        self.path = Path(path)
        self.reloads = 0
        self.failures = 0
        self._task = task
        self._build = build
        self._alpha = alpha
        self._n_samples = n_samples
        self._owner = owner
        self._served = served
        self._strict = strict
        self._lock = threading.Lock()
        key = _stat_key(self.path)  # before loading: a replacement during the load is seen
        resolved = self._resolve()
        self._state: tuple[_StatKey | None, T, ResolvedCalibrator] = (
            key,
            build(resolved),
            resolved,
        )
        self._failed: _StatKey | object | None = _UNSET

    def _resolve(self) -> ResolvedCalibrator:
        return resolve_calibrator(
            CalibratorArtefact.load(self.path), self._task, alpha=self._alpha,
            n_samples=self._n_samples, owner=self._owner, served=self._served,
            strict=self._strict,
        )  # fmt: skip

    @property
    def resolved(self) -> ResolvedCalibrator:
        """The resolved calibrator in force."""
        return self._state[2]

    def current(self) -> T:
        """The value in force, reloaded first if the file was replaced (never raises)."""
        return self.current_with_resolved()[0]

    def current_with_resolved(self) -> tuple[T, ResolvedCalibrator]:
        """The value in force and the resolved calibrator it was built from, as one pair.

        Reloaded first if the file was replaced (never raises); the pair comes from one
        load, whatever other threads swap in meanwhile.
        """
        key = _stat_key(self.path)
        state = self._state
        if key == state[0] or key == self._failed:
            return state[1], state[2]
        with self._lock:
            state = self._state
            if key == state[0] or key == self._failed:
                return state[1], state[2]
            try:
                if key is None:
                    msg = "the file is missing or cannot be read"
                    raise OSError(msg)
                resolved = self._resolve()
                value = self._build(resolved)
            except Exception as exc:
                self.failures += 1
                self._failed = key  # this version is not retried, nor warned about again
                msg = (
                    f"{self._owner}: calibrator artefact {str(self.path)!r} changed but cannot "
                    f"be reloaded ({type(exc).__name__}: {exc}); the artefact in force stays. "
                    "Replace the file atomically with a valid artefact for this task (e.g. "
                    "`taskcal refit`)."
                )
                warnings.warn(msg, ArtefactReloadWarning, stacklevel=4)
                return state[1], state[2]
            self._state = (key, value, resolved)
            self._failed = _UNSET
            self.reloads += 1
            return value, resolved
