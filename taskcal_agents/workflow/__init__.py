"""The calibration workflow: sample → fit → evaluate → report.

``_store``: the resumable samples file; ``_runner``: concurrent sampling into it;
``_ray_engine`` / ``_ray_vllm``: the same on Ray (HTTP servers, or vLLM inside Ray);
``_data``: samples → arrays (``_eval_arrays``); ``_evaluate``: cross-fitted decoder
comparison on arrays (``_decoders``, ``_crossfit``, ``_scores``, ``_permutation``);
``_fit``: the calibrator artefact; ``_steps``: ``taskcal fit`` / ``taskcal evaluate`` on
a samples file; ``_selective``: risk–coverage curves and AURC. Public modules:
:mod:`~taskcal_agents.workflow.report` (tables, figures and a markdown summary of an
evaluation), :mod:`~taskcal_agents.workflow.demo` (``taskcal demo``) and
:mod:`~taskcal_agents.workflow.calibrate` (``taskcal calibrate``).

``__all__`` is the public surface: sample (:func:`run_sampling`, or
:func:`run_sampling_ray` / :func:`run_sampling_vllm` on Ray) into a
:class:`SamplesStore`, fit (:func:`fit_artefact`), evaluate (:func:`evaluate_samples`),
report (:func:`write_report`). Also importable from here, outside ``__all__``: the other
names 0.1 exported from this package (:func:`fit_calibrator`, :func:`evaluate_arrays`,
:func:`load_eval_arrays`, ...).

Names are imported lazily, so that importing the command line does not import LangChain
through this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from taskcal_agents._exports import lazy_exports

if TYPE_CHECKING:
    from taskcal_agents.workflow._calibrator_specs import (
        DEFAULT_CALIBRATORS as DEFAULT_CALIBRATORS,
    )
    from taskcal_agents.workflow._data import eval_arrays as eval_arrays
    from taskcal_agents.workflow._data import load_eval_arrays as load_eval_arrays
    from taskcal_agents.workflow._eval_arrays import EvalArrays as EvalArrays
    from taskcal_agents.workflow._evaluate import Evaluation as Evaluation
    from taskcal_agents.workflow._evaluate import evaluate_arrays as evaluate_arrays
    from taskcal_agents.workflow._evaluation_json import evaluation_to_dict as evaluation_to_dict
    from taskcal_agents.workflow._fit import fit_calibrator as fit_calibrator
    from taskcal_agents.workflow._ray_engine import RayEngine, run_sampling_ray
    from taskcal_agents.workflow._ray_vllm import run_sampling_vllm
    from taskcal_agents.workflow._runner import SampleSettings, run_sampling, sample_header
    from taskcal_agents.workflow._runner import SamplingReport as SamplingReport
    from taskcal_agents.workflow._selective import RiskCoverage as RiskCoverage
    from taskcal_agents.workflow._selective import risk_coverage as risk_coverage
    from taskcal_agents.workflow._steps import evaluate_samples, fit_artefact
    from taskcal_agents.workflow._store import SamplesFile as SamplesFile
    from taskcal_agents.workflow._store import SamplesStore, read_samples
    from taskcal_agents.workflow.report import load_evaluation as load_evaluation
    from taskcal_agents.workflow.report import write_report

_EXPORTS: dict[str, str] = {
    "RayEngine": "taskcal_agents.workflow._ray_engine",
    "SampleSettings": "taskcal_agents.workflow._runner",
    "SamplesStore": "taskcal_agents.workflow._store",
    "evaluate_samples": "taskcal_agents.workflow._steps",
    "fit_artefact": "taskcal_agents.workflow._steps",
    "read_samples": "taskcal_agents.workflow._store",
    "run_sampling": "taskcal_agents.workflow._runner",
    "run_sampling_ray": "taskcal_agents.workflow._ray_engine",
    "run_sampling_vllm": "taskcal_agents.workflow._ray_vllm",
    "sample_header": "taskcal_agents.workflow._runner",
    "write_report": "taskcal_agents.workflow.report",
}

__all__ = [
    "RayEngine",
    "SampleSettings",
    "SamplesStore",
    "evaluate_samples",
    "fit_artefact",
    "read_samples",
    "run_sampling",
    "run_sampling_ray",
    "run_sampling_vllm",
    "sample_header",
    "write_report",
]

_ALSO: dict[str, str] = {
    # the command line's default maps (derived from the calibrators' registry)
    "DEFAULT_CALIBRATORS": "taskcal_agents.workflow._calibrator_specs",
    # exported by 0.1
    "EvalArrays": "taskcal_agents.workflow._eval_arrays",
    "Evaluation": "taskcal_agents.workflow._evaluate",
    "RiskCoverage": "taskcal_agents.workflow._selective",
    "SamplesFile": "taskcal_agents.workflow._store",
    "SamplingReport": "taskcal_agents.workflow._runner",
    "eval_arrays": "taskcal_agents.workflow._data",
    "evaluate_arrays": "taskcal_agents.workflow._evaluate",
    "evaluation_to_dict": "taskcal_agents.workflow._evaluation_json",
    "fit_calibrator": "taskcal_agents.workflow._fit",
    "load_eval_arrays": "taskcal_agents.workflow._data",
    "load_evaluation": "taskcal_agents.workflow.report",
    "risk_coverage": "taskcal_agents.workflow._selective",
}
"""Names found here outside ``__all__``: the other names 0.1 exported from this package."""

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, also=_ALSO)
