"""Test data shared by several modules: a tool schema, a decision-model question, BFCL files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from langchain_core.decisions import Choice

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "date": {"type": "string"},
            },
            "required": ["city"],
        },
    },
}
"""An OpenAI tool schema: get_weather(city), with an optional unit and date."""

TEAM = Choice(
    instructions="Which team should handle this request?",
    criteria={
        "billing": "Payment, invoice, or subscription issues.",
        "technical": "Product bugs or integration failures.",
        "sales": "Pricing or purchasing questions.",
    },
)
"""A decision model's question: which of three teams handles a request."""

# ------------------------------------------------------------------ a small BFCL source

CITIES = ["Paris", "Rome", "Berlin", "Madrid", "Vienna", "Lisbon", "Oslo", "Prague", "Dublin"]
TOPICS = [  # every tool shares a word with every request ("help"), so each has negatives
    ("get_weather", "Help with the weather forecast.", "city", "weather forecast"),
    ("book_hotel", "Help with a hotel room booking.", "town", "hotel room booking"),
    ("find_museum", "Help to find museum exhibitions.", "place", "museum exhibitions"),
    ("rent_bike", "Help with a bicycle rental.", "station", "bicycle rental"),
    ("order_taxi", "Help to order a taxi ride.", "address", "taxi ride"),
    ("buy_tickets", "Help to buy concert tickets.", "venue", "concert tickets"),
]


def function(name: str, description: str, param: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "parameters": {
            "type": "dict",
            "properties": {param: {"type": "string", "description": f"The {param}."}},
            "required": [param],
        },
    }


def write_category(root: Path, category: str, n: int, tools_per_item: int) -> None:
    questions, answers = [], []
    for k in range(n):
        name, description, param, words = TOPICS[k % len(TOPICS)]
        name = f"{name}{k}"  # every request its own tool set
        city = CITIES[k % len(CITIES)]
        offered = [function(name, description, param)]
        for extra in range(1, tools_per_item):
            other = TOPICS[(k + extra) % len(TOPICS)]
            offered.append(function(f"{other[0]}_{extra}", other[1], other[2]))
        qid = f"{category}_{k}"
        text = f"Please help with the {words} in {city} for request {k}."
        questions.append({"id": qid, "question": [[{"role": "user", "content": text}]],
                          "function": offered})  # fmt: skip
        answers.append({"id": qid, "ground_truth": [{name: {param: [city]}}]})
    (root / "possible_answer").mkdir(parents=True, exist_ok=True)
    for path, rows in (
        (root / f"BFCL_v4_{category}.json", questions),
        (root / "possible_answer" / f"BFCL_v4_{category}.json", answers),
    ):
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
