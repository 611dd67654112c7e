"""Tool decisions at the price of one forward pass: five decoders side by side, as ratios.

On the same items, each decided by the runtime's own path with its own calibrator artefact:

- ``N = 16``: the decision protocol (:func:`~taskcal_agents.decision.decide_in_rounds`)
  replayed over an item's 16 recorded samples, with the N = 16 artefact;
- ``N = 8``, ``N = 4``: the same protocol over the first 8 or 4 samples (an i.i.d. draw of
  that size), with artefacts fitted on the train split's records cut to their first 8 or 4
  samples (``subsample``, then ``fit``);
- ``adaptive``: the protocol with adaptive N (rounds 4, 8, 16, ε = 0.05) and the fitted
  stopping prior. Adaptive N cannot serve a task that reads the relevance features (unseen
  samples would change them), so its task grounds calls without them
  (``tool_decision(grounding=GroundingSpec())``) and its artefact is fitted on the train
  split's N = 16 records for that task (``fit --no-relevance``);
- ``one-pass``: :meth:`~taskcal_agents.decision.Decider.decide_one_pass` on the item's
  one-pass record (``taskcal sample --belief one_pass``), with the one-pass artefact
  (``taskcal calibrate --belief one_pass``);
- ``clustered``: clustered self-assessment: the first two samples' distinct calls, ask and
  refuse as the lettered options of one pass (``clustered``,
  :func:`~taskcal_agents.sampling._one_pass.call_options`), decided as a one-pass belief
  whose call is the likeliest call option's sample, with an artefact fitted on the train
  split's clustered records;

and the best constant action. Every decision is scored under the effect-aware default
matrix (:mod:`taskcal_agents.workflow._effect_rows`, the tools' effects by the written rule),
with paired standard errors against N = 16 and the constant, and the label-shuffle test.
Forward passes, generated tokens and wall time per decision come from ``timing``: each
decoder run live at a front door (the clustered variant through the sampler) on the same
items of each set, on one server in one run.

**The rule** (fixed here, before the one-pass belief read an item of the locked test split
or of When2Call): with the Qwen2.5-Coder-1.5B artefacts, let d be the mean over a set's items
of cost(one-pass) − cost(N = 16), paired per item, and se its paired standard error. If
d ≤ se on both sets (the locked BFCL test split and When2Call), the one-pass belief is
documented as the cheap default for hosted models. Otherwise the documentation gives what
the samples buy, in cost per generated token, as a curve over N ∈ {1 (one-pass), 4, 8, 16}.
The Qwen2.5-Coder-0.5B artefacts are reported as measured.

Run (a server of the model on URL; each step resumes)::

    B=benchmarks/bench_decision_cost.py
    python $B subsample TRAIN16.jsonl --n 4 --out train.n4.jsonl && python $B fit train.n4.jsonl
    python $B fit TRAIN16.jsonl --no-relevance --out adaptive.json
    python $B clustered TRAIN16.jsonl --base-url URL --model NAME --out train.clustered.jsonl
    python $B timing --base-url URL --model NAME --data test.jsonl w2c.jsonl --items 10 --out T.json
    python $B table --set test TEST16.jsonl TEST1.jsonl TESTC.jsonl test.jsonl \\
        --set w2c W2C16.jsonl W2C1.jsonl W2CC.jsonl w2c.jsonl --artefact A16.json \\
        --n8 A8.json --n4 A4.json --adaptive adaptive.json --one-pass A1.json \
        --clustered AC.json --timing T.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from taskcal_agents._files import write_json
from taskcal_agents.datasets import read_dataset
from taskcal_agents.datasets._effects import EFFECT_RULE_VERSION, tool_effects_by_rule
from taskcal_agents.decision import (
    AdaptiveSampling,
    Decider,
    Decision,
    DecisionInput,
    GroundingSpec,
    SamplingOptions,
    Task,
    decide_in_rounds,
    resolve_calibrator,
    tool_decision,
)
from taskcal_agents.parsing import GroundingContext, answered_tool_calls
from taskcal_agents.sampling import drive, drive_rounds, one_pass_protocol
from taskcal_agents.sampling._one_pass import call_options
from taskcal_agents.workflow._calibrate import CALIBRATE_CALIBRATOR, calibrate_task
from taskcal_agents.workflow._effect_rows import decision_entry, summary, target_tool, tasks_for
from taskcal_agents.workflow._runner import (
    SampleSettings,
    build_messages,
    message_from_dict,
    message_to_dict,
    sample_header,
)
from taskcal_agents.workflow._steps import fit_artefact
from taskcal_agents.workflow._store import SamplesStore, read_samples

DECODERS = ("constant", "N = 16", "N = 8", "N = 4", "adaptive", "one-pass", "clustered")
EPSILON = 0.05
"""Adaptive N's ε (the value the adaptive-N results are reported at)."""


