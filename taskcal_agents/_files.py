"""Atomic JSON writing (layer 0): artefacts and evaluation files are never left half written.

:func:`read_json` reads them back, turning a missing or malformed file into a
:class:`~taskcal_agents.errors.DataFileError` that names the file.

Also the JSONL append primitives shared by the samples store and the decision log: a line
is encoded in full and handed to the kernel with one ``os.write`` on an ``O_APPEND`` file
descriptor, then ``fsync``-ed (:func:`append_line`), so a writer killed at any moment
leaves at worst a torn last line, which readers skip (:func:`split_complete`).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from taskcal_agents.errors import DataFileError

__all__ = ["append_line", "encode_line", "read_json", "split_complete", "write_json"]


def write_json(obj: Any, path: str | os.PathLike[str]) -> Path:
    """Write *obj* as indented JSON, atomically (temporary file, then rename)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(obj, fh, indent=2, allow_nan=True)
            fh.write("\n")
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return p


def read_json(path: str | os.PathLike[str], *, what: str, missing_hint: str) -> Any:
    """Read the JSON file *path*, described as *what* in errors.

    Raises:
        DataFileError: ``"<what> not found; <missing_hint>"`` for a missing file, or
            ``"<what> is not valid JSON: ..."`` (with the line) for an unreadable one.
    """
    p = Path(path)
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        msg = f"{what} not found; {missing_hint}"
        raise DataFileError(msg, path=str(p)) from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        msg = f"{what} is not valid JSON: {exc}."
        raise DataFileError(msg, path=str(p), line=getattr(exc, "lineno", None)) from exc


def encode_line(obj: Mapping[str, Any]) -> bytes:
    """One JSONL line (UTF-8, newline-terminated) for *obj*."""
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def split_complete(data: bytes) -> tuple[list[bytes], int]:
    """Complete lines of *data* and the byte length they cover (a torn tail excluded)."""
    end = data.rfind(b"\n") + 1
    return data[:end].splitlines(), end


def append_line(fd: int, line: bytes) -> None:
    """Append *line* to the ``O_APPEND`` descriptor *fd* in one ``os.write``, then ``fsync``.

    Returns only once the line is on disk: a record acknowledged by a caller survives
    ``kill -9`` (and, on a file system that honours ``fsync``, a power loss).
    """
    written = os.write(fd, line)
    while written < len(line):  # only on exotic file systems; still one record
        written += os.write(fd, line[written:])
    os.fsync(fd)
