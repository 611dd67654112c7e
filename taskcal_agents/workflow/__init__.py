"""The calibration workflow: sample → fit → evaluate → report.

``_store``: the resumable samples file; ``_runner``: concurrent sampling into it;
``_data``: samples → arrays; ``_evaluate``: cross-fitted decoder comparison on arrays;
``_fit``: the calibrator artefact; ``_selective``: risk–coverage curves and AURC;
``_report``: tables, figures and a markdown summary.
"""

from __future__ import annotations

from taskcal_agents.workflow._data import eval_arrays, load_eval_arrays, resolve_task
from taskcal_agents.workflow._evaluate import (
    DEFAULT_CALIBRATORS,
    EVALUATION_FORMAT,
    EVALUATION_FORMAT_VERSION,
    EvalArrays,
    Evaluation,
    PermutationTest,
    crossfit_calibrated,
    evaluate_arrays,
    evaluation_to_dict,
    in_fold_prior,
    mbr,
    parse_calibrator_spec,
    permutation_test,
    score_actions,
    stratified_folds,
)
from taskcal_agents.workflow._fit import (
    ARTEFACT_FORMAT,
    ARTEFACT_FORMAT_VERSION,
    fit_calibrator,
    load_artefact,
    make_artefact,
    write_json,
)
from taskcal_agents.workflow._report import (
    load_evaluation,
    markdown_summary,
    markdown_table,
    plot_costs,
    plot_reliability,
    plot_risk_coverage,
    rich_table,
    selective_section,
    verdict,
    write_report,
)
from taskcal_agents.workflow._runner import (
    Sampler,
    SampleSettings,
    SamplingReport,
    build_messages,
    grade_item,
    message_from_dict,
    message_to_dict,
    run_sampling,
    sample_header,
    sample_item,
)
from taskcal_agents.workflow._selective import (
    RiskCoverage,
    action_confidence,
    risk_coverage,
    selective_summary,
)
from taskcal_agents.workflow._store import (
    SAMPLES_FORMAT,
    SAMPLES_FORMAT_VERSION,
    SamplesFile,
    SamplesStore,
    read_samples,
)

__all__ = [
    "ARTEFACT_FORMAT",
    "ARTEFACT_FORMAT_VERSION",
    "DEFAULT_CALIBRATORS",
    "EVALUATION_FORMAT",
    "EVALUATION_FORMAT_VERSION",
    "SAMPLES_FORMAT",
    "SAMPLES_FORMAT_VERSION",
    "EvalArrays",
    "Evaluation",
    "PermutationTest",
    "RiskCoverage",
    "SampleSettings",
    "Sampler",
    "SamplesFile",
    "SamplesStore",
    "SamplingReport",
    "action_confidence",
    "build_messages",
    "crossfit_calibrated",
    "eval_arrays",
    "evaluate_arrays",
    "evaluation_to_dict",
    "fit_calibrator",
    "grade_item",
    "in_fold_prior",
    "load_artefact",
    "load_eval_arrays",
    "load_evaluation",
    "make_artefact",
    "markdown_summary",
    "markdown_table",
    "mbr",
    "message_from_dict",
    "message_to_dict",
    "parse_calibrator_spec",
    "permutation_test",
    "plot_costs",
    "plot_reliability",
    "plot_risk_coverage",
    "read_samples",
    "resolve_task",
    "rich_table",
    "risk_coverage",
    "run_sampling",
    "sample_header",
    "sample_item",
    "score_actions",
    "selective_section",
    "selective_summary",
    "stratified_folds",
    "verdict",
    "write_json",
    "write_report",
]
