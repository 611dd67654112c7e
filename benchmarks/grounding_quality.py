"""Precision and recall of the argument-grounding check on hand-labelled real tool calls.

The set, ``tests/data/grounding/calls.jsonl``, holds tool calls that Qwen2.5-Coder-0.5B-Instruct
wrote (When2Call, the library's demo requests and the set's own requests,
``tests/data/grounding/requests.jsonl``), one call a row, each labelled by hand grounded or
not, with the arguments that make it ungrounded; see that folder's README. For each row this
rebuilds the item's :class:`~taskcal_agents.parsing.GroundingContext` (its tools and its
conversation, never the task prompt, as the runner does), runs
:meth:`~taskcal_agents.parsing.GroundingContext.ground_call` on the call and prints, per
dataset (When2Call also per item label) and overall:

- precision and recall of the class "ungrounded" (positive: the check says the call is
  not grounded), and the accuracy;
- the agreement on the offending arguments: the share of truly ungrounded rows whose hand
  ``offending`` arguments equal (as a set) what the check needs, its
  :attr:`~taskcal_agents.parsing._grounding.CallGrounding.needed` (for a tool that was not offered:
  the tool's name).

The When2Call rows store no conversation or schema: their items are read from the shared
data folder (``$TASKCAL_SHARED_DATA``, else ``../shared/data``; or --source). With
``--show-errors`` it prints every row where the check and the hand label disagree.

Run::

    PYTHONPATH=. python benchmarks/grounding_quality.py [--set PATH] [--source PATH]
        [--show-errors] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from taskcal_agents.datasets import DatasetItem, convert, read_dataset
from taskcal_agents.errors import DataFileError
from taskcal_agents.parsing._grounding import CallGrounding, GroundingContext
from taskcal_agents.workflow._demo import demo_items

DATA_DIR = Path(__file__).resolve().parents[1] / "tests" / "data" / "grounding"
DEFAULT_SET = DATA_DIR / "calls.jsonl"
REQUESTS = DATA_DIR / "requests.jsonl"
DATASETS = ("gset", "demo", "when2call")
WHEN2CALL_LABELS = ("tool_call", "request_for_info", "cannot_answer")


def load_rows(path: Path = DEFAULT_SET) -> list[dict[str, Any]]:
    """The labelled rows of the set at *path* (one JSON object a line)."""
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def load_items(
    datasets: Iterable[str], *, source: str | os.PathLike[str] | None = None
) -> dict[str, dict[str, DatasetItem]]:
    """The items the rows point into, by dataset and item id.

    ``gset`` is the set's own ``requests.jsonl``, ``demo`` the package's demo requests and
    ``when2call`` the converted LLM-judge test file of the shared data folder (*source*, or
    ``$TASKCAL_SHARED_DATA/when2call/when2call_test_llm_judge.jsonl``).

    Raises:
        DataFileError: The When2Call source is missing (set ``$TASKCAL_SHARED_DATA``).
    """
    out: dict[str, dict[str, DatasetItem]] = {}
    for name in dict.fromkeys(datasets):
        if name == "gset":
            items = read_dataset(REQUESTS)
        elif name == "demo":
            items = demo_items()
        elif name == "when2call":
            items = convert("when2call", source)
        else:
            msg = f"unknown dataset {name!r}; expected one of {list(DATASETS)}."
            raise ValueError(msg)
        out[name] = {item.id: item for item in items}
    return out


def check(row: Mapping[str, Any], item: DatasetItem) -> CallGrounding:
    """The grounding check of the row's call, in its item's tools and conversation."""
    return GroundingContext(item.tools, item.messages).ground_call(row["call"])


def check_offending(grounding: CallGrounding) -> list[str]:
    """What the check blames: the tool's name when it was not offered, else ``needed``."""
    if not grounding.offered:
        return [grounding.name]
    return list(grounding.needed)


def predictions(
    rows: Sequence[Mapping[str, Any]], items: Mapping[str, Mapping[str, DatasetItem]]
) -> list[dict[str, Any]]:
    """One prediction per row: ``grounded`` and ``offending`` as the check says."""
    out = []
    for row in rows:
        item = items[row["dataset"]][row["item_id"]]
        g = check(row, item)
        out.append(
            {
                "id": row["id"],
                "grounded": g.grounded,
                "offending": check_offending(g),
                "arguments": {a.name: f"{a.status}/{a.how}" for a in g.arguments},
            }
        )
    return out


