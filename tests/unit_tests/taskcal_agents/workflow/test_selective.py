from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from taskcal_agents.errors import ConfigurationError, DataFileError
from taskcal_agents.workflow import EvalArrays, write_report
from taskcal_agents.workflow._evaluate import evaluate_arrays
from taskcal_agents.workflow._evaluation_json import evaluation_to_dict
from taskcal_agents.workflow._report import markdown_summary, plot_risk_coverage, selective_section
from taskcal_agents.workflow._selective import (
    RiskCoverage,
    action_confidence,
    risk_coverage,
    selective_summary,
)


def _geifman_aurc(costs: np.ndarray, order: list[int] | tuple[int, ...]) -> float:
    """Mean over i of the mean cost of the first i items of *order* (no ties)."""
    c = costs[list(order)]
    return float(np.mean(np.cumsum(c) / np.arange(1, c.size + 1)))


# --------------------------------------------------------------------------------------
# risk–coverage, hand-computed


def test_distinct_confidences_by_hand() -> None:
    rc = risk_coverage([0.0, 1.0, 0.0, 2.0], [4.0, 3.0, 2.0, 1.0])
    np.testing.assert_allclose(rc.coverage, [0.25, 0.5, 0.75, 1.0])
    np.testing.assert_allclose(rc.risk, [0.0, 0.5, 1 / 3, 0.75])
    np.testing.assert_allclose(rc.thresholds, [4.0, 3.0, 2.0, 1.0])
    assert rc.aurc == pytest.approx(19 / 48)  # (0 + 1/2 + 1/3 + 3/4) / 4
    assert rc.oracle_aurc == pytest.approx(13 / 48)  # order 0, 0, 1, 2
    assert rc.full_risk == pytest.approx(0.75)
    assert rc.n == 4
    # the largest coverage at the target, even past a point above it
    assert rc.coverage_at(0.4) == 0.75
    assert rc.coverage_at(0.5) == 0.75
    assert rc.coverage_at(0.75) == 1.0
    assert rc.coverage_at(0.0) == 0.25
    assert rc.coverage_at(-0.1) == 0.0


def test_ties_enter_together_by_hand() -> None:
    costs = [1.0, 0.0, 2.0, 0.0, 1.0]
    confidence = [0.9, 0.9, 0.5, 0.5, 0.1]
    rc = risk_coverage(costs, confidence)
    np.testing.assert_allclose(rc.coverage, [0.4, 0.8, 1.0])
    np.testing.assert_allclose(rc.risk, [0.5, 0.75, 0.8])
    # expected partial means 1/2, 1/2, (1 + 1)/3, (1 + 2)/4, 4/5
    assert rc.aurc == pytest.approx(193 / 300)
    assert rc.oracle_aurc == pytest.approx(49 / 150)  # order 0, 0, 1, 1, 2
    assert [rc.coverage_at(t) for t in (0.49, 0.5, 0.75, 0.8)] == [0.0, 0.4, 0.8, 1.0]


def test_constant_confidence_is_one_point_at_full_coverage() -> None:
    costs = np.array([0.0, 4.0, 1.0, 1.0, 2.0, 0.0])
    rc = risk_coverage(costs, np.full(6, 0.3))
    np.testing.assert_allclose(rc.coverage, [1.0])
    np.testing.assert_allclose(rc.risk, [costs.mean()])
    assert rc.aurc == pytest.approx(costs.mean())
    assert rc.coverage_at(costs.mean()) == 1.0
    assert rc.coverage_at(costs.mean() - 0.01) == 0.0


# --------------------------------------------------------------------------------------
# risk–coverage, properties


def test_perfect_ranking_has_the_least_aurc_of_all_orders() -> None:
    rng = np.random.default_rng(3)
    for _ in range(5):
        costs = rng.choice([0.0, 1.0, 2.0, 4.0], size=6)
        best = min(_geifman_aurc(costs, p) for p in itertools.permutations(range(6)))
        rc = risk_coverage(costs, -costs)
        assert rc.aurc == pytest.approx(best)
        assert rc.oracle_aurc == pytest.approx(best)
        # any other confidence does no better
        other = risk_coverage(costs, rng.normal(size=6))
        assert other.aurc >= best - 1e-12
        assert other.oracle_aurc == pytest.approx(best)


