"""Files written one way: the atomic writer, the one file lock, and no ``fcntl`` at import.

* every whole-file write in ``taskcal_agents/`` goes through ``_files`` (an AST scan);
* a failed write leaves the old file intact and no temporary behind;
* the lock refuses a second writer (``wait=False``) and lets appenders take turns;
* ``import taskcal_agents`` and every module of it work where ``fcntl`` does not exist.
"""

from __future__ import annotations

import ast
import errno
import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any

import pytest

from taskcal_agents import _files
from taskcal_agents._files import (
    atomic_open,
    atomic_path,
    lock_exclusive,
    save_figure,
    write_json,
    write_text,
)
from taskcal_agents.errors import DataFileError
from tests.conftest import require_module

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "taskcal_agents"

# --- the AST scan --------------------------------------------------------------------------

ALLOWED: dict[tuple[str, str], str] = {
    ("workflow/_store.py", "os.open"): (
        "the samples store: an append-only JSONL stream that resumes after a crash (one "
        "os.write + fsync per batch, a torn tail truncated on reopen), not a whole-file rewrite"
    ),
    ("production/_decision_log.py", "os.open"): (
        "the JSONL decision log: append-only, one os.write + fsync per record under the lock"
    ),
    ("models/_prepare.py", "os.open"): "the lock file of a model folder; it is never written",
    ("serving/_process.py", "open:ab"): (
        "the vLLM server's log: a stream the child process writes to as it runs"
    ),
    ("serving/_process.py", "tempfile.mkstemp"): "names (creates empty) that log file",
}
"""Writes outside ``_files.py`` that are not whole-file rewrites, by module and kind."""

WRITE_METHODS = frozenset(
    {"write_text", "write_bytes", "savefig", "to_csv", "to_parquet", "savetxt", "tofile"}
)
DUMPERS = frozenset({"json", "pickle", "yaml", "marshal", "tomli_w"})
DUMP_FUNCTIONS = frozenset({"dump", "safe_dump", "dump_all", "safe_dump_all"})
WRITE_FLAGS = frozenset({"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"})


def _str_arg(call: ast.Call, position: int, keyword: str) -> str | None:
    node: ast.expr | None = None
    if len(call.args) > position:
        node = call.args[position]
    for kw in call.keywords:
        if kw.arg == keyword:
            node = kw.value
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _write_kind(call: ast.Call) -> str | None:
    """What kind of file write *call* is (``None``: not one)."""
    func = call.func
    owner: str | None = None
    if isinstance(func, ast.Name):
        name = func.id
    elif isinstance(func, ast.Attribute):
        name = func.attr
        owner = func.value.id if isinstance(func.value, ast.Name) else None
        if name in WRITE_METHODS:
            return name
    else:
        return None
    to_stream = len(call.args) > 1 or any(k.arg in {"fp", "file", "stream"} for k in call.keywords)
    if owner in DUMPERS and name in DUMP_FUNCTIONS and to_stream:  # not json.dumps, yaml.dump(o)
        return f"{owner}.{name}"
    if owner == "os" and name in {"replace", "rename"}:
        return f"os.{name}"
    if owner == "os" and name == "open":
        flags = {n.attr for n in ast.walk(call) if isinstance(n, ast.Attribute)}
        return "os.open" if flags & WRITE_FLAGS else None
    if owner == "shutil" and name in {"copy", "copy2", "copyfile", "move"}:
        return f"shutil.{name}"
    if owner == "tempfile" and name in {"mkstemp", "NamedTemporaryFile"}:
        return f"tempfile.{name}"
    if name in {"open", "fdopen"}:
        # builtin open(file, mode) / os.fdopen(fd, mode); Path.open(mode)
        bare_open = isinstance(func, ast.Name) or owner in {"os", "io", "builtins"}
        mode = _str_arg(call, 1 if bare_open else 0, "mode")
        if mode is not None and set(mode) & set("wxa+"):
            return f"open:{mode}"
    return None


