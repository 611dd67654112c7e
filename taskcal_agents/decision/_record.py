"""The record of one decision: :class:`Decision`, and the fields every decision fills.

A :class:`Decision` holds the action, the beliefs and expected costs behind it, the samples'
counts, groundings and clusters, the risk guard's verdict and the stopping rule's; the front
doors return it, attach it to messages and log it. :func:`evidence_fields` fills the fields
drawn from the samples alike for an MBR decision and a fallback one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from langchain_core.messages import AIMessage
from pydantic import BaseModel, ConfigDict, Field, field_serializer

from taskcal_agents.decision._belief import Belief
from taskcal_agents.decision._executability import ungrounded_flags
from taskcal_agents.decision._task import Task
from taskcal_agents.parsing import (
    RELEVANCE_FEATURES,
    AnswerClusters,
    SampleGrounding,
    call_agreement,
    modal_grounding,
)

__all__ = ["Decision", "evidence_fields", "logged_relevance", "modal_provenance", "with_repeats"]


class Decision(BaseModel):
    """One cost-aware decision and the evidence behind it."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    task: str
    """The task name."""
    action: str
    """The chosen action."""
    probs: dict[str, float]
    """The raw (smoothed) belief p̂ by label; under ``unparsed: other`` it sees all N
    samples, the unparsed ones spread evenly over the labels."""
    calibrated: dict[str, float]
    """The calibrated belief q by label: f(p̂), or f of the belief features for a
    calibrator fitted on them (equal to ``probs`` without calibrator or on fallback)."""
    expected_cost: dict[str, float]
    """The expected cost of each action under ``calibrated``."""
    counts: dict[str, float] = Field(default_factory=dict)
    """Sample counts by label (unparsed samples included only under ``"as:<label>"``)."""
    n_samples: int = Field(ge=0)
    """The number of samples drawn (unparsed ones included)."""
    n_unparsed: int = Field(ge=0)
    """The number of samples the parser could not map to a task label (repeats included)."""
    n_repeats: int = Field(default=0, ge=0)
    """The number of samples that repeated a tool call already made and answered in the
    current user turn (see :meth:`Decider.decide
    <taskcal_agents.decision.Decider.decide>`); counted as unparsed, never executed."""
    belief: Literal["samples", "one_pass"] = "samples"
    """How the belief was read: from N sampled completions, or from one forward pass's
    log-probabilities and one greedy completion (``probs`` then counts as
    ``counts``' pseudo-samples, and ``n_samples`` is the greedy completion)."""
    forward_passes: int | None = None
    """Under ``belief="one_pass"``: the forward passes the decision took (the choice's and
    the greedy completion's); ``None`` for sampled beliefs (one request with ``n``)."""
    greedy_label: str | None = None
    """Under ``belief="one_pass"``: the greedy completion's label (``None``: unparsed, a
    repeat, or none drawn), whose call is the one the decision can send; ``n_ungrounded``
    then says whether that call is ungrounded (1) or not (0)."""
    fallback: bool = False
    """Whether ``action`` is the task's fallback action rather than the MBR action."""
    fallback_reason: str | None = None
    """Why the fallback was used (no samples, all unparsed, model error)."""
    message: AIMessage | None = None
    """The representative message for the action: the most frequent canonical tool call
    for a tool-call action, the most typical sampled text for other sampled labels (e.g.
    the clarifying question), ``task.abstain_text`` for the abstain action,
    ``task.ask_text`` for the ask action without a sampled question; ``None`` when the
    action has no sample to represent it."""
    samples: list[AIMessage] | None = None
    """The sampled messages (only on request)."""
    sample_labels: list[str | None] | None = None
    """The parsed label of each sample (``None``: unparsed), with ``samples``; under answer
    clustering the label it counted as (the answer label: in the modal cluster)."""
    n_clusters: int | None = None
    """Under answer clustering: the number of meaning clusters among the sampled answers
    (``None`` for tasks that do not cluster)."""
    n_ungrounded: int | None = None
    """Under the task's ``grounding``: the ``tool_call`` samples whose calls are ungrounded
    (a required argument missing, or a value the conversation does not support; see
    :mod:`taskcal_agents.parsing._grounding`); ``None`` for a task without grounding."""
    call_agreement: int | None = None
    """Under the task's ``grounding``: how many samples make the modal call (same tools,
    same normalised arguments)."""
    n_untrusted: int | None = None
    """Under the task's ``trust`` policy: the ``tool_call`` samples whose grounded calls take
    a value from a source the policy does not trust (never sent); ``None`` without a
    policy."""
    trust_violations: list[dict[str, Any]] = Field(default_factory=list)
    """Under the task's ``trust`` policy, for the modal untrusted call: each value no
    trusted source supplies, its kind, its sources and the policy entry that fired
    (:meth:`~taskcal_agents.parsing.TrustViolation.to_dict`); empty otherwise."""
    provenance: list[dict[str, Any]] | None = None
    """Under the task's ``grounding``: the modal sampled call's arguments with their kind,
    grounding status and sources (:class:`~taskcal_agents.parsing.Source` labels:
    ``"user"``, ``"tool:search_web"``, ``"inferred:default"``), one entry per call, and
    under a ``trust`` policy its ``warrant`` (:meth:`~taskcal_agents.parsing.Warrant.to_dict`);
    ``None`` without grounding or without a sampled call."""
    effect: str | None = None
    """Under the task's ``effects``: the effect of the call the decision would send (``read``,
    ``write``, ``irreversible``; the task's default when no call can be sent), else ``None``."""
    effect_source: str | None = None
    """Where :attr:`effect` came from: ``"task"``, ``"mcp"``, ``"metadata"``, ``"tags"`` or
    ``"default"`` (see :class:`~taskcal_agents.decision.ToolEffects`)."""
    call_cost: list[float] | None = None
    """Under the task's ``effects``: the call action's cost column the decision used (one cost
    per label, the effect's ``call_cost``)."""
    approved: bool = False
    """Whether the call was sent because the user approved exactly it (a yes to the
    library's confirmation, or an approve or edit at a human-in-the-loop interrupt): no
    sample was drawn."""
    missing_arguments: list[str] = Field(default_factory=list)
    """For an ask decision: the arguments the question asks for (those the sampled calls
    lacked or invented), in the order asked; empty otherwise."""
    relevance: dict[str, float] | None = None
    """The relevance features (:data:`~taskcal_agents.parsing._relevance.RELEVANCE_FEATURES`)
    when the task reads them (``grounding.relevance``), else ``None``; ``refit`` rebuilds
    the calibrator input from them."""
    calibrator_id: str | None = None
    """The content id of the calibrator artefact that decided
    (:attr:`~taskcal_agents.decision.CalibratorArtefact.content_id`, as the decision
    log's ``artefact_id``); ``None`` on the raw belief or by a calibrator given without an
    artefact."""
    # Adaptive N (taskcal_agents.decision._adaptive), set by the front doors that sample in rounds.
    stopped_early: bool = False
    """Whether adaptive N's stopping rule ended the draw before N samples were requested
    (``n_samples`` is what was drawn, unparsed samples included)."""
    change_probability: float | None = None
    """Under adaptive N, the estimated probability, at the last check, that drawing up to
    N would change the action (0 at N; ``None`` without adaptive N)."""
    unguarded_action: str | None = None
    """The action before the risk guard: the MBR action (or the cheapest one that can be
    carried out, or the fallback action); equal to ``action`` unless ``guarded``."""
    guard: str | None = None
    """The risk limit in force (its spec, e.g. ``"tool_call_when_not:0.05"``), or ``None``
    (see :mod:`taskcal_agents.decision._risk_control`)."""
    guard_threshold: float | None = None
    """The guard's threshold λ̂ (``inf``: no threshold was certified, it always
    downgrades; ``null`` in the JSON form), or ``None`` without a guard."""
    guard_score: float | None = None
    """The score s of ``unguarded_action`` that the guard compared with λ̂ (the calibrated
    probability that it is a least-cost action, or 1 − its scaled expected cost), or
    ``None`` when the guard did not look at it."""
    guarded: bool = False
    """Whether the guard downgraded ``unguarded_action`` to the safe ``action``."""
    decision_id: str | None = None
    """The id under which a front door's decision log recorded this decision (pass it to
    :func:`~taskcal_agents.production.record_outcome`), or ``None`` when not logged."""

    @field_serializer("guard_threshold", when_used="json")
    def _finite_threshold(self, value: float | None) -> float | None:
        return value if value is None or np.isfinite(value) else None

    def to_metadata(self) -> dict[str, Any]:
        """Return a JSON-able dict without the messages (for ``response_metadata``)."""
        return self.model_dump(mode="json", exclude={"message", "samples"})


