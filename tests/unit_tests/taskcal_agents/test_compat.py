"""The public import paths of 0.1 keep working for one release, each with a warning.

Every name each 0.1 module listed in ``__all__`` (the table below is 0.1's, frozen) is
imported from its old path: it must be the same object as at its new home, and importing
the old module must raise a ``DeprecationWarning`` that names the new path and points at
the importing line. The old ``taskcal_agents.decision`` module is the new package: its
names that the package no longer exports warn when read from it.
"""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import warnings

import pytest

from taskcal_agents._compat import MOVED

OLD_ALL: dict[str, tuple[str, ...]] = {
    "parsers": (
        "UNPARSED_REASONS",
        "AnswerOrAbstainParser",
        "ChoiceParser",
        "ContentToolCalls",
        "Parser",
        "RatingParser",
        "SchemaParser",
        "ToolDecisionParser",
        "builtin_parser_names",
        "canonical_tool_calls",
        "extract_tool_calls",
        "get_parser",
        "has_written_call",
        "message_text",
        "normalize_text",
        "parse_tool_calls",
        "register_parser",
        "registered_parser_names",
        "tool_names_of",
        "unparsed_reason",
        "with_offered_tools",
        "with_tool_calls",
    ),
    "tool_turns": (
        "answered_tool_calls",
        "call_text",
        "is_repeat_call",
        "is_tool_result_turn",
        "last_tool_results",
        "tool_result_reply",
        "unusable_reply",
    ),
    "grounding": (
        "ArgumentCheck",
        "CallGrounding",
        "GroundingContext",
        "SampleGrounding",
        "call_agreement",
        "grounded_message",
        "mentions",
        "missing_arguments",
        "question_for",
        "sent_args",
        "tool_schemas",
    ),
    "answer_clusters": (
        "ENTAILMENT_CHOICES",
        "ENTAILMENT_PROMPT",
        "AnswerClusters",
        "ChoiceSampler",
        "EntailmentJudgeFactory",
        "answer_tokens",
        "answers_equivalent",
        "cluster_answers",
        "cluster_samples",
        "clusters_from_record",
        "clusters_record",
        "entailment_judge",
        "modal_labels",
        "question_of",
        "sample_answers",
    ),
    "constraints": (
        "LEGACY_GUIDED_FIELDS",
        "STRUCTURED_OUTPUT_KINDS",
        "check_structured_outputs",
        "choice_constraint",
        "json_constraint",
    ),
    "prompting": (
        "SYSTEM_ROLES",
        "append_task_prompt",
        "request_with_task_prompt",
        "with_task_prompt",
    ),
    "belief": ("DEFAULT_ALPHA", "Belief", "check_alpha"),
    "options": ("DEFAULT_N_SAMPLES", "DEFAULT_TEMPERATURE", "AdaptiveSampling", "SamplingOptions"),
    "task": (
        "TASK_FORMAT_VERSION",
        "UNGROUNDED_CALL",
        "AnswerClusterSpec",
        "GroundingSpec",
        "ParserSpec",
        "Task",
    ),
    "tasks": (
        "DEFAULT_AFTER_TOOL_RESULT_COST",
        "DEFAULT_GROUNDING",
        "DEFAULT_TOOL_DECISION_COST",
        "after_tool_result",
        "answer_or_abstain",
        "multiple_choice",
        "rating",
        "tool_decision",
    ),
    "risk_control": (
        "ANY_ACTION",
        "DEFAULT_GRID",
        "RiskControl",
        "RiskCurve",
        "RiskGuard",
        "RiskKind",
        "RiskNotCertifiedWarning",
        "RiskSettingsWarning",
        "RiskSpec",
        "binomial_pvalues",
        "calibrate_risk",
        "hoeffding_bentkus_pvalues",
        "ltt_select",
        "naive_threshold",
        "risk_curve",
    ),
    "adaptive": (
        "AdaptiveSampling",
        "StopCheck",
        "change_probability",
        "check_adaptive",
        "outcome_counts",
        "stop_check",
        "stop_check_messages",
        "with_stop",
    ),
    "artefact": (
        "ARTEFACT_FORMAT",
        "ARTEFACT_FORMAT_VERSION",
        "ARTEFACT_READ_VERSIONS",
        "ArtefactReloader",
        "Calibrator",
        "CalibratorArtefact",
        "CalibratorLike",
        "ResolvedCalibrator",
        "as_artefact",
        "check_calibrator",
        "check_reload",
        "resolve_calibrator",
    ),
    "decision": (
        "TOOL_CALL_ACTION",
        "ActionChoice",
        "Decider",
        "Decision",
        "carried_actions",
        "carries_out",
        "decide_from_messages",
        "executable_mbr",
        "grounded_flags",
        "mbr_action",
        "ungrounded_flags",
    ),
    "decision_log": (
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
    ),
    "monitor": (
        "MONITOR_FORMAT",
        "MONITOR_FORMAT_VERSION",
        "MetricResult",
        "MonitorReport",
        "WindowResult",
        "first_alarm",
        "monitor",
        "monitor_log",
        "parse_window",
    ),
    "runnable": ("TaskCalibratedRunnable", "split_retry"),
    "chat_model": ("DECISION_METADATA_KEY", "TaskCalibratedChatModel"),
    "middleware": ("TaskCalibrationMiddleware", "TaskCalibrationState", "decision_from_message"),
    "decision_model": (
        "LabelParser",
        "TaskCalibratedDecisionModel",
        "noul_probability",
        "render_state",
    ),
    "interop": (
        "AUTO_MODE_QUESTION_ID",
        "HITL_QUESTION_ID",
        "HITL_STORE_NAMESPACE",
        "MODEL_ROUTER_QUESTION_ID",
        "ReviewGate",
        "block_threshold",
        "hitl_when",
        "risk_classifier",
        "risk_costs",
    ),
    "datasets.grading": (
        "DEFAULT_F1_THRESHOLD",
        "DEFAULT_MAX_CONTAINMENT_TOKENS",
        "contains_tokens",
        "grade_answer",
        "normalize_answer",
        "token_f1",
    ),
}
"""``__all__`` of each 0.1 module that moved (``decision`` is now a package)."""