def _write_sites() -> list[tuple[str, int, str]]:
    sites = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == "_files.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and (kind := _write_kind(node)) is not None:
                sites.append((rel, node.lineno, kind))
    return sites


def test_every_whole_file_write_goes_through_the_atomic_writer() -> None:
    sites = _write_sites()
    stray = [f"taskcal_agents/{rel}:{line}: {kind}" for rel, line, kind in sites
             if (rel, kind) not in ALLOWED]  # fmt: skip
    assert not stray, (
        "write files through taskcal_agents._files (write_text, write_json, atomic_open, "
        "atomic_path, save_figure), or allow-list an append-only stream here with the reason:\n"
        + "\n".join(stray)
    )
    used = {(rel, kind) for rel, _, kind in sites}
    assert set(ALLOWED) <= used, f"allow-list entries no longer needed: {set(ALLOWED) - used}"


def test_the_scan_sees_each_kind_of_write() -> None:
    source = textwrap.dedent(
        """
        p.write_text("x"); p.write_bytes(b""); fig.savefig(p); json.dump(o, fh)
        yaml.safe_dump(o, fh); open(p, "w"); p.open("wb"); os.fdopen(fd, "x")
        os.replace(a, b); os.open(p, os.O_WRONLY | os.O_CREAT)
        open(p); p.open(); yaml.safe_dump(o); json.dumps(o); os.open(p, os.O_RDONLY)
        SamplesStore.open(p, header); archive.open(member)
        """
    )
    calls = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)]
    calls.sort(key=lambda c: (c.lineno, c.col_offset))
    kinds = [kind for call in calls if (kind := _write_kind(call))]
    assert kinds == [
        "write_text", "write_bytes", "savefig", "json.dump", "yaml.safe_dump", "open:w",
        "open:wb", "open:x", "os.replace", "os.open",
    ]  # fmt: skip


def _module_level_imports(tree: ast.Module) -> set[str]:
    """Modules imported when the module is imported (not inside a function or class)."""
    names: set[str] = set()
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            for field in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(node, field, []):
                    todo.extend(child.body if isinstance(child, ast.ExceptHandler) else [child])
    return names


def test_no_module_imports_a_platform_lock_at_import_time() -> None:
    offenders = [
        path.relative_to(ROOT).as_posix()
        for path in sorted(PACKAGE.rglob("*.py"))
        if _module_level_imports(ast.parse(path.read_text(encoding="utf-8"))) & {"fcntl", "msvcrt"}
    ]
    assert offenders == []


# --- no fcntl at import time ---------------------------------------------------------------

_WITHOUT_FCNTL = textwrap.dedent(
    """
    import importlib, pkgutil, sys
    sys.modules["fcntl"] = None  # `import fcntl` now raises ImportError
    import taskcal_agents
    required = ["decision", "parsing", "production", "workflow", "sampling", "serving",
                "models", "datasets", "commands", "cli"]
    for name in required:
        importlib.import_module(f"taskcal_agents.{name}")
    skipped = []
    for info in pkgutil.walk_packages(taskcal_agents.__path__, "taskcal_agents."):
        if info.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(info.name)
        except ImportError as exc:
            if "fcntl" in str(exc):
                raise
            skipped.append(f"{info.name}: {exc}")  # an optional dependency is not installed
    assert "fcntl" not in {k for k, v in sys.modules.items() if v is not None}
    print("ok", len(skipped))
    """
)


def test_import_works_without_fcntl() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _WITHOUT_FCNTL],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("ok")


def test_lock_without_a_lock_primitive_warns_once_and_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if sys.platform == "win32":  # pragma: no cover
        pytest.skip("Windows always has msvcrt")
    import taskcal_agents._files as files

    files._warn_no_lock.cache_clear()
    monkeypatch.setitem(sys.modules, "fcntl", None)
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    try:
        with pytest.warns(RuntimeWarning, match="cannot lock its files"):
            lock_exclusive(fd, wait=False)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            lock_exclusive(fd, wait=False)  # said once
    finally:
        os.close(fd)
        files._warn_no_lock.cache_clear()


