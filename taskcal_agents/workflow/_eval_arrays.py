"""The evaluation's input: a task's items as arrays (beliefs, labels, masks, cost matrix).

:class:`EvalArrays` holds everything the cross-fitted comparison of decoders
(:func:`~taskcal_agents.workflow._evaluate.evaluate_arrays`) reads, checked for consistent
shapes: the raw beliefs ``P`` (n, k) built from the parsed samples, the true label indices
``y`` (n,), the greedy completion's label index (-1 when unparsed or missing), a mask of
items with no usable sample, a mask of the actions each item's samples can carry out, and
the task's cost matrix ``C`` (k, m), row = true label, column = action.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from taskcal_agents.errors import ConfigurationError

__all__ = ["EvalArrays"]


@dataclass(frozen=True)
class EvalArrays:
    """Everything the evaluation needs, as arrays.

    Attributes:
        P: Raw beliefs, shape (n, k), rows sum to 1.
        y: True label indices, shape (n,).
        cost: Cost matrix, shape (k, m), row = true label, column = action.
        labels: The k label names.
        actions: The m action names.
        greedy: Label index of the greedy completion, -1 when unparsed or missing, (n,).
        no_sample: Items without any usable sample (they get the fallback action), (n,).
        fallback: Index of the fallback action.
        ids: Item ids (for the per-item output).
        executable: Whether each item's samples can carry out each action, (n, m)
            (:func:`~taskcal_agents.decision.carried_actions`); ``None`` means all True.
        X: Calibrator inputs (belief features), (n, d) with d > k: under the ``unparsed:
            other`` policy the smoothed counts and unparsed share (d = k + 1), under
            grounded belief features also the ungrounded calls' share (one more column);
            rows sum to 1. ``None`` when calibrators read ``P``.
        n_clusters: For a task with ``answer_clusters``, the number of meaning clusters
            among each item's answers, (n,) (0: no answer); ``None`` otherwise.
        has_greedy: Whether a ``greedy`` row means anything: a greedy completion was drawn
            (not with ``--no-greedy``, e.g. one-pass beliefs, where it would be the fallback
            action on every item) and the label grades it (not under answer clustering,
            where the label grades the modal answer). ``False`` leaves the row out.
        executable_any: Under a task that sends only grounded calls
            (``grounding.execute: grounded``), what each item's samples could carry out
            if any call could be sent, (n, m); ``None`` otherwise.
        no_tools: For a tool decision, the items offered no tools, (n,); ``None``
            otherwise.
        inputs: For a task that reads the relevance features (``grounding.relevance``),
            each item's :func:`~taskcal_agents.decision._decider.raw_inputs` (p̂, the belief
            features' extra shares, the relevance features), (n, task.n_inputs), read by a
            calibrator of raw input columns (``reads_raw_columns``); ``None`` otherwise.
        counts: Each item's samples counted into the stopping rule's outcomes (per task
            outcome, then unparsed; :func:`~taskcal_agents.decision._adaptive.outcome_counts`),
            (n, len(task.outcomes) + 1); a row of zeros for a one-pass (logprob) belief.
            ``None`` when the counts are not multinomial (answer clusters) or not built.
        call_correct: For a tool decision whose items carry BFCL's possible answers, whether
            the call each item would execute (the runtime's representative call) is an
            accepted answer (1.0 / 0.0), (n,); NaN where the item has no possible answer or
            no call can be carried out; ``None`` when no item has one.
        call_action: The task's call action (``Task.call_action``), whose calls the tool
            metrics and the cost sweep score; ``None``: none.
    """

    P: NDArray[np.float64]
    y: NDArray[np.intp]
    cost: NDArray[np.float64]
    labels: tuple[str, ...]
    actions: tuple[str, ...]
    greedy: NDArray[np.intp]
    no_sample: NDArray[np.bool_]
    fallback: int
    ids: tuple[str, ...] = ()
    executable: NDArray[np.bool_] | None = None
    X: NDArray[np.float64] | None = None
    n_clusters: NDArray[np.intp] | None = None
    has_greedy: bool = True
    executable_any: NDArray[np.bool_] | None = None
    no_tools: NDArray[np.bool_] | None = None
    counts: NDArray[np.int64] | None = None
    inputs: NDArray[np.float64] | None = None
    call_correct: NDArray[np.float64] | None = None
    call_action: str | None = "tool_call"  # tool_decision()'s

    def __post_init__(self) -> None:
        n, k = self.P.shape
        m = len(self.actions)
        problems = []
        if self.executable is None:
            object.__setattr__(self, "executable", np.ones((n, m), dtype=bool))
        elif np.shape(self.executable) != (n, m):
            problems.append(
                f"executable must have shape (n, m) = ({n}, {m}), got {np.shape(self.executable)}"
            )
        if self.cost.shape != (k, m) or len(self.labels) != k:
            problems.append(
                f"cost has shape {self.cost.shape}, expected (k, m) = ({k}, {m}) for "
                f"{len(self.labels)} labels and {m} actions"
            )
        if self.y.shape != (n,) or self.greedy.shape != (n,) or self.no_sample.shape != (n,):
            problems.append(
                f"y, greedy and no_sample must have shape ({n},), got {self.y.shape}, "
                f"{self.greedy.shape} and {self.no_sample.shape}"
            )
        elif n and (self.y.min() < 0 or self.y.max() >= k):
            problems.append(f"y must hold label indices in [0, {k}), got {sorted(set(self.y))}")
        bad_x = self.X is not None and (self.X.ndim != 2 or self.X.shape[0] != n)
        if self.X is not None and (bad_x or self.X.shape[1] <= k):
            problems.append(
                f"X must have shape (n, d) with d > k = {k} (the belief features: counts plus "
                f"the unparsed or ungrounded shares) and n = {n}, got {self.X.shape}"
            )
        if self.inputs is not None and (
            self.inputs.ndim != 2 or self.inputs.shape[0] != n or self.inputs.shape[1] <= k
        ):
            problems.append(
                f"inputs must have shape (n, d) with d > k = {k} and n = {n}, got "
                f"{self.inputs.shape}"
            )
        if self.executable_any is not None and np.shape(self.executable_any) != (n, m):
            problems.append(
                f"executable_any must have shape (n, m) = ({n}, {m}), got "
                f"{np.shape(self.executable_any)}"
            )
        if self.call_correct is not None and np.shape(self.call_correct) != (n,):
            problems.append(
                f"call_correct must have shape ({n},), got {np.shape(self.call_correct)}"
            )
        if self.no_tools is not None and np.shape(self.no_tools) != (n,):
            problems.append(f"no_tools must have shape ({n},), got {np.shape(self.no_tools)}")
        if self.counts is not None and (np.ndim(self.counts) != 2 or np.shape(self.counts)[0] != n):
            problems.append(
                f"counts must have shape (n, outcomes + 1), got {np.shape(self.counts)}"
            )
        if self.n_clusters is not None and np.shape(self.n_clusters) != (n,):
            problems.append(f"n_clusters must have shape ({n},), got {np.shape(self.n_clusters)}")
        if not 0 <= self.fallback < m:
            problems.append(f"fallback must be an action index in [0, {m}), got {self.fallback}")
        if problems:
            msg = "EvalArrays are inconsistent: " + "; ".join(problems) + "."
            raise ConfigurationError(msg)

    @property
    def n(self) -> int:
        """The number of items."""
        return int(self.P.shape[0])

    @property
    def served(self) -> NDArray[np.bool_]:
        """Items with a usable sample: the rows a calibrator sees at run time."""
        return ~self.no_sample

    def label_to_action(self) -> NDArray[np.intp] | None:
        """Action index of each label (same name), or ``None`` when a label has no action."""
        index = {a: j for j, a in enumerate(self.actions)}
        if not all(label in index for label in self.labels):
            return None
        return np.array([index[label] for label in self.labels], dtype=np.intp)
