"""After deployment: the decision log, the monitor, refit on logged outcomes, artefact reload."""

from __future__ import annotations

from taskcal_agents.production.decision_log import (
    DecisionLog,
    DecisionLogLike,
    JsonlDecisionLog,
    OutcomeReport,
    SqliteDecisionLog,
    artefact_id,
    import_outcomes,
    model_name_of,
    open_decision_log,
    record_belief,
    record_outcome,
)
from taskcal_agents.production.monitor import (
    MONITOR_FORMAT,
    MONITOR_FORMAT_VERSION,
    MetricResult,
    MonitorReport,
    WindowResult,
    first_alarm,
    monitor,
    monitor_log,
    parse_window,
)
from taskcal_agents.production.refit import (
    DEFAULT_Z,
    MIN_HOLDOUT,
    MIN_TRAIN,
    RefitResult,
    refit_from_records,
)
from taskcal_agents.production.reload import (
    ArtefactReloader,
    check_reload,
)

__all__ = [
    "DEFAULT_Z",
    "MIN_HOLDOUT",
    "MIN_TRAIN",
    "MONITOR_FORMAT",
    "MONITOR_FORMAT_VERSION",
    "ArtefactReloader",
    "DecisionLog",
    "DecisionLogLike",
    "JsonlDecisionLog",
    "MetricResult",
    "MonitorReport",
    "OutcomeReport",
    "RefitResult",
    "SqliteDecisionLog",
    "WindowResult",
    "artefact_id",
    "check_reload",
    "first_alarm",
    "import_outcomes",
    "model_name_of",
    "monitor",
    "monitor_log",
    "open_decision_log",
    "parse_window",
    "record_belief",
    "record_outcome",
    "refit_from_records",
]
