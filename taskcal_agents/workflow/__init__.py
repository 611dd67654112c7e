"""The calibration workflow: sample → fit → evaluate → report.

``_store``: the resumable samples file; ``_runner``: concurrent sampling into it;
``_data``: samples → arrays; ``_evaluate``: cross-fitted decoder comparison on arrays;
``_fit``: the calibrator artefact; ``_selective``: risk–coverage curves and AURC;
``_report``: tables, figures and a markdown summary.

Public names are imported lazily, so that importing the command line does not import
LangChain through this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from taskcal_agents._exports import lazy_exports

if TYPE_CHECKING:
    from taskcal_agents.workflow._data import eval_arrays, load_eval_arrays
    from taskcal_agents.workflow._evaluate import (
        EvalArrays,
        Evaluation,
        evaluate_arrays,
        evaluation_to_dict,
    )
    from taskcal_agents.workflow._fit import fit_calibrator
    from taskcal_agents.workflow._report import load_evaluation, write_report
    from taskcal_agents.workflow._runner import (
        SampleSettings,
        SamplingReport,
        run_sampling,
        sample_header,
    )
    from taskcal_agents.workflow._selective import RiskCoverage, risk_coverage
    from taskcal_agents.workflow._store import SamplesFile, SamplesStore, read_samples

_EXPORTS: dict[str, str] = {
    "EvalArrays": "taskcal_agents.workflow._evaluate",
    "Evaluation": "taskcal_agents.workflow._evaluate",
    "RiskCoverage": "taskcal_agents.workflow._selective",
    "SampleSettings": "taskcal_agents.workflow._runner",
    "SamplesFile": "taskcal_agents.workflow._store",
    "SamplesStore": "taskcal_agents.workflow._store",
    "SamplingReport": "taskcal_agents.workflow._runner",
    "eval_arrays": "taskcal_agents.workflow._data",
    "evaluate_arrays": "taskcal_agents.workflow._evaluate",
    "evaluation_to_dict": "taskcal_agents.workflow._evaluate",
    "fit_calibrator": "taskcal_agents.workflow._fit",
    "load_eval_arrays": "taskcal_agents.workflow._data",
    "load_evaluation": "taskcal_agents.workflow._report",
    "read_samples": "taskcal_agents.workflow._store",
    "risk_coverage": "taskcal_agents.workflow._selective",
    "run_sampling": "taskcal_agents.workflow._runner",
    "sample_header": "taskcal_agents.workflow._runner",
    "write_report": "taskcal_agents.workflow._report",
}

__all__ = [
    "EvalArrays",
    "Evaluation",
    "RiskCoverage",
    "SampleSettings",
    "SamplesFile",
    "SamplesStore",
    "SamplingReport",
    "eval_arrays",
    "evaluate_arrays",
    "evaluation_to_dict",
    "fit_calibrator",
    "load_eval_arrays",
    "load_evaluation",
    "read_samples",
    "risk_coverage",
    "run_sampling",
    "sample_header",
    "write_report",
]


_MOVED = {
    "RefitResult": "taskcal_agents.production.refit",
    "refit_from_records": "taskcal_agents.production.refit",
}
"""Names that moved to :mod:`taskcal_agents.production` (found here for one release)."""

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, _MOVED)
