"""Datasets: the generic JSONL format, converters from public data sets, and answer grading.

Format (one JSON object per line)::

    {"id": str, "messages": [...], "tools": [...optional...], "label": str, "meta": {...}}

:class:`DatasetItem` states the rules (:func:`read_dataset` checks them); :func:`convert`
writes a public data set in this format. An answer-or-abstain item's label comes from grading
its answer against gold.
"""

from __future__ import annotations

# ``__all__`` (below) is the public surface. The names imported ``as`` themselves stay
# importable from this package outside it: names 0.1 exported from here, and what the
# workflow uses (the shared data folder of the demo, BFCL's answer check).
from taskcal_agents.datasets._answer_check import call_matches_answer as call_matches_answer
from taskcal_agents.datasets._format import DatasetItem, read_dataset
from taskcal_agents.datasets._format import write_dataset as write_dataset
from taskcal_agents.datasets._shared_data import CONVERTERS as CONVERTERS
from taskcal_agents.datasets._shared_data import SHARED_DATA_ENV as SHARED_DATA_ENV
from taskcal_agents.datasets._shared_data import convert
from taskcal_agents.datasets._shared_data import shared_data_dir as shared_data_dir
from taskcal_agents.datasets._tasks import default_task as default_task

__all__ = [
    "DatasetItem",
    "convert",
    "read_dataset",
]
