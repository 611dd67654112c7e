"""A LangChain decision model (``langchain_core.decisions``) backed by calibrated sampling.

:class:`TaskCalibratedDecisionModel` answers ``Choice`` questions (and ``Noul`` and
``Score`` ones) about a state by drawing N completions from a chat model, mapping each to
a label, calibrating the belief and taking the minimum-Bayes-risk label. The answer keeps
the calibrated distribution, so callers can apply their own thresholds::

    from langchain_core.decisions import Choice

    classifier = TaskCalibratedDecisionModel(chat_model=llm)
    response = classifier.invoke({
        "state": "Stripe fails whenever I connect my account.",
        "questions": {"team": Choice(
            instructions="Which team should handle this request?",
            criteria={"billing": "Payments.", "technical": "Bugs.", "sales": "Pricing."},
        )},
    })
    response.choices["team"].choice, response.choices["team"].probabilities

Per question (by its ID) a calibrator (fitted, a
:class:`~taskcal_agents.decision.CalibratorArtefact` or an artefact path) and a cost
matrix can be given; both are indexed by the question's labels in ``criteria`` order
(``"yes"``, ``"no"`` for a ``Noul``; the levels ``"0"``, ``"1"``, … for a ``Score``).

A ``Noul`` answer is what a caller compares with 0.5 (``AutoModeMiddleware`` blocks at
P(risky) ≥ 0.5), so it carries the question's costs: with the expected costs EC(yes) and
EC(no) of answering yes and no, it is q' = EC(no) / (EC(yes) + EC(no)), which is ≥ 0.5
exactly when the MBR answer is yes. Under the default 0-1 costs q' is the calibrated
probability of yes; under ``[[0, c_FN], [c_FP, 0]]`` it is q·c_FN / (q·c_FN + (1−q)·c_FP),
so q' ≥ 0.5 ⇔ q ≥ c_FP / (c_FP + c_FN) (see :mod:`taskcal_agents.langchain._interop`).

Given the agent's ``task``, its trust policy holds here as at the other front doors: a
``Noul`` about a tool call whose value no trusted source supplies is answered yes (block,
review) without sampling.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import math
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Self

from langchain_core.decisions import (
    BaseDecisionModel,
    Choice,
    ChoiceAnswer,
    ClassifierResponse,
    Noul,
    NoulAnswer,
    Question,
    Score,
    ScoreAnswer,
    State,
)
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from pydantic import (
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)
from typing_extensions import override

from taskcal_agents.decision import (
    AUTO,
    Decider,
    Decision,
    Draw,
    Drawn,
    ParserSpec,
    SamplingOptions,
    Task,
    as_artefact,
    effect_resolver,
    modal_provenance,
)
from taskcal_agents.errors import ConfigurationError
from taskcal_agents.langchain._session import (
    DecisionSession,
    PendingDecision,
    configuration_error,
    decided,
    rebuilt,
)
from taskcal_agents.langchain._trust_gate import violations_as_sent
from taskcal_agents.parsing import (
    LABEL_PARSER,
    GroundingContext,
    SampleGrounding,
    TrustViolation,
)
from taskcal_agents.production import model_name_of, open_decision_log
from taskcal_agents.sampling import (
    adrive_rounds,
    asample_messages,
    bound_tools,
    drive_rounds,
    sample_messages,
)

__all__ = ["TaskCalibratedDecisionModel", "noul_probability", "render_state"]

_SYSTEM = (
    "You are a careful classifier. Read the input, then answer the question with exactly "
    "one of the allowed labels and nothing else."
)
_NOUL_LABELS = ("yes", "no")
_HELD = "yes"
"""A ``Noul``'s answer that holds a tool call (AutoMode blocks it, :func:`hitl_when` asks)."""
_DOOR_QUESTIONS = ("is_risky", "needs_review")
"""The question IDs the doors ask: ``AutoModeMiddleware``'s and :func:`hitl_when`'s default
(``_interop.AUTO_MODE_QUESTION_ID``, ``HITL_QUESTION_ID``; that module imports this one)."""


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseMessage):
        return {"role": value.type, "content": value.text}
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [_jsonable(v) for v in value]
    return value


