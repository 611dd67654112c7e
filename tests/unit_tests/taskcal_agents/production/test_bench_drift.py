"""Smoke test of the drift benchmark (``benchmarks/bench_drift.py --quick``)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import load_benchmark


def _benchmark() -> ModuleType:
    return load_benchmark("bench_drift")


def test_quick_run_alarms_after_a_drift_and_refit_recovers_cost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = _benchmark()
    results = bench.main(
        ["--quick", "--scenarios", "none", "prior_shift", "--log-dir", str(tmp_path)]
    )
    printed = capsys.readouterr().out
    assert "benchmarks/bench_drift.py --quick" in printed
    assert printed.count("| prior_shift |") == 1 and printed.count("| none |") == 1
    drift, calm = results["prior_shift"], results["none"]
    # the drift is detected in most streams, in a window after the change
    detected = [r["delay"] for r in drift if r["delay"] is not None]
    assert len(detected) >= len(drift) - 1, drift
    assert all(d >= 200 for d in detected)  # at least one whole window after the change
    # the streams without a change: windows counted, few of them alarming
    assert sum(r["windows"] for r in calm) == 6 * len(calm)
    assert sum(r["window_alarms"] for r in calm) <= 3, calm
    # costs: the oracle (MBR on the true π) is best; under drift the refitted map beats the old
    total = {key: sum(r[key] for r in drift) for key in ("old", "new", "oracle")}
    assert total["oracle"] < total["new"] < total["old"], total
    assert not list(tmp_path.glob("bench_drift.*"))  # the temporary logs are removed