# ----------------------------------------------------------------------------- records


def _context(record: Mapping[str, Any]) -> GroundingContext:
    return GroundingContext(record.get("tools") or [], record.get("messages") or [])


def replay(decider: Decider, record: Mapping[str, Any], options: SamplingOptions) -> Decision:
    """The decision protocol, its draws answered in order from the record's samples."""
    samples = [message_from_dict(m) for m in record.get("samples", [])]
    messages = record.get("messages") or []
    item = DecisionInput(None, answered_tool_calls(messages), _context(record))
    protocol = decide_in_rounds(decider, [item], options, tool_names=record.get("tool_names"))

    def draw(d: Any) -> list[Any]:
        return [samples[d.drawn : d.drawn + d.n]]

    (result,) = drive_rounds(protocol, draw)
    if isinstance(result, BaseException):
        raise result
    return result


def one_pass(decider: Decider, record: Mapping[str, Any]) -> Decision:
    """:meth:`Decider.decide_one_pass` on a one-pass (or clustered) record."""
    greedy = record.get("greedy")
    return decider.decide_one_pass(
        record["probs"], message_from_dict(greedy) if greedy else None,
        forward_passes=int((record.get("logprob") or {}).get("requests", 1)) + 1,
        tool_names=record.get("tool_names"), context=_context(record),
        answered_calls=answered_tool_calls(record.get("messages") or []),
    )  # fmt: skip


def call_text(call: Mapping[str, Any]) -> str:
    """A call as an option's text: ``name(key=JSON, ...)``, keys sorted."""
    args = call.get("args") or {}
    inner = ", ".join(f"{k}={json.dumps(args[k], sort_keys=True)}" for k in sorted(args))
    return f"{call['name']}({inner})"


def sample_calls(samples: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, int]]:
    """The distinct calls of ``samples``: ``(tool, text, index of the first sample making it)``."""
    out: dict[str, tuple[str, str, int]] = {}
    for i, sample in enumerate(samples):
        calls = sample.get("tool_calls") or []
        if calls:
            text = "; ".join(call_text(c) for c in calls)
            out.setdefault(text, (str(calls[0]["name"]), text, i))
    return list(out.values())


# ------------------------------------------------------------------------------ steps


def subsample(path: Path, k: int, out: Path) -> int:
    """Write each record cut to its first ``k`` samples (an N = k draw); return the count."""
    source = read_samples(path)
    header = dict(source.header)
    header["settings"] = {**header.get("settings", {}), "n": k}
    lines = [json.dumps(header)]
    for record in source.records.values():
        lines.append(json.dumps({**record, "samples": record["samples"][:k],
                                 "labels": record["labels"][:k]}))  # fmt: skip
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(source.records)


def without_relevance(task: Task) -> Task:
    """``task`` grounding its calls without the relevance features (what adaptive N serves)."""
    data = task.model_dump(mode="json")
    return Task.model_validate({**data, "grounding": GroundingSpec().model_dump(mode="json")})


def fit(path: Path, out: Path, *, relevance: bool = True) -> None:
    """Fit the calibrate recipe (its task, calibrator family and folds) on a samples file.

    ``relevance=False``: for the task without the relevance features (adaptive N's).
    """
    from taskcal_agents.decision import CalibratorArtefact

    task = calibrate_task() if relevance else without_relevance(calibrate_task())
    fitted, _ = fit_artefact(path, calibrator=CALIBRATE_CALIBRATOR, task=task)
    CalibratorArtefact.from_dict(fitted).save(out)