def render_state(state: State) -> str:
    """Return the state as prompt text (messages as ``role: text`` lines)."""
    if isinstance(state, str):
        return state
    if isinstance(state, BaseMessage):
        return f"{state.type}: {state.text}"
    if isinstance(state, Sequence) and all(isinstance(m, BaseMessage) for m in state):
        return "\n".join(f"{m.type}: {m.text}" for m in state)  # type: ignore[union-attr]
    return json.dumps(_jsonable(state), ensure_ascii=False, indent=1)


def noul_probability(decision: Decision) -> float:
    """Return the ``Noul`` answer of a yes/no decision: ≥ 0.5 exactly when it says yes.

    q' = EC(no) / (EC(yes) + EC(no)) from the decision's expected costs: the calibrated
    probability of yes under 0-1 costs, the cost-weighted one otherwise (0.5 when both
    costs are 0; ties are yes, as MBR breaks them). When the action is not the MBR one (the
    fallback without parsed samples, or a risk guard's downgrade), q' is moved to the
    nearest value on the action's side of 0.5, so a caller's 0.5 test never contradicts it.

    Args:
        decision: A decision over the labels ``"yes"``, ``"no"``.
    """
    block, allow = decision.expected_cost["yes"], decision.expected_cost["no"]
    total = block + allow
    q = 0.5 if total <= 0 else min(max(allow / total, 0.0), 1.0)
    if (decision.action == "yes") != (q >= 0.5):
        q = 0.5 if decision.action == "yes" else math.nextafter(0.5, 0.0)
    return q


def _text(content: Any) -> str:
    if content is None:
        return ""
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


def _question_labels(question: Question) -> tuple[list[str], list[str]]:
    """Return the question's labels and their descriptions."""
    if isinstance(question, Choice):
        return list(question.criteria), [_text(v) for v in question.criteria.values()]
    if isinstance(question, Noul):
        criteria = question.criteria
        return list(_NOUL_LABELS), [
            _text(criteria.true) if criteria else "",
            _text(criteria.false) if criteria else "",
        ]
    if isinstance(question, Score):
        return [str(i) for i in range(len(question.criteria))], [
            _text(v) for v in question.criteria
        ]
    msg = (
        "TaskCalibratedDecisionModel answers Choice, Noul and Score questions, got a "
        f"{type(question).__name__} question; use a vision model for Box questions."
    )
    raise ConfigurationError(msg)


def _name_of(chat_model: Any) -> str:
    """The name a decision model reports for ``chat_model`` when it is given none."""
    name = getattr(chat_model, "model_name", None) or getattr(chat_model, "model", None)
    return str(name or type(chat_model).__name__)