# --- the lock ------------------------------------------------------------------------------


def _open(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)


def test_lock_refuses_a_second_writer_then_frees_on_close(tmp_path: Path) -> None:
    path = tmp_path / "store.jsonl"
    second = _open(path)
    try:
        first = _open(path)
        try:
            lock_exclusive(first, wait=False)
            with pytest.raises(BlockingIOError):
                lock_exclusive(second, wait=False)
        finally:
            os.close(first)
        lock_exclusive(second, wait=False)  # closing the holder released it
    finally:
        os.close(second)


_HOLDER = textwrap.dedent(
    """
    import os, sys
    from taskcal_agents._files import lock_exclusive
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    lock_exclusive(fd, wait=False)
    print("locked", flush=True)
    sys.stdin.readline()
    """
)


def test_lock_refuses_a_writer_in_another_process(tmp_path: Path) -> None:
    path = tmp_path / "store.jsonl"
    with subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    ) as holder:
        assert holder.stdout is not None and holder.stdin is not None
        fd = _open(path)
        try:
            assert holder.stdout.readline().strip() == "locked"
            with pytest.raises(BlockingIOError):
                lock_exclusive(fd, wait=False)
            holder.stdin.write("\n")
            holder.stdin.flush()
            assert holder.wait(timeout=60) == 0
            lock_exclusive(fd, wait=True)  # free once the holder is gone
        finally:
            os.close(fd)
            if holder.poll() is None:
                holder.kill()


class _FakeMsvcrt:
    """``msvcrt.locking`` with one other holder that lets go after *busy* refusals."""

    LK_NBLCK = 2

    def __init__(self, busy: int) -> None:
        self.busy = busy
        self.calls: list[tuple[int, int, int, int]] = []

    def locking(self, fd: int, mode: int, nbytes: int) -> None:
        self.calls.append((fd, mode, nbytes, os.lseek(fd, 0, os.SEEK_CUR)))
        if self.busy:
            self.busy -= 1
            raise OSError(errno.EACCES, "Permission denied")


def test_windows_lock_refuses_or_waits_and_keeps_the_position(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_files, "_MSVCRT_RETRY_S", 0.0)
    fd = _open(tmp_path / "log.jsonl")
    try:
        os.write(fd, b"abc")
        refused = _FakeMsvcrt(busy=1)
        with pytest.raises(BlockingIOError):
            _files._lock_msvcrt(refused, fd, wait=False)
        waited = _FakeMsvcrt(busy=2)
        _files._lock_msvcrt(waited, fd, wait=True)
        assert len(waited.calls) == 3
        # one byte far past the end of the file, so readers and appenders are never blocked
        assert {c[1:] for c in waited.calls} == {(2, 1, _files._MSVCRT_LOCK_OFFSET)}
        assert os.lseek(fd, 0, os.SEEK_CUR) == 3
    finally:
        os.close(fd)


# --- the atomic writer ---------------------------------------------------------------------


