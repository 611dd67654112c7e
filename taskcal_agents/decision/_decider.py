"""Decision: calibrate the belief and take the minimum-Bayes-risk (MBR) action.

Given the belief p̂ over the task's labels, a calibrator f gives q = f(p̂), and the action
is argmin_a Σ_ℓ q(ℓ)·C[ℓ, a] among the actions the samples can carry out
(:func:`executable_mbr`, :func:`carried_actions`: a tool call needs a sample that makes
one). Under the task's ``unparsed: other`` policy a calibrator may instead read the k + 1
belief features (p̂'s counts plus the unparsed share, see
:attr:`taskcal_agents.decision.Belief.features`); which one it reads follows from its
``n_features_in_``. :class:`Decider` validates the task/calibrator pair once
and then decides in microseconds; :func:`decide_from_messages` is the one-shot form used
by the workflow and the agent middleware (pure: no model call).

For a task with ``answer_clusters`` (open answers) the samples are first clustered by
meaning (:func:`~taskcal_agents.parsing._answer_clusters.cluster_samples`): the belief is the
modal cluster's share and the answer action replies with the modal cluster's
representative.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np
from langchain_core.messages import AIMessage
from numpy.typing import NDArray

from calibrators import expected_costs as _expected_costs
from calibrators import least_cost_actions
from taskcal_agents.decision import _calibration, _choice, _reply, _samples
from taskcal_agents.decision._artefact import ResolvedCalibrator, check_calibrator
from taskcal_agents.decision._belief import DEFAULT_ALPHA, Belief, check_alpha
from taskcal_agents.decision._calibration import (
    item_relevance,
    raw_inputs,
    reads_features,
    reads_inputs,
)
from taskcal_agents.decision._choice import ActionChoice
from taskcal_agents.decision._effects import call_effect
from taskcal_agents.decision._executability import (
    TOOL_CALL_ACTION,
    carried_actions,
    carries_out,
    executable_mbr,
    grounded_flags,
    mbr_action,
    replacement_reason,
    ungrounded_flags,
)
from taskcal_agents.decision._one_pass import read_one_pass
from taskcal_agents.decision._record import (
    Decision,
    evidence_fields,
    logged_relevance,
    with_repeats,
)
from taskcal_agents.decision._risk_control import RiskControl
from taskcal_agents.decision._stopping_prior import StoppingPrior
from taskcal_agents.decision._task import Task
from taskcal_agents.decision._terms import DecisionTerms, approvable, decision_terms
from taskcal_agents.errors import ConfigurationError, LabelMismatchError
from taskcal_agents.parsing import (
    AnswerClusters,
    EntailmentJudgeFactory,
    GroundingContext,
    SampleGrounding,
)

__all__ = [
    "TOOL_CALL_ACTION",
    "ActionChoice",
    "Decider",
    "Decision",
    "carried_actions",
    "carries_out",
    "decide_from_messages",
    "executable_mbr",
    "grounded_flags",
    "item_relevance",
    "mbr_action",
    "raw_inputs",
    "ungrounded_flags",
]


class Decider:
    """Task + calibrator + α, validated once; ``decide`` is the hot path.

    Args:
        task: The task.
        calibrator: A fitted calibrator, or ``None`` to decide on the raw belief. It reads
            p̂, shape ``(n, k)``, or, when its ``n_features_in_`` is k + 1 under the
            task's ``unparsed: other`` policy, the belief features (counts plus the
            unparsed share).
        alpha: The Dirichlet smoothing prior of the belief (use the value the calibrator
            was fitted with).
        judge: For a task whose ``answer_clusters`` method is ``"entailment"``: makes the
            judge of a question, e.g. ``functools.partial(entailment_judge, sampler)``
            (:func:`~taskcal_agents.parsing._answer_clusters.entailment_judge`); not used otherwise.
        risk_control: A calibrated risk limit
            (:class:`~taskcal_agents.decision._risk_control.RiskControl`, e.g. the artefact's): an
            MBR decision of a guarded action whose score is below its threshold is
            downgraded to the cheapest safe action (ask / abstain) under q. Fallback
            decisions are not guarded (as in the calibration). ``None``: no guard.
        stopping_prior: Adaptive N's stopping prior
            (:class:`~taskcal_agents.decision._stopping_prior.StoppingPrior`, e.g. the artefact's);
            ``None``: none (adaptive N then draws all N samples).
        calibrator_id: The content id of the calibrator's artefact, stamped on each
            decision (``Decision.calibrator_id``); :meth:`from_resolved` sets it.

    Raises:
        ConfigurationError: If the calibrator or alpha is invalid, the task clusters
            answers by entailment and no judge is given, or the risk control does not
            fit the task.
        LabelMismatchError: If the calibrator's labels differ from the task's.
    """

    __slots__ = (
        "_actions",
        "_cost",
        "_features",
        "_guard",
        "_inputs",
        "_judge",
        "_labels",
        "alpha",
        "calibrator",
        "calibrator_id",
        "risk_control",
        "stopping_prior",
        "task",
    )

    def __init__(
        self,
        task: Task,
        calibrator: Any = None,
        *,
        alpha: float = DEFAULT_ALPHA,
        judge: EntailmentJudgeFactory | None = None,
        risk_control: RiskControl | None = None,
        stopping_prior: StoppingPrior | None = None,
        calibrator_id: str | None = None,
    ) -> None:
        if not isinstance(task, Task):
            msg = f"Decider parameter 'task' must be a Task, got {task!r}."
            raise ConfigurationError(msg)
        check_calibrator(task, calibrator)
        if judge is not None and not callable(judge):
            msg = (
                f"Decider parameter 'judge' must be callable (question= → entails(a, b)) or "
                f"None, got {judge!r}."
            )
            raise ConfigurationError(msg)
        clusters = task.answer_clusters
        if clusters is not None and clusters.method == "entailment" and judge is None:
            msg = (
                f"Decider for task {task.name!r}: answer_clusters method 'entailment' asks the "
                "served model whether two answers mean the same, so it needs a judge; pass "
                "judge=functools.partial(entailment_judge, sampler) or use method 'lexical'."
            )
            raise ConfigurationError(msg)
        self.task = task
        self.calibrator = calibrator
        self.alpha = check_alpha(alpha, owner="Decider")
        self._judge = judge
        self._cost = task.cost_matrix()
        self._labels = tuple(task.labels)
        self._actions = tuple(task.action_list)
        self._features = reads_features(task, calibrator)
        self._inputs = reads_inputs(task, calibrator)
        if risk_control is not None and not isinstance(risk_control, RiskControl):
            msg = (
                f"Decider parameter 'risk_control' must be a RiskControl (from "
                f"calibrate_risk or a calibrator artefact) or None, got {risk_control!r}."
            )
            raise ConfigurationError(msg)
        self.risk_control = risk_control
        self._guard = None if risk_control is None else risk_control.guard(task)
        if stopping_prior is not None:
            if not isinstance(stopping_prior, StoppingPrior):
                msg = (
                    f"Decider parameter 'stopping_prior' must be a StoppingPrior (from "
                    f"fit_stopping_prior or a calibrator artefact) or None, got "
                    f"{stopping_prior!r}."
                )
                raise ConfigurationError(msg)
            stopping_prior.for_task(task)  # fitted for this task's outcomes
        self.stopping_prior = stopping_prior
        self.calibrator_id = calibrator_id

    @classmethod
    def from_resolved(
        cls,
        task: Task,
        resolved: ResolvedCalibrator,
        *,
        judge: EntailmentJudgeFactory | None = None,
        risk_control: RiskControl | None = None,
    ) -> Decider:
        """The Decider of a front door: ``resolved``'s calibrator, α and artefact settings.

        The artefact's risk control (unless ``risk_control`` replaces it) and its stopping
        prior when fitted for ``task``'s outcomes
        (:meth:`~taskcal_agents.decision._artefact.ResolvedCalibrator.stopping_prior_for`).
        Every front door builds its Deciders with it, so none drops an artefact setting.
        """
        return cls(
            task, resolved.calibrator, alpha=resolved.alpha, judge=judge,
            risk_control=resolved.risk_control if risk_control is None else risk_control,
            stopping_prior=resolved.stopping_prior_for(task),
            calibrator_id=None if resolved.artefact is None else resolved.artefact.content_id,
        )  # fmt: skip

    @property
    def reads_features(self) -> bool:
        """Whether the calibrator reads the k + 1 belief features rather than p̂."""
        return self._features

    @property
    def reads_inputs(self) -> bool:
        """Whether the calibrator reads :func:`raw_inputs` (with the relevance features)."""
        return self._inputs

    def calibrator_input(
        self, belief: Belief, relevance: Sequence[float] | None = None
    ) -> NDArray[np.float64]:
        """Return what the calibrator reads: p̂, the belief features, or :func:`raw_inputs`.

        Args:
            belief: The belief.
            relevance: The decision's relevance features (:func:`item_relevance`), read
                only by a calibrator of :func:`raw_inputs`.

        Raises:
            ConfigurationError: If the calibrator reads the features but ``belief`` was
                built without the ``"other"`` policy, or reads the relevance features and
                none are given.
        """
        return _calibration.calibrator_input(
            self.task, self.calibrator, belief, relevance,
            on_features=self._features, on_inputs=self._inputs,
        )  # fmt: skip

    def calibrate(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        """Return q = f(x) (x itself without calibrator), renormalised to sum to 1.

        Args:
            x: The calibrator input (see :meth:`calibrator_input`): p̂, or the k + 1 belief
                features for a calibrator fitted on them; one row ``(d,)`` or a matrix
                ``(n, d)`` (one ``predict_proba`` call, q of the same shape).

        Raises:
            ConfigurationError: If the calibrator returns a wrongly shaped or invalid row.
        """
        return _calibration.calibrate(self.task, self.calibrator, x)

    def decide(
        self,
        messages: Sequence[AIMessage],
        *,
        tool_names: Sequence[str] | None = None,
        return_samples: bool = False,
        question: str | None = None,
        answered_calls: Collection[str] = (),
        context: GroundingContext | None = None,
    ) -> Decision:
        """Parse the samples, ground their calls and decide.

        A sample labelled ``tool_call`` whose call was already made and answered in the
        current user turn (its key in ``answered_calls``) is a *repeat*. It is counted as
        unparsed, under the task's ``unparsed`` policy, and in ``Decision.n_repeats``:
        it states no new decision to act on (the model did not take the result in), so
        it is never evidence for calling and never the representative call, hence never
        executed again; under ``"other"`` it weakens the belief, under
        ``"as:<label>"`` it counts as that label, and when every sample repeats the
        decision is the task's fallback with that reason. It is not dropped: ``n_samples``
        and ``n_unparsed`` keep it.

        Args:
            messages: The sampled completions.
            tool_names: The names of the tools offered to the calls that drew them: a call
                to any other tool is unparsed and never sent. ``None``: any tool (or the
                task parser's own ``tool_names`` option).
            return_samples: Keep the samples and their labels in the decision.
            question: Under answer clustering, the question the samples answer
                (:func:`~taskcal_agents.parsing._answer_clusters.question_of` of the request), as
                at sampling time; ignored otherwise.
            answered_calls: The calls already made and answered in the current user turn
                (:func:`~taskcal_agents.parsing._tool_turns.answered_tool_calls` of the request).
            context: The request's tools and conversation
                (:class:`~taskcal_agents.parsing.GroundingContext`), which a task with
                ``grounding`` checks each sampled call against; ignored otherwise.

        Returns:
            The decision; the fallback action (flagged, with its reason) when there are
            no samples or none could be parsed.

        Raises:
            ConfigurationError: The task grounds its calls and ``context`` is missing.
        """
        labels, n_repeats, groundings = self.read_samples(
            messages, tool_names=tool_names, answered_calls=answered_calls, context=context
        )
        clusters, labels = _samples.cluster_with_judge(
            self.task, messages, labels, question, self._judge
        )
        belief = self.task.belief_from_outcomes(
            self.task.sample_outcomes(labels, ungrounded_flags(groundings)), alpha=self.alpha
        )
        decision = self.decide_belief(
            belief,
            messages=messages,
            labels=labels,
            tool_names=tool_names,
            return_samples=return_samples,
            clusters=clusters,
            groundings=groundings,
            relevance=item_relevance(self.task, messages, labels, context, groundings),
            context=context,
        )
        return with_repeats(decision, n_repeats, belief)

    def decide_one_pass(
        self,
        probs: Sequence[float] | NDArray[np.float64],
        greedy: AIMessage | None,
        *,
        forward_passes: int,
        tool_names: Sequence[str] | None = None,
        return_samples: bool = False,
        answered_calls: Collection[str] = (),
        context: GroundingContext | None = None,
    ) -> Decision:
        """Decide from a one-pass belief and one greedy completion.

        The greedy completion is read as :meth:`decide` reads a sample (parsed, a repeat
        found, its call grounded); the belief and the relevance features are
        :func:`~taskcal_agents.decision._one_pass.read_one_pass`'s. The call sent, if any, is
        the greedy completion's.

        Args:
            probs: The one pass's probability per task label
                (:class:`~taskcal_agents.sampling.OnePassBelief`'s ``probs``).
            greedy: The greedy completion (``None``: none was drawn).
            forward_passes: The forward passes behind ``probs`` and ``greedy``, recorded.
            tool_names: As :meth:`decide`.
            return_samples: As :meth:`decide`.
            answered_calls: As :meth:`decide`.
            context: As :meth:`decide`.

        Raises:
            ConfigurationError: ``probs`` is not one probability per label, or the task
                grounds its calls and ``context`` is missing.
        """
        messages = [] if greedy is None else [greedy]
        labels, n_repeats, groundings = self.read_samples(
            messages, tool_names=tool_names, answered_calls=answered_calls, context=context
        )
        belief, relevance = read_one_pass(
            self.task, probs, messages, labels, groundings, context, alpha=self.alpha
        )
        decision = self.decide_belief(
            belief,
            messages=messages,
            labels=labels,
            tool_names=tool_names,
            return_samples=return_samples,
            groundings=groundings,
            relevance=relevance,
            context=context,
        )
        update: dict[str, Any] = {
            "belief": "one_pass",
            "forward_passes": int(forward_passes),
            "greedy_label": labels[0] if labels else None,
            "n_samples": len(messages),
            "n_unparsed": sum(label is None for label in labels),
            "n_repeats": n_repeats,
        }
        return decision.model_copy(update=update)

    def read_samples(
        self,
        messages: Sequence[AIMessage],
        *,
        tool_names: Sequence[str] | None = None,
        answered_calls: Collection[str] = (),
        context: GroundingContext | None = None,
    ) -> tuple[list[str | None], int, list[SampleGrounding] | None]:
        """Parse and ground the samples as :meth:`decide` reads them.

        The labels of :meth:`parse_samples` and the groundings of :meth:`ground`; under
        grounding a call is also a repeat when the call that would be *sent* (invented
        optional arguments dropped) was already made and answered. The adaptive-N stopping
        rule reads the samples through here too.

        Returns:
            The labels (``None``: unparsed or a repeat), the number of repeats, and the
            groundings (``None`` for a task without grounding).
        """
        return _samples.read_samples(
            self.task, messages,
            tool_names=tool_names, answered_calls=answered_calls, context=context,
        )  # fmt: skip

    def ground(
        self, messages: Sequence[AIMessage], context: GroundingContext | None
    ) -> list[SampleGrounding] | None:
        """Ground each sample's calls under the task's ``grounding`` (``None`` without it).

        Raises:
            ConfigurationError: The task grounds its calls and ``context`` is ``None``.
        """
        return _samples.ground_samples(self.task, messages, context)

    def parse_samples(
        self,
        messages: Sequence[AIMessage],
        *,
        tool_names: Sequence[str] | None = None,
        answered_calls: Collection[str] = (),
    ) -> tuple[list[str | None], int]:
        """The label of each sample as :meth:`decide` reads it, and the number of repeats.

        A ``tool_call`` sample that repeats an answered call is ``None`` (see
        :meth:`decide`); the adaptive-N stopping rule parses through here too.
        """
        return _samples.parse_samples(
            self.task, messages, tool_names=tool_names, answered_calls=answered_calls
        )

    def decide_belief(
        self,
        belief: Belief,
        *,
        messages: Sequence[AIMessage] = (),
        labels: Sequence[str | None] | None = None,
        tool_names: Sequence[str] | None = None,
        return_samples: bool = False,
        clusters: AnswerClusters | None = None,
        groundings: Sequence[SampleGrounding] | None = None,
        relevance: Sequence[float] | None = None,
        context: GroundingContext | None = None,
    ) -> Decision:
        """Decide from a belief (``messages``/``labels`` only pick the message).

        Args:
            belief: The belief over the task labels.
            messages: The samples behind the belief, if any.
            labels: Their labels as g_T reads them (``None``: unparsed), aligned with
                ``messages``; under answer clustering, the labels after clustering.
            tool_names: The offered tools (see :meth:`decide`).
            return_samples: Keep the samples and their labels in the decision.
            clusters: Under answer clustering, the clusters of ``messages``: the answer
                action replies with the modal cluster's representative.
            groundings: Under the task's ``grounding``, each sample's
                (:meth:`ground`): only grounded calls are sent (``execute: grounded``),
                and the ask action's question names what the calls lacked.
            relevance: The relevance features (:func:`item_relevance`), when the task
                reads them: recorded in the decision, and read by a calibrator of
                :func:`raw_inputs`.
            context: The request's tools and conversation: under the task's ``effects``,
                the effects the tools declare.

        Returns:
            The decision.

        Raises:
            LabelMismatchError: The belief is not over the task's labels, in their order.
        """
        if list(belief.labels) != list(self._labels):
            msg = (
                f"belief labels {list(belief.labels)!r} differ from task {self.task.name!r}'s "
                f"labels {list(self._labels)!r}; a one-pass belief read over other choices is "
                "relabelled with LogprobBelief.to_belief(labels=task.labels)."
            )
            raise LabelMismatchError(msg, expected=list(self._labels), got=list(belief.labels))
        if belief.n_parsed == 0:
            if belief.n == 0:
                why = "no samples were drawn"
            else:
                why = f"all {belief.n} samples were unparsed by parser {self.task.parser.name!r}"
            decision = self.fallback(
                why, belief=belief, messages=messages, labels=labels,
                tool_names=tool_names, return_samples=return_samples, clusters=clusters,
                groundings=groundings,
            )  # fmt: skip
            if relevance is None:
                return decision
            return decision.model_copy(update={"relevance": logged_relevance(relevance)})
        p = belief.probs
        q = self.calibrate(self.calibrator_input(belief, relevance))
        if labels is None:
            labels = [self.task.parse_completion(m, tool_names=tool_names) for m in messages]
        # The MBR action; if only a sample can carry it out (a tool call with its arguments)
        # and none does, take the cheapest action that can be carried out, and say so.
        terms = decision_terms(
            self.task, messages, labels, tool_names=tool_names, groundings=groundings,
            context=context,
        )  # fmt: skip
        choice = self.choose_actions(q[None, :], terms.executable[None, :], cost=terms.cost)
        ec = choice.expected_costs[0]
        unguarded = self._actions[int(choice.unguarded[0])]
        reason: str | None = None
        if choice.replaced[0]:
            unrestricted = self._actions[int(least_cost_actions(ec[None, :])[0])]
            reason = replacement_reason(unrestricted, unguarded, groundings, self.task.call_action)
        action = self._actions[int(choice.actions[0])]
        if action == self.task.ask_action and terms.nothing_to_ask:
            # Nothing to ask about: the cheapest action that can be taken other than asking
            # or sending the call unasked (confirming it, or refusing).
            others = [
                i for i, a in enumerate(self._actions)
                if terms.executable[i] and a not in (self.task.ask_action, self.task.call_action)
            ]  # fmt: skip
            if others:
                action = self._actions[min(others, key=lambda i: (ec[i], i))]
        return self._record(
            action, belief, messages, labels,
            tool_names=tool_names, return_samples=return_samples, clusters=clusters,
            groundings=groundings, fallback=reason is not None, fallback_reason=reason,
            probs=dict(zip(self._labels, p.tolist(), strict=True)),
            calibrated=dict(zip(self._labels, q.tolist(), strict=True)),
            expected_cost=dict(zip(self._actions, ec.tolist(), strict=True)),
            unguarded_action=unguarded, relevance=logged_relevance(relevance),
            **_choice.guard_fields(choice, self._guard, self.risk_control),
            **self._effect_fields(terms),
        )  # fmt: skip

    def _effect_fields(self, terms: DecisionTerms) -> dict[str, Any]:
        """The Decision's effect fields (none without the task's ``effects``)."""
        if terms.effect is None:
            return {}
        call = self._actions.index(str(self.task.call_action))
        return {
            "effect": terms.effect.effect,
            "effect_source": terms.effect.source,
            "call_cost": terms.cost[:, call].tolist(),
        }

    def approved(
        self, context: GroundingContext, *, tool_names: Sequence[str] | None = None
    ) -> Decision:
        """The decision to send exactly the calls the user approved (no sample is drawn).

        ``context.approved`` holds them: the user's plain yes right after the library's
        confirmation question (:attr:`~taskcal_agents.parsing.GroundingContext.approved`).
        The decision's beliefs are the user's word: ``tool_call`` with probability 1.

        Raises:
            ConfigurationError: ``context`` approves no call the task may send as it is
                (:func:`~taskcal_agents.decision._terms.approvable`: each call to an offered
                tool, grounded and trusted), or the task has no call action.
        """
        calls = context.approved
        call = self.task.call_action
        if not calls or call is None or not approvable(self.task, context, tool_names):
            msg = (
                f"Decider.approved for task {self.task.name!r} needs a conversation whose last "
                "message approves a confirmed call to an offered tool, grounded and trusted, "
                "and a task with a call action."
            )
            raise ConfigurationError(msg)
        message = AIMessage(
            content="",
            tool_calls=[
                {"name": c["name"], "args": dict(c["args"]),
                 "id": f"call_{uuid.uuid4().hex[:24]}", "type": "tool_call"}
                for c in calls
            ],
        )  # fmt: skip
        sure = {label: float(label == call) for label in self._labels}
        effect_fields: dict[str, Any] = {}
        if self.task.effects is not None:
            effect = call_effect([c["name"] for c in calls], self.task.effects, context)
            cost = self.task.cost_matrix(effect.effect)
            effect_fields = self._effect_fields(DecisionTerms(np.ones(0, bool), effect, cost))
        cost = self.task.cost_matrix(effect_fields.get("effect"))
        ec = _expected_costs(np.array(list(sure.values())), cost, check_input=False)
        return Decision(
            task=self.task.name, action=call, message=message, probs=sure, calibrated=dict(sure),
            expected_cost=dict(zip(self._actions, ec.tolist(), strict=True)),
            n_samples=0, n_unparsed=0, approved=True, unguarded_action=call,
            calibrator_id=self.calibrator_id, **effect_fields,
        )  # fmt: skip

    def _record(
        self,
        action: str,
        belief: Belief,
        messages: Sequence[AIMessage],
        labels: Sequence[str | None],
        *,
        tool_names: Sequence[str] | None,
        return_samples: bool,
        clusters: AnswerClusters | None,
        groundings: Sequence[SampleGrounding] | None,
        **fields: Any,
    ) -> Decision:
        """The decision to take ``action``: its reply message and evidence, plus ``fields``."""
        message, asked = _reply.reply_message(
            self.task, action, messages, labels, tool_names, clusters, groundings
        )
        evidence = evidence_fields(self.task, belief, messages, labels,
                                   return_samples=return_samples, clusters=clusters,
                                   groundings=groundings)  # fmt: skip
        return Decision(
            task=self.task.name, action=action, message=message,
            missing_arguments=list(asked), calibrator_id=self.calibrator_id,
            **evidence, **fields,
        )  # fmt: skip

    def ask_message(
        self,
        messages: Sequence[AIMessage],
        labels: Sequence[str | None],
        groundings: Sequence[SampleGrounding],
    ) -> tuple[AIMessage, tuple[str, ...]]:
        """The ask action's message under grounding, and the arguments it asks for.

        The arguments are those the ungrounded calls lack
        (:func:`~taskcal_agents.parsing._grounding.missing_arguments`). A sampled clarifying
        question (a sample g_T reads as the ask label that makes no call and writes none
        out, :func:`~taskcal_agents.parsing._tool_calls.has_written_call`) is preferred when
        it names one of them, or when no call lacked anything; otherwise the question is
        built from the tool's schema (:func:`~taskcal_agents.parsing._grounding.question_for`), and
        without either the task's ``ask_text``.
        """
        return _reply.ask_message(self.task, messages, labels, groundings)

    def choose_actions(
        self,
        Q: NDArray[np.float64],
        executable: NDArray[np.bool_],
        *,
        cost: NDArray[np.float64] | None = None,
    ) -> ActionChoice:
        """The actions the Decider takes on calibrated beliefs: executable MBR, then the guard.

        The one map from q to the returned action, shared by :meth:`decide_belief` and
        the adaptive-N stopping rule, so the rule watches
        the action the runtime returns. Rows without a parsed sample take the fallback
        action instead (not handled here; fallback decisions are not guarded).

        Args:
            Q: Calibrated beliefs, shape ``(n, k)`` (:meth:`calibrate`).
            executable: Which actions each row's samples can carry out, shape ``(n, m)``
                (:func:`carried_actions`).
            cost: The cost matrix ``(k, m)``, or one per row ``(n, k, m)`` (under the task's
                ``effects``, that of each row's call, :func:`decision_terms`); ``None``: the
                task's.

        Returns:
            The final and unguarded action indices, with ``replaced``, ``guarded`` and
            the guard's scores.

        Raises:
            ConfigurationError: If the shapes do not match.
        """
        return _choice.choose_actions(
            self.task, self._cost if cost is None else cost, Q, executable, self._guard,
            self.risk_control,
        )  # fmt: skip

    def fallback(
        self,
        reason: str,
        *,
        belief: Belief | None = None,
        messages: Sequence[AIMessage] = (),
        labels: Sequence[str | None] | None = None,
        tool_names: Sequence[str] | None = None,
        return_samples: bool = False,
        clusters: AnswerClusters | None = None,
        groundings: Sequence[SampleGrounding] | None = None,
    ) -> Decision:
        """Return the task's fallback decision, flagged with ``reason``.

        ``probs`` and ``calibrated`` hold the smoothed belief (uniform without samples);
        ``expected_cost`` is computed under it for reference.
        """
        if belief is None:
            belief = Belief(np.zeros(len(self._labels)), self._labels, n=len(messages),
                            n_unparsed=len(messages), alpha=self.alpha)  # fmt: skip
        p = belief.probs
        ec = _expected_costs(p, self._cost, check_input=False)
        action = self.task.default_action
        if labels is None:
            labels = [self.task.parse_completion(m, tool_names=tool_names) for m in messages]
        probs = dict(zip(self._labels, p.tolist(), strict=True))
        return self._record(
            action, belief, messages, labels, tool_names=tool_names,
            return_samples=return_samples, clusters=clusters, groundings=groundings,
            probs=probs, calibrated=dict(probs),
            expected_cost=dict(zip(self._actions, ec.tolist(), strict=True)),
            fallback=True, fallback_reason=reason, unguarded_action=action,
            guard=None if self.risk_control is None else str(self.risk_control.spec),
            guard_threshold=None if self.risk_control is None else self.risk_control.threshold,
        )  # fmt: skip

    def representative(
        self,
        action: str,
        messages: Sequence[AIMessage],
        labels: Sequence[str | None],
        *,
        tool_names: Sequence[str] | None = None,
        clusters: AnswerClusters | None = None,
        groundings: Sequence[SampleGrounding] | None = None,
    ) -> AIMessage | None:
        """Return the message that carries out ``action``.

        Abstain action → ``task.abstain_text``. With ``clusters`` (answer clustering) and
        a modal cluster, the answer action → the modal cluster's representative sample
        (:attr:`~taskcal_agents.parsing._answer_clusters.AnswerClusters.representative`, the answer
        a graded item's label was graded on). Otherwise, among the samples labelled
        ``action`` (for a sampled action, only those that carry it out, see
        :func:`carries_out`, so that it agrees with :func:`carried_actions`): the first
        sample making the most frequent canonical tool call (name plus sorted-key JSON
        arguments) if any sample makes a tool call, its calls as real ``tool_calls`` with
        ids (:func:`~taskcal_agents.parsing._tool_calls.with_tool_calls`: a call written in the
        content is moved out of it), else the first sample with the most frequent
        normalised text. Under the task's ``grounding`` (``groundings``, one per sample)
        the calls are compared as they are sent, invented optional arguments dropped
        (:func:`~taskcal_agents.parsing._grounding.grounded_message`), and under ``execute:
        grounded`` only the samples whose calls are grounded are candidates. Ask action
        without such samples → ``task.ask_text``;
        any other action without samples → ``None``.
        """
        return _reply.representative(
            self.task, action, messages, labels,
            tool_names=tool_names, clusters=clusters, groundings=groundings,
        )  # fmt: skip


def decide_from_messages(
    task: Task,
    messages: Sequence[AIMessage],
    calibrator: Any = None,
    alpha: float = DEFAULT_ALPHA,
    *,
    return_samples: bool = False,
    risk_control: RiskControl | None = None,
    context: GroundingContext | None = None,
) -> Decision:
    """Decide from already-sampled messages (pure: no model call).

    Validates the calibrator on every call; for repeated decisions build a
    :class:`Decider` once.

    Args:
        task: The task.
        messages: The sampled completions.
        calibrator: A fitted calibrator or ``None``.
        alpha: The Dirichlet smoothing prior.
        return_samples: Keep the samples and their labels in the decision.
        risk_control: A calibrated risk limit to guard the decision with (see
            :class:`Decider`).
        context: The request's tools and conversation, for a task that grounds its calls
            (see :meth:`Decider.decide`).

    Returns:
        The decision.
    """
    decider = Decider(task, calibrator, alpha=alpha, risk_control=risk_control)
    return decider.decide(messages, return_samples=return_samples, context=context)