def scores(rows: Sequence[Mapping[str, Any]], preds: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Precision and recall of "ungrounded", accuracy and offending-argument agreement.

    Precision (recall, agreement) is ``None`` when the check never says ungrounded (no row
    is truly ungrounded).
    """
    truth = [not row["grounded"] for row in rows]
    pred = [not p["grounded"] for p in preds]
    tp = sum(t and p for t, p in zip(truth, pred, strict=True))
    n_pred, n_true = sum(pred), sum(truth)
    same = sum(
        not row["grounded"] and set(row["offending"]) == set(p["offending"])
        for row, p in zip(rows, preds, strict=True)
    )
    return {
        "n": len(rows),
        "ungrounded": n_true,
        "predicted_ungrounded": n_pred,
        "precision": tp / n_pred if n_pred else None,
        "recall": tp / n_true if n_true else None,
        "accuracy": sum(t == p for t, p in zip(truth, pred, strict=True)) / len(rows),
        "offending_agreement": same / n_true if n_true else None,
        "false_positives": sum(p and not t for t, p in zip(truth, pred, strict=True)),
        "false_negatives": sum(t and not p for t, p in zip(truth, pred, strict=True)),
    }


def evaluate(
    rows: Sequence[Mapping[str, Any]], items: Mapping[str, Mapping[str, DatasetItem]]
) -> dict[str, Any]:
    """Scores per group (each dataset, When2Call per item label, ``all``) and the errors."""
    preds = predictions(rows, items)
    groups: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        groups.setdefault(row["dataset"], []).append(i)
    for label in WHEN2CALL_LABELS:
        idx = [
            i
            for i, row in enumerate(rows)
            if row["dataset"] == "when2call" and row.get("item_label") == label
        ]
        if idx:
            groups[f"when2call/{label}"] = idx
    order = [g for g in (*DATASETS, *(f"when2call/{lab}" for lab in WHEN2CALL_LABELS))]
    out: dict[str, Any] = {
        name: scores([rows[i] for i in groups[name]], [preds[i] for i in groups[name]])
        for name in order
        if name in groups
    }
    if len({row["dataset"] for row in rows}) > 1:
        out["all"] = scores(rows, preds)
    errors = []
    for row, p in zip(rows, preds, strict=True):
        if row["grounded"] != p["grounded"]:
            kind = "false_negative" if p["grounded"] else "false_positive"
        elif not row["grounded"] and set(row["offending"]) != set(p["offending"]):
            kind = "offending"
        else:
            continue
        errors.append(
            {
                "id": row["id"],
                "kind": kind,
                "call": row["call"],
                "hand": row["offending"] if not row["grounded"] else "grounded",
                "check": p["offending"] if not p["grounded"] else "grounded",
                "arguments": p["arguments"],
                "note": row.get("note", ""),
            }
        )
    return {"groups": out, "errors": errors}


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def format_table(results: Mapping[str, Any]) -> str:
    """A markdown table, one line per group."""
    lines = [
        "class 'ungrounded' (positive: the check says the call is not grounded)",
        "",
        "| group | n | ungrounded | precision | recall | accuracy | offending agreement |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, s in results["groups"].items():
        lines.append(
            f"| {name} | {s['n']} | {s['ungrounded']} | {_fmt(s['precision'])} | "
            f"{_fmt(s['recall'])} | {_fmt(s['accuracy'])} | {_fmt(s['offending_agreement'])} |"
        )
    return "\n".join(lines)


def format_errors(errors: Sequence[Mapping[str, Any]]) -> str:
    """The disagreements, one block each."""
    lines = [f"disagreements: {len(errors)}"]
    for e in errors:
        lines.append("")
        lines.append(f"{e['id']} [{e['kind']}]")
        lines.append(f"  call:  {json.dumps(e['call'], ensure_ascii=False)}")
        lines.append(f"  hand:  {e['hand']}   check: {e['check']}")
        lines.append(f"  args:  {e['arguments']}")
        if e["note"]:
            lines.append(f"  note:  {e['note']}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the table (or JSON with ``--json``)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--set", type=Path, default=DEFAULT_SET, help="Labelled JSONL.")
    ap.add_argument(
        "--source", default=None, help="when2call_test_llm_judge.jsonl (default: shared data)."
    )
    ap.add_argument("--show-errors", action="store_true", help="Print the disagreements.")
    ap.add_argument("--json", action="store_true", help="Print the scores as JSON.")
    args = ap.parse_args(argv)
    rows = load_rows(args.set)
    try:
        items = load_items((r["dataset"] for r in rows), source=args.source)
    except DataFileError as exc:  # the When2Call rows need the shared data
        sys.stderr.write(f"error: {exc}\n")
        return 2
    results = evaluate(rows, items)
    if args.json:
        sys.stdout.write(json.dumps(results, indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(format_table(results))
        if args.show_errors:
            sys.stdout.write("\n\n" + format_errors(results["errors"]))
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
