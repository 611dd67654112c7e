"""Exceptions raised by taskcal-agents.

Hierarchy::

    TaskCalError                      base of everything raised here
    ├── ConfigurationError (ValueError)     bad task / cost matrix / calibrator / option
    │   ├── LabelMismatchError               calibrator or data labels differ from the task's
    │   └── UnknownArgumentError (TypeError)  a front door got an argument it does not take
    ├── DataFileError (ValueError)           a bad line in a dataset, samples or artefact file
    ├── UnknownDecisionError (KeyError)      an outcome for a decision id not in the log
    ├── SamplingError (RuntimeError)         the model failed to produce samples
    │   └── SamplingServerError              the server failed a request (also a ServerError)
    └── ServerError (RuntimeError)           the vLLM server failed to start, died or failed
        ├── SamplingServerError
        └── ServerStartupError               it did not become healthy in time

Every exception inherits the built-in type that callers already catch, and
carries its data as attributes. :class:`DecisionLogWarning` (a ``UserWarning``) says that
a decision could not be logged (the decision itself is returned all the same);
:class:`ArtefactReloadWarning` (a ``UserWarning``) that a replaced calibrator artefact
file could not be reloaded (the artefact in force stays).
"""

from __future__ import annotations


class TaskCalError(Exception):
    """Base class of all taskcal-agents errors."""


class ConfigurationError(TaskCalError, ValueError):
    """A task, cost matrix, calibrator or option is invalid."""


class UnknownArgumentError(ConfigurationError, TypeError):
    """A front door got an argument it does not take (a misspelt one, say).

    Also a ``TypeError``, which Python raises for an unexpected keyword argument.

    Attributes:
        names: The arguments it does not take.
    """

    def __init__(self, message: str, *, names: list[str]) -> None:
        super().__init__(message)
        self.names = names


class LabelMismatchError(ConfigurationError):
    """Two label sets that must agree (task vs calibrator, task vs data) differ.

    Attributes:
        expected: The labels the task declares.
        got: The labels that arrived.
    """

    def __init__(self, msg: str, *, expected: list[str], got: list[str]) -> None:
        super().__init__(msg)
        self.expected = list(expected)
        self.got = list(got)


class DataFileError(TaskCalError, ValueError):
    """A dataset, samples or artefact file holds a bad record.

    Attributes:
        path: The file.
        line: The 1-based line number, or ``None`` when the whole file is at fault.
    """

    def __init__(self, msg: str, *, path: str, line: int | None = None) -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {msg}")
        self.path = str(path)
        self.line = line


class UnknownDecisionError(TaskCalError, KeyError):
    """An outcome names a decision id that the decision log does not hold.

    Attributes:
        decision_id: The id.
        path: The log.
    """

    def __init__(self, msg: str, *, decision_id: str, path: str) -> None:
        super().__init__(msg)
        self.decision_id = decision_id
        self.path = str(path)

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class DecisionLogWarning(UserWarning):
    """A decision could not be written to the decision log (the decision stands)."""


class ArtefactReloadWarning(UserWarning):
    """A replaced calibrator artefact file could not be reloaded (the old one stays in force)."""


class SamplingError(TaskCalError, RuntimeError):
    """The wrapped model failed to produce the requested samples."""


class ServerError(TaskCalError, RuntimeError):
    """The managed vLLM server failed, died, or answered with an error.

    Attributes:
        log_tail: The last lines of the server's log, when known.
    """

    def __init__(self, msg: str, *, log_tail: str = "") -> None:
        super().__init__(msg if not log_tail else f"{msg}\n--- server log (tail) ---\n{log_tail}")
        self.log_tail = log_tail


class SamplingServerError(ServerError, SamplingError):
    """The server failed a sampling request: timed out, unreachable, HTTP 5xx or 429.

    Raised while sampling, so it is a :class:`SamplingError` (what the front doors document
    and retry); it is a :class:`ServerError` too, for code that tells the server's faults apart.
    """


class ServerStartupError(ServerError):
    """The server did not become healthy within its startup timeout."""


__all__ = [
    "ArtefactReloadWarning",
    "ConfigurationError",
    "DataFileError",
    "DecisionLogWarning",
    "LabelMismatchError",
    "SamplingError",
    "SamplingServerError",
    "ServerError",
    "ServerStartupError",
    "TaskCalError",
    "UnknownArgumentError",
    "UnknownDecisionError",
]