OLD_WORKFLOW = (
    "EvalArrays", "Evaluation", "RefitResult", "RiskCoverage", "SampleSettings", "SamplesFile",
    "SamplesStore", "SamplingReport", "eval_arrays", "evaluate_arrays", "evaluation_to_dict",
    "fit_calibrator", "load_eval_arrays", "load_evaluation", "read_samples",
    "refit_from_records", "risk_coverage", "run_sampling", "sample_header", "write_report",
)  # fmt: skip
"""``taskcal_agents.workflow.__all__`` of 0.1."""


@pytest.mark.parametrize("old", sorted(m for m in OLD_ALL if m != "decision"))
def test_an_old_module_path_warns_and_forwards_every_name(old: str) -> None:
    name = f"taskcal_agents.{old}"
    assert name in MOVED, f"{name} has no forward"
    sys.modules.pop(name, None)
    with pytest.warns(DeprecationWarning, match="^" + re.escape(f"{name} moved to ")) as caught:
        namespace: dict[str, object] = {}
        exec(compile(f"import {name} as module", __file__, "exec"), namespace)  # an import line
    module = namespace["module"]
    assert caught[0].filename == __file__  # points at the importing line
    for attr in OLD_ALL[old]:
        value = getattr(module, attr)
        homes = [importlib.import_module(t) for t in MOVED[name]]
        assert any(getattr(h, attr, None) is value for h in homes), f"{name}.{attr}"


def test_the_old_decision_module_names_are_read_from_the_package_with_a_warning() -> None:
    package = importlib.import_module("taskcal_agents.decision")
    decider = importlib.import_module("taskcal_agents.decision._decider")
    for attr in OLD_ALL["decision"]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            value = getattr(package, attr)
        assert value is getattr(decider, attr)
        if attr not in package.__all__:
            assert any(issubclass(w.category, DeprecationWarning) for w in caught), attr


def test_the_old_workflow_names_are_found() -> None:
    workflow = importlib.import_module("taskcal_agents.workflow")
    for attr in OLD_WORKFLOW:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            assert getattr(workflow, attr) is not None, attr
    with pytest.warns(DeprecationWarning, match="taskcal_agents.production.refit_from_records"):
        workflow.refit_from_records  # noqa: B018


def test_a_script_sees_the_warning_by_default() -> None:
    """Python shows a DeprecationWarning by default when it is attributed to __main__."""
    out = subprocess.run(
        [sys.executable, "-c", "import taskcal_agents.tasks"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "DeprecationWarning: taskcal_agents.tasks moved to taskcal_agents.decision;" in (
        out.stderr
    )
