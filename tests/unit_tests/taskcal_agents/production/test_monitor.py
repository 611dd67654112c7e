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

import taskcal_agents.production._null as null_module
from calibrators import IdentityCalibrator, VectorScaling
from taskcal_agents.cli import app
from taskcal_agents.decision._artefact import CalibratorArtefact
from taskcal_agents.decision._decider import Decision
from taskcal_agents.decision._task import Task
from taskcal_agents.errors import ConfigurationError, DataFileError, LabelMismatchError
from taskcal_agents.production._decision_log import open_decision_log
from taskcal_agents.production._monitor import first_alarm, monitor, parse_window
from taskcal_agents.production._null import saddlepoint_z

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
        assert saddlepoint_z(q, x, values[j]) == pytest.approx(exact, abs=0.03), level
    assert values[np.searchsorted(cdf, 0.99865)] / se > 4.0  # the normal z
    # every item at its least value: the atom's probability; beyond the support: inf
    assert saddlepoint_z(q, x, values[0]) == pytest.approx(stats.norm.ppf(probs[0]))
    assert saddlepoint_z(q, x, values[-1] + 1e-3) == np.inf
    assert saddlepoint_z(q, x, values[0] - 1e-3) == -np.inf
    # n Bernoulli(0.05) items, centred: the binomial tail (mid-p) both ways
    n, p = 200, 0.05
    qb, xb = np.tile([1 - p, p], (n, 1)), np.tile([-p, 1 - p], (n, 1))
    for k in (2, 5, 15, 20, 25):
        mid = stats.binom.cdf(k - 1, n, p) + stats.binom.pmf(k, n, p) / 2
        assert saddlepoint_z(qb, xb, k - n * p) == pytest.approx(stats.norm.ppf(mid), abs=0.06)


# ------------------------------------------ the gaps' z: exact tails, near the mean

# A window of 12 skewed beliefs (most mass on one label, a few outcomes far less likely)
# and outcomes in the upper tail of both gaps: few enough items that the exact null
# distribution of each sum, y_i ~ q_i, is enumerated (3^12 outcomes).
SKEWED_Q = np.array(
    [
        [0.794, 0.091, 0.115],
        [0.219, 0.002, 0.779],
        [0.628, 0.013, 0.359],
        [0.796, 0.174, 0.030],
        [0.002, 0.063, 0.935],
        [0.002, 0.059, 0.939],
        [0.883, 0.081, 0.036],
        [0.963, 0.011, 0.026],
        [0.002, 0.054, 0.944],
        [0.640, 0.002, 0.358],
        [0.988, 0.011, 0.001],
        [0.045, 0.518, 0.437],
    ]
)
SKEWED_Y = [0, 2, 2, 1, 2, 1, 1, 2, 2, 0, 1, 2]


def _mid_p_z(q: np.ndarray, values: np.ndarray, observed: float) -> float:
    """Φ⁻¹ of the exact mid-p, P(S < s) + P(S = s) / 2, of ``S = sum_i values[i, y_i]``."""
    sums, probs = np.zeros(1), np.ones(1)
    for qi, vi in zip(q, values, strict=True):  # every outcome vector, enumerated
        sums = (sums[:, None] + vi[None, :]).ravel()
        probs = (probs[:, None] * qi[None, :]).ravel()
    tie = np.abs(sums - observed) <= 1e-9
    return float(stats.norm.ppf(probs[(sums < observed) & ~tie].sum() + probs[tie].sum() / 2))


def test_reported_gap_z_is_the_exact_mid_p_of_the_window() -> None:
    # monitor() itself, on a window whose sums' null distributions are enumerated: each
    # gap's reported z is the normal quantile of the exact mid-p (the cost sum is on the
    # integer lattice of the costs; the uncorrected saddlepoint approximates its mid-p),
    # within 0.03 (measured 0.010 for cost_gap, 0.001 for nll_gap). The plain z of a mean,
    # mean / (std / √n) (2.4 and 2.2: no alarm) and the normal z at the reported null SE,
    # mean / se (4.9 and 5.6), are off by more than 1: a gap reverted to either fails.
    q, y, n = SKEWED_Q, np.array(SKEWED_Y), len(SKEWED_Y)
    cost = np.asarray(TASK.cost_matrix(), dtype=np.float64)
    actions = np.argmin(q @ cost, axis=1)
    records = [{"id": f"d{i}", "task": "x", "labels": LABELS, "outcome": LABELS[y[i]],
                "calibrated": dict(zip(LABELS, q[i].tolist(), strict=True)),
                "action": LABELS[actions[i]]} for i in range(n)]  # fmt: skip
    (window,) = monitor(records, TASK, n_boot=10, min_n=5).windows
    rows = np.arange(n)
    surprise = -np.log(q)
    expected = (q @ cost)[rows, actions]
    for name, values, centre in [
        ("cost_gap", cost[:, actions].T, expected),  # the realised cost: integers
        ("nll_gap", surprise, np.sum(q * surprise, axis=1)),
    ]:
        terms = values - centre[:, None]
        observed = terms[rows, y]
        exact = _mid_p_z(q, values, float(values[rows, y].sum()))
        m = window.metric(name)
        assert m.z == pytest.approx(exact, abs=0.03), name
        assert m.value == pytest.approx(observed.mean())
        assert m.se == pytest.approx(np.sqrt(np.sum(q * terms**2)) / n)
        assert exact > 3 and m.status == "ALARM", name
        plain = observed.mean() / (observed.std(ddof=1) / np.sqrt(n))
        assert exact - plain > 1 and m.value / m.se - exact > 1, (name, plain, m.value / m.se)


