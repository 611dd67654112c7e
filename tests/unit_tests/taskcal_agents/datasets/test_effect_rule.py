"""The written effect rule for dataset tools (BFCL, When2Call), one case per step."""

from __future__ import annotations

import pytest

from taskcal_agents.datasets._effects import (
    IRREVERSIBLE_VERBS,
    READ_VERBS,
    WRITE_VERBS,
    effect_by_rule,
    tool_effects_by_rule,
)


def test_the_verb_lists_are_disjoint() -> None:
    assert not IRREVERSIBLE_VERBS & WRITE_VERBS
    assert not IRREVERSIBLE_VERBS & READ_VERBS
    assert not WRITE_VERBS & READ_VERBS


@pytest.mark.parametrize(
    ("name", "description", "effect"),
    [
        # the description's first verb decides before the name's words
        ("video_games.store_price", "Fetches the selling price of a game.", "read"),
        ("RideSharing_2_GetRide", "Book a cab to the destination.", "irreversible"),
        ("todo.add", "Creates a new todo entry.", "write"),
        # the name decides when the description has no listed verb; last segment first
        ("api.TokenApi.get_tokens", "", "read"),
        ("payments.send_money", "The transfer tool.", "irreversible"),
        ("hotel_booking", "A hotel room for a date range.", "irreversible"),  # booking → book
        ("deletesRecords", "", "irreversible"),  # camelCase; deletes → delete
        # only the first sentence of the description is read
        ("weather", "The weather service. Deletes nothing.", "write"),
        # no listed verb anywhere: the library's default
        ("religion.history_info", "Comprehensive details about a religion.", "write"),
    ],
)
def test_effect_by_rule(name: str, description: str, effect: str) -> None:
    assert effect_by_rule(name, description) == effect


def test_tool_effects_by_rule_reads_openai_and_bare_tools() -> None:
    tools = [
        {"type": "function", "function": {"name": "get_weather", "description": "x"}},
        {"name": "send_email", "description": "Sends an email."},
    ]
    assert tool_effects_by_rule(tools) == {"get_weather": "read", "send_email": "irreversible"}
