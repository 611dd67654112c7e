"""The drift monitor: alarms on the right metric, windows, both log backends, the CLI."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats
from typer.testing import CliRunner

from calibrators import IdentityCalibrator
from taskcal_agents.cli import app
from taskcal_agents.decision.artefact import CalibratorArtefact
from taskcal_agents.decision.decider import Decision
from taskcal_agents.decision.task import Task
from taskcal_agents.errors import ConfigurationError, DataFileError, LabelMismatchError
from taskcal_agents.production.decision_log import open_decision_log
from taskcal_agents.production.monitor import (
    _saddlepoint_z,
    first_alarm,
    monitor,
    parse_window,
)

LABELS = ["a", "b", "c"]
TASK = Task(name="x", labels=LABELS, cost=[[0, 1, 2], [3, 0, 2], [3, 1, 0]],
            parser={"name": "choice", "options": {"labels": LABELS}})  # fmt: skip
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _stream(
    n: int,
    *,
    seed: int = 0,
    sharpen: float = 1.0,
    prior: list[float] | None = None,
    fallback: float = 0.0,
    unparsed: float = 0.05,
    start: int = 0,
    minutes: float = 1.0,
) -> list[dict[str, Any]]:
    """Records with true beliefs q; ``sharpen`` > 1 makes the logged q overconfident."""
    rng = np.random.default_rng(seed)
    cost = TASK.cost_matrix()
    out = []
    for i in range(n):
        q = rng.dirichlet([1.0, 1.0, 1.0])
        y = rng.choice(3, p=q if prior is None else prior)
        shown = q**sharpen / np.sum(q**sharpen)
        fb = bool(rng.random() < fallback)
        out.append({
            "id": f"d{start + i}",
            "time": (T0 + timedelta(minutes=(start + i) * minutes)).isoformat(),
            "task": "x",
            "labels": LABELS,
            "calibrated": dict(zip(LABELS, shown.tolist(), strict=True)),
            "action": LABELS[int(np.argmin(shown @ cost))],
            "fallback": fb,
            "n_samples": 8,
            "n_unparsed": int(rng.binomial(8, unparsed)),
            "outcome": LABELS[y],
        })  # fmt: skip
    return out


def _alarming(report: Any) -> set[str]:
    return {m.name for _, m in report.alarms()}


def test_calibrated_stream_does_not_alarm() -> None:
    report = monitor(_stream(1200), TASK, window=200)
    assert len(report.windows) == 6
    assert not report.alarm, report.alarms()
    assert report.windows[0].metric("nll").status == "reference"
    assert report.to_dict()["format"] == "taskcal.monitor"


def test_overconfidence_alarms_on_calibration_metrics() -> None:
    records = _stream(600) + _stream(600, seed=1, sharpen=3.0, start=600)
    report = monitor(records, TASK, window=200)
    assert report.alarm
    assert {"cost_gap", "nll_gap"} <= _alarming(report)
    assert not any(n.startswith("label_prior") for n in _alarming(report))
    assert all(i >= 3 for i, _ in report.alarms())  # only windows after the change


def test_classwise_ece_is_compared_with_calibrated_beliefs_of_the_same_window() -> None:
    # A fit-time ECE from many items is far below the (upward biased) ECE of a window of
    # 200 calibrated decisions; comparing the two alarmed in most windows of an unchanged
    # stream. The reference is the ECE of the window's own q under resampled outcomes.
    fit = {"n": 5000, "crossval": {"nll": 0.9, "classwise_ece": 0.005}}
    report = monitor(_stream(1200), TASK, window=200, fit_metrics=fit)
    ece = [w.metric("classwise_ece") for w in report.windows]
    assert all(m.source == "calibrated q" and m.reference > 0.02 for m in ece)
    assert not any(m.alarm for m in ece), [(m.value, m.reference, m.z) for m in ece]
    sharp = monitor(_stream(400, sharpen=3.0), TASK, window=200, fit_metrics=fit)
    assert all(w.metric("classwise_ece").alarm for w in sharp.windows)


def test_label_shift_alarms_on_the_moved_label() -> None:
    records = _stream(400) + _stream(400, seed=1, prior=[0.1, 0.1, 0.8], start=400)
    report = monitor(records, TASK, window=200)
    assert "label_prior:c" in _alarming(report)
    assert report.windows[-1].metric("label_prior:c").z > 3


@pytest.mark.parametrize(("field", "kwargs"), [("fallback_rate", {"fallback": 0.3}),
                                               ("unparsed_rate", {"unparsed": 0.4})])  # fmt: skip
def test_rate_rise_alarms(field: str, kwargs: dict[str, float]) -> None:
    records = _stream(400) + _stream(400, seed=1, start=400, **kwargs)
    report = monitor(records, TASK, window=200)
    assert field in _alarming(report)
    assert all(i >= 2 for i, m in report.alarms() if m.name == field)


def test_fit_time_references_are_used() -> None:
    fit = {"n": 500, "crossval": {"nll": 0.2, "classwise_ece": 0.01},
           "fallback_rate": {"n": 500, "rate": 0.0},
           "label_prior": {"n": 500, "shares": {"a": 0.8, "b": 0.1, "c": 0.1}}}  # fmt: skip
    report = monitor(_stream(300), TASK, fit_metrics=fit)
    (window,) = report.windows
    assert window.metric("nll").source == "fit"
    assert {"nll", "label_prior:a"} <= _alarming(report)
    assert window.metric("unparsed_rate").status == "reference"  # no fit value: window 0


def test_too_few_never_alarms() -> None:
    records = _stream(20, sharpen=5.0, prior=[0.9, 0.05, 0.05])
    report = monitor(records, TASK, min_n=30)
    assert not report.alarm
    assert report.windows[0].metric("cost_gap").status == "too few"
    # the same data with a lower min_n alarms: the rule, not the data, kept it quiet
    assert monitor(records, TASK, min_n=10).alarm


def test_windows_by_count_and_duration() -> None:
    records = _stream(300, minutes=10)  # 300 decisions over 50 hours
    assert [w.n_decisions for w in monitor(records, TASK, window=100).windows] == [100] * 3
    by_day = monitor(records, TASK, window="24h").windows
    assert [w.n_decisions for w in by_day] == [144, 144, 12]
    assert by_day[1].time_from == (T0 + timedelta(hours=24)).isoformat()
    assert parse_window("7d") == 7 * 86400.0 and parse_window("200") == 200
    with pytest.raises(ConfigurationError, match=r"monitor window must be a positive count"):
        parse_window("7 days")


def test_wrong_task_and_labels_are_clear_errors() -> None:
    records = _stream(10)
    other = [{**r, "task": "y"} for r in records]
    with pytest.raises(ConfigurationError, match=r"none of the 10 decisions is for task 'x'"):
        monitor(other, TASK)
    relabelled = [{**r, "labels": ["b", "a", "c"]} for r in records]
    with pytest.raises(LabelMismatchError, match=r"has labels \['b', 'a', 'c'\]"):
        monitor(relabelled, TASK)


def test_first_alarm_finds_the_change_and_not_noise() -> None:
    change = _stream(600) + _stream(600, seed=1, sharpen=3.0, start=600)
    hit = first_alarm(change, TASK, window=200, step=10)
    assert hit is not None and 600 <= hit < 900
    # non-overlapping windows: each of ~10 metrics is tested once per window (sliding
    # windows repeat the tests; the drift benchmark measures that false-alarm rate)
    assert first_alarm(_stream(1200), TASK, window=200, step=200) is None


def _decision(q: np.ndarray, *, fallback: bool = False) -> Decision:
    ec = q @ TASK.cost_matrix()
    action = LABELS[int(np.argmin(ec))]
    return Decision(task="x", action=action, unguarded_action=action,
                    probs=dict(zip(LABELS, q.tolist(), strict=True)),
                    calibrated=dict(zip(LABELS, q.tolist(), strict=True)),
                    expected_cost=dict(zip(LABELS, ec.tolist(), strict=True)),
                    counts=dict.fromkeys(LABELS, 1.0), n_samples=4, n_unparsed=0,
                    fallback=fallback)  # fmt: skip


def _write_log(path: Path, *, sharpen: float, n: int = 120, seed: int = 0) -> Path:
    """A real decision log: Decisions appended, outcomes recorded through the API."""
    log = open_decision_log(path)
    rng = np.random.default_rng(seed)
    outcomes = []
    for _ in range(n):
        q = rng.dirichlet([1.0, 1.0, 1.0])
        shown = q**sharpen / np.sum(q**sharpen)
        decision_id = log.append(_decision(shown), artefact_id="art1")
        outcomes.append((decision_id, LABELS[rng.choice(3, p=q)]))
    log.import_outcomes(outcomes)
    return path


@pytest.mark.parametrize("name", ["log.jsonl", "log.sqlite"])
def test_both_backends_through_the_cli(tmp_path: Path, name: str) -> None:
    task_file = TASK.to_file(tmp_path / "task.json")
    runner = CliRunner()
    good = _write_log(tmp_path / f"good-{name}", sharpen=1.0)
    result = runner.invoke(app, ["monitor", "--log", str(good), "--task", str(task_file),
                                 "--json", str(tmp_path / "r.json")])  # fmt: skip
    assert result.exit_code == 0, result.output
    saved = json.loads((tmp_path / "r.json").read_text())
    assert saved["format_version"] == 1 and saved["n_records"] == 120
    assert saved["artefact_ids"] == {"art1": 120}
    bad = _write_log(tmp_path / f"bad-{name}", sharpen=4.0)
    png = tmp_path / "drift.png"
    result = runner.invoke(app, ["monitor", "--log", str(bad), "--task", str(task_file),
                                 "--png", str(png)])  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "ALARM" in result.output and png.read_bytes()[:4] == b"\x89PNG"


def test_cli_with_artefact_and_errors(tmp_path: Path) -> None:
    fit = {"n": 100, "crossval": {"nll": 1.0}}
    art = CalibratorArtefact(calibrator=IdentityCalibrator().fit(np.eye(3), [0, 1, 2]),
                             labels=LABELS, task=TASK, metadata={"fit_metrics": fit})  # fmt: skip
    path = art.save(tmp_path / "art.json")
    log = _write_log(tmp_path / "log.jsonl", sharpen=1.0)
    runner = CliRunner()
    result = runner.invoke(app, ["monitor", "--log", str(log), "--artefact", str(path)])
    assert result.exit_code == 0, result.output
    assert "(fit)" in result.output
    other = Task(name="x", labels=["c", "b", "a"], cost=[[0, 1, 2], [3, 0, 2], [3, 1, 0]],
                 parser={"name": "choice", "options": {"labels": ["c", "b", "a"]}})  # fmt: skip
    result = runner.invoke(app, ["monitor", "--log", str(log), "--task",
                                 str(other.to_file(tmp_path / "other.json"))])  # fmt: skip
    assert result.exit_code == 2
    assert "has labels" in result.output
    result = runner.invoke(app, ["monitor", "--log", str(log)])
    assert result.exit_code == 2 and "--artefact" in result.output
    result = runner.invoke(app, ["monitor", "--log", str(tmp_path / "none.jsonl"), "--task", "t"])
    assert result.exit_code == 2 and "not found" in result.output


# ---------------------------------------------------------------- review fixes


def test_records_of_another_task_are_left_out_and_counted() -> None:
    # a middleware deciding on every call logs tool-result turns as another task
    mixed = _stream(300)
    for i, r in enumerate(list(mixed[::10])):
        mixed.append({**r, "id": f"t{i}", "task": "after_tool_result", "labels": ["ok", "no"]})
    report = monitor(mixed, TASK)
    assert (report.n_records, report.n_other_task) == (300, 30)
    assert report.to_dict()["n_other_task"] == 30 and not report.alarm
    only_other = [r for r in mixed if r["task"] != "x"]
    with pytest.raises(ConfigurationError, match=r"none of the 30 decisions is for task 'x'"):
        monitor(only_other, TASK)


@pytest.mark.parametrize(
    ("belief", "match"),
    [({"a": float("nan"), "b": 0.5, "c": 0.5}, "finite"),
     ({"a": -0.2, "b": 0.6, "c": 0.6}, "negative"),
     ({"a": 0.0, "b": 0.0, "c": 0.0}, "sum to 1"),
     ({"a": 0.5, "b": 0.5}, "lacks label 'c'"),
     (None, "no 'calibrated'")],
)  # fmt: skip
def test_bad_beliefs_are_data_errors_naming_the_record(belief: Any, match: str) -> None:
    records = _stream(50)
    records[7]["calibrated"] = belief
    with pytest.raises(DataFileError, match=match) as info:
        monitor(records, TASK, source="log.jsonl")
    assert "log.jsonl" in str(info.value) and "'d7'" in str(info.value)
    assert "calibrated" in str(info.value)


def _raw_log(path: Path, records: list[dict[str, Any]]) -> Path:
    lines = []
    for r in records:
        lines.append(json.dumps({"type": "decision", **{k: v for k, v in r.items()
                                                         if k != "outcome"}}))  # fmt: skip
        if r.get("outcome") is not None:
            lines.append(json.dumps({"type": "outcome", "id": r["id"], "label": r["outcome"]}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_cli_mixed_tasks_and_bad_records(tmp_path: Path) -> None:
    art = CalibratorArtefact(calibrator=IdentityCalibrator().fit(np.eye(3), [0, 1, 2]),
                             labels=LABELS, task=TASK, metadata={})  # fmt: skip
    path = art.save(tmp_path / "art.json")
    records = _stream(200)
    other = [{**r, "id": f"t{i}", "task": "after_tool_result"} for i, r in enumerate(records[:20])]
    log = _raw_log(tmp_path / "log.jsonl", records + other)
    runner = CliRunner()
    result = runner.invoke(app, ["monitor", "--log", str(log), "--artefact", str(path)])
    assert result.exit_code == 0, result.output
    assert "20 decisions of other tasks left out" in result.output
    records[3]["calibrated"]["a"] = float("nan")
    bad = _raw_log(tmp_path / "bad.jsonl", records)
    result = runner.invoke(app, ["monitor", "--log", str(bad), "--artefact", str(path)])
    assert result.exit_code == 2, result.output
    assert "bad.jsonl" in result.output and "'d3'" in result.output


def test_no_labelled_decisions_warns(tmp_path: Path) -> None:
    records = [{**r, "outcome": None} for r in _stream(50)]
    report = monitor(records, TASK)
    assert any("no labelled decisions" in w for w in report.warnings)
    assert report.to_dict()["warnings"] == list(report.warnings)
    task_file = TASK.to_file(tmp_path / "task.json")
    log = _raw_log(tmp_path / "log.jsonl", records)
    result = CliRunner().invoke(app, ["monitor", "--log", str(log), "--task", str(task_file)])
    assert result.exit_code == 0
    assert "warning" in result.output and "no labelled decisions" in result.output


def test_help_shows_the_nll_gap_formula() -> None:
    result = CliRunner().invoke(app, ["monitor", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "-log q[y] - H(q)" in result.output


# ------------------------------------------------------------- audit: mutations caught

EXACT_REFERENCES = {
    # the stream of _stream: q ~ Dirichlet(1, 1, 1), y ~ q, so E[-log q[y]] = E[H(q)] =
    # ψ(4) − ψ(2) = 5/6, labels uniform; 8 samples, each unparsed with probability 0.05
    "crossval": {"n": 10**7, "nll": 5 / 6, "nll_se": 0.0},
    "label_prior": {"n": 10**7, "shares": dict.fromkeys(LABELS, 1 / 3)},
    "unparsed_rate": {"n": 10**7, "rate": 0.05, "se": 0.0},
    "fallback_rate": {"n": 10**7, "rate": 0.1},
}


def test_z_scores_are_standard_on_a_stationary_stream() -> None:
    # A calibrated, stationary stream against its exact references: each metric's z over
    # 120 windows has mean about 0 and standard deviation about 1 (0.94–1.12 here). An SE
    # off by a factor (doubled: sd 0.5; halved: sd 2) fails. The alarm rate at z = 3 is
    # measured by benchmarks/bench_monitor_null.py, not here.
    records = _stream(12000, seed=7, fallback=0.1)
    report = monitor(records, TASK, window=100, fit_metrics=EXACT_REFERENCES, n_boot=20)
    assert len(report.windows) == 120
    names = [m.name for m in report.windows[0].metrics]
    assert len(names) == 9  # 3 gaps and ECE, 3 label shares, 2 rates
    for name in names:
        results = [w.metric(name) for w in report.windows]
        assert all(m.status in {"ok", "ALARM"} for m in results), name
        z = np.array([m.z for m in results], dtype=np.float64)
        sd = float(z.std(ddof=1))
        assert 0.75 < sd < 1.33, f"{name}: the sd of z is {sd:.3f}, not about 1"
        assert abs(float(z.mean())) < 0.35, f"{name}: the mean of z is {z.mean():.3f}"
        # the SE reported is the one z stands for (the gaps' z is a saddlepoint's: close)
        normal = np.array([(m.value - m.reference) / m.se for m in results])
        off = float(np.median(np.abs(z - normal)))
        assert off < 0.1, f"{name}: z and (value − reference) / SE differ by {off:.3f}"


def test_the_gaps_z_is_the_exact_tail_of_a_skewed_sum() -> None:
    # The gaps' z under calibration, against the exact distribution of a sum of 12 skewed
    # items (3^12 outcomes enumerated): the normal-equivalent of its tail probability
    # (mid-p), also in the upper tail, where the normal z (sum / SE) reads 4.1 for 3.
    rng = np.random.default_rng(3)
    q = rng.dirichlet([0.5, 0.5, 0.5], size=12)
    x = -np.log(q)
    x -= np.sum(q * x, axis=1, keepdims=True)  # the nll_gap terms: mean 0 under q
    values, probs = np.zeros(1), np.ones(1)
    for qi, xi in zip(q, x, strict=True):
        values = (values[:, None] + xi[None, :]).ravel()
        probs = (probs[:, None] * qi[None, :]).ravel()
    order = np.argsort(values)
    values, probs = values[order], probs[order]
    cdf = np.cumsum(probs)
    se = np.sqrt(np.sum(q * x * x))
    for level in (0.1, 0.5, 0.9, 0.99, 0.99865, 0.9995):
        j = int(np.searchsorted(cdf, level))
        exact = float(stats.norm.ppf(cdf[j] - probs[j] / 2))
        assert _saddlepoint_z(q, x, values[j]) == pytest.approx(exact, abs=0.03), level
    assert values[np.searchsorted(cdf, 0.99865)] / se > 4.0  # the normal z
    # every item at its least value: the atom's probability; beyond the support: inf
    assert _saddlepoint_z(q, x, values[0]) == pytest.approx(stats.norm.ppf(probs[0]))
    assert _saddlepoint_z(q, x, values[-1] + 1e-3) == np.inf
    assert _saddlepoint_z(q, x, values[0] - 1e-3) == -np.inf
    # n Bernoulli(0.05) items, centred: the binomial tail (mid-p) both ways
    n, p = 200, 0.05
    qb, xb = np.tile([1 - p, p], (n, 1)), np.tile([-p, 1 - p], (n, 1))
    for k in (2, 5, 15, 20, 25):
        mid = stats.binom.cdf(k - 1, n, p) + stats.binom.pmf(k, n, p) / 2
        assert _saddlepoint_z(qb, xb, k - n * p) == pytest.approx(stats.norm.ppf(mid), abs=0.06)