def _skewed_terms(n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Centred per-item terms of n items: nll_gap-like ones (beliefs Dirichlet(0.3) over 4
    labels) and cost_gap-like ones (a rare outcome, p 1–10 %, that costs 5)."""
    rng = np.random.default_rng(n)
    q = rng.dirichlet([0.3] * 4, size=n)
    x = -np.log(np.clip(q, 1e-12, 1.0))
    p = rng.uniform(0.01, 0.1, n)
    qb, xb = np.stack([1 - p, p], axis=1), np.stack([-5 * p, 5 * (1 - p)], axis=1)
    return [(q, x - np.sum(q * x, axis=1, keepdims=True)), (qb, xb)]


@pytest.mark.parametrize("n", [200, 2000])
def test_saddlepoint_z_is_continuous_near_the_mean(n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Σ nll_gap is the score of a map's scale, so a window of the fit's own items has a gap
    # of about 0, where 2(t·total − K) with K a sum of log-sum-exps cancels catastrophically
    # (z −2429 at z0 = 1e-6, n = 200). Over z0 = ±10^(−9…−1) the z is finite, increasing,
    # and at the mean tends to the limit of r*, γ₁/6 (+ z0 to first order), not to 0: a
    # right-skewed sum's median lies below its mean. The solve alone (no series near the
    # mean) agrees to 1e-6 down to |z0| = 1e-7: K is computed centred.
    w = np.concatenate([-np.logspace(-1, -9, 161), np.logspace(-9, -1, 161)])
    for q, x in _skewed_terms(n):
        sd = float(np.sqrt(np.sum(q * x * x)))
        g1 = float(np.sum(q * x**3)) / sd**3
        z = np.array([saddlepoint_z(q, x, v * sd) for v in w])
        assert np.all(np.isfinite(z)) and np.all(np.diff(z) > 0)
        tiny = np.abs(w) <= 1e-6
        assert np.max(np.abs(z[tiny] - w[tiny] - g1 / 6)) < 1e-6
        assert np.max(np.abs(z - w)) < abs(g1) / 6 + 0.01
        # the saddlepoint solved everywhere (no series near the mean) gives the same z
        monkeypatch.setattr(null_module, "SERIES_BELOW", 0.0)
        solved = np.array([saddlepoint_z(q, x, v * sd) for v in w])
        monkeypatch.undo()
        far = np.abs(w) >= 1e-7
        assert np.max(np.abs(solved[far] - z[far])) < 1e-6


@pytest.mark.parametrize("n", [200, 500])
def test_the_fits_own_items_do_not_alarm_on_the_gaps(n: int) -> None:
    # −log q[y] − H(q) = −(s_y − E_q s) for q = softmax(s), so Σ nll_gap is the score of the
    # map's overall scale: on the items a vector scaling was fitted on it is 0 up to the
    # optimiser's tolerance (mean gap about 1e-8): a K of log-sum-exps reads z = −290 (ALARM)
    # on the first of these windows.
    rng = np.random.default_rng(1)
    truth = rng.dirichlet([1.0, 1.0, 1.0], size=n)
    y = (rng.random((n, 1)) > np.cumsum(truth, axis=1)[:, :-1]).sum(axis=1)
    sharp = truth**3 / np.sum(truth**3, axis=1, keepdims=True)  # an overconfident model
    q = VectorScaling().fit(sharp, y).predict_proba(sharp)
    cost = TASK.cost_matrix()
    records = [{"id": f"d{i}", "task": "x", "labels": LABELS, "outcome": LABELS[y[i]],
                "calibrated": dict(zip(LABELS, q[i].tolist(), strict=True)),
                "action": LABELS[int(np.argmin(q[i] @ cost))]} for i in range(n)]  # fmt: skip
    report = monitor(records, TASK, n_boot=10)
    gap = report.windows[0].metric("nll_gap")
    assert abs(gap.value) < 1e-6 and gap.status == "ok"
    assert 0 < gap.z < 0.1  # about γ₁/6 of the window's sum
    assert not report.windows[0].metric("cost_gap").alarm
