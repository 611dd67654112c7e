"""After deployment: the decision log, the monitor, refit, reload.

A :class:`DecisionLog`
(:func:`open_decision_log`: JSONL or SQLite) keeps one record per decision, and
:func:`record_outcome` attaches the true label later; :func:`monitor_log` watches the logged
decisions for drift against the fit (a :class:`MonitorReport`); :func:`refit_from_records`
fits a new calibrator on the logged outcomes and promotes it only when a holdout shows it is
better (a :class:`RefitResult`); an :class:`ArtefactReloader` swaps a front door's artefact
when its file changes.

``__all__`` is the public surface. The other names imported below are what the front doors
of :mod:`taskcal_agents.langchain` and the command line use: they are not part of the API.
"""

from __future__ import annotations

from taskcal_agents.production._decision_log import DecisionLog, open_decision_log, record_outcome
from taskcal_agents.production._decision_log import DecisionLogLike as DecisionLogLike
from taskcal_agents.production._decision_log import artefact_id as artefact_id
from taskcal_agents.production._decision_log import import_outcomes as import_outcomes
from taskcal_agents.production._decision_log import model_name_of as model_name_of
from taskcal_agents.production._monitor import monitor_log
from taskcal_agents.production._monitor_report import MonitorReport
from taskcal_agents.production._refit import RefitResult, refit_from_records
from taskcal_agents.production._reload import ArtefactReloader
from taskcal_agents.production._reload import check_reload as check_reload

__all__ = [
    "ArtefactReloader",
    "DecisionLog",
    "MonitorReport",
    "RefitResult",
    "monitor_log",
    "open_decision_log",
    "record_outcome",
    "refit_from_records",
]
