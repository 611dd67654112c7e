"""The corpus's near misses and generic names: rules that hold item by item."""

from __future__ import annotations

from typing import Any

from taskcal_agents.datasets._bfcl import _tools
from taskcal_agents.datasets._bfcl_hard import GENERIC_NAMES, hard_items
from taskcal_agents.datasets._bfcl_source import Request
from taskcal_agents.datasets._format import DatasetItem


def fn(name: str, description: str) -> dict[str, Any]:
    props = {"city": {"type": "string", "description": "The city."}}
    return {"name": name, "description": description,
            "parameters": {"type": "dict", "properties": props, "required": ["city"]}}  # fmt: skip


REQUESTS = [
    # a travel service: the right tool finds buses; its flights and hotels cannot
    Request("m1", "live_multiple", "Find a bus from Boston to New York city for Friday.",
            [fn("Buses_3_FindBus", "Find a bus itinerary between cities."),
             fn("Flights_4_SearchFlight", "Search for a flight from a city to a city."),
             fn("Hotels_4_SearchHotel", "Search hotels in a city for given dates."),
             fn("Buses_3_BuyBusTicket", "Buy a bus ticket.")],  # shares "bus": may serve
            {"Buses_3_FindBus": {"city": ["Boston"]}}),
    # the same service, nothing near enough to share the request's words
    Request("m2", "live_multiple", "Play some jazz music.",
            [fn("Music_PlaySong", "Play a song."), fn("Alarm_Add", "Add an alarm.")],
            {"Music_PlaySong": {"city": ["x"]}}),
    Request("s1", "simple_python", "What's the weather in Paris?",
            [fn("get_weather", "Get the weather in a city.")],
            {"get_weather": {"city": ["Paris"]}}),
    Request("s2", "simple_python", "Run the weather report for Rome.",
            [fn("weather_report", "Report the weather of a city.")],
            {"weather_report": {"city": ["Rome"]}}),
]  # fmt: skip
SPLITS = ["train"] * len(REQUESTS)
MADE = [  # the split's first calls: their requests share a seventh and a fifth of their words
    DatasetItem(id=f"c{i}", messages=[{"role": "user", "content": q}], label="tool_call",
                tools=_tools([fn(n, d)], "src"), meta={"split": "train"})
    for i, (q, n, d) in enumerate([
        ("Should I pack an umbrella for my weekend trip to the city of Paris?", "get_weather",
         "Get the weather."),
        ("Which coaches leave Boston tonight for the city?", "bus_find", "Find buses."),
    ])
]  # fmt: skip


def test_a_near_miss_offers_the_services_other_tools_and_never_one_that_may_serve() -> None:
    made = hard_items(REQUESTS, SPLITS, MADE, _tools, "src", seed=1)["train"]
    near = [i for i in made if i.meta["kind"] == "near_miss"]
    assert [i.meta["bfcl_id"] for i in near] == ["m1"]  # m2 shares no word with its tools
    [item] = near
    assert item.label == "cannot_answer" and item.meta["right_tool"] == "Buses_3_FindBus"
    names = [t["function"]["name"] for t in item.tools]
    assert names == ["Flights_4_SearchFlight", "Hotels_4_SearchHotel"]  # not the bus ticket


def test_a_generic_name_shares_no_word_with_the_request_and_renames_the_answer() -> None:
    made = hard_items(REQUESTS, SPLITS, MADE, _tools, "src", seed=1)["train"]
    generic = [i for i in made if i.meta["kind"] == "generic_name"]
    assert len(generic) == len([i for i in made if i.meta["kind"] == "near_miss"])  # paired
    for item in generic:
        [tool] = item.tools
        name = tool["function"]["name"]
        assert name in GENERIC_NAMES and item.label == "tool_call"
        assert name not in item.messages[0]["content"].lower().split()  # "run" is not picked
        assert item.meta["possible_answer"] == {
            name: {"city": [item.meta["possible_answer"][name]["city"][0]]}
        }
        assert tool["function"]["description"]  # described as before
    assert [i.meta["kind"] for i in made] == ["near_miss", "generic_name"] * len(generic)
