"""Each record's tool decision by the runtime's default task on one served artefact, as JSON.

The record ids map to the action ``Decider.decide`` takes under ``tool_decision()`` with the
item's tools and conversation as a front door passes them. It reads only the public decision
API, so it runs under an earlier checkout too (``PYTHONPATH=<checkout>``): the actions of the
code and calibrator as shipped before a change, to sit beside ``bench_effects.py --before``.

Run: .venv/bin/python benchmarks/tool_actions.py SAMPLES.jsonl --artefact ARTEFACT.json
     --out ACTIONS.json
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from taskcal_agents._files import write_json
from taskcal_agents.decision import Decider, resolve_calibrator, tool_decision
from taskcal_agents.parsing import GroundingContext
from taskcal_agents.workflow._runner import message_from_dict
from taskcal_agents.workflow._store import read_samples

__all__ = ["FORMAT", "main"]

FORMAT = "taskcal.tool_actions"


def main(argv: Sequence[str] | None = None) -> dict[str, str]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("samples", type=Path)
    parser.add_argument("--artefact", required=True, help="the calibrator artefact (as served)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    task = tool_decision()
    decider = Decider.from_resolved(task, resolve_calibrator(args.artefact, task, owner="actions"))
    samples = read_samples(args.samples)
    actions = {}
    for key in sorted(samples.records):
        record = samples.records[key]
        messages = [message_from_dict(m) for m in record.get("samples", [])]
        context = GroundingContext(record.get("tools") or [], record.get("messages") or [])
        decision = decider.decide(messages, tool_names=record.get("tool_names"), context=context)
        actions[record["id"]] = decision.action
    write_json({"format": FORMAT, "format_version": 1, "samples": args.samples.name,
                "artefact": Path(args.artefact).name, "actions": actions}, args.out)  # fmt: skip
    print(f"{args.samples.name}: {dict(Counter(actions.values()))} -> {args.out}")
    return actions


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
