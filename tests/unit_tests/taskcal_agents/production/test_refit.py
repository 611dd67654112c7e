"""``refit_from_records`` and ``taskcal refit``: paired promotion on the decision log."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from calibrators import make_calibrator
from taskcal_agents.cli import app
from taskcal_agents.decision._artefact import CalibratorArtefact
from taskcal_agents.decision._belief import Belief
from taskcal_agents.decision._decider import Decision
from taskcal_agents.decision._presets import tool_decision
from taskcal_agents.decision._task import GroundingSpec
from taskcal_agents.errors import ConfigurationError, DataFileError
from taskcal_agents.production import refit_from_records
from taskcal_agents.production._decision_log import artefact_id, open_decision_log

TASK = tool_decision(grounding=GroundingSpec())  # no relevance features: beliefs only
LABELS = list(TASK.labels)
ALPHA = 0.5
N = 10
T0 = datetime(2026, 1, 1, tzinfo=UTC)
SHIFT = np.array([0.15, 1.0, 6.0])
"""A class bias: the outcomes favour ``cannot_answer`` far more than p̂ says."""


def _beliefs(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per item: the model's label distribution, counts of N samples, unparsed counts."""
    pi = rng.dirichlet(np.full(3, 0.6), size=n)
    unparsed = rng.binomial(1, 0.1, size=n)
    counts = np.array([rng.multinomial(N - u, p) for p, u in zip(pi, unparsed, strict=True)])
    return pi, counts, unparsed


def _outcomes(rng: np.random.Generator, pi: np.ndarray, shift: np.ndarray | None) -> np.ndarray:
    r = pi if shift is None else pi * shift
    r = r / r.sum(axis=1, keepdims=True)
    return np.array([rng.choice(3, p=row) for row in r])


