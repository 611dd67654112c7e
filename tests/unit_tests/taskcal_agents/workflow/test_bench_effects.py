"""Smoke test of ``benchmarks/bench_effects.py`` on a fake samples file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import taskcal_agents
from taskcal_agents.decision import Decider, resolve_calibrator, tool_decision
from taskcal_agents.workflow._effect_rows import (
    DECODERS,
    decide_records,
    lowest_fit_third,
    refusals,
    summary,
)
from taskcal_agents.workflow._store import read_samples
from tests.conftest import load_benchmark
from tests.unit_tests.taskcal_agents.helpers.workflow_fakes import _samples_file

SHIPPED = Path(taskcal_agents.__file__).parent / "data" / "calibrators"


def test_every_decoder_is_scored_under_the_effect_aware_matrix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = load_benchmark("bench_effects")
    samples = _samples_file(tmp_path, n=30)
    artefact = str(SHIPPED / "qwen2.5-coder-0.5b-instruct.json")
    report = bench.main([str(samples), "--artefact", artefact, "--permutations", "20"])
    printed = capsys.readouterr().out
    [(_, result)] = report["sets"].items()
    entries = {e["decoder"]: e for e in result["summary"]}
    assert list(entries) == list(bench.DECODERS)
    # the main table (a header and one row per decoder), then the refusal table (a header
    # and one row per decoder but the constant)
    assert printed.count("\n| ") == 1 + len(bench.DECODERS) + len(bench.DECODERS)
    assert all(0 <= r["lexical_fit"] <= 1 for r in result["items"])
    # the lookup tool is a read by the written rule ("Look something up."): no effect is
    # write or irreversible, and every decoder's costs are those of the scoring matrix
    assert {r["target_effect"] for r in result["items"] if r["label"] == "tool_call"} == {"read"}
    for name, entry in entries.items():
        assert 0 <= entry["cost"] <= 10
        if name != "constant":
            assert 0 < entry["shuffle_p"] <= 1
            _, se = entry["vs constant"]
            assert se is not None and se >= 0
    # the flat decoder has no confirm action; the default one may confirm
    assert all(r["decisions"]["flat"]["action"] != "confirm" for r in result["items"])


def _row(i: int, label: str, fit: float, action: str) -> dict[str, object]:
    decision = {"action": action, "effect": "read", "generic_ask": False, "wrong_tool": False}
    return {
        "id": f"i{i:02d}", "label": label, "lexical_fit": fit, "target_effect": "read",
        "decisions": dict.fromkeys(DECODERS[1:], decision),
    }  # fmt: skip


def test_refusals_are_counted_in_the_lowest_third_of_lexical_fit() -> None:
    # nine right calls: the three with the least fit (0.0, 0.1, 0.2) hold two refusals, a
    # well-fitting one a third; two ask items, one asked; one no-fit item refused
    fits = [0.2, 0.9, 0.0, 0.5, 0.7, 0.1, 0.8, 0.6, 0.4]
    refused = {0.0, 0.1, 0.9}
    rows = [
        _row(i, "tool_call", f, "cannot_answer" if f in refused else "tool_call")
        for i, f in enumerate(fits)
    ]
    rows += [_row(20, "request_for_info", 0.3, "request_for_info")]
    rows += [_row(21, "request_for_info", 0.3, "tool_call")]
    rows += [_row(22, "cannot_answer", 0.0, "cannot_answer")]
    assert [r["lexical_fit"] for r in lowest_fit_third(rows[:9])] == [0.0, 0.1, 0.2]
    entry = {e["decoder"]: e for e in summary(rows, permutations=0)}["confirm"]
    assert entry["calls_refused"] == pytest.approx(3 / 9)
    assert entry["low_fit_calls_refused"] == pytest.approx(2 / 3)
    assert entry["ask_items_asked"] == pytest.approx(1 / 2)
    assert entry["cannot_answer_recall"] == 1.0


def test_earlier_actions_sit_beside_the_decoders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # tool_actions.py decides with tool_decision(), the default task: on this checkout its
    # actions are the confirm decoder's where no tool's effect is declared (all "write")
    bench = load_benchmark("bench_effects")
    actions = load_benchmark("tool_actions")
    samples = _samples_file(tmp_path, n=30)
    artefact = str(SHIPPED / "qwen2.5-coder-0.5b-instruct.json")
    out = tmp_path / "actions.json"
    taken = actions.main([str(samples), "--artefact", artefact, "--out", str(out)])
    report = bench.main(
        [str(samples), "--artefact", artefact, "--before", str(out), "--permutations", "0"]
    )
    [(_, result)] = report["sets"].items()
    resolved = resolve_calibrator(artefact, tool_decision(), owner="test")
    records = list(read_samples(samples).records.values())
    undeclared = decide_records(
        records, lambda _, task: Decider.from_resolved(task, resolved), effects_of=lambda _: {}
    )
    assert taken == {r["id"]: r["decisions"]["confirm"]["action"] for r in undeclared}
    assert result["before"] == refusals(result["items"], lambda r: taken[r["id"]])
    assert set(taken.values()) >= {"tool_call", "confirm", "request_for_info"}
    assert "| before |" in capsys.readouterr().out
    # an actions file that misses a record is refused, naming it
    data = json.loads(out.read_text())
    data["actions"].pop(sorted(data["actions"])[0])
    out.write_text(json.dumps(data))
    with pytest.raises(SystemExit, match="no action for 1 records"):
        bench.main([str(samples), "--artefact", artefact, "--before", str(out)])
