"""Grading free-form answers against reference answers (SimpleQA, NQ-open).

For answer-or-abstain data the true label is not in the source file: it is whether the
model's *own* answer is correct. The converters therefore write ``"label": null`` and the
reference answers in ``meta["references"]``; after sampling, ``taskcal sample`` grades the
answer the system would give (the greedy completion) and assigns the label that is optimal
given the truth: ``"answer"`` when the answer is correct, ``"abstain"`` otherwise.

The grader, :func:`grade_answer`, follows the SQuAD evaluation script's normalisation
(lower-case, drop punctuation, drop the articles *a*, *an*, *the*, collapse whitespace)
and counts a prediction as correct when, for at least one reference,

1. the normalised prediction equals the normalised reference (exact match), or
2. the normalised reference occurs as a contiguous run of whole tokens inside a normalised
   prediction of at most ``max_containment_tokens`` tokens (a short sentence that contains
   the answer, as chat models write it), or
3. the SQuAD token F1 between the two is at least ``f1_threshold`` *and* every token of
   the reference that holds a digit also occurs in the prediction (word-order and minor
   wording differences such as "14 December 1972" vs "December 14, 1972" pass; "December
   2001" vs "December 1972" does not, although its F1 is 0.5).

Empty predictions are never correct. The grader is lexical: it cannot recognise a correct
paraphrase with different words, so it under-counts correct answers slightly; it does not
reward long answers that list many candidates (rule 2's length cap).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = frozenset(string.punctuation) | frozenset("‘’“”–—…")

DEFAULT_F1_THRESHOLD = 0.6
DEFAULT_MAX_CONTAINMENT_TOKENS = 30


def normalize_answer(text: str) -> str:
    """Normalise an answer as the SQuAD evaluation script does.

    Args:
        text: The raw answer.

    Returns:
        Lower-cased text without punctuation and articles, whitespace collapsed.
    """
    text = text.lower()
    text = "".join(ch if ch not in _PUNCT else " " for ch in text)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def token_f1(prediction: str, reference: str) -> float:
    """SQuAD token F1 between two answers (after :func:`normalize_answer`).

    Args:
        prediction: The model's answer.
        reference: A reference answer.

    Returns:
        The harmonic mean of token precision and recall, in [0, 1].
    """
    pred = normalize_answer(prediction).split()
    ref = normalize_answer(reference).split()
    if not pred or not ref:
        return float(pred == ref)
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision = common / len(pred)
    recall = common / len(ref)
    return 2 * precision * recall / (precision + recall)


def contains_tokens(haystack: Sequence[str], needle: Sequence[str]) -> bool:
    """Whether *needle* occurs in *haystack* as a contiguous run of whole tokens.

    Args:
        haystack: The tokens searched (e.g. a normalised prediction, split).
        needle: The tokens looked for (e.g. a normalised reference, split).

    Returns:
        ``True`` when ``haystack[i : i + len(needle)] == needle`` for some ``i``.
    """
    haystack, needle = list(haystack), list(needle)
    n = len(needle)
    return any(haystack[i : i + n] == needle for i in range(len(haystack) - n + 1))


def grade_answer(
    prediction: str,
    references: Sequence[str],
    *,
    f1_threshold: float = DEFAULT_F1_THRESHOLD,
    max_containment_tokens: int = DEFAULT_MAX_CONTAINMENT_TOKENS,
) -> bool:
    """Whether *prediction* matches any of *references* (see the module docstring).

    Args:
        prediction: The model's answer text.
        references: The accepted reference answers.
        f1_threshold: Token F1 at or above which a prediction counts as correct.
        max_containment_tokens: Longest prediction (in normalised tokens) for which
            containing a reference counts as correct.

    Returns:
        ``True`` when the prediction is correct.
    """
    pred_tokens = normalize_answer(prediction).split()
    if not pred_tokens:
        return False
    for reference in references:
        ref_tokens = normalize_answer(reference).split()
        if not ref_tokens:
            continue
        if pred_tokens == ref_tokens:
            return True
        if len(pred_tokens) <= max_containment_tokens and contains_tokens(pred_tokens, ref_tokens):
            return True
        ref_numbers = {t for t in ref_tokens if any(ch.isdigit() for ch in t)}
        if ref_numbers <= set(pred_tokens) and token_f1(prediction, reference) >= f1_threshold:
            return True
    return False


__all__ = [
    "DEFAULT_F1_THRESHOLD",
    "DEFAULT_MAX_CONTAINMENT_TOKENS",
    "contains_tokens",
    "grade_answer",
    "normalize_answer",
    "token_f1",
]