def clustered(path: Path, out: Path, sampler: Any) -> int:
    """The clustered pass of each record of ``path``; resumable. Returns the records written."""
    source = read_samples(path)
    task = calibrate_task()
    settings = SampleSettings(
        n=2, belief="one_pass", greedy=True, model=source.settings.get("model")
    )
    header = sample_header(task, settings, source.header.get("dataset"))
    written = 0
    with SamplesStore.open(out, header) as store:
        for key in sorted(source.records):
            if key in store.done:
                continue
            record = source.records[key]
            first = record["samples"][:2]
            calls = sample_calls(first)
            options = call_options(task, [(tool, text) for tool, text, _ in calls])
            item = _item(record)
            start = time.perf_counter()
            belief = drive(
                one_pass_protocol(task, build_messages(task, item), tool_names=(),
                                  tools=record.get("tools") or None, options=options),
                lambda r: sampler.sample(**r),
            )  # fmt: skip
            by_option = belief.option_probs()
            letter = dict(zip((text for _, text, _ in calls), options.options, strict=False))
            chosen = max(calls, key=lambda c: by_option[letter[c[1]]], default=None)
            greedy = first[chosen[2]] if chosen is not None else (first[0] if first else None)
            labels = record.get("labels") or []
            greedy_label = (
                labels[chosen[2]] if chosen is not None else (labels[0] if labels else None)
            )
            store.append({
                "id": key, "label": record["label"], "labels": [], "samples": [],
                "greedy": greedy, "greedy_label": greedy_label, "belief": "one_pass",
                "probs": [float(p) for p in belief.probs],
                "logprob": {"coverage": belief.coverage, "requests": belief.requests,
                            "unresolved_mass": belief.unresolved_mass, "options": by_option},
                "unparsed_reasons": {}, "tool_names": record.get("tool_names") or [],
                "tools": record.get("tools") or [], "messages": record.get("messages") or [],
                "elapsed_s": round(time.perf_counter() - start, 4),
            })  # fmt: skip
            written += 1
    return written


def _item(record: Mapping[str, Any]) -> Any:
    from taskcal_agents.datasets import DatasetItem

    return DatasetItem(id=record["id"], messages=record.get("messages") or [],
                       tools=record.get("tools") or [], label=record.get("label"))  # fmt: skip


# ------------------------------------------------------------------------------ table


