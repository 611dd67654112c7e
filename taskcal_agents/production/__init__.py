"""After deployment: the front doors' core, the decision log, the monitor, refit, reload.

``decision_log`` (one record per decision, outcomes attached later), ``monitor`` and
``monitor_report`` (drift of the logged decisions against the fit), ``refit`` (a new
calibrator from logged outcomes, promoted only when it is better on a holdout), ``reload``
(swap a front door's artefact when its file changes), ``session`` (the core every front
door decides through, :class:`~taskcal_agents.production.session.DecisionSession`). The
package exports the entry points; every other name is public in its module.
"""

from __future__ import annotations

from taskcal_agents.production.decision_log import DecisionLog, open_decision_log, record_outcome
from taskcal_agents.production.monitor import monitor_log
from taskcal_agents.production.monitor_report import MonitorReport
from taskcal_agents.production.refit import RefitResult, refit_from_records
from taskcal_agents.production.reload import ArtefactReloader

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
