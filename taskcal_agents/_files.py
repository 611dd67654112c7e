"""Files written one way (layer 0): atomic whole-file writes, JSONL appends, one file lock.

Whole files: every report, summary, figure, task file, artefact, evaluation, monitor JSON
and model manifest the library or the CLI writes goes through :func:`atomic_path` — a
temporary file in the destination's folder, flushed and ``fsync``-ed, then ``os.replace``-d
onto the destination (and the folder ``fsync``-ed, on POSIX), the temporary removed if
anything fails — so a reader sees the old file or the new one, never half of one.
:func:`atomic_open` (a file object), :func:`write_text`, :func:`write_json` and
:func:`save_figure` (matplotlib) are that writer for each kind of content.

:func:`read_json` reads JSON back, turning a missing or malformed file into a
:class:`~taskcal_agents.errors.DataFileError` that names the file; :func:`read_jsonl` and
:func:`decode_line` are the one JSONL reader (datasets, samples, decision logs, outcomes), a bad
line a ``DataFileError`` that names the file and the line.

Append-only streams (the samples store and the decision log) share the JSONL primitives: a
line is encoded in full and handed to the kernel with one ``os.write`` on an ``O_APPEND``
file descriptor, then ``fsync``-ed (:func:`append_line`), so a writer killed at any moment
leaves at worst a torn last line, which readers skip (:func:`split_complete`).

:func:`lock_exclusive` is the one file lock (``flock`` on POSIX, ``msvcrt.locking`` on
Windows), imported when a lock is taken, so importing the package never needs ``fcntl``.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import json
import os
import secrets
import stat
import sys
import time
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any, Literal, overload

from taskcal_agents.errors import DataFileError

__all__ = [
    "append_line",
    "atomic_open",
    "atomic_path",
    "decode_line",
    "encode_line",
    "lock_exclusive",
    "read_json",
    "read_jsonl",
    "save_figure",
    "sha256_file",
    "split_complete",
    "write_json",
    "write_text",
]


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a fresh temporary path beside *path*; on success it replaces *path* atomically.

    The caller (or a library that only takes a file name, such as matplotlib) writes the
    temporary file; when the block ends without an exception it is ``fsync``-ed and
    renamed onto *path*. On any exception it is removed and *path* is left as it was. The
    parent folder is created if needed; the file keeps the permissions it had, and a new
    one gets those a plain ``open(path, "w")`` would (``0o666`` less the umask); a symbolic
    link is written through (its target is replaced, the link stays). The temporary name keeps the
    suffix of *path* (``.summary.md.<random>.tmp.md``), so writers that pick a format by
    suffix pick the right one.
    """
    p = Path(path)
    if p.is_symlink():  # write through the link, as a plain open does: the link stays
        p = p.resolve()
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = _create_temp(p)
    with contextlib.suppress(FileNotFoundError):  # a replaced file keeps its mode
        os.chmod(tmp, stat.S_IMODE(os.stat(p).st_mode))
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDWR | getattr(os, "O_BINARY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, p)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(p.parent)


@overload
def atomic_open(
    path: str | os.PathLike[str], *, binary: Literal[False] = ...
) -> contextlib.AbstractContextManager[IO[str]]: ...
@overload
def atomic_open(
    path: str | os.PathLike[str], *, binary: Literal[True]
) -> contextlib.AbstractContextManager[IO[bytes]]: ...
def atomic_open(
    path: str | os.PathLike[str], *, binary: bool = False
) -> contextlib.AbstractContextManager[IO[Any]]:
    """A file object to write *path* through, atomically (see :func:`atomic_path`).

    Text is UTF-8. Nothing is visible at *path* until the block ends without an exception.
    """
    return _atomic_open(path, binary=binary)


@contextlib.contextmanager
def _atomic_open(path: str | os.PathLike[str], *, binary: bool) -> Iterator[IO[Any]]:
    with atomic_path(path) as tmp:
        fh: IO[Any]
        with tmp.open("wb") if binary else tmp.open("w", encoding="utf-8") as fh:
            yield fh


def write_text(text: str, path: str | os.PathLike[str]) -> Path:
    """Write *text* (UTF-8) to *path*, atomically; return the path."""
    with atomic_open(path) as fh:
        fh.write(text)
    return Path(path)


def write_json(obj: Any, path: str | os.PathLike[str]) -> Path:
    """Write *obj* as indented JSON, atomically; return the path."""
    with atomic_open(path) as fh:
        json.dump(obj, fh, indent=2, allow_nan=True)
        fh.write("\n")
    return Path(path)


def save_figure(fig: Any, path: str | os.PathLike[str], **kwargs: Any) -> Path:
    """``fig.savefig(path, **kwargs)`` for a matplotlib figure, atomically; return the path.

    The format follows the suffix of *path*, as with ``savefig`` itself.
    """
    with atomic_path(path) as tmp:
        fig.savefig(tmp, **kwargs)
    return Path(path)


def _create_temp(p: Path) -> Path:
    """Create an empty, new file beside *p* (``O_EXCL``; mode ``0o666`` less the umask)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    while True:
        tmp = p.with_name(f".{p.name}.{secrets.token_hex(4)}.tmp{p.suffix}")
        try:
            os.close(os.open(tmp, flags, 0o666))
        except FileExistsError:  # pragma: no cover - a 32-bit random clash
            continue
        return tmp


def _fsync_dir(folder: Path) -> None:
    """Make a rename in *folder* durable (POSIX; a no-op where folders cannot be opened)."""
    if os.name != "posix":
        return
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


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


def decode_line(
    raw: str | bytes, *, path: str | os.PathLike[str], line: int, hint: str = ""
) -> dict[str, Any]:
    """One JSONL line as its JSON object.

    Raises:
        DataFileError: Naming ``path`` and ``line``, if the line is not valid JSON (``hint``
            says what to do) or not an object.
    """
    try:
        obj = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        where = f" (column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        detail = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        msg = f"line is not valid JSON (truncated or corrupt?): {detail}{where}." + (
            f" {hint}" if hint else ""
        )
        raise DataFileError(msg, path=str(path), line=line) from exc
    if not isinstance(obj, dict):
        text = raw if isinstance(raw, str) else raw.decode("utf-8", "replace")
        msg = f"each line must be a JSON object, got {type(obj).__name__}: {text.strip()[:80]!r}."
        raise DataFileError(msg, path=str(path), line=line)
    return obj


def read_jsonl(
    path: str | os.PathLike[str], *, text: str | None = None, hint: str = ""
) -> Iterator[tuple[int, dict[str, Any]]]:
    """The 1-based line number and object of each non-blank line of a JSONL file.

    Args:
        path: The file (read as UTF-8 unless ``text`` is given).
        text: The file's content, when it is not on disk (``path`` names it in errors).
        hint: What to do about a line that is not valid JSON (see :func:`decode_line`).

    Raises:
        DataFileError: For a line that is not a JSON object.
    """
    if text is None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            msg = f"the file is not UTF-8 text ({exc})."
            raise DataFileError(msg, path=str(path)) from exc
    # JSON strings may hold U+2028 and the like raw: lines end only at a newline.
    for number, raw in enumerate(text.split("\n"), start=1):
        if raw.strip():
            yield number, decode_line(raw.rstrip("\r"), path=path, line=number, hint=hint)


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


def lock_exclusive(fd: int, *, wait: bool) -> None:
    """Take an exclusive lock on the open file *fd*; it is held until *fd* is closed.

    Advisory between processes (and between two descriptors of one process). POSIX uses
    ``fcntl.flock``; Windows ``msvcrt.locking`` on one byte far past the end of the file,
    so that its mandatory range lock never blocks readers or appenders. The module is
    imported here, not at import time. Where neither exists there is no lock, said once
    with a ``RuntimeWarning``.

    Args:
        fd: An open file descriptor.
        wait: ``True``: block until the lock is free (appenders that take turns).
            ``False``: one writer only — raise at once if another holds it.

    Raises:
        BlockingIOError: ``wait=False`` and another descriptor holds the lock.
    """
    if sys.platform == "win32":
        import msvcrt

        _lock_msvcrt(msvcrt, fd, wait=wait)
        return
    try:
        import fcntl
    except ImportError:  # a POSIX-like platform without flock (WASI, Emscripten)
        _warn_no_lock()
        return
    fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)


@functools.cache
def _warn_no_lock() -> None:
    """Say once that writers are not locked here (the declared fallback: no lock)."""
    warnings.warn(
        "this platform has neither fcntl nor msvcrt: taskcal-agents cannot lock its files, "
        "so it cannot refuse a second writer of a samples file or order appends to a "
        "decision log; run one writer per file.",
        RuntimeWarning,
        stacklevel=3,
    )


# 1 TiB + 2 GiB: past any real log or samples file, within every file system's size limit;
# its low 32 bits alone are 2 GiB, should a C runtime truncate the offset.
_MSVCRT_LOCK_OFFSET = (1 << 40) | (1 << 31)
_MSVCRT_RETRY_S = 0.05


def _lock_msvcrt(msvcrt: Any, fd: int, *, wait: bool) -> None:
    """:func:`lock_exclusive` with Windows' ``msvcrt`` (passed in, so it is testable)."""
    position = os.lseek(fd, 0, os.SEEK_CUR)
    os.lseek(fd, _MSVCRT_LOCK_OFFSET, os.SEEK_SET)
    try:
        while True:
            try:
                msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            except OSError as exc:
                if not wait:
                    msg = "the file is locked by another writer"
                    raise BlockingIOError(errno.EAGAIN, msg) from exc
                time.sleep(_MSVCRT_RETRY_S)
            else:
                return
    finally:
        os.lseek(fd, position, os.SEEK_SET)


def sha256_file(path: str | os.PathLike[str], *, chunk: int = 1 << 20) -> str:
    """The SHA-256 (hex) of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()