def decide_set(
    records: Mapping[str, Mapping[str, Mapping[str, Any]]],
    deciders: Mapping[str, Callable[[Any], Decider]],
    items: Mapping[str, Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """Rows of :mod:`~taskcal_agents.workflow._effect_rows` for the items every source has.

    ``records``: per source (``"samples"``, ``"one_pass"``, ``"clustered"``), its records by
    id; ``deciders``: per decoder, the Decider of a task (its artefact's calibrator).
    """
    ids = sorted(set.intersection(*(set(r) for r in records.values())))
    rows = []
    for key in ids:
        sampled = records["samples"][key]
        effects = tool_effects_by_rule(sampled.get("tools") or [])
        task = tasks_for(effects)["confirm"]
        target = target_tool(sampled, items.get(key))
        context = _context(sampled)
        messages = [message_from_dict(m) for m in sampled.get("samples", [])]
        grounded = any(g.calls and g.grounded for g in context.ground_samples(messages))
        row: dict[str, Any] = {
            "id": key,
            "label": sampled["label"],
            "decisions": {},
            "target_effect": effects.get(target) if target else None,
        }
        decisions = {
            "N = 16": replay(deciders["N = 16"](task), sampled, SamplingOptions(n_samples=16)),
            "N = 8": replay(deciders["N = 8"](task), sampled, SamplingOptions(n_samples=8)),
            "N = 4": replay(deciders["N = 4"](task), sampled, SamplingOptions(n_samples=4)),
            "adaptive": replay(deciders["adaptive"](without_relevance(task)), sampled,
                               SamplingOptions(n_samples=16,
                                               adaptive=AdaptiveSampling(epsilon=EPSILON))),
            "one-pass": one_pass(deciders["one-pass"](task), records["one_pass"][key]),
            "clustered": one_pass(deciders["clustered"](task), records["clustered"][key]),
        }  # fmt: skip
        for name, decision in decisions.items():
            row["decisions"][name] = decision_entry(
                decision, task, effects=effects, target=target, grounded=grounded
            )
            row["decisions"][name]["n_samples"] = decision.n_samples
        rows.append(row)
    return rows


def _cost_ratio(entries: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    base = next(e["cost"] for e in entries if e["decoder"] == "N = 16")
    return {e["decoder"]: e["cost"] / base if base else math.nan for e in entries}


def table(name: str, rows: Sequence[Mapping[str, Any]], entries: Sequence[Mapping[str, Any]],
          timing: Mapping[str, Any] | None) -> str:  # fmt: skip
    """The set's table: each decoder's cost and ratios against N = 16."""
    ratio = _cost_ratio(entries)
    t16 = (timing or {}).get("N = 16") or {}
    lines = [
        f"{name}: {len(rows)} items (effects by rule v{EFFECT_RULE_VERSION}); ratios are "
        "against N = 16",
        "",
        "| decoder | cost | ratio | vs N = 16 | vs constant | call recall | over-calling | "
        "cannot_answer recall | completions | tokens (ratio) | wall s (ratio) | shuffle p |",
        "|---" * 12 + "|",
    ]
    for e in entries:
        t = dict((timing or {}).get(e["decoder"]) or {})
        if e["decoder"] == "adaptive" and rows:  # its draws: the rounds it took, per item
            drawn = [r["decisions"]["adaptive"]["n_samples"] for r in rows]
            t.setdefault("completions", f"{float(np.mean(drawn)):.1f}")

        def rel(key: str, t: Mapping[str, Any] = t) -> str:
            if key not in t or not t16.get(key):
                return "–"
            return f"{t[key]:.1f} ({t[key] / t16[key]:.2f})"

        diff = e.get("vs N = 16")
        const = e.get("vs constant")
        over = e.get("wrong_read_executed", math.nan), e.get("wrong_write_executed", math.nan)
        lines.append(
            f"| {e['decoder']} | {e['cost']:.3f} | {ratio[e['decoder']]:.2f} | "
            f"{'–' if diff is None else f'{diff[0]:+.3f} ± {diff[1]:.3f}'} | "
            f"{'–' if const is None else f'{const[0]:+.3f} ± {const[1]:.3f}'} | "
            f"{_pct(e.get('calls_executed'))} | {_pct(over[0])} / {_pct(over[1])} | "
            f"{_pct(e.get('cannot_answer_recall'))} | {t.get('completions', '–')} | "
            f"{rel('tokens')} | {rel('wall_s')} | "
            f"{_p(e.get('shuffle_p'))} |"
        )
    return "\n".join(lines)


def _p(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def _pct(value: float | None) -> str:
    return "–" if value is None or value != value else f"{100 * value:.1f} %"


def rule(entries_by_set: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """The stated rule's verdict: one-pass within one paired SE of N = 16 on every set."""
    verdicts = {}
    for name, entries in entries_by_set.items():
        e = next(x for x in entries if x["decoder"] == "one-pass")
        d, se = e["vs N = 16"]
        # paired_difference gives base − decoder: d = cost(N16) − cost(one-pass)
        verdicts[name] = {"one_pass_minus_n16": -d, "se": se, "holds": -d <= se}
    return {"sets": verdicts, "holds": all(v["holds"] for v in verdicts.values())}


# ----------------------------------------------------------------------------- timing


def timing(base_url: str, model: str, data: Sequence[Path], items: int) -> dict[str, Any]:
    """Each decoder live on the first ``items`` items of each dataset, on one server."""
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_openai import ChatOpenAI

    from taskcal_agents.langchain import TaskCalibratedRunnable
    from taskcal_agents.sampling import OpenAISampler

    class Usage(BaseCallbackHandler):
        def __init__(self) -> None:
            self.tokens = 0

        def on_llm_end(self, response: Any, **kwargs: Any) -> None:
            usage = (response.llm_output or {}).get("token_usage") or {}
            self.tokens += int(usage.get("completion_tokens") or 0)

    task = calibrate_task()
    chat = ChatOpenAI(base_url=base_url, model=model, api_key="EMPTY", max_tokens=256,  # type: ignore[arg-type]
                      timeout=600)  # fmt: skip
    chosen = [it for path in data for it in read_dataset(path)[:items]]
    out: dict[str, Any] = {}
    doors = {
        "N = 16": {"n_samples": 16}, "N = 8": {"n_samples": 8}, "N = 4": {"n_samples": 4},
        "one-pass": {"belief": "one_pass"},
    }  # fmt: skip
    for name, settings in doors.items():
        walls, tokens, passes = [], [], []
        for item in chosen:
            usage = Usage()
            # an item without tools binds none (vLLM refuses an empty ``tools`` array)
            bound = chat.bind_tools(item.tools) if item.tools else chat
            door = TaskCalibratedRunnable(bound, task, calibrator=None, **settings)
            start = time.perf_counter()
            decision = door.invoke(item.messages, config={"callbacks": [usage]})
            walls.append(time.perf_counter() - start)
            tokens.append(usage.tokens)
            passes.append(decision.forward_passes or decision.n_samples)
        out[name] = {"wall_s": float(np.mean(walls)), "tokens": float(np.mean(tokens)),
                     "completions": float(np.mean(passes)), "items": len(chosen)}  # fmt: skip
    with OpenAISampler(base_url, model, default_params={"max_tokens": 256}) as sampler:
        walls, tokens, passes = [], [], []
        for item in chosen:
            start = time.perf_counter()
            first = sampler.sample(build_messages(task, item), n=2, temperature=1.0,
                                   tools=item.tools or None)  # fmt: skip
            calls = sample_calls([message_to_dict(m) for m in first])
            options = call_options(task, [(tool, text) for tool, text, _ in calls])
            belief = drive(
                one_pass_protocol(task, build_messages(task, item), tool_names=(),
                                  tools=item.tools or None, options=options),
                lambda r: sampler.sample(**r),
            )  # fmt: skip
            walls.append(time.perf_counter() - start)
            usage = first[0].response_metadata.get("request_usage") or {}
            tokens.append(int(usage.get("completion_tokens") or 0) + belief.requests)
            passes.append(2 + belief.requests)
        out["clustered"] = {
            "wall_s": float(np.mean(walls)), "tokens": float(np.mean(tokens)),
            "completions": float(np.mean(passes)), "items": len(chosen),
        }  # fmt: skip
    out["adaptive"] = None  # its draws are the N = 16 draw's first rounds: see the table
    return out


# ------------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("subsample")
    p.add_argument("samples", type=Path)
    p.add_argument("--n", type=int, required=True)
    p.add_argument("--out", type=Path, required=True)
    p = sub.add_parser("fit")
    p.add_argument("samples", type=Path)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--no-relevance", action="store_true", help="adaptive N's task")
    p = sub.add_parser("clustered")
    p.add_argument("samples", type=Path)
    p.add_argument("--base-url", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--out", type=Path, required=True)
    p = sub.add_parser("timing")
    p.add_argument("--base-url", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--data", type=Path, nargs="+", required=True)
    p.add_argument("--items", type=int, default=10)
    p.add_argument("--out", type=Path, required=True)
    p = sub.add_parser("table")
    p.add_argument("--set", nargs=5, action="append", required=True,
                   metavar=("NAME", "N16", "ONE_PASS", "CLUSTERED", "DATA"))  # fmt: skip
    for flag in ("--artefact", "--n8", "--n4", "--adaptive", "--one-pass", "--clustered"):
        p.add_argument(flag, required=True)
    p.add_argument("--timing", type=Path, default=None)
    p.add_argument("--permutations", type=int, default=200)
    p.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)

    if args.command == "subsample":
        count = subsample(args.samples, args.n, args.out)
        print(f"wrote {count} records of {args.n} samples to {args.out}")
        return {"records": count}
    if args.command == "fit":
        out = args.out or args.samples.with_suffix(".artefact.json")
        fit(args.samples, out, relevance=not args.no_relevance)
        print(f"wrote {out}")
        return {"artefact": str(out)}
    if args.command == "clustered":
        from taskcal_agents.sampling import OpenAISampler

        with OpenAISampler(args.base_url, args.model) as sampler:
            count = clustered(args.samples, args.out, sampler)
        print(f"wrote {count} clustered records to {args.out}")
        return {"records": count}
    if args.command == "timing":
        result = timing(args.base_url, args.model, args.data, args.items)
        write_json(result, args.out)
        print(json.dumps(result, indent=1))
        return result

    owner = "bench_decision_cost"
    resolved = {
        "N = 16": args.artefact, "N = 8": args.n8, "N = 4": args.n4,
        "adaptive": args.adaptive, "one-pass": args.one_pass, "clustered": args.clustered,
    }  # fmt: skip
    calibrators = {
        k: resolve_calibrator(v, without_relevance(calibrate_task()) if k == "adaptive"
                              else tool_decision(), owner=owner)
        for k, v in resolved.items()
    }  # fmt: skip

    def decider_of(name: str) -> Callable[[Any], Decider]:
        return lambda task: Decider.from_resolved(task, calibrators[name])

    deciders = {name: decider_of(name) for name in resolved}
    timings = json.loads(args.timing.read_text(encoding="utf-8")) if args.timing else None
    report: dict[str, Any] = {"effect_rule_version": EFFECT_RULE_VERSION, "sets": {}}
    entries_by_set = {}
    for name, n16, op, cl, data in args.set:
        records = {"samples": read_samples(Path(n16)).records,
                   "one_pass": read_samples(Path(op)).records,
                   "clustered": read_samples(Path(cl)).records}  # fmt: skip
        items = {it.id: it.model_dump() for it in read_dataset(Path(data))}
        rows = decide_set(records, deciders, items)
        entries = summary(rows, args.permutations, DECODERS, ("constant", "N = 16"))
        entries_by_set[name] = entries
        print(table(name, rows, entries, timings), end="\n\n")
        report["sets"][name] = {"summary": entries, "items": rows}
    report["rule"] = rule(entries_by_set)
    print("rule:", json.dumps(report["rule"]))
    if args.out is not None:
        write_json(report, args.out)
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