def evidence_fields(
    task: Task,
    belief: Belief,
    messages: Sequence[AIMessage],
    labels: Sequence[str | None],
    *,
    return_samples: bool,
    clusters: AnswerClusters | None,
    groundings: Sequence[SampleGrounding] | None,
) -> dict[str, Any]:
    """The :class:`Decision` fields drawn from the belief's counts and the samples.

    The counts, the samples and their labels (only with ``return_samples``), the number of
    answer clusters and, under grounding, the ungrounded tool calls and the calls' agreement.
    """
    fields: dict[str, Any] = {
        "counts": dict(zip(task.labels, belief.counts.tolist(), strict=True)),
        "n_samples": belief.n,
        "n_unparsed": belief.n_unparsed,
        "samples": list(messages) if return_samples else None,
        "sample_labels": list(labels) if return_samples else None,
        "n_clusters": None if clusters is None else clusters.n_clusters,
    }
    if groundings is None:
        return fields
    flags = ungrounded_flags(groundings) or []
    fields["n_ungrounded"] = sum(
        bad and label == task.call_action for label, bad in zip(labels, flags, strict=True)
    )
    fields["call_agreement"] = call_agreement(groundings)
    fields["provenance"] = modal_provenance(groundings)
    if task.trust is not None:
        fields["n_untrusted"] = sum(
            label == task.call_action and g.grounded and not g.trusted
            for label, g in zip(labels, groundings, strict=True)
        )
        broken = modal_grounding([g for g in groundings if g.grounded and not g.trusted])
        if broken is not None:
            fields["trust_violations"] = [v.to_dict() for v in broken.violations]
    return fields