class TaskCalibratedDecisionModel(BaseDecisionModel, SamplingOptions):
    """Answer decision questions with calibrated, cost-aware sampling of a chat model.

    Each question becomes a task whose labels are its options. N completions are drawn
    (one call with ``n`` where the model supports it, else N concurrent calls), mapped to
    labels with :class:`~taskcal_agents.parsing._labels.LabelParser`, smoothed, calibrated
    by the question's calibrator (if any) and decided by minimum Bayes risk under the
    question's cost matrix (0-1 for ``Choice``, L1 for ``Score`` by default).

    Answers: ``Choice`` → the MBR label, the calibrated probabilities and the label's
    calibrated probability as confidence; ``Noul`` → the cost-weighted probability of yes
    (:func:`noul_probability`: the calibrated probability under 0-1 costs, ≥ 0.5 exactly
    when the decision is yes);
    ``Score`` → the expected level under the calibrated distribution, the distribution,
    and its largest probability as confidence. Unparseable replies only count in the
    decision (see :meth:`decide`); with none parsed the distribution is uniform.

    With the agent's ``task``, its trust policy holds as at the other front doors: a
    ``Noul`` about a tool call (a state with ``tool_call`` and ``messages``, as
    ``AutoModeMiddleware`` and :func:`~taskcal_agents.langchain.hitl_when` ask it) whose
    call takes a value no trusted source in ``messages`` supplies is answered yes without
    sampling (see :attr:`task`).
    """

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    chat_model: BaseChatModel
    """The chat model that is sampled."""
    model: str = ""
    """Model name reported in responses and traces (default: the chat model's)."""
    calibrators: dict[str, Any] = Field(default_factory=dict)
    """Calibrators by question ID (classes in the question's label order): each a fitted
    calibrator, a :class:`~taskcal_agents.decision.CalibratorArtefact`, the path of an
    artefact file (read at construction), ``"auto"`` or ``None`` (the raw belief). An
    artefact's labels must be the question's, in order, and its α is used unless ``alpha``
    is given. A question not listed is ``"auto"``: a calibrator shipped for the model and
    the question's task, else the raw belief with one
    :class:`~taskcal_agents.decision.UncalibratedWarning`."""
    costs: dict[str, list[list[float]]] = Field(default_factory=dict)
    """Cost matrices by question ID (row = true label, column = chosen label)."""
    system_prompt: str = _SYSTEM
    """The system message sent before each question."""
    reload_artefact: bool = False
    """Watch the artefact files given in ``calibrators`` (paths) and reload one when it is
    replaced, as the other front doors do (see
    :class:`~taskcal_agents.production.ArtefactReloader`)."""
    decision_log: Any = None
    """Where each question's decision is logged (under the question ID as task name): a
    :class:`~taskcal_agents.production.DecisionLog` or a path (``.jsonl`` or
    ``.sqlite``/``.db``); ``None``: off. As the other front doors log theirs."""
    strict_calibrator: bool = False
    """Refuse an explicit artefact whose record does not match how the chat model is
    sampled, instead of warning once and using it (as the other front doors)."""
    task: Task | None = None
    """The agent's task (or the path of its task file), whose trust policy holds here as at
    the other front doors. A ``Noul`` question about a tool call (a state with
    ``tool_call`` and ``messages``) is then checked first: when the call, sent as it is,
    takes a value no trusted source in ``messages`` supplies
    (:func:`~taskcal_agents.langchain._trust_gate.violations_as_sent`), the answer is yes
    (AutoMode blocks the call, :func:`~taskcal_agents.langchain.hitl_when` asks a person)
    without sampling: a fallback decision whose reason names the value, its source and
    the policy entry, with ``n_untrusted`` 1, the ``trust_violations`` and the call's
    ``provenance``. A trusted call is decided by the samples, its decision recording
    ``n_untrusted`` 0 and the provenance. ``None``, or a task without ``trust``: no
    policy (as before); ``Choice`` and ``Score`` questions are answered as before."""
    hold_questions: tuple[str, ...] = _DOOR_QUESTIONS
    """Under :attr:`task`'s trust policy, the ``Noul`` question IDs whose "yes" holds the
    call they ask about: ``AutoModeMiddleware``'s (``"is_risky"``) and
    :func:`~taskcal_agents.langchain.hitl_when`'s (``"needs_review"``). A call that breaks
    the policy, asked about under another ID, is an error naming it, never an answer that
    may let it through (a "yes" that means "safe"). Each ID must be one of the model's
    questions, checked at construction: a door's, or one its ``costs`` or ``calibrators``
    are filed under (``risk_classifier(question_id=...)`` files them)."""
    tools: list[Any] = Field(default_factory=list)
    """The agent's tools: under :attr:`task`'s trust policy their schemas name each
    argument's kind (as :func:`~taskcal_agents.langchain.trust_gate` takes them); a tool
    not among them has its arguments' kinds read from their names and values."""

    _sessions: dict[str, tuple[Task, DecisionSession]] = PrivateAttr(default_factory=dict)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def __init__(self, **kwargs: Any) -> None:
        """Validate the fields; read the artefact files among ``calibrators``.

        Raises:
            UnknownArgumentError: For an argument it does not take.
            ConfigurationError: For an invalid argument.
            DataFileError: If an artefact path cannot be read.
        """
        try:
            super().__init__(**kwargs)
        except ValidationError as exc:
            raise configuration_error(type(self).__name__, exc, type(self).model_fields) from exc
        self._check_hold_questions()  # a wrong ID fails here, not when a call breaks the policy
        if not self.reload_artefact:  # a bad file fails here, not on the first question
            for calibrator in self.calibrators.values():
                as_artefact(calibrator)
        if self.decision_log is not None:
            self.decision_log = open_decision_log(self.decision_log)  # shared by copies

    def _check_hold_questions(self) -> None:
        """Refuse a hold question the model is not asked (a door's, or one it is set up for).

        Raises:
            ConfigurationError: Naming each such ID and the model's questions.
        """
        known = sorted({*_DOOR_QUESTIONS, *self.costs, *self.calibrators})
        unknown = [qid for qid in dict.fromkeys(self.hold_questions) if qid not in known]
        if not unknown:
            return
        names = []
        for qid in unknown:
            close = difflib.get_close_matches(qid, known, n=1, cutoff=0.75)
            names.append(f"{qid!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        msg = (
            f"TaskCalibratedDecisionModel parameter 'hold_questions' names {', '.join(names)}, "
            f"which {'is' if len(names) == 1 else 'are'} not among its questions: {known} "
            f"(AutoModeMiddleware's {_DOOR_QUESTIONS[0]!r}, hitl_when's "
            f"{_DOOR_QUESTIONS[1]!r}, and those its costs or calibrators are filed under). "
            "File a question's costs or calibrator under its ID "
            "(risk_classifier(question_id=...)) to hold calls with it."
        )
        raise ConfigurationError(msg)

    @override
    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A new decision model from this one's parameters with ``update`` applied.

        As scikit-learn's ``clone``: built by the constructor, so each question's
        calibrator is resolved anew (``"auto"`` for the new chat model); nothing derived
        travels with it. The reported ``model`` name follows a new ``chat_model`` unless it
        was given. The decision log stays the one this model opened.
        """
        update = dict(update or {})
        params = {name: getattr(self, name) for name in self.model_fields_set}
        derived = params.get("model") == _name_of(self.chat_model)
        if "chat_model" in update and "model" not in update and derived:
            params.pop("model")
        return rebuilt(self, update, deep=deep, params=params)

    def __copy__(self) -> Self:
        return self.model_copy()

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Self:
        return self.model_copy(deep=True)

    @field_validator("task", mode="before")
    @classmethod
    def _task_file(cls, value: Any) -> Any:
        return Task.from_file(value) if isinstance(value, str | os.PathLike) else value

    @field_validator("belief")
    @classmethod
    def _sampled_belief(cls, value: str) -> str:
        if value == "one_pass":
            msg = (
                "the decision model answers questions (choices among their options), and "
                "belief='one_pass' reads a tool decision's tools, ask and refuse; use "
                "belief='samples'"
            )
            raise ValueError(msg)
        return value

    @model_validator(mode="before")
    @classmethod
    def _default_model_name(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("model"):
            data = {**data, "model": _name_of(data.get("chat_model"))}
        return data

    @property
    @override
    def _provider(self) -> str:
        return "taskcal"

    # ------------------------------------------------------------------ pure steps

    def task_for(self, question_id: str, question: Question) -> Task:
        """Return the task that answers ``question`` (labels, costs, parser).

        Raises:
            ConfigurationError: For a ``Box`` question, fewer than two labels, or an invalid
                cost matrix for the question.
        """
        labels, _ = _question_labels(question)
        if len(labels) < 2:
            msg = (
                f"TaskCalibratedDecisionModel question {question_id!r} must offer at least two "
                f"labels, got {labels!r}."
            )
            raise ConfigurationError(msg)
        k = len(labels)
        if isinstance(question, Score):
            default = [[float(abs(i - j)) for j in range(k)] for i in range(k)]
        else:
            default = [[0.0 if i == j else 1.0 for j in range(k)] for i in range(k)]
        return Task(
            name=question_id,
            labels=labels,
            cost=self.costs.get(question_id, default),
            parser=ParserSpec(
                name=LABEL_PARSER,
                options={"labels": labels},
            ),
        )

    def prompt_for(self, state: State, question: Question) -> list[BaseMessage]:
        """Return the chat messages that ask ``question`` about ``state``."""
        labels, descriptions = _question_labels(question)
        lines = [
            f"- {label}: {text}" if text else f"- {label}"
            for label, text in zip(labels, descriptions, strict=True)
        ]
        kind = "level" if isinstance(question, Score) else "label"
        body = (
            f"Input:\n{render_state(state)}\n\nQuestion: {_text(question.instructions)}\n\n"
            f"Allowed {kind}s:\n" + "\n".join(lines) + f"\n\nAnswer with one {kind} only."
        )
        return [SystemMessage(self.system_prompt), HumanMessage(body)]

    def _session(self, question_id: str, question: Question) -> DecisionSession:
        """The decision's assembly for ``question``: its task, calibrator, options and log.

        Kept per question ID while the question's task stays the same (so a reloaded
        artefact is watched across calls). A copy of this model builds its own.
        """
        task = self.task_for(question_id, question)
        with self._lock:
            kept = self._sessions.get(question_id)
        if kept is not None and kept[0] == task:
            return kept[1]
        calibrator = self.calibrators.get(question_id, AUTO)
        reload = (
            self.reload_artefact
            and calibrator != AUTO
            and isinstance(calibrator, str | os.PathLike)
        )
        session = DecisionSession(
            task, calibrator, options=self, model=self.chat_model,
            owner=f"{type(self).__name__} question {question_id!r}", reload_artefact=reload,
            decision_log=self.decision_log, shared_prior=True, strict=self.strict_calibrator,
        )  # fmt: skip
        with self._lock:
            self._sessions[question_id] = (task, session)
        return session

    def _decider(self, question_id: str, question: Question) -> Decider:
        return self._session(question_id, question).in_force().decider

    @staticmethod
    def _answer(question: Question, decision: Decision) -> Any:
        q = decision.calibrated
        if isinstance(question, Noul):
            return NoulAnswer(type="noul", noul=noul_probability(decision))
        if isinstance(question, Score):
            levels = {int(label): p for label, p in q.items()}
            return ScoreAnswer(
                type="score",
                score=sum(level * p for level, p in levels.items()),
                legend=dict(enumerate(question.criteria)),
                probabilities=levels,
                confidence=min(max(levels.values()), 1.0),
            )
        return ChoiceAnswer(
            type="choice",
            choice=decision.action,
            probabilities=dict(q),
            confidence=min(max(q[decision.action], 0.0), 1.0),
        )

    # -------------------------------------------------------------------- deciding

    def decide(
        self, state: State, question_id: str, question: Question, *, seed: int | None = None
    ) -> Decision:
        """Sample and return the full :class:`~taskcal_agents.decision.Decision`.

        Args:
            state: The state to evaluate.
            question_id: The question's ID (selects its calibrator and costs).
            question: The question.
            seed: Base sampling seed passed to the chat model (sample i gets ``seed + i``
                where the N samples are separate calls); ``None``: none.

        Returns:
            The decision (its ``action`` is the MBR label).
        """
        review = self._review(state, question)
        held = self._held(question_id, question, review)
        if held is not None:
            return held
        pending = self._begin(state, question_id, question)

        def draw(d: Draw) -> Drawn:
            args = pending.sample_args(d, seed)
            return [sample_messages(self.chat_model, pending.prompt(d, 0), **args)]

        return self._finish(pending, drive_rounds(pending.protocol, draw), review)

    async def adecide(
        self, state: State, question_id: str, question: Question, *, seed: int | None = None
    ) -> Decision:
        """Async :meth:`decide`."""
        review = self._review(state, question)
        held = self._held(question_id, question, review)
        if held is not None:
            return held
        pending = self._begin(state, question_id, question)

        async def draw(d: Draw) -> Drawn:
            args = pending.sample_args(d, seed)
            return [await asample_messages(self.chat_model, pending.prompt(d, 0), **args)]

        return self._finish(pending, await adrive_rounds(pending.protocol, draw), review)

    # ------------------------------------------------------------ the trust policy

    def _review(self, state: State, question: Question) -> SampleGrounding | None:
        """The grounding of the tool call a ``Noul`` asks about, under :attr:`task`'s policy.

        ``None`` without a policy, for another question, or for a state that holds no
        ``tool_call`` (a mapping with its ``name`` and ``args``).
        """
        trust = None if self.task is None else self.task.trust
        if trust is None or not isinstance(question, Noul) or not isinstance(state, Mapping):
            return None
        call = state.get("tool_call")
        if not isinstance(call, Mapping) or not call.get("name"):
            return None
        messages = state.get("messages")
        if not isinstance(messages, Sequence) or isinstance(messages, str):
            messages = []
        args = call.get("args")
        message = AIMessage(
            content="",
            tool_calls=[{
                "name": str(call["name"]), "args": dict(args) if isinstance(args, Mapping) else {},
                "id": str(call.get("id") or "reviewed"),
            }],
        )  # fmt: skip
        context = GroundingContext(self.tools, messages)
        effect_of = effect_resolver(self.task.effects if self.task is not None else None, context)
        return context.ground(message, trust, effect_of=effect_of)

    def _held(
        self, question_id: str, question: Question, review: SampleGrounding | None
    ) -> Decision | None:
        """The logged decision that holds the reviewed call, or ``None`` when it may pass."""
        task = self.task
        if review is None or task is None or task.trust is None:
            return None
        violations = [v for c in review.calls for v in violations_as_sent(c, task.trust)]
        if not violations:
            return None
        explained = "; ".join(dict.fromkeys(v.explain() for v in violations))
        if question_id not in self.hold_questions:
            msg = (
                f"TaskCalibratedDecisionModel question {question_id!r} asks about the call "
                f"{review.calls[0].name}, which breaks the trust policy of task {task.name!r} "
                f"({explained}); only a yes to the questions in hold_questions "
                f"{list(self.hold_questions)} holds a call. Add {question_id!r} to "
                "hold_questions if its yes holds the call."
            )
            raise ConfigurationError(msg)
        reason = (
            f"the call {review.calls[0].name} breaks the trust policy of task {task.name!r} "
            f"({explained}); answered {_HELD!r} without sampling"
        )
        session = self._session(question_id, question)
        in_force = session.in_force()
        decision = in_force.decider.fallback(reason).model_copy(
            update={"action": _HELD, "unguarded_action": _HELD,
                    **self._trust_fields(review, violations)},
        )  # fmt: skip
        return decided(session.log_decision(decision, in_force, model_name=self._sampled_name))

    @staticmethod
    def _trust_fields(
        review: SampleGrounding, violations: Sequence[TrustViolation]
    ) -> dict[str, Any]:
        """The decision's trust fields for the reviewed call (as the other doors record them)."""
        return {
            "n_untrusted": int(bool(violations)),
            "trust_violations": [v.to_dict() for v in violations],
            "provenance": modal_provenance([review]),
        }

    def _finish(
        self,
        pending: PendingDecision,
        results: Sequence[Decision | BaseException],
        review: SampleGrounding | None,
    ) -> Decision:
        """The sampled decision, with the reviewed call's trust fields, logged."""
        if review is not None:
            fields = self._trust_fields(review, ())
            results = [r.model_copy(update=fields) if isinstance(r, Decision) else r
                       for r in results]  # fmt: skip
        return decided(pending.finish(results, model_name=self._sampled_name)[0])

    def _sampled_name(self) -> str | None:
        """The sampled chat model's name, for the decision log (``model`` may be another)."""
        return model_name_of(self.chat_model)

    def _begin(self, state: State, question_id: str, question: Question) -> PendingDecision:
        """The decision of one question, begun (rounds, retries, fallback), with its prompt."""
        return self._session(question_id, question).begin(
            [self.prompt_for(state, question)], tools=bound_tools(self.chat_model),
            what=f"{type(self).__name__} could not sample {self.n_samples} completions",
        )  # fmt: skip

    def _check(self, questions: Mapping[str, Question]) -> None:
        if not questions:
            msg = "TaskCalibratedDecisionModel request 'questions' must not be empty, got {}."
            raise ConfigurationError(msg)
        for question_id, question in questions.items():
            self._decider(question_id, question)  # validate every question before sampling

    @override
    def _classify(self, state: State, questions: dict[str, Question]) -> ClassifierResponse:
        self._check(questions)
        answers = {
            qid: self._answer(question, self.decide(state, qid, question))
            for qid, question in questions.items()
        }
        return ClassifierResponse(model=self.model, answers=answers)

    @override
    async def _aclassify(self, state: State, questions: dict[str, Question]) -> ClassifierResponse:
        self._check(questions)
        ids = list(questions)
        decisions = await asyncio.gather(*(self.adecide(state, qid, questions[qid]) for qid in ids))
        answers = {
            qid: self._answer(questions[qid], decision)
            for qid, decision in zip(ids, decisions, strict=True)
        }
        return ClassifierResponse(model=self.model, answers=answers)
