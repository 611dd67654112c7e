"""The calibration workflow: sample → fit → evaluate → report.

Sample (:func:`run_sampling`, or :func:`run_sampling_ray` / :func:`run_sampling_vllm` on
Ray with a :class:`RayEngine`) under :class:`SampleSettings` into a :class:`SamplesStore`
(:func:`sample_header` describes the run; :func:`read_samples` reads a samples file back);
fit a calibrator artefact (:func:`fit_artefact`; :func:`fit_calibrator` on
:class:`EvalArrays`); evaluate decoders with cross-fitting (:func:`evaluate_samples`, the
calibrators of :data:`DEFAULT_CALIBRATORS` by default); report (:func:`write_report`:
figures and a markdown summary; :func:`load_evaluation` reads an evaluation back;
:func:`verdict`, :func:`rich_table`, :func:`tool_rich_table` and
:func:`cost_sweep_rich_table` for a terminal). :func:`calibrate_endpoint` runs all of it for
a served model on the BFCL corpus (``taskcal calibrate``; :data:`CALIBRATE_CALIBRATOR`).

Names are imported lazily (``_EXPORTS``), so that importing the command line does not import
LangChain through this package. ``__all__`` is the public surface. The names imported
``as`` themselves below are what ``taskcal demo`` uses (the demo's defaults and steps, from
a light module): they are not part of the API.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from taskcal_agents._exports import lazy_exports
from taskcal_agents.workflow._demo import DEMO_CONCURRENCY as DEMO_CONCURRENCY
from taskcal_agents.workflow._demo import DEMO_MODEL as DEMO_MODEL
from taskcal_agents.workflow._demo import DEMO_PERMUTATIONS as DEMO_PERMUTATIONS
from taskcal_agents.workflow._demo import STSB_ITEMS as STSB_ITEMS
from taskcal_agents.workflow._demo import STSB_SEED as STSB_SEED
from taskcal_agents.workflow._demo import DemoPart as DemoPart
from taskcal_agents.workflow._demo import DemoResult as DemoResult
from taskcal_agents.workflow._demo import Estimate as Estimate
from taskcal_agents.workflow._demo import StepTimer as StepTimer
from taskcal_agents.workflow._demo import run_demo as run_demo
from taskcal_agents.workflow._demo import stsb_items as stsb_items

if TYPE_CHECKING:
    from taskcal_agents.workflow._calibrate import CALIBRATE_CALIBRATOR, calibrate_endpoint
    from taskcal_agents.workflow._calibrator_specs import DEFAULT_CALIBRATORS
    from taskcal_agents.workflow._eval_arrays import EvalArrays
    from taskcal_agents.workflow._fit import fit_calibrator
    from taskcal_agents.workflow._ray_engine import RayEngine, run_sampling_ray
    from taskcal_agents.workflow._ray_vllm import run_sampling_vllm
    from taskcal_agents.workflow._report import (
        cost_sweep_rich_table,
        load_evaluation,
        rich_table,
        tool_rich_table,
        verdict,
        write_report,
    )
    from taskcal_agents.workflow._runner import SampleSettings, run_sampling, sample_header
    from taskcal_agents.workflow._steps import evaluate_samples, fit_artefact
    from taskcal_agents.workflow._store import SamplesStore, read_samples

_EXPORTS: dict[str, str] = {
    "CALIBRATE_CALIBRATOR": "taskcal_agents.workflow._calibrate",
    "DEFAULT_CALIBRATORS": "taskcal_agents.workflow._calibrator_specs",
    "EvalArrays": "taskcal_agents.workflow._eval_arrays",
    "RayEngine": "taskcal_agents.workflow._ray_engine",
    "SampleSettings": "taskcal_agents.workflow._runner",
    "SamplesStore": "taskcal_agents.workflow._store",
    "calibrate_endpoint": "taskcal_agents.workflow._calibrate",
    "cost_sweep_rich_table": "taskcal_agents.workflow._report",
    "evaluate_samples": "taskcal_agents.workflow._steps",
    "fit_artefact": "taskcal_agents.workflow._steps",
    "fit_calibrator": "taskcal_agents.workflow._fit",
    "load_evaluation": "taskcal_agents.workflow._report",
    "read_samples": "taskcal_agents.workflow._store",
    "rich_table": "taskcal_agents.workflow._report",
    "run_sampling": "taskcal_agents.workflow._runner",
    "run_sampling_ray": "taskcal_agents.workflow._ray_engine",
    "run_sampling_vllm": "taskcal_agents.workflow._ray_vllm",
    "sample_header": "taskcal_agents.workflow._runner",
    "tool_rich_table": "taskcal_agents.workflow._report",
    "verdict": "taskcal_agents.workflow._report",
    "write_report": "taskcal_agents.workflow._report",
}

__all__ = [
    "CALIBRATE_CALIBRATOR",
    "DEFAULT_CALIBRATORS",
    "EvalArrays",
    "RayEngine",
    "SampleSettings",
    "SamplesStore",
    "calibrate_endpoint",
    "cost_sweep_rich_table",
    "evaluate_samples",
    "fit_artefact",
    "fit_calibrator",
    "load_evaluation",
    "read_samples",
    "rich_table",
    "run_sampling",
    "run_sampling_ray",
    "run_sampling_vllm",
    "sample_header",
    "tool_rich_table",
    "verdict",
    "write_report",
]

# The other names 0.1 exported from this package are found with a warning (one release).
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
