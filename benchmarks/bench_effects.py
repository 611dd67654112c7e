"""Effect-aware tool decisions on recorded samples: three decoders under the effect-aware matrix.

The rows of :mod:`taskcal_agents.workflow._effect_rows` (the runtime's ``Decider.decide`` on
each record under the flat, effect-aware and confirming tasks, scored under the effect-aware
default matrix, with paired SEs, the label-shuffle test and the call metrics), with one
served calibrator artefact deciding every record. The items' tools carry no annotations:
each tool's effect is the written rule's
(:func:`~taskcal_agents.datasets._effects.effect_by_rule`), given to the decision as the task
file's ``effects.tools`` would be.

``--before`` gives, per set, the actions an earlier checkout took on the same records
(``benchmarks/tool_actions.py``'s output): their refusals are the refusal table's last row.

Run: .venv/bin/python benchmarks/bench_effects.py SAMPLES.jsonl --artefact ARTEFACT.json
     [--data DATA.jsonl] [--before ACTIONS.json] [--permutations 200] [--out JSON]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from taskcal_agents._files import write_json
from taskcal_agents.datasets._effects import EFFECT_RULE_VERSION, tool_effects_by_rule
from taskcal_agents.decision import Decider, Task, resolve_calibrator, tool_decision
from taskcal_agents.workflow._effect_rows import (
    DECODERS,
    decide_records,
    refusals,
    summary,
    table,
)
from taskcal_agents.workflow._store import read_samples

__all__ = ["DECODERS", "main"]


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("samples", nargs="+", type=Path)
    parser.add_argument("--artefact", required=True, help="the calibrator artefact (as served)")
    parser.add_argument(
        "--data", type=Path, nargs="*", default=[], help="each set's dataset (its right tools)"
    )
    parser.add_argument(
        "--before", type=Path, nargs="*", default=[], help="each set's earlier actions (JSON)"
    )
    parser.add_argument("--permutations", type=int, default=200)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    resolved = resolve_calibrator(args.artefact, tool_decision(), owner="bench_effects")

    def calibrator_for(_: str, task: Task) -> Decider:
        return Decider.from_resolved(task, resolved)

    def effects_of(record: Mapping[str, Any]) -> dict[str, str]:
        return tool_effects_by_rule(record.get("tools") or [])

    report: dict[str, Any] = {"effect_rule_version": EFFECT_RULE_VERSION, "sets": {}}
    for i, path in enumerate(args.samples):
        samples = read_samples(path)
        items = {}
        if i < len(args.data):
            lines = args.data[i].read_text(encoding="utf-8").splitlines()
            items = {json.loads(line)["id"]: json.loads(line) for line in lines if line.strip()}
        records = [samples.records[key] for key in sorted(samples.records)]
        rows = decide_records(records, calibrator_for, effects_of=effects_of, items=items)
        entries = summary(rows, args.permutations)
        before = None
        if i < len(args.before):
            actions = _actions(args.before[i], records)
            before = refusals(rows, _by_id(actions))
        title = f"{path.name} (effects by rule v{EFFECT_RULE_VERSION})"
        print(table(title, rows, entries, before), end="\n\n")
        report["sets"][str(path)] = {"summary": entries, "before": before, "items": rows}
    if args.out is not None:
        write_json(report, args.out)
    return report


def _by_id(actions: Mapping[str, str]) -> Callable[[Mapping[str, Any]], str]:
    """A row's action, looked up by its id."""
    return lambda row: actions[row["id"]]


def _actions(path: Path, records: Sequence[dict[str, Any]]) -> dict[str, str]:
    """``tool_actions.py``'s actions, checked to cover every record."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("format") != "taskcal.tool_actions":
        raise SystemExit(f"{path}: not a tool_actions file (format {data.get('format')!r})")
    actions = data["actions"]
    missing = [r["id"] for r in records if r["id"] not in actions]
    if missing:
        raise SystemExit(f"{path}: no action for {len(missing)} records, e.g. {missing[0]!r}")
    return {str(k): str(v) for k, v in actions.items()}


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
