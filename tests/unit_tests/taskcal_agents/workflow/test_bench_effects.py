"""Smoke test of ``benchmarks/bench_effects.py`` on a fake samples file."""

from __future__ import annotations

from pathlib import Path

import pytest

import taskcal_agents
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
    assert printed.count("\n| ") == 1 + len(bench.DECODERS)  # the header and one row each
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
