"""Precision and recall of the built-in parsers g_T on hand-labelled real completions.

The set, ``tests/data/parser_quality/completions.jsonl``, holds completions of
SmolLM2-135M-Instruct (When2Call, NQ-open, STS-B, MMLU) with the label a careful human
gives each one (``null`` when no task label applies); see that folder's README. Each
parser runs on its rows (offered tools passed as the runner passes them) and the script
prints, per parser, one row per label — ``unparsed`` being the class of ``None`` and of
out-of-task outputs — with precision, recall and support (the number of hand labels),
then why the samples it left unparsed are unparsed (``unoffered_tool`` counted apart).

Run::

    python benchmarks/parser_quality.py [--set PATH] [--json]
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from taskcal_agents.parsing import get_parser
from taskcal_agents.parsing._labels import Parser, unparsed_reason, with_offered_tools
from taskcal_agents.workflow._runner import message_from_dict

DEFAULT_SET = (
    Path(__file__).resolve().parents[1] / "tests" / "data" / "parser_quality" / "completions.jsonl"
)
UNPARSED = "unparsed"


def load_rows(path: Path) -> list[dict[str, Any]]:
    """The labelled rows of the set at *path* (one JSON object a line)."""
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@functools.cache
def _parser(name: str, options: str) -> Parser:
    return get_parser(name, **json.loads(options))


def predict(row: Mapping[str, Any]) -> str:
    """The label the row's parser gives its message (``"unparsed"`` for none)."""
    spec = row["parser"]
    parser = _parser(spec["name"], json.dumps(spec.get("options", {}), sort_keys=True))
    parser = with_offered_tools(parser, row.get("tool_names"))
    label = parser(message_from_dict(row["message"]))
    return label if label in row["labels"] else UNPARSED


def reason(row: Mapping[str, Any]) -> str:
    """Why the row's message is unparsed (``taskcal_agents.parsing._labels.unparsed_reason``)."""
    return unparsed_reason(message_from_dict(row["message"]), tool_names=row.get("tool_names"))


def scores(truth: Sequence[str], pred: Sequence[str], classes: Iterable[str]) -> dict[str, Any]:
    """Per-class precision, recall and support, and the accuracy, of *pred* against *truth*.

    Precision (recall) is ``None`` for a class that is never predicted (never true).
    """
    per: dict[str, dict[str, Any]] = {}
    for c in classes:
        tp = sum(t == c and p == c for t, p in zip(truth, pred, strict=True))
        n_pred = sum(p == c for p in pred)
        n_true = sum(t == c for t in truth)
        per[c] = {
            "precision": tp / n_pred if n_pred else None,
            "recall": tp / n_true if n_true else None,
            "support": n_true,
            "predicted": n_pred,
        }
    accuracy = sum(t == p for t, p in zip(truth, pred, strict=True)) / len(truth)
    return {"classes": per, "accuracy": accuracy, "n": len(truth)}


def evaluate(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Scores per parser name (classes: the task labels in order, then ``unparsed``)."""
    groups: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[row["parser"]["name"]].append(row)
    out: dict[str, dict[str, Any]] = {}
    for name, group in groups.items():
        truth = [row["label"] if row["label"] is not None else UNPARSED for row in group]
        pred = [predict(row) for row in group]
        classes = list(dict.fromkeys(lab for row in group for lab in row["labels"]))
        out[name] = scores(truth, pred, [*classes, UNPARSED])
        out[name]["unparsed_reasons"] = dict(
            Counter(reason(row) for row, p in zip(group, pred, strict=True) if p == UNPARSED)
        )
        out[name]["confusion"] = {
            f"{t} -> {p}": n for (t, p), n in sorted(Counter(zip(truth, pred, strict=True)).items())
        }
    return out


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def format_tables(results: Mapping[str, Mapping[str, Any]]) -> str:
    """Markdown tables, one per parser."""
    lines: list[str] = []
    for name, res in results.items():
        lines.append(f"{name} (n={res['n']}, accuracy {res['accuracy']:.2f})")
        lines.append("")
        lines.append("| label | precision | recall | support |")
        lines.append("|---|---|---|---|")
        for label, s in res["classes"].items():
            if s["support"] or s["predicted"]:
                row = f"| {label} | {_fmt(s['precision'])} | {_fmt(s['recall'])} | {s['support']} |"
                lines.append(row)
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(res["unparsed_reasons"].items()))
        lines.append("")
        lines.append(f"unparsed samples by reason: {reasons or 'none'}")
        lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the tables (or JSON with ``--json``)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--set", type=Path, default=DEFAULT_SET, help="Labelled JSONL.")
    ap.add_argument("--json", action="store_true", help="Print the scores as JSON.")
    args = ap.parse_args(argv)
    results = evaluate(load_rows(args.set))
    sys.stdout.write(json.dumps(results, indent=2) if args.json else format_tables(results))
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