def _listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_write_json_and_text_replace_the_file(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "a.json"
    assert write_json({"x": float("nan")}, target) == target
    assert target.read_text(encoding="utf-8") == '{\n  "x": NaN\n}\n'
    assert write_text("héllo\n", target) == target
    assert target.read_bytes() == "héllo\n".encode()
    assert _listing(target.parent) == ["a.json"]


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_a_replaced_file_keeps_its_mode_and_a_link_is_written_through(tmp_path: Path) -> None:
    target = tmp_path / "report.md"
    target.write_text("old")
    target.chmod(0o600)
    write_text("new", target)
    assert target.read_text() == "new" and target.stat().st_mode & 0o777 == 0o600
    link = tmp_path / "latest.md"
    link.symlink_to(target)
    write_text("newer", link)
    assert link.is_symlink() and target.read_text() == "newer"


def test_written_files_get_the_umask_permissions(tmp_path: Path) -> None:
    umask = os.umask(0o022)
    os.umask(umask)
    target = write_text("x", tmp_path / "r.md")
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask


def test_failed_json_write_keeps_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "evaluation.json"
    write_json({"old": True}, target)
    with pytest.raises(TypeError):
        # json.dump writes "{"a": 1, "b": " before it meets the object
        write_json({"a": 1, "b": object()}, target)
    assert json.loads(target.read_text(encoding="utf-8")) == {"old": True}
    assert _listing(tmp_path) == ["evaluation.json"]


def test_failed_stream_keeps_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "model.gguf"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError, match="midway"), atomic_open(target, binary=True) as fh:
        fh.write(b"new" * 1000)
        fh.flush()
        raise RuntimeError("midway")
    assert target.read_bytes() == b"old"
    assert _listing(tmp_path) == ["model.gguf"]


def test_nothing_is_visible_before_the_block_ends(tmp_path: Path) -> None:
    target = tmp_path / "summary.md"
    with atomic_path(target) as tmp:
        assert tmp.parent == tmp_path and tmp.suffix == ".md" and tmp.name.startswith(".")
        tmp.write_text("done\n", encoding="utf-8")
        assert not target.exists()
    assert target.read_text(encoding="utf-8") == "done\n"
    assert _listing(tmp_path) == ["summary.md"]


class _Figure:
    """A figure whose ``savefig`` writes part of the file, then fails (or succeeds)."""

    def __init__(self, fail: bool) -> None:
        self.fail = fail
        self.seen: list[tuple[Path, dict[str, Any]]] = []

    def savefig(self, fname: Path, **kwargs: Any) -> None:
        self.seen.append((Path(fname), kwargs))
        Path(fname).write_bytes(b"\x89PNG partial")
        if self.fail:
            raise ValueError("the renderer failed")


def test_save_figure_is_atomic(tmp_path: Path) -> None:
    target = tmp_path / "reliability.png"
    ok = _Figure(fail=False)
    assert save_figure(ok, target, dpi=110) == target
    ((tmp, kwargs),) = ok.seen
    assert tmp.suffix == ".png" and tmp != target and kwargs == {"dpi": 110}
    with pytest.raises(ValueError, match="renderer"):
        save_figure(_Figure(fail=True), target, dpi=110)
    assert target.read_bytes() == b"\x89PNG partial"
    assert _listing(tmp_path) == ["reliability.png"]


def test_save_figure_with_matplotlib_picks_the_format_by_suffix(tmp_path: Path) -> None:
    require_module("matplotlib")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(1, 1))
    fig.add_subplot().plot([0, 1])
    assert save_figure(fig, tmp_path / "f.png").read_bytes().startswith(b"\x89PNG")
    assert b"<svg" in save_figure(fig, tmp_path / "f.svg").read_bytes()
    assert _listing(tmp_path) == ["f.png", "f.svg"]


def test_read_jsonl_ends_lines_only_at_newlines(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    rows = [{"q": "a\u2028b\u0085c"}, {"q": "d"}]
    path.write_bytes(b"".join(_files.encode_line(r) for r in rows).replace(b"\n", b"\r\n", 1))
    assert list(_files.read_jsonl(path)) == [(1, rows[0]), (2, rows[1])]
    path.write_bytes(b'{"q": "\xff"}\n')
    with pytest.raises(DataFileError, match=r"rows\.jsonl: the file is not UTF-8 text \("):
        list(_files.read_jsonl(path))
    path.write_text('{"q": 1}\n\n{"q": \n', encoding="utf-8")
    with pytest.raises(DataFileError, match=r"rows\.jsonl:3: line is not valid JSON"):
        list(_files.read_jsonl(path))
