"""The decision kernel: expected costs, MBR and minimax actions, and their one tie rule."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from calibrators import expected_costs, least_cost_actions, mbr_actions, minimax_action

COST = np.array([[0.0, 1.0, 2.0], [4.0, 0.0, 2.0], [4.0, 1.0, 0.0]])


def exact(message: str) -> str:
    return "^" + re.escape(message) + "$"


# --- shapes -------------------------------------------------------------------------------


def test_expected_costs_of_a_matrix_and_of_a_vector():
    P = np.array([[0.5, 0.3, 0.2], [1.0, 0.0, 0.0]])
    R = expected_costs(P, COST)
    assert R.shape == (2, 3)
    assert R.dtype == np.float64
    np.testing.assert_allclose(R, [[2.0, 0.7, 1.6], [0.0, 1.0, 2.0]])
    v = expected_costs(P[0], COST)
    assert v.shape == (3,)
    np.testing.assert_allclose(v, R[0])


def test_expected_costs_of_an_empty_batch():
    assert expected_costs(np.empty((0, 3)), COST).shape == (0, 3)
    assert least_cost_actions(np.empty((0, 3))).shape == (0,)


def test_expected_costs_with_more_actions_than_labels():
    cost = np.array([[0.0, 1.0, 3.0, 0.5], [2.0, 0.0, 3.0, 0.5]])
    np.testing.assert_allclose(expected_costs([0.25, 0.75], cost), [1.5, 0.25, 3.0, 0.5])
    assert mbr_actions([[0.25, 0.75]], cost).tolist() == [1]


def test_mbr_actions_dtype_and_shape():
    actions = mbr_actions([[0.9, 0.05, 0.05], [0.5, 0.3, 0.2]], COST)
    assert actions.dtype == np.intp
    assert actions.tolist() == [0, 1]


def test_unchecked_expected_costs_equal_checked_ones():
    P = np.random.default_rng(0).dirichlet(np.ones(3), size=20)
    np.testing.assert_array_equal(
        expected_costs(P, COST, check_input=False), expected_costs(P, COST)
    )


# --- the tie rule: the lowest index -------------------------------------------------------


def test_mbr_tie_goes_to_the_lowest_index():
    # expected costs 0.5, 0.5, 0.5
    assert mbr_actions([[0.5, 0.5]], [[0, 1, 0], [1, 0, 1]]).tolist() == [0]
    # expected costs 0.5, 0.5, 0.0 and 0.5, 0.0, 0.0
    assert mbr_actions([[0.5, 0.5], [1.0, 0.0]], [[1, 0, 0], [0, 1, 0]]).tolist() == [2, 1]


def test_restricted_tie_goes_to_the_lowest_allowed_index():
    R = [[0.3, 0.1, 0.2, 0.2], [0.3, 0.1, 0.2, 0.2]]
    allowed = np.array([[True, False, True, True], [False, False, False, True]])
    assert least_cost_actions(R, allowed=allowed).tolist() == [2, 3]


def test_row_with_nothing_allowed_keeps_its_unrestricted_choice():
    R = [[0.3, 0.1, 0.1], [0.3, 0.1, 0.2]]
    allowed = np.array([[False, False, False], [True, False, True]])
    assert least_cost_actions(R, allowed=allowed).tolist() == [1, 2]


def test_minimax_tie_goes_to_the_lowest_index():
    # worst cases 4, 2, 2
    assert minimax_action([[0, 2, 1], [4, 1, 2]]) == 1
    assert isinstance(minimax_action(COST), int)


@given(
    arrays(np.float64, (6, 4), elements=st.sampled_from([0.0, 0.5, 1.0])),
    arrays(np.bool_, (6, 4)),
)
def test_least_cost_actions_match_brute_force(R: np.ndarray, allowed: np.ndarray) -> None:
    # few distinct values: many exact ties
    got = least_cost_actions(R, allowed=allowed)
    for i in range(R.shape[0]):
        candidates = [j for j in range(4) if allowed[i, j]] or list(range(4))
        assert got[i] == min(candidates, key=lambda j: (R[i, j], j))


@given(arrays(np.float64, (3, 4), elements=st.sampled_from([0.0, 1.0, 2.0])))
def test_minimax_matches_brute_force(cost: np.ndarray) -> None:
    worst = [max(cost[:, a]) for a in range(4)]
    assert minimax_action(cost) == min(range(4), key=lambda a: (worst[a], a))


# --- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("P", "cost", "message"),
    [
        (
            [[0.5, 0.5]],
            COST,
            "cost must have one row per label (2 rows, row = true label); got shape (3, 3). "
            "Transpose it if rows are actions.",
        ),
        (
            [0.5, 0.6],
            [[0, 1], [1, 0]],
            "Each row of P must sum to 1 (tolerance 1e-06); row 0 sums to 1.1. Normalise the "
            "rows, e.g. P / P.sum(axis=1, keepdims=True).",
        ),
        (
            [[1.5, -0.5]],
            [[0, 1], [1, 0]],
            "P must hold non-negative probabilities; row 0 is [1.5, -0.5]. Pass probabilities, "
            "not logits or log-probabilities (apply a softmax first).",
        ),
        (
            np.ones((1, 2, 2)) / 2,
            [[0, 1], [1, 0]],
            "P must be a 2-D array of shape (n_samples, n_classes) with one probability row "
            "per sample; got an array of shape (1, 2, 2). Reshape a single distribution with "
            "P.reshape(1, -1).",
        ),
        (
            [[0.5, 0.5]],
            [[0, np.nan], [1, 0]],
            "cost must hold finite numbers; cost[0, 1] is nan.",
        ),
    ],
)
def test_expected_costs_bad_input(P, cost, message):
    with pytest.raises(ValueError, match=exact(message)):
        expected_costs(P, cost)


def test_mbr_actions_wants_a_matrix():
    with pytest.raises(ValueError, match=re.escape("got an array of shape (2,). Reshape")):
        mbr_actions([0.5, 0.5], [[0, 1], [1, 0]])


@pytest.mark.parametrize(
    ("R", "allowed", "message"),
    [
        (
            [0.1, 0.2],
            None,
            "expected_costs must be a 2-D array of shape (n_samples, n_actions) with at least "
            "one action; got an array of shape (2,).",
        ),
        (
            np.empty((2, 0)),
            None,
            "expected_costs must be a 2-D array of shape (n_samples, n_actions) with at least "
            "one action; got an array of shape (2, 0).",
        ),
        (
            [[0.1, np.inf]],
            None,
            "expected_costs must be finite; expected_costs[0, 1] is inf.",
        ),
        (
            [[0.1, 0.2]],
            [[1, 0]],
            "allowed must be a boolean array of the shape of expected_costs (1, 2); got dtype "
            "int64 and shape (1, 2).",
        ),
        (
            [[0.1, 0.2]],
            [True, False],
            "allowed must be a boolean array of the shape of expected_costs (1, 2); got dtype "
            "bool and shape (2,).",
        ),
    ],
)
def test_least_cost_actions_bad_input(R, allowed, message):
    with pytest.raises(ValueError, match=exact(message)):
        least_cost_actions(R, allowed=allowed)


def test_minimax_bad_cost():
    message = (
        "cost must hold non-negative numbers; cost[1, 0] is -1.0. Shift the matrix so that "
        "the best outcome costs 0."
    )
    with pytest.raises(ValueError, match=exact(message)):
        minimax_action([[0, 1], [-1, 0]])
