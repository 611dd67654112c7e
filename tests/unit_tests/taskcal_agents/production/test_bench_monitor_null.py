"""Smoke test of the monitor's false-alarm benchmark (``bench_monitor_null.py --quick``)."""

from __future__ import annotations

from types import ModuleType

import pytest

from tests.conftest import load_benchmark


def _benchmark() -> ModuleType:
    return load_benchmark("bench_monitor_null")


def test_quick_run_tallies_every_metric_per_source(capsys: pytest.CaptureFixture[str]) -> None:
    results = _benchmark().main(["--quick"])
    printed = capsys.readouterr().out
    assert "benchmarks/bench_monitor_null.py --quick" in printed
    for source in ("calibrated", "world"):
        assert f"source {source!r}: 10 windows" in printed
    assert printed.count("| cost_gap | both | 10 |") == 2
    assert printed.count("| nll_gap | both | 10 |") == 2
    assert len(results) == 2 and all(len(seed["calibrated"]) == 5 for seed in results)
    # the gaps with the saddlepoint, plain and normal z side by side, from the same records
    for source in ("calibrated", "world"):
        for gap in ("cost_gap", "nll_gap"):
            assert f"| {source} | {gap} | 10 | 0.270 |" in printed
    # the calibrated null without a fit: 4 redraws of the outcomes of 2 x 5 windows
    assert printed.count("| calibrated, outcomes redrawn |") == 2
    assert "| calibrated, outcomes redrawn | cost_gap | 40 |" in printed
    assert all(seed["null"]["nll_gap"].shape == (20, 3) for seed in results)


def test_shares_have_seed_clustered_ses() -> None:
    pct = _benchmark().pct
    # 1 alarm in 10 windows of one seed, 0 in 10 of another: 5 % ± 5 % (one cluster each),
    # not the binomial ± 4.9 % of 20 independent windows; the same counts in every seed
    # give a clustered SE of 0
    assert pct([1, 0], [10, 10]) == "5.000 ± 5.000"
    assert pct([1, 1], [10, 10]) == "10.000 ± 0.000"
    assert pct([0, 0], [0, 0]) == "-"