def modal_provenance(groundings: Sequence[SampleGrounding]) -> list[dict[str, Any]] | None:
    """The provenance of the modal sampled call's arguments, as :attr:`Decision.provenance`."""
    modal = modal_grounding(groundings)
    if modal is None:
        return None
    return [
        {
            "tool": call.name,
            "arguments": {
                a.name: {
                    "kind": a.kind,
                    "status": a.status,
                    "how": a.how,
                    "sources": [s.label for s in a.sources],
                }
                for a in call.arguments
            },
            **({"warrant": call.warrant.to_dict()} if call.warrant is not None else {}),
        }
        for call in modal.calls
    ]


def logged_relevance(relevance: Sequence[float] | None) -> dict[str, float] | None:
    """The relevance features by name, as :attr:`Decision.relevance` records them."""
    if relevance is None:
        return None
    return dict(zip(RELEVANCE_FEATURES, map(float, relevance), strict=True))


def with_repeats(decision: Decision, n_repeats: int, belief: Belief) -> Decision:
    """``decision`` with the number of samples that repeated an answered tool call.

    A fallback taken because every sample was unparsed says so in its reason.
    """
    if not n_repeats:
        return decision
    update: dict[str, Any] = {"n_repeats": n_repeats}
    if decision.fallback and belief.n_parsed == 0:
        update["fallback_reason"] = (
            f"{decision.fallback_reason} ({n_repeats} repeated a tool call already made "
            "and answered)"
        )
    return decision.model_copy(update=update)
