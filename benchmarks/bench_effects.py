"""Effect-aware tool decisions on recorded samples: three decoders under the effect-aware matrix.

The rows of :mod:`taskcal_agents.workflow._effect_rows` (the runtime's ``Decider.decide`` on
each record under the flat, effect-aware and confirming tasks, scored under the effect-aware
default matrix, with paired SEs, the label-shuffle test and the call metrics), with one
served calibrator artefact deciding every record. The items' tools carry no annotations:
each tool's effect is the written rule's
(:func:`~taskcal_agents.datasets._effects.effect_by_rule`), given to the decision as the task
file's ``effects.tools`` would be.

Run: .venv/bin/python benchmarks/bench_effects.py SAMPLES.jsonl --artefact ARTEFACT.json
     [--data DATA.jsonl] [--permutations 200] [--out JSON]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from taskcal_agents._files import write_json
from taskcal_agents.datasets._effects import EFFECT_RULE_VERSION, tool_effects_by_rule
from taskcal_agents.decision import Decider, Task, resolve_calibrator, tool_decision
from taskcal_agents.workflow._effect_rows import DECODERS, decide_records, summary, table
from taskcal_agents.workflow._store import read_samples

__all__ = ["DECODERS", "main"]


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("samples", nargs="+", type=Path)
    parser.add_argument("--artefact", required=True, help="the calibrator artefact (as served)")
    parser.add_argument(
        "--data", type=Path, nargs="*", default=[], help="each set's dataset (its right tools)"
    )
    parser.add_argument("--permutations", type=int, default=200)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    resolved = resolve_calibrator(args.artefact, tool_decision(), owner="bench_effects")

    def calibrator_for(_: str, task: Task) -> Decider:
        return Decider.from_resolved(task, resolved)

    def effects_of(record: dict[str, Any]) -> dict[str, str]:
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
        title = f"{path.name} (effects by rule v{EFFECT_RULE_VERSION})"
        print(table(title, rows, entries), end="\n\n")
        report["sets"][str(path)] = {"summary": entries, "items": rows}
    if args.out is not None:
        write_json(report, args.out)
    return report


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
