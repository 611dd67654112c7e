from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskcal_agents.decision._belief import DEFAULT_ALPHA, Belief
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
    if alpha >= 1e-12:  # a subnormal alpha underflows to 0 once divided by the total
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


# --- the "other" policy: unparsed samples are evidence ------------------------------------


def test_other_probs_spread_unparsed_mass_over_labels() -> None:
    # One tool call and seven unparsed samples of eight: weak evidence, not 0.85.
    belief = Belief.from_labels(["a", *[None] * 7], LABELS, alpha=0.1, unparsed_evidence=True)
    assert (belief.n, belief.n_unparsed, belief.n_parsed) == (8, 7, 1)
    assert belief.counts.tolist() == [1.0, 0.0, 0.0]
    expected = np.array([1 + 0.1 + 7 / 3, 0.1 + 7 / 3, 0.1 + 7 / 3]) / (8 + 3 * 0.1)
    np.testing.assert_allclose(belief.probs, expected)
    assert belief.probs[0] == pytest.approx(0.4137, abs=1e-4)
    dropped = Belief.from_labels(["a", *[None] * 7], LABELS, alpha=0.1)
    assert dropped.probs[0] == pytest.approx(1.1 / 1.3)


def test_other_features_add_the_unparsed_share() -> None:
    belief = Belief.from_labels(["a", "b", "b", None], LABELS, alpha=0.5, unparsed_evidence=True)
    np.testing.assert_allclose(belief.features, np.array([1.5, 2.5, 0.5, 1.5]) / 6.0)
    assert belief.features.shape == (4,)
    # Without unparsed samples the label columns keep the order of p̂ and the share is α.
    clean = Belief.from_labels(["a", "b", "b"], LABELS, alpha=0.5, unparsed_evidence=True)
    np.testing.assert_allclose(clean.features, np.array([1.5, 2.5, 0.5, 0.5]) / 5.0)
    np.testing.assert_allclose(clean.probs, np.array([1.5, 2.5, 0.5]) / 4.5)


def test_features_are_probs_without_the_other_policy() -> None:
    for belief in (
        Belief.from_labels(["a", None], LABELS, alpha=0.1),
        Belief.from_labels(["a", None], LABELS, alpha=0.1, unparsed_as="c"),
    ):
        np.testing.assert_array_equal(belief.features, belief.probs)
        assert belief.features.shape == (3,)


def test_other_all_unparsed_and_empty_are_uniform() -> None:
    all_unparsed = Belief.from_labels([None] * 4, LABELS, alpha=0, unparsed_evidence=True)
    np.testing.assert_allclose(all_unparsed.probs, [1 / 3] * 3)
    np.testing.assert_allclose(all_unparsed.features, [0, 0, 0, 1])
    empty = Belief.from_labels([], LABELS, alpha=0, unparsed_evidence=True)
    np.testing.assert_allclose(empty.probs, [1 / 3] * 3)
    np.testing.assert_allclose(empty.features, [1 / 4] * 4)


@given(st.lists(st.sampled_from([*LABELS, None]), max_size=40), st.floats(0, 5))
def test_other_probs_and_features_are_distributions(labels: list[str | None], alpha: float) -> None:
    belief = Belief.from_labels(labels, LABELS, alpha=alpha, unparsed_evidence=True)
    assert belief.probs.shape == (3,)
    assert belief.features.shape == (4,)
    assert abs(belief.probs.sum() - 1) < 1e-12
    assert abs(belief.features.sum() - 1) < 1e-12
    if labels and alpha >= 1e-12:
        assert np.all(belief.probs > 0)
        assert np.all(belief.features > 0)


@given(st.lists(st.sampled_from([*LABELS, None]), min_size=1, max_size=40))
def test_other_probs_are_features_with_the_share_spread(labels: list[str | None]) -> None:
    # Without smoothing, p̂ is the label part of the features plus the unparsed share / k.
    belief = Belief.from_labels(labels, LABELS, alpha=0, unparsed_evidence=True)
    f = belief.features
    np.testing.assert_allclose(belief.probs, f[:3] + f[3] / 3, atol=1e-12)


def test_unparsed_as_and_evidence_exclude_each_other() -> None:
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "Belief.from_labels got unparsed_as='c' and unparsed_evidence=True; an unparsed "
            "sample either counts as a label or is evidence of its own: pass one of them."
        ),
    ):
        Belief.from_labels([None], LABELS, unparsed_as="c", unparsed_evidence=True)


def test_repr_names_the_other_policy() -> None:
    belief = Belief([1, 0, 2], LABELS, n_unparsed=1, unparsed_evidence=True)
    assert repr(belief) == (
        "Belief(counts={'a': 1.0, 'b': 0.0, 'c': 2.0}, n=4, n_unparsed=1, alpha=0.1, "
        "unparsed_evidence=True)"
    )
