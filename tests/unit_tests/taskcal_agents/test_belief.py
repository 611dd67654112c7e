from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskcal_agents.belief import DEFAULT_ALPHA, Belief
from taskcal_agents.errors import ConfigurationError

LABELS = ["a", "b", "c"]


def test_from_labels_counts_and_smoothing() -> None:
    belief = Belief.from_labels(["a", "a", "b", None], LABELS, alpha=0.5)
    assert belief.counts.tolist() == [2.0, 1.0, 0.0]
    assert (belief.n, belief.n_unparsed, belief.n_parsed) == (4, 1, 3)
    np.testing.assert_allclose(belief.probs, [2.5 / 4.5, 1.5 / 4.5, 0.5 / 4.5])
    assert belief.as_dict() == dict(zip(LABELS, belief.probs.tolist(), strict=True))


def test_unparsed_as_label() -> None:
    belief = Belief.from_labels(["a", None, None], LABELS, alpha=0.0, unparsed_as="c")
    assert belief.counts.tolist() == [1.0, 0.0, 2.0]
    assert (belief.n, belief.n_unparsed, belief.n_parsed) == (3, 2, 3)


def test_default_alpha_and_empty_is_uniform() -> None:
    assert Belief.from_labels([], LABELS).alpha == DEFAULT_ALPHA == 0.1
    np.testing.assert_allclose(Belief.from_labels([None], LABELS, alpha=0).probs, [1 / 3] * 3)
    np.testing.assert_allclose(Belief.from_labels([], LABELS).probs, [1 / 3] * 3)


def test_alpha_zero_is_frequencies() -> None:
    belief = Belief.from_labels(["a", "b", "b", "b"], LABELS, alpha=0)
    np.testing.assert_allclose(belief.probs, [0.25, 0.75, 0.0])


# α = 0 or a normal float: a subnormal α (5e-324) underflows to 0 once divided by the count.
@given(
    st.lists(st.sampled_from([*LABELS, None]), max_size=40),
    st.one_of(st.just(0.0), st.floats(1e-300, 5)),
)
def test_probs_sum_to_one_and_positive(labels: list[str | None], alpha: float) -> None:
    probs = Belief.from_labels(labels, LABELS, alpha=alpha).probs
    assert probs.shape == (3,)
    assert abs(probs.sum() - 1) < 1e-12
    if alpha > 0:
        assert np.all(probs > 0)


def test_unknown_label() -> None:
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "Belief.from_labels got label 'z', which is not in the label set ['a', 'b', 'c']; map "
            "it to a task label or pass None for unparsed."
        ),
    ):
        Belief.from_labels(["z"], LABELS)


@pytest.mark.parametrize("alpha", [-1, float("nan"), float("inf"), "x", True])
def test_bad_alpha(alpha: object) -> None:
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            f"Belief parameter 'alpha' must be a finite number >= 0, got {alpha!r}; use "
            "alpha=0.1 (the default) or 0 for raw frequencies."
        ),
    ):
        Belief([0, 0, 0], LABELS, alpha=alpha)  # type: ignore[arg-type]


def test_bad_counts() -> None:
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "Belief parameter 'counts' must hold 3 finite counts >= 0 (one per label in ['a', "
            "'b', 'c']), got [1.0, -1.0, 0.0]."
        ),
    ):
        Belief([1, -1, 0], LABELS)
    with pytest.raises(ConfigurationError, match=re.escape("must hold 3 finite counts >= 0")):
        Belief([1, 1], LABELS)


def test_repr() -> None:
    belief = Belief([1, 0, 2], LABELS, n_unparsed=1)
    assert repr(belief) == (
        "Belief(counts={'a': 1.0, 'b': 0.0, 'c': 2.0}, n=4, n_unparsed=1, alpha=0.1)"
    )
