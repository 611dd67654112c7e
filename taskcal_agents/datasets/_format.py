"""The generic dataset format: JSONL, one labelled chat request per line.

Each line is one JSON object::

    {"id": "...", "messages": [{"role": "user", "content": "..."}],
     "tools": [{"type": "function", "function": {...}}],   # optional
     "label": "tool_call",                                  # the true task label
     "meta": {...}}                                         # optional, free-form

``label`` may be ``null`` only for items whose truth is assigned after sampling by grading
the model's own answer (answer-or-abstain data, see :mod:`taskcal_agents.parsing._grading`);
such items carry their reference answers in ``meta["references"]``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from taskcal_agents._files import atomic_open, decode_line
from taskcal_agents._validation import describe_validation_error
from taskcal_agents.errors import DataFileError

_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})


class DatasetItem(BaseModel):
    """One labelled request of a dataset file."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    """Unique identifier of the item within its file."""
    messages: list[dict[str, Any]] = Field(min_length=1)
    """OpenAI-style chat messages (``role`` and ``content``)."""
    tools: list[dict[str, Any]] = Field(default_factory=list)
    """OpenAI tool schemas offered with the request (may be empty)."""
    label: str | None = None
    """The true task label, or ``None`` when it is assigned by grading after sampling."""
    meta: dict[str, Any] = Field(default_factory=dict)
    """Free-form information (source, reference answers, raw score, ...)."""

    @field_validator("messages")
    @classmethod
    def _check_messages(cls, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for i, message in enumerate(messages):
            role = message.get("role")
            if not isinstance(role, str) or role not in _ROLES:
                msg = (
                    f"messages[{i}].role must be one of {sorted(_ROLES)}, got {role!r}; "
                    "write OpenAI-style chat messages."
                )
                raise ValueError(msg)
        return messages

    @field_validator("tools")
    @classmethod
    def _check_tools(cls, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for i, tool in enumerate(tools):
            function = tool.get("function")
            if tool.get("type") != "function" or not isinstance(function, dict):
                msg = (
                    f'tools[{i}] must be an OpenAI tool schema {{"type": "function", '
                    f'"function": {{"name": ..., "parameters": ...}}}}, got {tool!r}.'
                )
                raise ValueError(msg)
            if not isinstance(function.get("name"), str) or not function["name"]:
                msg = f"tools[{i}].function.name must be a non-empty string, got {function!r}."
                raise ValueError(msg)
        return tools

    @property
    def references(self) -> list[str]:
        """Reference answers for graded items (``meta["references"]``), else ``[]``."""
        refs = self.meta.get("references", [])
        return [str(r) for r in refs] if isinstance(refs, list) else [str(refs)]


def parse_dataset_line(
    text: str,
    *,
    path: str | os.PathLike[str],
    line: int,
    labels: Sequence[str] | None = None,
    allow_unlabelled: bool = False,
) -> DatasetItem:
    """Parse one dataset line, raising :class:`DataFileError` naming *path* and *line*.

    Args:
        text: The line (without its newline).
        path: The file, for error messages.
        line: The 1-based line number, for error messages.
        labels: The task's labels; a label outside them is an error. ``None`` skips the check.
        allow_unlabelled: Accept ``"label": null`` for items with ``meta["references"]``.

    Returns:
        The validated item.

    Raises:
        DataFileError: The line is not valid JSON, not a valid item, or has an unknown label.
    """
    hint = "Repair or delete the line, or regenerate the file with `taskcal data convert`."
    obj = decode_line(text, path=path, line=line, hint=hint)
    try:
        item = DatasetItem.model_validate(obj)
    except ValidationError as exc:
        msg = f"not a valid dataset item: {describe_validation_error(exc)}."
        raise DataFileError(msg, path=str(path), line=line) from exc
    if item.label is None:
        if not (allow_unlabelled and item.references):
            msg = (
                f"item {item.id!r} has no label; only answer-or-abstain items with "
                'meta["references"] may be unlabelled (their label is assigned by grading).'
            )
            raise DataFileError(msg, path=str(path), line=line)
    elif labels is not None and item.label not in labels:
        msg = (
            f"item {item.id!r} has label {item.label!r}, which is not one of the task's labels "
            f"{list(labels)!r}; use the task the file was written for, or fix the label."
        )
        raise DataFileError(msg, path=str(path), line=line)
    return item


def read_dataset(
    path: str | os.PathLike[str],
    *,
    labels: Sequence[str] | None = None,
    allow_unlabelled: bool = False,
) -> list[DatasetItem]:
    """Read a dataset JSONL file.

    Blank lines are skipped. Every error names the file and the 1-based line.

    Args:
        path: The JSONL file.
        labels: The task's labels; any other label is an error. ``None`` skips the check.
        allow_unlabelled: Accept unlabelled items that carry reference answers (graded later).

    Returns:
        The items, in file order.

    Raises:
        DataFileError: The file is missing or empty, or a line is bad (see
            :func:`parse_dataset_line`), or an id repeats.
    """
    p = Path(path)
    if not p.is_file():
        msg = "dataset file not found; write one with `taskcal data convert` or check the path."
        raise DataFileError(msg, path=str(p))
    items: list[DatasetItem] = []
    seen: dict[str, int] = {}
    with p.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                text = raw.decode("utf-8").strip()
            except UnicodeDecodeError as exc:
                msg = f"line is not valid UTF-8 ({exc})."
                raise DataFileError(msg, path=str(p), line=lineno) from exc
            if not text:
                continue
            item = parse_dataset_line(
                text, path=p, line=lineno, labels=labels, allow_unlabelled=allow_unlabelled
            )
            if item.id in seen:
                msg = (
                    f"duplicate id {item.id!r} (first seen on line {seen[item.id]}); "
                    "ids must be unique."
                )
                raise DataFileError(msg, path=str(p), line=lineno)
            seen[item.id] = lineno
            items.append(item)
    if not items:
        msg = "dataset file holds no items."
        raise DataFileError(msg, path=str(p))
    return items


def write_dataset(items: Iterable[DatasetItem], path: str | os.PathLike[str]) -> int:
    """Write *items* as JSONL, atomically (temporary file, then rename).

    Args:
        items: The items to write.
        path: The destination; its parent folder is created if needed.

    Returns:
        The number of items written.
    """
    count = 0
    with atomic_open(path) as fh:
        for item in items:
            fh.write(json.dumps(item.model_dump(mode="json"), ensure_ascii=False) + "\n")
            count += 1
    return count
