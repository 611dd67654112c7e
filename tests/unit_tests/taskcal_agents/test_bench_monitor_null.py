"""Smoke test of the monitor's false-alarm benchmark (``bench_monitor_null.py --quick``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _benchmark() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "bench_monitor_null", ROOT / "benchmarks" / "bench_monitor_null.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_quick_run_tallies_every_metric_per_source(capsys: pytest.CaptureFixture[str]) -> None:
    results = _benchmark().main(["--quick"])
    printed = capsys.readouterr().out
    assert "benchmarks/bench_monitor_null.py --quick" in printed
    for source in ("calibrated", "world"):
        assert f"source {source!r}: 10 windows" in printed
    assert printed.count("| cost_gap | both | 10 |") == 2
    assert printed.count("| nll_gap | both | 10 |") == 2
    assert len(results) == 2 and all(len(seed["calibrated"]) == 5 for seed in results)
