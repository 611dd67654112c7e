"""When2Call-comparable metrics of ``taskcal evaluate``: tool-use rates and decoder rows."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from rich.console import Console

from taskcal_agents._stats import paired_difference
from taskcal_agents.errors import ConfigurationError
from taskcal_agents.workflow import EvalArrays
from taskcal_agents.workflow._calibrator_specs import (
    default_factory,
)
from taskcal_agents.workflow._decoders import runtime_actions
from taskcal_agents.workflow._evaluate import evaluate_arrays
from taskcal_agents.workflow._evaluation_json import evaluation_to_dict
from taskcal_agents.workflow._report import markdown_summary, tool_rich_table, tool_section
from taskcal_agents.workflow._scores import score_actions, tool_scores

LABELS = ("tool_call", "request_for_info", "cannot_answer")
COST = np.array([[0.0, 1.0, 2.0], [4.0, 0.0, 2.0], [4.0, 1.0, 0.0]])
FIXED_DIRICHLET = "dirichlet:reg_lambda=0.1:reg_mu=0.1"
"""A one-fit Dirichlet (the workflow's default selects its strengths by inner CV)."""
TOOL_KEYS = (
    "tool_call_recall",
    "over_calling_rate",
    "cannot_answer_recall",
    "no_tool_call_rate",
    "executed_call_correct",
)


def _six(**kw: Any) -> EvalArrays:
    """Six items: three tool calls, one request for info, two impossible requests."""
    y = np.array([0, 0, 0, 1, 2, 2], dtype=np.intp)
    fields: dict[str, Any] = {
        "P": np.full((6, 3), 1 / 3),
        "y": y,
        "cost": COST,
        "labels": LABELS,
        "actions": LABELS,
        "greedy": y.copy(),
        "no_sample": np.zeros(6, dtype=bool),
        "fallback": 1,
    }
    return EvalArrays(**{**fields, **kw})


def _arrays(n: int = 60, seed: int = 0, **kw: Any) -> EvalArrays:
    """Informative beliefs over the three labels, every label on a third of the items."""
    rng = np.random.default_rng(seed)
    y = (np.arange(n) % 3).astype(np.intp)
    P = rng.dirichlet(np.ones(3), size=n)
    P[np.arange(n), y] += 0.6
    P /= P.sum(axis=1, keepdims=True)
    fields: dict[str, Any] = {
        "P": P,
        "y": y,
        "cost": COST,
        "labels": LABELS,
        "actions": LABELS,
        "greedy": np.argmax(P, axis=1).astype(np.intp),
        "no_sample": np.zeros(n, dtype=bool),
        "fallback": 1,
    }
    return EvalArrays(**{**fields, **kw})


# --------------------------------------------------------------------------------------
# the rates


def test_tool_rates_on_six_items_by_hand() -> None:
    no_tools = np.array([False, False, False, True, True, False])
    data = _six(no_tools=no_tools)
    actions = np.array([0, 0, 1, 0, 2, 2], dtype=np.intp)
    row = score_actions(actions, data)
    # tool_call items 0, 1, 2 -> calls on 0 and 1
    assert row["tool_call_recall"] == pytest.approx(2 / 3)
    # other items 3, 4, 5 -> a call on 3
    assert row["over_calling_rate"] == pytest.approx(1 / 3)
    # items 3 and 4 offered no tools -> a call on 3
    assert row["no_tool_call_rate"] == pytest.approx(1 / 2)
    # cannot_answer items 4, 5 -> both refused
    assert row["cannot_answer_recall"] == 1.0
    # macro-F1 by hand: tool_call tp=2 fp=1 fn=1 -> 2/3; request_for_info tp=0 -> 0;
    # cannot_answer tp=2 fp=0 fn=0 -> 1
    assert row["macro_f1"] == pytest.approx((2 / 3 + 0.0 + 1.0) / 3)
    assert row["accuracy"] == pytest.approx(4 / 6)


def test_tool_rates_follow_the_tool_call_names_not_their_positions() -> None:
    labels = ("cannot_answer", "request_for_info", "tool_call")
    cost = COST[::-1, ::-1].copy()
    actions_names = ("request_for_info", "tool_call", "cannot_answer")
    data = _six(
        y=np.array([2, 2, 2, 1, 0, 0], dtype=np.intp),
        labels=labels,
        actions=actions_names,
        cost=cost[:, [1, 0, 2]],
        fallback=0,
    )
    call, ask, refuse = 1, 0, 2
    actions = np.array([call, ask, ask, call, call, refuse], dtype=np.intp)
    scores = tool_scores(actions, data)
    assert scores == {
        "tool_call_recall": pytest.approx(1 / 3),
        "over_calling_rate": 2 / 3,
        "cannot_answer_recall": 0.5,
    }


def test_no_tool_rate_needs_an_item_without_tools() -> None:
    actions = np.zeros(6, dtype=np.intp)
    assert "no_tool_call_rate" not in tool_scores(actions, _six())
    assert "no_tool_call_rate" not in tool_scores(actions, _six(no_tools=np.zeros(6, bool)))
    everything = tool_scores(actions, _six(no_tools=np.ones(6, bool)))
    assert everything == {
        "tool_call_recall": 1.0,
        "over_calling_rate": 1.0,
        "cannot_answer_recall": 0.0,
        "no_tool_call_rate": 1.0,
    }


def test_executed_calls_are_scored_only_where_an_answer_exists_and_a_call_is_made() -> None:
    # items 0-2 have possible answers (0 correct, 1 wrong, 2 correct); 3-5 have none
    correct = np.array([1.0, 0.0, 1.0, np.nan, np.nan, np.nan])
    data = _six(call_correct=correct)
    actions = np.array([0, 0, 1, 0, 2, 2], dtype=np.intp)  # calls on 0, 1 and 3
    scores = tool_scores(actions, data)
    assert scores["executed_call_correct"] == 0.5
    assert scores["n_executed_checked"] == 2
    no_calls = tool_scores(np.ones(6, dtype=np.intp), data)
    assert no_calls["executed_call_correct"] is None
    assert no_calls["n_executed_checked"] == 0
    assert "executed_call_correct" not in tool_scores(actions, _six())
    with pytest.raises(ConfigurationError, match="call_correct must have shape"):
        _six(call_correct=np.zeros(4))


def test_a_rate_without_items_is_none() -> None:
    data = _six(y=np.array([1, 1, 2, 2, 1, 2], dtype=np.intp))
    scores = tool_scores(np.zeros(6, dtype=np.intp), data)
    assert scores["tool_call_recall"] is None
    assert scores["over_calling_rate"] == 1.0


def test_other_tasks_get_no_tool_rates() -> None:
    y = np.array([0, 1, 0, 1], dtype=np.intp)
    data = EvalArrays(
        P=np.full((4, 2), 0.5),
        y=y,
        cost=np.array([[0.0, 1.0], [1.0, 0.0]]),
        labels=("yes", "no"),
        actions=("yes", "no"),
        greedy=y.copy(),
        no_sample=np.zeros(4, dtype=bool),
        fallback=0,
    )
    assert tool_scores(y, data) == {}
    assert not set(TOOL_KEYS) & set(score_actions(y, data))
    evaluation = evaluate_arrays(data, calibrators=(), n_folds=2, n_permutations=0)
    for row in evaluation.rows:
        assert not set(TOOL_KEYS) & set(row), row["decoder"]
    out = evaluation_to_dict(evaluation, data)
    assert "n_no_tools" not in out
    assert tool_rich_table(out) is None
    assert tool_section(out) == ""
    assert "Tool use" not in markdown_summary(out)


def test_tool_call_as_an_action_only_is_no_tool_decision() -> None:
    y = np.array([0, 1, 0, 1], dtype=np.intp)
    data = EvalArrays(
        P=np.full((4, 2), 0.5),
        y=y,
        cost=np.array([[0.0, 1.0], [1.0, 0.0]]),
        labels=("answerable", "unanswerable"),
        actions=("tool_call", "cannot_answer"),
        greedy=y.copy(),
        no_sample=np.zeros(4, dtype=bool),
        fallback=1,
    )
    assert tool_scores(y, data) == {}


# --------------------------------------------------------------------------------------
# the decoder rows


def test_every_scored_row_of_a_tool_decision_carries_the_rates() -> None:
    no_tools = np.arange(60) % 3 == 2
    data = _arrays(no_tools=no_tools)
    evaluation = evaluate_arrays(
        data, calibrators=("temperature", FIXED_DIRICHLET), n_folds=3, n_permutations=0,
        test_calibrator=FIXED_DIRICHLET,
    )  # fmt: skip
    should = data.y == 0
    for row in evaluation.rows:
        assert row["error"] is None
        calls = evaluation.actions[row["decoder"]] == 0
        assert row["tool_call_recall"] == pytest.approx(calls[should].mean())
        assert row["over_calling_rate"] == pytest.approx(calls[~should].mean())
        assert row["no_tool_call_rate"] == pytest.approx(calls[no_tools].mean())
    out = evaluation_to_dict(evaluation, data)
    assert out["n_no_tools"] == 20
    assert out["items"]["no_tools"] == no_tools.tolist()
    assert out["decoders"][0]["no_tool_call_rate"] == evaluation.rows[0]["no_tool_call_rate"]


def test_mbr_raw_any_ignores_the_grounding_rule() -> None:
    base = _arrays()
    n = base.n
    grounded = np.ones((n, 3), dtype=bool)
    grounded[::2, 0] = False  # half the items sampled no grounded call
    anyway = np.ones((n, 3), dtype=bool)

    without = evaluate_arrays(
        _arrays(executable=grounded), calibrators=(), n_folds=3, n_permutations=0
    )
    assert "mbr_raw_any" not in [r["decoder"] for r in without.rows]

    data = _arrays(executable=grounded, executable_any=anyway)
    evaluation = evaluate_arrays(data, calibrators=(), n_folds=3, n_permutations=0)
    names = [r["decoder"] for r in evaluation.rows]
    assert names.index("mbr_raw_any") == names.index("mbr_raw") + 1
    row = evaluation.row("mbr_raw_any")
    assert row["description"] == "MBR on the raw belief, any sampled call sent (execute: any)"
    raw, free = evaluation.actions["mbr_raw"], evaluation.actions["mbr_raw_any"]
    assert not np.any(raw[::2] == 0)
    np.testing.assert_array_equal(free, runtime_actions(data.P, data, executable=anyway))
    assert np.any(free[::2] == 0)
    assert not np.array_equal(raw, free)
    np.testing.assert_array_equal(free[1::2], raw[1::2])  # same where both may call
    realised = data.cost[data.y]
    mean, se = paired_difference(realised[np.arange(n), raw], realised[np.arange(n), free])
    assert row["saving_vs_raw"] == pytest.approx(mean)
    assert row["saving_vs_raw_se"] == pytest.approx(se)
    assert row["saving_vs_constant"] is not None
    assert "tool_call_recall" in row
    assert evaluation_to_dict(evaluation, data)["items"]["executable_any"] == anyway.tolist()


def test_argmax_row_is_the_most_probable_calibrated_label() -> None:
    no_sample = np.zeros(60, dtype=bool)
    no_sample[[3, 17, 40]] = True
    data = _arrays(no_sample=no_sample)
    evaluation = evaluate_arrays(
        data, calibrators=("temperature", FIXED_DIRICHLET), n_folds=3, n_permutations=0,
        test_calibrator=FIXED_DIRICHLET,
    )  # fmt: skip
    name = f"argmax_{FIXED_DIRICHLET}"
    assert [r["decoder"] for r in evaluation.rows][-1] == name
    row = evaluation.row(name)
    assert row["description"] == f"most probable {FIXED_DIRICHLET}-calibrated label (0-1 cost)"
    Q = evaluation.probs[FIXED_DIRICHLET]
    expected = np.argmax(Q, axis=1)
    expected[no_sample] = data.fallback
    np.testing.assert_array_equal(evaluation.actions[name], expected)
    assert row["accuracy"] == pytest.approx(np.mean(expected == data.y))
    assert row["nll"] == evaluation.row(f"mbr_{FIXED_DIRICHLET}")["nll"]
    assert row["saving_vs_constant"] is not None and row["saving_vs_raw"] is not None
    assert "tool_call_recall" in row


class _Broken:
    """A calibrator that never fits."""

    def fit(self, P: NDArray[np.float64], y: NDArray[np.intp]) -> _Broken:
        raise ValueError("cannot fit")


def _factory(spec: str) -> Any:
    """The workflow's factory, with a ``broken`` calibrator added."""
    return _Broken if spec == "broken" else default_factory(spec)


@pytest.mark.parametrize(
    ("case", "calibrators", "test"),
    [
        ("not_evaluated", ("temperature",), FIXED_DIRICHLET),
        ("failed", ("temperature", "broken"), "broken"),
        ("labels_are_no_actions", ("temperature",), "temperature"),
    ],
)
def test_no_argmax_row_without_a_usable_test_calibrator(
    case: str, calibrators: tuple[str, ...], test: str
) -> None:
    data = _arrays()
    if case == "labels_are_no_actions":
        data = EvalArrays(**{**data.__dict__, "labels": ("call", "ask", "refuse")})
    evaluation = evaluate_arrays(
        data, calibrators=calibrators, n_folds=3, n_permutations=0, test_calibrator=test,
        factory=_factory,
    )  # fmt: skip
    names = [r["decoder"] for r in evaluation.rows]
    assert not [n for n in names if n.startswith("argmax_")], names
    if case == "failed":
        assert evaluation.row("mbr_broken")["error"] == "ValueError: cannot fit"


# --------------------------------------------------------------------------------------
# the printed table and the report


def test_tool_table_and_report_section() -> None:
    data = _arrays(no_tools=np.arange(60) % 3 == 2)
    evaluation = evaluate_arrays(data, calibrators=("temperature",), n_folds=3, n_permutations=0)
    out = evaluation_to_dict(evaluation, data)
    table = tool_rich_table(out)
    assert table is not None
    console = Console(record=True, width=160)
    console.print(table)
    text = console.export_text()
    for header in ("decoder", "macro-F1", "tool-call recall", "over-calling", "no-tool call rate"):
        assert header in text
    assert "the 20 items offered no tools" in " ".join(text.split())
    row = evaluation.row("mbr_temperature")
    assert f"{row['tool_call_recall']:.3f}" in text

    section = tool_section(out)
    assert section.startswith("## Tool use")
    assert (
        f"| mbr_temperature | {row['macro_f1']:.3f} | {row['tool_call_recall']:.3f} | "
        f"{row['over_calling_rate']:.3f} | {row['cannot_answer_recall']:.3f} | "
        f"{row['no_tool_call_rate']:.3f} |"
    ) in section.splitlines()
    assert section in markdown_summary(out)

    plain = evaluation_to_dict(evaluate_arrays(_arrays(), calibrators=(), n_folds=3,
                                               n_permutations=0), _arrays())  # fmt: skip
    assert "no-tool call rate" not in tool_section(plain)
    assert "tool-call recall" in tool_section(plain)
