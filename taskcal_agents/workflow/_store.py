"""The resumable samples store: a JSONL file that survives ``kill -9``.

Layout: the first line is a header, every further line one finished item::

    {"type": "header", "format": "taskcal.samples", "format_version": 1,
     "task": {...Task.model_dump()...}, "settings": {"n": 16, "temperature": 1.0, ...}}
    {"type": "record", "id": "...", "label": "tool_call", "labels": [...], "samples": [...],
     "greedy": {...}, "greedy_label": "...", ...}

Crash safety: every line is encoded in full and handed to the kernel with a *single*
``os.write`` on a file descriptor opened with ``O_APPEND``, then ``fsync``-ed. A process
killed at any moment therefore leaves either the whole line or, at worst, a torn last line
without its newline. Readers ignore a torn last line; :meth:`SamplesStore.open` (the writer)
truncates it away before appending, so a rerun re-samples that item and nothing is lost or
duplicated. A bad line that is *not* the last one is corruption and raises
:class:`~taskcal_agents.errors.DataFileError` naming the file and line.
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from taskcal_agents._files import (
    append_line,
    decode_line,
    encode_line,
    lock_exclusive,
    split_complete,
)
from taskcal_agents.errors import DataFileError

SAMPLES_FORMAT = "taskcal.samples"
SAMPLES_FORMAT_VERSION = 1

#: Settings that must agree between a samples file and a run that resumes it.
RESUME_KEYS = (
    *("n", "temperature", "greedy", "max_tokens", "model", "belief", "choices"),
    *("adaptive", "adaptive_artefact"),
)

_RESUME_HINTS = {
    "adaptive_artefact": (
        " (the content id of the --artefact adaptive N stops by: another fit, calibrator, "
        "alpha, risk limit or stopping prior would stop other items at other rounds; a file "
        "sampled adaptively before the id was recorded has None)"
    ),
}


@dataclass
class SamplesFile:
    """The parsed content of a samples file.

    Attributes:
        path: The file.
        header: The header object (task, settings).
        records: Finished records by id, in file order; a repeated id keeps its first record.
        torn_tail: Whether the file ended in a torn (incomplete) line, which was ignored.
        duplicates: Ids that appeared more than once (their later copies were ignored).
        lines: The 1-based line of each record, for error messages.
    """

    path: Path
    header: dict[str, Any]
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    torn_tail: bool = False
    duplicates: list[str] = field(default_factory=list)
    lines: dict[str, int] = field(default_factory=dict)

    @property
    def task(self) -> dict[str, Any]:
        """The task the samples were drawn for (``Task.model_dump()``)."""
        return dict(self.header.get("task") or {})

    @property
    def settings(self) -> dict[str, Any]:
        """The sampling settings (n, temperature, model, ...)."""
        return dict(self.header.get("settings") or {})


def read_samples(path: str | os.PathLike[str]) -> SamplesFile:
    """Read a samples file, ignoring a torn last line.

    Args:
        path: The samples JSONL file.

    Returns:
        The header and the records by id.

    Raises:
        DataFileError: The file is missing, has no valid header, or holds a corrupt line
            (anywhere but a torn end).
    """
    p = Path(path)
    if not p.is_file():
        msg = "samples file not found; create it with `taskcal sample` or check the path."
        raise DataFileError(msg, path=str(p))
    data = p.read_bytes()
    lines, end = split_complete(data)
    torn = end < len(data)
    if not lines:
        msg = (
            "samples file has no complete header line (the writer was killed before it "
            "finished?); delete the file and run `taskcal sample` again."
        )
        raise DataFileError(msg, path=str(p), line=1)
    header = _decode(lines[0], path=p, line=1)
    if header.get("type") != "header" or header.get("format") != SAMPLES_FORMAT:
        msg = (
            f"first line must be a {SAMPLES_FORMAT!r} header, got {str(lines[0][:80])!r}; "
            "is this a samples file written by `taskcal sample`?"
        )
        raise DataFileError(msg, path=str(p), line=1)
    version = header.get("format_version")
    if version != SAMPLES_FORMAT_VERSION:
        msg = (
            f"format_version must be {SAMPLES_FORMAT_VERSION}, got {version!r}; re-create the "
            "file with this version of taskcal."
        )
        raise DataFileError(msg, path=str(p), line=1)
    for key in ("settings", "task"):
        if header.get(key) is not None and not isinstance(header[key], dict):
            msg = (
                f"header field {key!r} must be an object, got {str(header[key])[:80]!r}; re-create "
                "the file with `taskcal sample`."
            )
            raise DataFileError(msg, path=str(p), line=1)
    out = SamplesFile(path=p, header=header, torn_tail=torn)
    for lineno, raw in enumerate(lines[1:], start=2):
        if not raw.strip():
            continue
        record = _decode(raw, path=p, line=lineno)
        rid = record.get("id")
        if record.get("type") != "record" or not isinstance(rid, str):
            msg = f"expected a record with a string 'id', got {str(raw[:80])!r}."
            raise DataFileError(msg, path=str(p), line=lineno)
        problem = _record_problem(record)
        if problem is not None:
            msg = f"record {rid!r}: {problem}; the file is corrupt: delete the line."
            raise DataFileError(msg, path=str(p), line=lineno)
        if rid in out.records:
            out.duplicates.append(rid)
            continue
        out.records[rid] = record
        out.lines[rid] = lineno
    return out


def _is_list_of(value: Any, kinds: tuple[type, ...]) -> bool:
    return isinstance(value, list) and all(isinstance(v, kinds) for v in value)


def _record_problem(record: Mapping[str, Any]) -> str | None:
    """Return which field of a record has the wrong type, or ``None``."""
    checks: dict[str, Any] = {
        "label": lambda v: v is None or isinstance(v, str),
        "greedy_label": lambda v: v is None or isinstance(v, str),
        "labels": lambda v: _is_list_of(v, (str, type(None))),
        "samples": lambda v: _is_list_of(v, (dict,)),
        "greedy": lambda v: v is None or isinstance(v, dict),
        "tool_names": lambda v: v is None or _is_list_of(v, (str,)),
        "tools": lambda v: v is None or _is_list_of(v, (dict,)),
        "messages": lambda v: v is None or _is_list_of(v, (dict,)),
        "grading": lambda v: v is None or isinstance(v, dict),
        "probs": lambda v: (
            _is_list_of(v, (int, float))
            and all(math.isfinite(x) and not isinstance(x, bool) for x in v)
        ),
    }
    for name, ok in checks.items():
        if name in record and not ok(record[name]):
            return f"field {name!r} has the wrong type or a non-finite value: {record[name]!r}"
    return None


def _decode(raw: bytes, *, path: Path, line: int) -> dict[str, Any]:
    hint = "Delete the line: its item will be sampled again by `taskcal sample`."
    return decode_line(raw, path=path, line=line, hint=hint)


def _stored(key: str, value: Any, tool_task: bool) -> Any:
    """A setting as compared on resuming: ``belief`` ``"logprob"`` is ``"one_pass"``.

    Except for a tool decision: its one-pass belief is over the tools, its ``"logprob"`` over
    the labels.
    """
    same = key == "belief" and value == "logprob" and not tool_task
    return "one_pass" if same else value


def _check_resumable(existing: SamplesFile, header: Mapping[str, Any]) -> None:
    old_task, new_task = existing.task, dict(header.get("task") or {})
    for key in ("name", "labels"):
        if old_task.get(key) != new_task.get(key):
            msg = (
                f"samples file was written for task {old_task.get('name')!r} with labels "
                f"{old_task.get('labels')!r}, but this run has task {new_task.get('name')!r} "
                f"with labels {new_task.get('labels')!r}; use another --out file."
            )
            raise DataFileError(msg, path=str(existing.path), line=1)
    if old_task.get("prompt") != new_task.get("prompt"):
        msg = (
            f"samples file was written with the task prompt {old_task.get('prompt')!r}, but "
            f"this run has {new_task.get('prompt')!r}; beliefs drawn under two prompts would "
            "be mixed: resume with the same prompt or use another --out file."
        )
        raise DataFileError(msg, path=str(existing.path), line=1)
    # Files written before answer clustering existed have no key: no clustering.
    if old_task.get("answer_clusters") != new_task.get("answer_clusters"):
        msg = (
            f"samples file was written with answer_clusters={old_task.get('answer_clusters')!r}, "
            f"but this run has answer_clusters={new_task.get('answer_clusters')!r}; records "
            "would differ in what they store: use another --out file."
        )
        raise DataFileError(msg, path=str(existing.path), line=1)
    # Compare as they are stored: the header read back holds lists where the run has tuples.
    old, new = existing.settings, json.loads(json.dumps(dict(header.get("settings") or {})))
    tool_task = bool(new_task.get("call_action")) or "tool_call" in (new_task.get("labels") or [])
    for key in RESUME_KEYS:
        if _stored(key, old.get(key), tool_task) != _stored(key, new.get(key), tool_task):
            what = _RESUME_HINTS.get(key, "")
            msg = (
                f"samples file was written with {key}={old.get(key)!r}, but this run has "
                f"{key}={new.get(key)!r}{what}; resume with the same settings or use another "
                "--out file."
            )
            raise DataFileError(msg, path=str(existing.path), line=1)


class SamplesStore:
    """Append-only writer of a samples file (thread-safe; one writer process per file).

    Use :meth:`open` to create or resume a file, :meth:`append` to add finished records,
    and :meth:`close` (or a ``with`` block) when done.

    Attributes:
        path: The file.
        done: Ids already in the file (a resumed run skips them).
    """

    def __init__(self, path: Path, fd: int, done: set[str]) -> None:
        self.path = path
        self._fd: int | None = fd
        self.done = done
        self._lock = threading.Lock()

    @classmethod
    def open(cls, path: str | os.PathLike[str], header: Mapping[str, Any]) -> SamplesStore:
        """Create *path* with *header*, or resume it after checking the header agrees.

        A torn last line left by a killed writer is truncated away first.

        Args:
            path: The samples file.
            header: ``{"task": Task.model_dump(), "settings": {...}}``; ``type``, ``format``
                and ``format_version`` are filled in.

        Returns:
            The open store; :attr:`done` holds the ids already sampled.

        Raises:
            DataFileError: The existing file is corrupt or was written for another task or
                with other settings.
        """
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        full = {
            "type": "header",
            "format": SAMPLES_FORMAT,
            "format_version": SAMPLES_FORMAT_VERSION,
            **{k: v for k, v in header.items() if k not in ("type", "format", "format_version")},
        }
        fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            try:
                lock_exclusive(fd, wait=False)
            except BlockingIOError as exc:
                msg = (
                    "samples file is being written by another process; wait for it to "
                    "finish or use another --out file."
                )
                raise DataFileError(msg, path=str(p)) from exc
            data = b""
            size = os.fstat(fd).st_size
            if size:
                data = p.read_bytes()
            _, end = split_complete(data)
            if end < len(data):  # a torn tail: drop it
                os.ftruncate(fd, end)
                os.fsync(fd)
            if end == 0:
                os.write(fd, encode_line(full))
                os.fsync(fd)
                return cls(p, fd, set())
            existing = read_samples(p)
            _check_resumable(existing, full)
            return cls(p, fd, set(existing.records))
        except BaseException:
            os.close(fd)
            raise

    def append(self, record: Mapping[str, Any]) -> None:
        """Append one finished record atomically (one ``os.write`` + ``fsync``).

        Args:
            record: The record; must have a string ``id`` not yet in the file.

        Raises:
            RuntimeError: The store is closed.
            ValueError: The id is missing or already stored.
        """
        self.append_many([record])

    def append_many(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Append finished records in one ``os.write`` + ``fsync`` (a batch from an engine).

        A writer killed during the write leaves whole lines and at most one torn last line,
        which the next :meth:`open` truncates away (its item is sampled again).

        Raises:
            RuntimeError: The store is closed.
            ValueError: An id is missing, repeated, or already stored (nothing is written).
        """
        lines: list[bytes] = []
        with self._lock:
            if self._fd is None:
                msg = f"SamplesStore for {self.path} is closed; open it again to append."
                raise RuntimeError(msg)
            seen: set[str] = set()
            for record in records:
                rid = record.get("id")
                if not isinstance(rid, str):
                    msg = f"record['id'] must be a string, got {rid!r}."
                    raise ValueError(msg)
                if rid in self.done or rid in seen:
                    msg = f"record id {rid!r} is already stored in {self.path}; skip finished ids."
                    raise ValueError(msg)
                seen.add(rid)
                lines.append(encode_line({"type": "record", **record}))
            if lines:
                append_line(self._fd, b"".join(lines))
                self.done |= seen

    def close(self) -> None:
        """Close the file (idempotent)."""
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> SamplesStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
