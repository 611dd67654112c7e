"""Effect-aware rows: tool decisions on recorded samples under three tasks, one scoring matrix.

Each record of a samples file (an item's N completions with its tools and conversation) is
decided by the runtime's own decision path, :meth:`Decider.decide
<taskcal_agents.decision.Decider.decide>` with the item's tools and conversation as a front
door passes them, under three tasks with the same calibrator:

- ``flat``: ``tool_decision(cost=FLAT_TOOL_DECISION_COST)``: execute / ask / refuse, every
  call priced alike (the decision before effects);
- ``effects``: the effect-aware costs without the confirm action;
- ``confirm``: ``tool_decision()``'s default, the effect-aware costs with the confirm action;

and, for reference, ``raw confirm`` (the default task on the raw belief) and the best
constant action (asking or refusing for every item, whichever costs less on the set). Every
decision is scored under the effect-aware default matrix (:data:`~taskcal_agents.decision.
_presets.EFFECT_AWARE_COST`, :data:`~taskcal_agents.decision._presets.DEFAULT_TOOL_EFFECTS`)
with the effect of the call it sends (a call to another tool than the item's right one, where
it is known, is scored as a wrong call). :func:`summary` reports per decoder the mean cost with
its paired differences (and SEs) against the best constant, raw MBR and the flat decision;
the label-shuffle test of the saving over the best constant (labels permuted over the items,
the decisions fixed); right calls executed (all, and where the right tool is a read), right
calls executed or confirmed, wrong calls executed by the effect of the call sent,
``cannot_answer`` recall, and the generic asks (the task's ``ask_text``) given while a sample
made a grounded call; and right calls refused (all, and in the lowest third of the request's
lexical fit to the offered tools, :func:`~taskcal_agents.parsing.lexical_fit`) and the ask
items asked. ``benchmarks/bench_effects.py`` runs it on a served artefact;
``taskcal demo`` on its tool-use requests with cross-fitted maps.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from taskcal_agents._stats import paired_difference
from taskcal_agents.decision import (
    DEFAULT_TOOL_EFFECTS,
    EFFECT_AWARE_COST,
    FLAT_TOOL_DECISION_COST,
    Decider,
    Decision,
    Task,
    tool_decision,
)
from taskcal_agents.parsing import GroundingContext, effect_severity, lexical_fit
from taskcal_agents.workflow._runner import message_from_dict

__all__ = [
    "DECODERS",
    "crossfit_rows",
    "decide_records",
    "decision_entry",
    "refusals",
    "summary",
    "table",
]

DECODERS = ("constant", "raw confirm", "flat", "effects", "confirm")
SCORED_ACTIONS = ("tool_call", "confirm", "request_for_info", "cannot_answer")


def scoring_cost(effect: str) -> NDArray[np.float64]:
    """The effect-aware default matrix (k × 4: execute, confirm, ask, refuse) for ``effect``."""
    cost = np.array(EFFECT_AWARE_COST, dtype=np.float64)
    cost[:, 0] = DEFAULT_TOOL_EFFECTS.call_cost[effect]  # type: ignore[index]
    return cost


def tasks_for(effects: Mapping[str, str]) -> dict[str, Task]:
    """The three decision tasks of one item, its tools' effects named as a task file would."""
    no_confirm = [[row[0], row[2], row[3]] for row in EFFECT_AWARE_COST]
    return {
        "flat": tool_decision(cost=FLAT_TOOL_DECISION_COST),
        "effects": tool_decision(cost=no_confirm, effects={**DEFAULT_TOOL_EFFECTS.model_dump(),
                                                           "tools": dict(effects)}),
        "confirm": tool_decision(tool_effects=effects),
    }  # fmt: skip


def target_tool(record: Mapping[str, Any], item: Mapping[str, Any] | None) -> str | None:
    """The right tool's name: the item's ``target_tool`` (a name, or When2Call's JSON)."""
    meta = (item or {}).get("meta") or {}
    target = meta.get("target_tool")
    if isinstance(target, str) and target.startswith("{"):
        try:
            return str(json.loads(target).get("name"))
        except ValueError:
            return None
    if isinstance(target, str):
        return target
    names = record.get("tool_names") or []
    return str(names[0]) if len(names) == 1 else None