def test_aurc_with_ties_is_the_mean_over_tie_breaks() -> None:
    rng = np.random.default_rng(5)
    for _ in range(5):
        costs = rng.choice([0.0, 1.0, 2.0, 4.0], size=6)
        confidence = rng.choice([0.1, 0.5, 0.9], size=6)
        values = []
        for perm in itertools.permutations(range(6)):
            rank = {item: r for r, item in enumerate(perm)}
            order = sorted(range(6), key=lambda i: (-confidence[i], rank[i]))
            values.append(_geifman_aurc(costs, order))
        assert risk_coverage(costs, confidence).aurc == pytest.approx(np.mean(values))
    # without ties it is Geifman's AURC of the one order
    confidence = rng.normal(size=6)
    order = list(np.argsort(-confidence))
    assert risk_coverage(costs, confidence).aurc == pytest.approx(_geifman_aurc(costs, order))


def test_curve_does_not_depend_on_item_order() -> None:
    rng = np.random.default_rng(0)
    costs = rng.choice([0.0, 1.0, 3.0], size=40)
    confidence = rng.choice([0.0, 0.2, 0.4, 0.6], size=40)
    a = risk_coverage(costs, confidence)
    perm = rng.permutation(40)
    b = risk_coverage(costs[perm], confidence[perm])
    for field in ("coverage", "risk", "thresholds"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert a.aurc == pytest.approx(b.aurc, abs=1e-15)
    # integer costs: group sums are exact, so the JSON blocks are identical
    assert a.to_dict(1.39) == b.to_dict(1.39)
    assert a.to_dict(1.39)["coverage_at_target"] == 1.0


def test_to_dict_downsamples_and_keeps_endpoints() -> None:
    rng = np.random.default_rng(1)
    costs = rng.random(1000)
    confidence = rng.random(1000)
    rc = risk_coverage(costs, confidence)
    block = selective_summary(costs, confidence, target_risk=0.45)
    assert set(block) == {
        "aurc",
        "oracle_aurc",
        "full_risk",
        "target_risk",
        "coverage_at_target",
        "curve",
    }
    assert json.loads(json.dumps(block)) == block
    coverage, risk = block["curve"]["coverage"], block["curve"]["risk"]
    assert len(coverage) == len(risk) <= 101
    assert len(coverage) >= 100
    assert coverage[0] == rc.coverage[0] == 0.001
    assert coverage[-1] == 1.0
    assert risk[-1] == pytest.approx(costs.mean()) == block["full_risk"]
    assert np.all(np.diff(coverage) > 0)
    # every kept point is a point of the full curve
    full = dict(zip(rc.coverage.tolist(), rc.risk.tolist(), strict=True))
    assert all(full[c] == r for c, r in zip(coverage, risk, strict=True))
    assert block["aurc"] == rc.aurc
    assert block["target_risk"] == 0.45
    assert block["coverage_at_target"] == rc.coverage_at(0.45)
    # a short curve is kept whole; no target, no coverage at target
    small = selective_summary([1.0, 0.0, 2.0, 0.0, 1.0], [0.9, 0.9, 0.5, 0.5, 0.1])
    assert small["curve"] == {"coverage": [0.4, 0.8, 1.0], "risk": [0.5, 0.75, 0.8]}
    assert (small["target_risk"], small["coverage_at_target"]) == (None, None)


# --------------------------------------------------------------------------------------
# confidence


def test_action_confidence_by_hand() -> None:
    Q = np.array([[0.6, 0.4]])
    cost = np.array([[0.0, 1.0], [3.0, 0.0]])  # expected costs 1.2 and 0.6
    # majority vote picks label 0's action, which MBR would not
    assert action_confidence(Q, cost, np.array([0])).tolist() == pytest.approx([-0.6])
    assert action_confidence(Q, cost, np.array([1])).tolist() == pytest.approx([0.6])
    # no other executable action: 1 + max(cost) - min(cost)
    only = action_confidence(Q, cost, np.array([1]), np.array([[False, True]]))
    assert only.tolist() == [4.0]


def test_action_confidence_brute_force() -> None:
    rng = np.random.default_rng(7)
    n, k, m = 40, 3, 4
    Q = rng.dirichlet(np.ones(k), size=n)
    cost = rng.integers(0, 5, size=(k, m)).astype(float)
    actions = rng.integers(0, m, size=n)
    executable = rng.random((n, m)) < 0.6
    executable[0] = False  # nothing executable
    executable[1] = False
    executable[1, actions[1]] = True  # only the chosen action
    got = action_confidence(Q, cost, actions, executable)
    R = Q @ cost
    for i in range(n):
        others = [R[i, j] for j in range(m) if j != actions[i] and executable[i, j]]
        want = min(others) - R[i, actions[i]] if others else 1 + cost.max() - cost.min()
        assert got[i] == pytest.approx(want)
    assert got[0] == got[1] == 1 + cost.max() - cost.min()
    # MBR on Q with every action executable: margins are >= 0 and the constant prior
    # gives one confidence for all items
    mbr = np.argmin(R, axis=1)
    assert np.all(action_confidence(Q, cost, mbr) >= 0)
    prior = np.tile([0.5, 0.3, 0.2], (n, 1))
    constant = np.full(n, np.argmin(prior[0] @ cost))
    assert np.unique(action_confidence(prior, cost, constant)).size == 1


# --------------------------------------------------------------------------------------
# errors


@pytest.mark.parametrize(
    ("call", "msg"),
    [
        (
            lambda: risk_coverage([0.0, 1.0], [1.0]),
            "risk_coverage: costs and confidence must have the same shape, got (2,) and (1,).",
        ),
        (
            lambda: risk_coverage([], []),
            "risk_coverage: costs must hold at least one item, got an empty array.",
        ),
        (
            lambda: risk_coverage([0.0, float("nan")], [1.0, 2.0]),
            "risk_coverage: costs must hold finite numbers, got [nan]; remove NaN and inf values.",
        ),
        (
            lambda: risk_coverage([0.0], [[1.0]]),
            "risk_coverage: confidence must be a 1-d array, got shape (1, 1).",
        ),
        (
            lambda: risk_coverage(["a"], [1.0]),
            "risk_coverage: costs must be a numeric array, got ['a'].",
        ),
        (
            lambda: action_confidence(np.ones((2, 2)) / 2, np.ones((3, 2)), np.array([0, 1])),
            "action_confidence: cost must have one row per column of Q (2), got shape (3, 2); "
            "pass the (labels × actions) cost matrix.",
        ),
        (
            lambda: action_confidence(np.ones((2, 2)) / 2, np.ones((2, 3)), np.array([0.0, 1.0])),
            "action_confidence: actions must be integer action indices of shape (2,), got "
            "dtype float64 and shape (2,).",
        ),
        (
            lambda: action_confidence(np.ones((2, 2)) / 2, np.ones((2, 3)), np.array([0, 3])),
            "action_confidence: actions must lie in [0, 3) for a cost matrix with 3 actions, "
            "got [3].",
        ),
        (
            lambda: action_confidence(
                np.ones((2, 2)) / 2, np.ones((2, 3)), np.array([0, 1]), np.ones((2, 3))
            ),
            "action_confidence: executable must be a boolean array of shape (2, 3), got dtype "
            "float64 and shape (2, 3).",
        ),
        (
            lambda: risk_coverage([0.0], [1.0]).coverage_at(float("nan")),
            "RiskCoverage.coverage_at: target_risk must be finite, got nan.",
        ),
        (
            lambda: risk_coverage([0.0], [1.0]).to_dict("0.5"),  # type: ignore[arg-type]
            "RiskCoverage.to_dict: target_risk must be a number or None, got '0.5'.",
        ),
        (
            lambda: risk_coverage([0.0], [1.0]).curve_points(1),
            "RiskCoverage.curve_points: max_points must be an int >= 2, got 1.",
        ),
    ],
)
def test_errors(call: Any, msg: str) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(msg)):
        call()


