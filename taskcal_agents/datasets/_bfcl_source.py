"""Reading BFCL's data: the pinned ``bfcl-eval`` wheel or an unpacked data folder.

Only the categories of :data:`BFCL_CATEGORIES` are read, never those kept for independent
evaluation (:data:`RESERVED_CATEGORIES`). The wheel's bytes are read, never installed or
imported, and a pinned version's SHA-256 is checked. :func:`read_requests` keeps the
requests of one user message with one right call among their tools.
"""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from taskcal_agents._files import read_jsonl, sha256_file
from taskcal_agents.errors import DataFileError

__all__ = [
    "BFCL_CATEGORIES",
    "BFCL_WHEELS",
    "RESERVED_CATEGORIES",
    "Request",
    "read_requests",
]

BFCL_CATEGORIES = ("simple_python", "multiple", "live_multiple")
"""The categories the corpus reads."""

RESERVED_CATEGORIES = ("live_simple", "irrelevance", "live_irrelevance")
"""Categories kept for independent evaluation: never read."""

BFCL_WHEELS = {
    "bfcl_eval-2026.3.23-py3-none-any.whl": (
        "3bb6dfa5f0c68ad403c9ec50b00db2bb3b4cc9b38ab1ff33f48fe30d853d3a0a"
    ),
}
"""Pinned ``bfcl-eval`` wheels: file name → SHA-256."""


def _member_name(category: str, answers: bool) -> re.Pattern[str]:
    folder = "possible_answer/" if answers else "(?<!possible_answer/)"
    return re.compile(rf"(?:^|/){folder}BFCL_v\d+_{re.escape(category)}\.json$")


def _read_members(source: Path) -> dict[tuple[str, bool], tuple[str, str]]:
    """``(category, answers?) -> (name, text)`` for the categories read, from a wheel or folder."""
    wanted = {(c, a): _member_name(c, a) for c in BFCL_CATEGORIES for a in (False, True)}
    found: dict[tuple[str, bool], tuple[str, str]] = {}
    if source.is_dir():
        wheels = sorted(source.glob("bfcl_eval-*.whl"))
        if wheels:
            return _read_members(wheels[-1])
        for path in sorted(source.rglob("BFCL_v*.json")):
            rel = path.relative_to(source).as_posix()
            for key, pattern in wanted.items():
                if pattern.search(rel):
                    found[key] = (rel, path.read_text(encoding="utf-8"))
    else:
        pinned = BFCL_WHEELS.get(source.name)
        if pinned is None:
            msg = (
                f"not a pinned bfcl-eval wheel ({', '.join(BFCL_WHEELS)}): give one of them "
                "(pip download --no-deps bfcl-eval==2026.3.23) or an unpacked bfcl_eval/data "
                "folder."
            )
            raise DataFileError(msg, path=str(source))
        digest = sha256_file(source)
        if digest != pinned:
            msg = f"SHA-256 {digest} does not match the pinned {pinned}: a changed or broken file."
            raise DataFileError(msg, path=str(source))
        try:
            with zipfile.ZipFile(source) as archive:
                for name in archive.namelist():
                    for key, pattern in wanted.items():
                        if pattern.search(name):
                            found[key] = (name, archive.read(name).decode("utf-8"))
        except zipfile.BadZipFile as exc:
            msg = f"not a wheel (zip): {exc}."
            raise DataFileError(msg, path=str(source)) from exc
    missing = sorted(
        {f"{c}{' answers' if a else ''}" for (c, a) in wanted}
        - {f"{c}{' answers' if a else ''}" for (c, a) in found}
    )
    if missing:
        msg = f"BFCL files missing from the source: {', '.join(missing)}."
        raise DataFileError(msg, path=str(source))
    return found


@dataclass
class Request:
    """One usable BFCL request: a single user message, one right call among its tools."""

    id: str
    category: str
    question: str
    functions: list[dict[str, Any]]
    """The offered tools in BFCL's dialect."""
    answer: dict[str, dict[str, list[Any]]]
    """BFCL's possible answer: ``{function: {param: [accepted values]}}``."""
    text: str = ""
    """The tools' words: names, descriptions, parameter names and descriptions."""
    deletion: tuple[str, str, str] | None = field(default=None)
    """``(question without the phrase, deleted parameter, phrase)`` when one qualifies."""

    @property
    def function(self) -> str:
        return next(iter(self.answer))


def read_requests(source: Path) -> list[Request]:
    """The usable requests of :data:`BFCL_CATEGORIES`, in category then file order."""
    members = _read_members(source)
    requests: list[Request] = []
    for category in BFCL_CATEGORIES:
        q_name, q_text = members[category, False]
        a_name, a_text = members[category, True]
        truths = read_jsonl(a_name, text=a_text)
        answers = {row.get("id"): row.get("ground_truth") for _, row in truths}
        for _, row in read_jsonl(q_name, text=q_text):
            turns, functions, truth = (
                row.get("question"),
                row.get("function"),
                answers.get(row.get("id")),
            )
            if not (isinstance(turns, list) and len(turns) == 1 and isinstance(truth, list)):
                continue
            messages = turns[0]
            if len(messages) != 1 or messages[0].get("role") != "user" or len(truth) != 1:
                continue
            answer = truth[0]
            names = {f.get("name") for f in functions or []}
            if not isinstance(answer, dict) or len(answer) != 1 or next(iter(answer)) not in names:
                continue
            question = str(messages[0].get("content") or "").strip()
            if question:
                offered = list(functions or [])
                requests.append(Request(str(row["id"]), category, question, offered, answer))
    return requests
