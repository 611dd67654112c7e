"""The one-pass logprob belief agrees with the belief from N sampled, constrained answers."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from taskcal_agents.parsing._constraints import choice_constraint
from taskcal_agents.sampling import OpenAISampler
from taskcal_agents.sampling._logprob import logprob_belief
from taskcal_agents.serving import ExternalServer, VLLMServer

pytestmark = pytest.mark.integration

# "ask" and "answer" share their first tokens ("a", "an"...), so the follow-up pass that
# resolves shared prefixes is exercised too.
LABELS = ["search", "ask", "answer"]
PROMPT = "Which tool fits? Reply with one of: search, ask, answer."
N = 96


def test_logprob_belief_matches_the_sampled_belief(
    vllm_server: VLLMServer | ExternalServer,
) -> None:
    with OpenAISampler.from_endpoint(vllm_server.endpoint) as sampler:
        one_pass = logprob_belief(sampler, PROMPT, LABELS)
        # Room for one token per character: under the choice constraint the sampler can
        # spell a label out in short pieces ("answe" was seen cut off at max_tokens=4).
        samples = sampler.sample(
            PROMPT,
            n=N,
            max_tokens=16,
            temperature=1.0,
            structured_outputs=choice_constraint(LABELS),
        )
    assert one_pass.coverage > 0.95
    assert one_pass.probs.sum() == pytest.approx(1.0)
    counts = Counter(m.content for m in samples)
    assert set(counts) <= set(LABELS)
    sampled = np.array([counts[label] / N for label in LABELS])

    # Multinomial noise: E|p̂_l - p_l| <= sd_l = sqrt(p_l (1 - p_l) / N), so the total
    # variation distance is about 0.5 * sum(sd_l). Four times that (plus 0.02 for bf16
    # differences between a 1-token and a sampled pass) fails by chance well under 1 in 1000.
    p = one_pass.probs
    tolerance = 4 * 0.5 * sum(math.sqrt(q * (1 - q) / N) for q in p) + 0.02
    tv = 0.5 * np.abs(sampled - p).sum()
    assert tv <= tolerance, (one_pass.as_dict(), dict(counts), tv, tolerance)