# --------------------------------------------------------------------------------------
# report


def _evaluation(target_risk: float | None) -> dict[str, Any]:
    """A small evaluation whose decoder rows carry ``selective`` blocks."""
    rng = np.random.default_rng(2)
    n, k = 45, 3
    y = (np.arange(n) % k).astype(np.intp)
    counts = rng.multinomial(8, [0.2, 0.2, 0.2], size=n) + 4 * np.eye(k)[y].astype(int)
    P = (counts + 0.1) / (counts + 0.1).sum(axis=1, keepdims=True)
    names = ("tool_call", "request_for_info", "cannot_answer")
    cost = np.array([[0.0, 1.0, 2.0], [4.0, 0.0, 2.0], [4.0, 1.0, 0.0]])
    data = EvalArrays(
        P=P,
        y=y,
        cost=cost,
        labels=names,
        actions=names,
        greedy=np.argmax(P, axis=1).astype(np.intp),
        no_sample=np.zeros(n, dtype=bool),
        fallback=1,
        ids=tuple(f"i{i}" for i in range(n)),
    )
    result = evaluate_arrays(data, calibrators=("temperature",), n_permutations=0)
    belief = {"constant": "constant", "greedy": "raw", "majority": "raw", "mbr_raw": "raw"}
    for row in result.rows:
        name = row["decoder"]
        Q = result.probs[belief.get(name, name.removeprefix("mbr_"))]
        acts = result.actions[name]
        realised = cost[y, acts]
        row["selective"] = selective_summary(
            realised, action_confidence(Q, cost, acts), target_risk=target_risk
        )
    task = {"name": "t", "labels": list(names), "actions": list(names), "cost": cost.tolist()}
    return json.loads(json.dumps(evaluation_to_dict(result, data, task=task)))


