"""Confirmations as labels (``benchmarks/bench_approvals.py --quick``): 300 answered per seed."""

from __future__ import annotations

import pytest

from tests.conftest import load_benchmark


def test_a_refit_on_approvals_pays_after_a_drift_and_is_refused_without_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bench = load_benchmark("bench_approvals")
    results = bench.main(["--quick", "--scenarios", "prior_shift", "none"])
    assert "| prior_shift | 3/3 |" in capsys.readouterr().out
    drifted, calm = results["prior_shift"], results["none"]
    # after the drift, every refit on the 300 answered confirmations is promoted and lowers
    # the paired cost on the held-back requests by more than two SE
    assert all(r["promoted"] and r["delta"] + 2 * r["se"] < 0 for r in drifted), drifted
    # the approvals agree with the map in force: the safe-refit rule refuses every refit
    assert not any(r["promoted"] for r in calm), calm
