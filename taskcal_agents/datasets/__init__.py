"""Datasets: the generic JSONL format, converters from public data sets, and answer grading.

Format (one JSON object per line)::

    {"id": str, "messages": [...], "tools": [...optional...], "label": str, "meta": {...}}

See :mod:`taskcal_agents.datasets._format` for the rules and
:mod:`taskcal_agents.datasets.grading` for how answer-or-abstain items get their label.
"""

from __future__ import annotations

from taskcal_agents.datasets._format import (
    DatasetItem,
    parse_dataset_line,
    read_dataset,
    write_dataset,
)
from taskcal_agents.datasets._shared_data import (
    CONVERTERS,
    MMLU_LABELS,
    SHARED_DATA_ENV,
    STSB_LABELS,
    WHEN2CALL_LABELS,
    Converter,
    convert,
    convert_mmlu,
    convert_nq_open,
    convert_simpleqa,
    convert_stsb,
    convert_when2call,
    round_half_up,
    select_items,
    shared_data_dir,
)
from taskcal_agents.datasets._tasks import WHEN2CALL_COST, default_task
from taskcal_agents.datasets.grading import grade_answer, normalize_answer, token_f1

__all__ = [
    "CONVERTERS",
    "MMLU_LABELS",
    "SHARED_DATA_ENV",
    "STSB_LABELS",
    "WHEN2CALL_COST",
    "WHEN2CALL_LABELS",
    "Converter",
    "DatasetItem",
    "convert",
    "convert_mmlu",
    "convert_nq_open",
    "convert_simpleqa",
    "convert_stsb",
    "convert_when2call",
    "default_task",
    "grade_answer",
    "normalize_answer",
    "parse_dataset_line",
    "read_dataset",
    "round_half_up",
    "select_items",
    "shared_data_dir",
    "token_f1",
    "write_dataset",
]
