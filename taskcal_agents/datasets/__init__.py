"""Datasets: the generic JSONL format, converters from public data sets, and answer grading.

Format (one JSON object per line)::

    {"id": str, "messages": [...], "tools": [...optional...], "label": str, "meta": {...}}

See :mod:`taskcal_agents.datasets._format` for the rules and
:mod:`taskcal_agents.parsing.grading` for how answer-or-abstain items get their label.
"""

from __future__ import annotations

from taskcal_agents.datasets._format import (
    DatasetItem,
    read_dataset,
    write_dataset,
)
from taskcal_agents.datasets._shared_data import (
    CONVERTERS,
    SHARED_DATA_ENV,
    convert,
)
from taskcal_agents.datasets._tasks import default_task

__all__ = [
    "CONVERTERS",
    "SHARED_DATA_ENV",
    "DatasetItem",
    "convert",
    "default_task",
    "read_dataset",
    "write_dataset",
]