def decide_records(
    records: Sequence[Mapping[str, Any]],
    calibrator_for: Callable[[str, Task], Decider],
    *,
    effects_of: Callable[[Mapping[str, Any]], Mapping[str, str]],
    items: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Each record decided by every decoder: its action, its call's effect, a generic ask.

    Args:
        records: Samples-file records (an item's completions, tools and conversation).
        calibrator_for: ``(record id, task)`` → the Decider of that task with the calibrator
            that decides the record (a served artefact's, or a map fitted without it).
        effects_of: A record's tools' effects by name (the task file's ``effects.tools``).
        items: The dataset's items by id (their right tools), when known.
    """
    rows = []
    for record in records:
        messages = [message_from_dict(m) for m in record.get("samples", [])]
        effects = dict(effects_of(record))
        offered = record.get("tool_names")
        row: dict[str, Any] = {"id": record["id"], "label": record["label"], "decisions": {}}
        target = target_tool(record, (items or {}).get(record["id"]))
        row["target_effect"] = effects.get(target) if target else None
        tasks = tasks_for(effects)
        deciders = {name: calibrator_for(record["id"], task) for name, task in tasks.items()}
        deciders["raw confirm"] = Decider(tasks["confirm"])
        context = GroundingContext(record.get("tools") or [], record.get("messages") or [])
        row["lexical_fit"] = lexical_fit(context.request, record.get("tools") or [])
        grounded = any(g.calls and g.grounded for g in context.ground_samples(messages))
        for name, decider in deciders.items():
            decision = decider.decide(messages, tool_names=offered, context=context)
            row["decisions"][name] = decision_entry(
                decision, decider.task, effects=effects, target=target, grounded=grounded
            )
        rows.append(row)
    return rows


def decision_entry(
    decision: Decision,
    task: Task,
    *,
    effects: Mapping[str, str],
    target: str | None,
    grounded: bool,
) -> dict[str, Any]:
    """What a row records of one decision: its action, its call's effect, a generic ask.

    Args:
        decision: The decision.
        task: The task that decided it (its ask text).
        effects: The item's tools' effects by name.
        target: The item's right tool, when known (a call to another is a wrong call).
        grounded: Whether a sample made a grounded call (then the task's ask text is a
            generic ask).
    """
    sent = []
    if decision.action == "tool_call" and decision.message is not None:
        sent = decision.message.tool_calls
    effect = max((effects.get(c["name"], "write") for c in sent), key=effect_severity,
                 default="write")  # fmt: skip
    generic = (
        decision.action == "request_for_info"
        and decision.message is not None
        and decision.message.content == task.ask_text
        and grounded
    )
    wrong_tool = bool(sent) and target is not None and target not in {c["name"] for c in sent}
    return {"action": decision.action, "effect": effect, "generic_ask": generic,
            "wrong_tool": wrong_tool}  # fmt: skip


def costs(
    rows: Sequence[Mapping[str, Any]],
    labels: Sequence[str],
    decoders: Sequence[str] = DECODERS[1:],
) -> dict[str, NDArray[np.float64]]:
    """Per decoder, each item's cost under the effect-aware matrix (``labels``: the truth).

    ``decoders``: the rows' decoders; the best constant action is ``"constant"``.
    """
    k = {label: i for i, label in enumerate(("tool_call", "request_for_info", "cannot_answer"))}
    out = {}
    for name in decoders:
        row_costs = []
        for r, y in zip(rows, labels, strict=True):
            d = r["decisions"][name]
            truth = k[y]
            if y == "tool_call" and d["action"] == "tool_call" and d.get("wrong_tool"):
                truth = k["request_for_info"]  # the right request, the wrong tool's call
            row_costs.append(scoring_cost(d["effect"])[truth, SCORED_ACTIONS.index(d["action"])])
        out[name] = np.array(row_costs)
    ask_or_refuse = ("request_for_info", "cannot_answer")
    write = scoring_cost("write")  # asking and refusing cost alike whatever the effect
    constants = {
        a: np.array([write[k[y], SCORED_ACTIONS.index(a)] for y in labels]) for a in ask_or_refuse
    }
    out["constant"] = min(constants.values(), key=lambda c: float(c.mean()))
    return out


def shuffle_p(rows: Sequence[Mapping[str, Any]], name: str, permutations: int, seed: int) -> float:
    """The label-shuffle test of ``name``'s saving over the best constant (one-sided)."""
    labels = [r["label"] for r in rows]
    decoders = [name]
    observed = costs(rows, labels, decoders)
    gap = float(observed["constant"].mean() - observed[name].mean())
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(permutations):
        shuffled = list(rng.permutation(labels))
        c = costs(rows, shuffled, decoders)
        hits += float(c["constant"].mean() - c[name].mean()) >= gap
    return (hits + 1) / (permutations + 1)


def _share(group: Sequence[Mapping[str, Any]], name: str, test: Any) -> float:
    """The share of ``group``'s items whose ``name`` decision passes ``test``."""
    if not group:
        return math.nan
    return sum(bool(test(r["decisions"][name])) for r in group) / len(group)


def _executed(d: Mapping[str, Any]) -> bool:
    """A right call made (to the item's right tool, where it is known)."""
    return d["action"] == "tool_call" and not d.get("wrong_tool")


def _executed_or_confirmed(d: Mapping[str, Any]) -> bool:
    return d["action"] == "confirm" or _executed(d)


def _executed_read(d: Mapping[str, Any]) -> bool:
    return d["action"] == "tool_call" and d["effect"] == "read"


def _executed_write(d: Mapping[str, Any]) -> bool:
    return d["action"] == "tool_call" and d["effect"] != "read"


def lowest_fit_third(calls: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The right calls in the lowest third of the request's lexical fit to the offered tools.

    The third is by rank (ties broken by id), so it holds ``len(calls) // 3`` items whatever
    the fit's ties; rows without a fit (made before it was recorded) are left out.
    """
    fitted = sorted(
        (r for r in calls if r.get("lexical_fit") is not None),
        key=lambda r: (r["lexical_fit"], r["id"]),
    )
    return fitted[: len(fitted) // 3]


def refusals(
    rows: Sequence[Mapping[str, Any]], action_of: Callable[[Mapping[str, Any]], str]
) -> dict[str, float]:
    """Right calls refused (all, and in the lowest third of lexical fit), asks, refusals.

    ``ask_items_asked`` and ``cannot_answer_recall`` complete them; each row's action is
    ``action_of``'s (a decoder's, or the action an earlier checkout took on the same record).
    """

    def share(group: Sequence[Mapping[str, Any]], action: str) -> float:
        return sum(action_of(r) == action for r in group) / len(group) if group else math.nan

    calls = [r for r in rows if r["label"] == "tool_call"]
    return {
        "cannot_answer_recall": share([r for r in rows if r["label"] == "cannot_answer"],
                                      "cannot_answer"),
        "calls_refused": share(calls, "cannot_answer"),
        "low_fit_calls_refused": share(lowest_fit_third(calls), "cannot_answer"),
        "ask_items_asked": share([r for r in rows if r["label"] == "request_for_info"],
                                 "request_for_info"),
    }  # fmt: skip


def _action_of(name: str) -> Callable[[Mapping[str, Any]], str]:
    """A row's action by the decoder ``name``."""

    def action(row: Mapping[str, Any]) -> str:
        return str(row["decisions"][name]["action"])

    return action


def summary(
    rows: Sequence[Mapping[str, Any]],
    permutations: int,
    decoders: Sequence[str] = DECODERS,
    bases: Sequence[str] = ("constant", "raw confirm", "flat"),
) -> list[dict[str, Any]]:
    """Per decoder: cost, paired differences, the call metrics and the label-shuffle test.

    ``decoders``: the rows' decoders, ``"constant"`` (the best constant action) first;
    ``bases``: the decoders each one's paired difference is taken against.
    """
    labels = [r["label"] for r in rows]
    c = costs(rows, labels, [d for d in decoders if d != "constant"])
    calls = [r for r in rows if r["label"] == "tool_call"]
    reads = [r for r in calls if r["target_effect"] == "read"]
    wrong = [r for r in rows if r["label"] != "tool_call"]
    out = []
    for name in decoders:
        entry: dict[str, Any] = {"decoder": name, "cost": float(c[name].mean())}
        for base in bases:
            if base != name:
                entry[f"vs {base}"] = paired_difference(c[base], c[name])
        if name != "constant":
            entry.update(
                calls_executed=_share(calls, name, _executed),
                read_calls_executed=_share(reads, name, _executed),
                calls_executed_or_confirmed=_share(calls, name, _executed_or_confirmed),
                wrong_read_executed=_share(wrong, name, _executed_read),
                wrong_write_executed=_share(wrong, name, _executed_write),
                **refusals(rows, _action_of(name)),
                generic_asks=sum(r["decisions"][name]["generic_ask"] for r in rows),
                shuffle_p=shuffle_p(rows, name, permutations, seed=0) if permutations else None,
            )
        out.append(entry)
    return out


def _diff(entry: Mapping[str, Any], key: str) -> str:
    if key not in entry:
        return "–"
    mean, se = entry[key]
    return f"{mean:+.3f} ± {se:.3f}" if se is not None else f"{mean:+.3f}"


def _pct(entry: Mapping[str, Any], key: str) -> str:
    value = entry.get(key)
    return "–" if value is None or value != value else f"{100 * value:.1f} %"


def _p(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def table(
    title: str,
    rows: Sequence[Mapping[str, Any]],
    entries: Sequence[Mapping[str, Any]],
    before: Mapping[str, float] | None = None,
) -> str:
    """The set's tables: one row per decoder, then each one's :func:`refusals`.

    ``before``: the refusals of an earlier checkout's actions on the same records, a last row.
    """
    effects = Counter(str(r["target_effect"]) for r in rows if r["label"] == "tool_call")
    by_effect = ", ".join(f"{k} {v}" for k, v in sorted(effects.items()))
    lines = [
        f"{title}: {len(rows)} items; the right calls' tools by effect: {by_effect}",
        "",
        "| decoder | cost | saving vs constant | vs raw MBR | vs flat | calls executed | "
        "read calls executed | executed or confirmed | wrong read / write executed | "
        "cannot_answer recall | generic asks | shuffle p |",
        "|---" * 12 + "|",
    ]
    for e in entries:
        lines.append(
            f"| {e['decoder']} | {e['cost']:.3f} | {_diff(e, 'vs constant')} | "
            f"{_diff(e, 'vs raw confirm')} | {_diff(e, 'vs flat')} | "
            f"{_pct(e, 'calls_executed')} | {_pct(e, 'read_calls_executed')} | "
            f"{_pct(e, 'calls_executed_or_confirmed')} | {_pct(e, 'wrong_read_executed')} / "
            f"{_pct(e, 'wrong_write_executed')} | {_pct(e, 'cannot_answer_recall')} | "
            f"{e.get('generic_asks', '–')} | {_p(e.get('shuffle_p'))} |"
        )
    low = len(lowest_fit_third([r for r in rows if r["label"] == "tool_call"]))
    lines += [
        "",
        f"| decoder | right calls refused | refused, lowest third of lexical fit ({low}) | "
        "ask items asked | cannot_answer recall |",
        "|---" * 5 + "|",
    ]
    for e in [*entries[1:], *([{"decoder": "before", **before}] if before else [])]:
        lines.append(
            f"| {e['decoder']} | {_pct(e, 'calls_refused')} | "
            f"{_pct(e, 'low_fit_calls_refused')} | {_pct(e, 'ask_items_asked')} | "
            f"{_pct(e, 'cannot_answer_recall')} |"
        )
    return "\n".join(lines)


def crossfit_rows(
    task: Task,
    samples: Any,
    *,
    effects: Mapping[str, str],
    folds: int,
    permutations: int,
    calibrator: str = "dirichlet",
    seed: int = 0,
) -> list[dict[str, Any]]:
    """:func:`summary` of a samples file, each record decided by a map fitted without it.

    The records are dealt into ``folds`` seeded folds; each fold is decided by the
    ``calibrator`` map (a workflow calibrator spec) fitted on the other folds' served items,
    as ``taskcal evaluate`` cross-fits, through the runtime's ``Decider``. ``effects``: the
    tools' effects by name (a task file's ``effects.tools``).
    """
    from taskcal_agents.workflow._calibrator_specs import default_factory
    from taskcal_agents.workflow._crossfit import calibrator_inputs
    from taskcal_agents.workflow._data import eval_arrays

    data = eval_arrays(task, samples)
    X, make, _ = calibrator_inputs(data, default_factory(calibrator))
    ids = list(data.ids)
    fold = np.random.default_rng(seed).permutation(len(ids)) % max(2, folds)
    maps = {}
    for f in np.unique(fold):
        keep = (fold != f) & data.served
        maps[int(f)] = make().fit(X[keep], data.y[keep])
    fold_of = dict(zip(ids, fold.tolist(), strict=True))

    def calibrator_for(record_id: str, decided: Task) -> Decider:
        return Decider(decided, maps[fold_of[record_id]])

    records = [samples.records[key] for key in ids]
    rows = decide_records(records, calibrator_for, effects_of=lambda _: effects)
    return summary(rows, permutations)