def _probs(counts: np.ndarray, unparsed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    beliefs = [
        Belief(c, LABELS, n=N, n_unparsed=int(u), alpha=ALPHA, unparsed_evidence=True)
        for c, u in zip(counts, unparsed, strict=True)
    ]
    return np.array([b.probs for b in beliefs]), np.array([b.features for b in beliefs])


def _old(name: str = "vector", seed: int = 1) -> CalibratorArtefact:
    """An artefact fitted on outcomes that follow p̂'s source (no shift)."""
    rng = np.random.default_rng(seed)
    pi, counts, unparsed = _beliefs(rng, 1500)
    y = _outcomes(rng, pi, None)
    P, F = _probs(counts, unparsed)
    cal = make_calibrator(name)
    if getattr(cal, "reads_extra_columns", False):
        cal = cal.set_params(n_classes=3).fit(F, y)
        inputs = "features"
    else:
        cal = cal.fit(P, y)
        inputs = "probs"
    return CalibratorArtefact(
        calibrator=cal, labels=LABELS, alpha=ALPHA, task=TASK,
        metadata={"calibrator_name": name, "fit_metrics": {"inputs": inputs},
                  "created": "2026-01-01T00:00:00+00:00"},
    )  # fmt: skip


def _records(
    n: int,
    *,
    seed: int = 0,
    shift: np.ndarray | None = SHIFT,
    recent_shift: np.ndarray | str | None = "same",
    start: datetime = T0,
    aid: str | None = None,
) -> list[dict[str, Any]]:
    """Labelled decision records one hour apart; ``recent_shift`` for the last 30 %."""
    rng = np.random.default_rng(seed)
    pi, counts, unparsed = _beliefs(rng, n)
    y = _outcomes(rng, pi, shift)
    if recent_shift != "same":
        cut = n - int(0.3 * n)
        y[cut:] = _outcomes(rng, pi[cut:], recent_shift)  # type: ignore[arg-type]
    P, _ = _probs(counts, unparsed)
    out = []
    for i in range(n):
        out.append({
            "id": f"d{i}", "time": (start + timedelta(hours=i)).isoformat(),
            "task": TASK.name, "labels": LABELS, "artefact_id": aid,
            "probs": dict(zip(LABELS, P[i].tolist(), strict=True)),
            "counts": dict(zip(LABELS, counts[i].astype(float).tolist(), strict=True)),
            "expected_cost": {a: 0.0 for a in TASK.action_list}, "fallback": False,
            "n_samples": N, "n_unparsed": int(unparsed[i]), "outcome": LABELS[y[i]],
        })  # fmt: skip
    return out


def test_promotes_a_refit_when_the_calibration_shifted() -> None:
    old = _old()
    result = refit_from_records(_records(600), old, source="log.jsonl")
    assert result.promoted, result.reason
    assert result.cost_diff is not None and result.cost_diff_se is not None
    assert result.cost_diff + 1.645 * result.cost_diff_se <= 0
    assert result.nll_diff is not None and result.nll_diff < 0
    assert (result.n_train, result.n_holdout) == (420, 180)
    new = result.artefact
    assert new is not None and new.labels == LABELS and new.task == TASK
    refit = new.metadata["refit"]
    assert refit["parent_artefact_id"] == artefact_id(old)
    assert refit["n_train"] == 420 and refit["source"] == "log.jsonl"
    assert refit["comparison"]["cost_diff"] == result.cost_diff
    assert new.metadata["calibrator_name"] == "vector"
    assert type(new.calibrator) is type(old.calibrator)
    # the provenance survives a save/load round trip
    again = CalibratorArtefact.from_dict(json.loads(json.dumps(new.to_dict())))
    assert again.metadata["refit"]["n_holdout"] == 180


def test_features_calibrator_is_refit_on_the_features() -> None:
    old = _old("matrix")
    assert old.calibrator.n_features_in_ == 4  # type: ignore[attr-defined]
    result = refit_from_records(_records(600), old)
    assert result.promoted, result.reason
    assert result.artefact is not None
    assert result.artefact.calibrator.n_features_in_ == 4  # type: ignore[attr-defined]
    assert result.artefact.metadata["fit_metrics"]["inputs"] == "features"


def test_kept_when_the_new_map_is_worse_on_the_recent_holdout() -> None:
    # trained on shifted outcomes, but the recent past is back to the old calibration
    records = _records(600, shift=SHIFT, recent_shift=None)
    result = refit_from_records(records, _old())
    assert not result.promoted
    assert result.cost_diff is not None and result.cost_diff > 0
    assert "kept the old artefact" in result.reason and "costs more" in result.reason
    assert result.artefact is not None  # fitted, for inspection, but not promoted


def test_kept_on_an_unchanged_stream_for_want_of_evidence() -> None:
    # outcomes follow the old map's calibration: a refit is not shown better, so it stays
    kept = [refit_from_records(_records(600, seed=s, shift=None), _old()) for s in range(4)]
    assert sum(r.promoted for r in kept) <= 1
    for r in kept:
        if not r.promoted:
            assert "not shown lower" in r.reason or "costs more" in r.reason


def test_the_cost_guard_keeps_a_map_the_holdout_shows_costlier() -> None:
    records = _records(600, shift=SHIFT, recent_shift=None)
    # a huge margin lets the cost through; the NLL evidence still decides
    lenient = refit_from_records(records, _old(), margin=10.0)
    assert not lenient.promoted and "not shown lower" in lenient.reason
    strict = refit_from_records(records, _old())
    assert not strict.promoted and "costs more" in strict.reason


def test_kept_when_too_few() -> None:
    result = refit_from_records(_records(25), _old())
    assert not result.promoted and result.artefact is None
    assert "too few" in result.reason and result.n_train + result.n_holdout == 25


def test_unlabelled_unserved_and_other_task_are_left_out() -> None:
    records = _records(100, aid="other")
    records[0]["outcome"] = None
    records[1]["counts"] = dict.fromkeys(LABELS, 0.0)
    records[2]["task"] = "another"
    result = refit_from_records(records, _old())
    assert (result.n_unlabelled, result.n_unserved, result.n_other_task) == (1, 1, 1)
    assert result.n_train + result.n_holdout == 97 and result.n_other_artefact == 97
    records[3]["outcome"] = "nope"
    with pytest.raises(DataFileError, match="not one of"):
        refit_from_records(records, _old())
    records[3]["outcome"], records[4]["labels"] = LABELS[0], LABELS[::-1]
    with pytest.raises(DataFileError, match="has labels"):
        refit_from_records(records, _old())


def test_bad_parameters() -> None:
    for kwargs in ({"holdout": 0.0}, {"holdout": 1.0}, {"half_life_days": 0.0}, {"z": -1.0}):
        with pytest.raises(ConfigurationError):
            refit_from_records([], _old(), **kwargs)


def test_recency_weights_change_the_fit() -> None:
    old = _old()
    # old shift first, then the shifted calibration: weights favour the recent part
    records = _records(300, shift=None, seed=3) + _records(
        300, seed=4, start=T0 + timedelta(days=30)
    )
    plain = refit_from_records(records, old)
    weighted = refit_from_records(records, old, half_life_days=2.0)
    huge = refit_from_records(records, old, half_life_days=1e9)
    assert plain.artefact and weighted.artefact and huge.artefact
    X = np.array([[0.6, 0.3, 0.1], [0.2, 0.3, 0.5], [0.1, 0.1, 0.8]])
    q_plain = plain.artefact.calibrator.predict_proba(X)
    q_weighted = weighted.artefact.calibrator.predict_proba(X)
    np.testing.assert_allclose(huge.artefact.calibrator.predict_proba(X), q_plain, atol=1e-5)
    # recency weighting follows the recent (shifted) outcomes: more mass on cannot_answer
    assert np.all(q_weighted[:, 2] > q_plain[:, 2])
    assert weighted.artefact.metadata["refit"]["half_life_days"] == 2.0


def test_holdout_is_the_most_recent_fraction_in_time_order() -> None:
    records = _records(600, shift=SHIFT, recent_shift=None)
    shuffled = list(records)
    np.random.default_rng(0).shuffle(shuffled)
    a = refit_from_records(records, _old())
    b = refit_from_records(shuffled, _old())
    assert (a.promoted, a.cost_diff, a.nll_diff) == (b.promoted, b.cost_diff, b.nll_diff)
    # deterministic
    c = refit_from_records(records, _old())
    assert c.comparison() == a.comparison()


def test_risk_controlled_artefact_is_refused() -> None:
    from taskcal_agents.decision._risk_control import calibrate_risk

    old = _old()
    rng = np.random.default_rng(0)
    Q = rng.dirichlet(np.ones(3), size=200)
    y = rng.integers(0, 3, size=200)
    old.risk_control = calibrate_risk(TASK, "tool_call_when_not:0.3", Q, y, delta=0.1)
    with pytest.raises(ConfigurationError, match="does not carry over"):
        refit_from_records(_records(100), old)


# ---------------------------------------------------------------- both log backends + CLI


def _log(tmp_path: Path, name: str, records: list[dict[str, Any]]) -> Path:
    """Write the records through a real DecisionLog (times: write order) with outcomes."""
    path = tmp_path / name
    log = open_decision_log(path)
    ids = []
    for r in records:
        decision = Decision(
            task=TASK.name, action=TASK.default_action, probs=r["probs"],
            calibrated=r["probs"], expected_cost=r["expected_cost"], counts=r["counts"],
            n_samples=r["n_samples"], n_unparsed=r["n_unparsed"],
        )  # fmt: skip
        ids.append(log.append(decision, task=TASK))
    log.import_outcomes([(i, r["outcome"]) for i, r in zip(ids, records, strict=True)])
    return path


@pytest.mark.parametrize("name", ["log.jsonl", "log.sqlite"])
def test_cli_promotes_and_replaces_atomically(tmp_path: Path, name: str) -> None:
    records = _records(200)
    log = _log(tmp_path, name, records)
    old = _old()
    old_path = old.save(tmp_path / "cal.json")
    inode = os.stat(old_path).st_ino
    expected = refit_from_records(records, old)
    assert expected.promoted
    result = CliRunner().invoke(
        app, ["refit", "--log", str(log), "--artefact", str(old_path), "-o", str(old_path)]
    )
    assert result.exit_code == 0, result.output
    assert "promoted" in result.output and "mean cost" in result.output
    assert os.stat(old_path).st_ino != inode  # replaced, not rewritten in place
    new = CalibratorArtefact.load(old_path)
    assert new.metadata["refit"]["source"] == str(log)
    assert new.metadata["refit"]["comparison"]["cost_diff"] == pytest.approx(expected.cost_diff)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("name", ["log.jsonl", "log.db"])
def test_cli_keeps_and_writes_nothing(tmp_path: Path, name: str) -> None:
    log = _log(tmp_path, name, _records(30))
    old_path = _old().save(tmp_path / "cal.json")
    out = tmp_path / "new.json"
    result = CliRunner().invoke(
        app, ["refit", "--log", str(log), "--artefact", str(old_path), "-o", str(out)]
    )
    assert result.exit_code == 3, result.output
    assert "too few" in result.output and not out.exists()


def test_cli_errors_exit_2(tmp_path: Path) -> None:
    old_path = _old().save(tmp_path / "cal.json")
    runner = CliRunner()
    missing = runner.invoke(
        app, ["refit", "--log", str(tmp_path / "x.jsonl"), "--artefact", str(tmp_path / "no.json"),
              "-o", str(tmp_path / "n.json")],
    )  # fmt: skip
    assert missing.exit_code == 2
    bad = runner.invoke(
        app, ["refit", "--log", str(tmp_path / "x.jsonl"), "--artefact", str(old_path),
              "-o", str(tmp_path / "n.json"), "--holdout", "1.5"],
    )  # fmt: skip
    assert bad.exit_code == 2 and "holdout" in bad.output


# ---------------------------------------------------------------- review fixes


def _with_fallbacks(records: list[dict[str, Any]], share: float = 0.05) -> list[dict[str, Any]]:
    """Every 1/share-th record a fallback: all samples unparsed, uniform beliefs."""
    uniform = dict.fromkeys(LABELS, 1 / 3)
    step = round(1 / share)
    for r in records[::step]:
        r.update(counts=dict.fromkeys(LABELS, 0.0), n_unparsed=N, fallback=True, probs=uniform)
    return records


def test_promoted_artefact_records_the_logs_monitor_references() -> None:
    from taskcal_agents.production._monitor import monitor

    records = _with_fallbacks(_records(600))
    result = refit_from_records(records, _old())
    assert result.promoted and result.artefact is not None, result.reason
    fit = result.artefact.metadata["fit_metrics"]
    assert fit["fallback_rate"] == {"n": 600, "rate": pytest.approx(30 / 600)}
    shares = [r["n_unparsed"] / N for r in records]
    assert fit["unparsed_rate"]["n"] == 600
    assert fit["unparsed_rate"]["rate"] == pytest.approx(np.mean(shares))
    assert fit["unparsed_rate"]["se"] == pytest.approx(np.std(shares, ddof=1) / np.sqrt(600))
    assert fit["holdout"]["nll"] == result.new_nll and fit["holdout"]["nll_se"] > 0
    # the same stream served by the new map: what the monitor sees must not alarm
    new = result.artefact
    cost = TASK.cost_matrix()
    served = []
    for r in records:
        q = new.calibrator.predict_proba(np.array([[r["probs"][lab] for lab in LABELS]]))[0]
        served.append({**r, "calibrated": dict(zip(LABELS, q.tolist(), strict=True)),
                       "action": TASK.action_list[int(np.argmin(q @ cost))]})  # fmt: skip
    report = monitor(served, new)
    (window,) = report.windows
    assert window.metric("fallback_rate").source == "fit"
    assert window.metric("nll").source == "fit"
    assert window.metric("unparsed_rate").source == "fit"
    assert not report.alarm, report.alarms()


def test_refit_embeds_the_task_it_used() -> None:
    costly = TASK.model_copy(update={"cost": [[0.0, 1.0, 2.0], [4.0, 0.0, 1.0], [9.0, 2.0, 0.0]]})
    result = refit_from_records(_records(600), _old(), task=costly)
    assert result.artefact is not None
    assert result.artefact.task == costly and result.artefact.task != TASK


@pytest.mark.parametrize(
    ("change", "match"),
    [({"probs": None}, "no 'probs'"),
     ({"probs": dict.fromkeys(LABELS, float("nan"))}, "finite"),
     ({"probs": {LABELS[0]: 1.0}}, "lacks label"),
     ({"probs": {LABELS[0]: 1.5, LABELS[1]: -0.5, LABELS[2]: 0.0}}, "negative"),
     ({"time": "yesterday"}, "time"),
     ({"n_samples": "ten"}, "n_samples")],
)  # fmt: skip
def test_bad_records_are_data_errors_naming_the_log(change: dict[str, Any], match: str) -> None:
    records = _records(100)
    records[5].update(change)
    with pytest.raises(DataFileError, match=match) as info:
        refit_from_records(records, _old(), source="log.jsonl")
    assert "log.jsonl" in str(info.value) and "'d5'" in str(info.value)


def test_cli_bad_record_exits_2(tmp_path: Path) -> None:
    records = _records(100)
    records[5]["probs"] = dict.fromkeys(LABELS, float("nan"))
    lines = []
    for r in records:
        lines.append(json.dumps({"type": "decision", **{k: v for k, v in r.items()
                                                         if k != "outcome"}}))  # fmt: skip
        lines.append(json.dumps({"type": "outcome", "id": r["id"], "label": r["outcome"]}))
    log = tmp_path / "log.jsonl"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    old_path = _old().save(tmp_path / "cal.json")
    result = CliRunner().invoke(
        app, ["refit", "--log", str(log), "--artefact", str(old_path), "-o", str(tmp_path / "n")]
    )
    assert result.exit_code == 2, result.output
    assert "log.jsonl" in result.output and "'d5'" in result.output


# ---------------------------------------------------------------- audit: mutations caught


@pytest.mark.parametrize("half_life_days", [None, 10.0])
def test_the_new_map_is_fitted_on_the_training_records_only(half_life_days: float | None) -> None:
    # The holdout (the most recent 30 % by time) judges the new map, so it must not train
    # it: whatever its outcomes say, the refitted map is the same. Changing the outcomes
    # of training records instead does change it (the check has power).
    records = _records(600, seed=5)
    np.random.default_rng(1).shuffle(records)  # log order is not time order
    by_time = sorted(records, key=lambda r: r["time"])
    holdout_ids = {r["id"] for r in by_time[-180:]}
    train_ids = {r["id"] for r in by_time[:-180]}

    def relabelled(ids: set[str]) -> list[dict[str, Any]]:
        return [{**r, "outcome": "cannot_answer"} if r["id"] in ids else r for r in records]

    probe = np.array([[0.6, 0.3, 0.1], [0.2, 0.3, 0.5], [0.1, 0.1, 0.8], [1 / 3, 1 / 3, 1 / 3]])
    maps = {}
    for name, recs in [("as_logged", records), ("holdout_relabelled", relabelled(holdout_ids)),
                       ("train_relabelled", relabelled(train_ids))]:  # fmt: skip
        result = refit_from_records(recs, _old(), half_life_days=half_life_days)
        assert (result.n_train, result.n_holdout) == (420, 180), name
        assert result.artefact is not None, result.reason
        maps[name] = result.artefact.calibrator.predict_proba(probe)
    np.testing.assert_allclose(
        maps["holdout_relabelled"], maps["as_logged"], rtol=0, atol=1e-9,
        err_msg="the refitted map depends on the holdout's outcomes: it was trained on them",
    )  # fmt: skip
    assert np.abs(maps["train_relabelled"] - maps["as_logged"]).max() > 0.05


def test_a_relevance_calibrator_is_refit_on_the_logged_relevance() -> None:
    # The logged relevance features (a no-fit signal that shifts the outcomes) are read back
    # into the raw inputs; a record logged without them cannot refit such a map.
    from taskcal_agents.decision._decider import raw_inputs
    from taskcal_agents.decision._task import GroundingSpec
    from taskcal_agents.parsing._relevance import RELEVANCE_FEATURES

    task = tool_decision(grounding=GroundingSpec(relevance=True))
    rng = np.random.default_rng(3)

    def rows(n: int) -> tuple[list[dict[str, Any]], np.ndarray, np.ndarray]:
        records = _records(n, seed=int(rng.integers(1000)), shift=None)
        X, y = [], []
        for r in records:
            fit = float(rng.uniform())  # low lexical fit: no tool fits more often
            if rng.uniform() > fit:
                r["outcome"] = "cannot_answer"
            r["task"] = task.name
            r["relevance"] = {k: 0.0 for k in RELEVANCE_FEATURES} | {"lexical_fit": fit}
            belief = Belief(
                list(r["counts"].values()), LABELS, n=N, n_unparsed=r["n_unparsed"],
                alpha=ALPHA, unparsed_evidence=True,
            )  # fmt: skip
            X.append(raw_inputs(task, belief, list(r["relevance"].values())))
            y.append(LABELS.index(r["outcome"]))
        return records, np.array(X), np.array(y)

    _, X, y = rows(800)
    stale = rng.permutation(y)  # the old map learnt nothing of the relevance
    cal = make_calibrator("logistic", C=1.0).set_params(n_classes=3).fit(X, stale)
    old = CalibratorArtefact(
        calibrator=cal, labels=LABELS, alpha=ALPHA, task=task,
        metadata={"calibrator_name": "logistic:C=1.0", "fit_metrics": {"inputs": "inputs"},
                  "created": "2026-01-01T00:00:00+00:00"},
    )  # fmt: skip
    records, _, _ = rows(600)
    result = refit_from_records(records, old)
    assert result.promoted, result.reason
    assert result.artefact is not None
    assert result.artefact.calibrator.n_features_in_ == task.n_inputs  # type: ignore[attr-defined]
    assert result.artefact.metadata["fit_metrics"]["inputs"] == "inputs"
    del records[5]["relevance"]
    with pytest.raises(DataFileError, match="decision record 'd5' has relevance None"):
        refit_from_records(records, old)


@pytest.mark.parametrize("belief", ["relabel", "features"])
def test_one_pass_decisions_are_read_back_as_the_runtime_read_them(belief: str) -> None:
    # A one-pass decision logs its pseudo-counts; refit rebuilds the calibrator's input from
    # them exactly as Decider.decide_one_pass built it, and an ungrounded greedy call is
    # never a call that could have been sent.
    from langchain_core.messages import AIMessage

    from taskcal_agents.decision._decider import Decider
    from taskcal_agents.parsing import GroundingContext
    from taskcal_agents.production._refit import _rows

    task = tool_decision(grounding=GroundingSpec(belief=belief, relevance=True))  # type: ignore[arg-type]
    decider = Decider(task, alpha=ALPHA)
    weather = {"type": "function", "function": {
        "name": "get_weather", "parameters": {"type": "object", "properties": {
            "city": {"type": "string"}}, "required": ["city"]}}}  # fmt: skip
    call = AIMessage(content="", tool_calls=[{"name": "get_weather", "args": {"city": "Paris"},
                                               "id": "c"}])  # fmt: skip
    records, expected = [], []
    for i, (text, probs) in enumerate([
        ("What's the weather in Paris?", [0.7, 0.2, 0.1]),
        ("What's the weather like?", [0.55, 0.35, 0.1]),  # Paris is invented: ungrounded
    ]):  # fmt: skip
        context = GroundingContext([weather], [{"role": "user", "content": text}])
        decision = decider.decide_one_pass(probs, call, forward_passes=2, context=context)
        record = decision.to_metadata() | {
            "id": f"d{i}",
            "time": T0.isoformat(),
            "labels": LABELS,
            "outcome": "tool_call",
        }
        records.append(json.loads(json.dumps(record)))
        _, relevance = _one_pass_inputs(task, probs, call, context)
        expected.append(relevance)
    rows = _rows(records, task, ALPHA, None, "log")
    assert rows.inputs is not None
    np.testing.assert_allclose(rows.inputs, np.array(expected))
    call_column = task.action_list.index("tool_call")
    assert rows.executable[0, call_column] and not rows.executable[1, call_column]


def _one_pass_inputs(task: Any, probs: list[float], call: Any, context: Any) -> tuple[Any, Any]:
    """The calibrator input the runtime builds for a one-pass decision (read_one_pass)."""
    from taskcal_agents.decision import read_one_pass
    from taskcal_agents.decision._decider import raw_inputs

    groundings = context.ground_samples([call])
    belief, relevance = read_one_pass(
        task, probs, [call], ["tool_call"], groundings, context, alpha=ALPHA
    )
    return belief, raw_inputs(task, belief, relevance)


def test_a_one_pass_log_is_read_by_its_greedy_completion_and_its_belief() -> None:
    # The greedy completion asked: no call could have been sent, whatever the pseudo-counts.
    # A call mass under one sample with an ungrounded greedy call reads without error. A log
    # of another belief than the artefact's is refused.
    from taskcal_agents.production._refit import _rows

    task = tool_decision(grounding=GroundingSpec(belief="features", relevance=False))
    base = {"time": T0.isoformat(), "labels": LABELS, "outcome": "tool_call", "task": task.name,
            "belief": "one_pass", "n_samples": 1, "n_unparsed": 0, "fallback": False,
            "expected_cost": {a: 0.0 for a in task.action_list},
            "probs": dict.fromkeys(LABELS, 1 / 3)}  # fmt: skip
    asked = base | {
        "id": "a",
        "greedy_label": "request_for_info",
        "n_ungrounded": 0,
        "counts": {"tool_call": 12.0, "request_for_info": 3.0, "cannot_answer": 1.0},
    }
    thin = base | {
        "id": "b",
        "greedy_label": "tool_call",
        "n_ungrounded": 1,
        "counts": {"tool_call": 0.8, "request_for_info": 13.6, "cannot_answer": 1.6},
    }
    rows = _rows([asked, thin], task, ALPHA, None, "log")  # fmt: skip
    call = task.action_list.index("tool_call")
    assert not rows.executable[0, call] and not rows.executable[1, call]
    from taskcal_agents.decision import one_pass_belief

    thin_belief = one_pass_belief(task, [0.05, 0.85, 0.1], ungrounded=True, alpha=ALPHA)
    assert thin_belief.n_ungrounded == 0  # 0.8 pseudo-samples: no whole ungrounded sample
    assert rows.X is not None
    np.testing.assert_allclose(rows.X[1], thin_belief.features)
    old = _old()
    with pytest.raises(DataFileError, match="decided on a 'one_pass' belief"):
        refit_from_records([asked | {"task": TASK.name}], old)