def test_report_with_risk_coverage(tmp_path: Path) -> None:
    evaluation = _evaluation(target_risk=0.5)
    written = write_report(evaluation, tmp_path / "report")
    assert [p.name for p in written] == [
        "reliability.png",
        "costs.png",
        "risk_coverage.png",
        "summary.md",
    ]
    assert written[2].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = written[3].read_text()
    section = selective_section(evaluation)
    assert section in summary
    assert "![risk_coverage](risk_coverage.png)" in summary
    lines = section.splitlines()
    assert lines[0] == "## Selective prediction"
    assert lines[2].startswith("Each decoder ranks the items by its confidence in its own action")
    assert lines[2].endswith(
        "and the last column is the largest fraction of items decided at a mean cost of at "
        "most 0.5."
    )
    assert lines[4] == (
        "| decoder | AURC | oracle AURC | risk at full coverage | coverage at risk ≤ 0.5 |"
    )
    rows = {r["decoder"]: r for r in evaluation["decoders"]}
    assert set(rows) == {"constant", "greedy", "majority", "mbr_raw", "mbr_temperature"}
    block = rows["mbr_temperature"]["selective"]
    assert (
        f"| mbr_temperature | {block['aurc']:.3f} | {block['oracle_aurc']:.3f} | "
        f"{block['full_risk']:.3f} | {block['coverage_at_target']:.3f} |"
    ) in lines
    assert block["full_risk"] == pytest.approx(rows["mbr_temperature"]["expected_cost"])
    assert len(lines) == 6 + len(rows)


def test_report_without_target_or_without_blocks(tmp_path: Path) -> None:
    evaluation = _evaluation(target_risk=None)
    section = selective_section(evaluation)
    assert "| decoder | AURC | oracle AURC | risk at full coverage |" in section
    assert "coverage at risk" not in section
    assert section.splitlines()[2].endswith(
        "so the gap between the two measures the ranking alone."
    )
    png = plot_risk_coverage(evaluation, tmp_path / "rc.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for row in evaluation["decoders"]:
        del row["selective"]
    assert selective_section(evaluation) == ""
    assert "Selective prediction" not in markdown_summary(evaluation)
    written = write_report(evaluation, tmp_path / "plain")
    assert [p.name for p in written] == ["reliability.png", "costs.png", "summary.md"]
    msg = (
        f"{tmp_path / 'rc2.png'}: evaluation has no risk–coverage curves (no decoder row has a "
        "'selective' block); re-run `taskcal evaluate` with a version that writes them."
    )
    with pytest.raises(DataFileError, match=re.escape(msg)):
        plot_risk_coverage(evaluation, tmp_path / "rc2.png")


def test_reliability_bins_show_their_item_counts() -> None:
    from matplotlib.figure import Figure

    from calibrators.metrics import reliability_diagram
    from taskcal_agents.workflow._report_figures import _annotate_bin_counts

    rng = np.random.default_rng(4)
    P = rng.dirichlet(np.ones(3), size=30)
    y = rng.integers(0, 3, size=30)
    ax = Figure().subplots()
    diagram = reliability_diagram(P, y, n_bins=10, ax=ax)
    top = _annotate_bin_counts(ax, diagram)
    counts = [int(t.get_text()) for t in top.get_xticklabels()]
    assert counts == [int(w) for w in diagram.weight if w > 0]
    assert sum(counts) == 30
    centres = (diagram.bin_edges[:-1] + diagram.bin_edges[1:]) / 2
    np.testing.assert_allclose(top.get_xticks(), centres[diagram.weight > 0])


def test_risk_coverage_is_frozen() -> None:
    rc = risk_coverage([0.0, 1.0], [1.0, 0.0])
    assert isinstance(rc, RiskCoverage)
    with pytest.raises(AttributeError):
        rc.aurc = 0.0  # type: ignore[misc]
