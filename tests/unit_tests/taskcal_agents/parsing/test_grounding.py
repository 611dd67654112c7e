"""Argument grounding: the checks, and the grounded tool decision at run time."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from calibrators import MatrixScaling
from taskcal_agents.decision._adaptive import AdaptiveSampling, outcome_counts, stop_check_messages
from taskcal_agents.decision._belief import Belief
from taskcal_agents.decision._decider import Decider, carried_actions
from taskcal_agents.decision._presets import multiple_choice, tool_decision
from taskcal_agents.decision._stopping_prior import StoppingPrior
from taskcal_agents.decision._task import UNGROUNDED_CALL, GroundingSpec, Task
from taskcal_agents.errors import ConfigurationError
from taskcal_agents.parsing._grounding import (
    GroundingContext,
    call_agreement,
    grounded_message,
    mentions,
    missing_arguments,
    question_for,
    tool_schemas,
)
from tests.unit_tests.taskcal_agents.helpers.data import WEATHER

CURRENCY = {
    "type": "function",
    "function": {
        "name": "convert_currency",
        "description": "Convert an amount of money from one currency to another.",
        "parameters": {
            "type": "object",
            "properties": {
                "amount": {"type": "number"},
                "from_currency": {"type": "string"},
                "to_currency": {"type": "string"},
            },
            "required": ["amount", "from_currency", "to_currency"],
        },
    },
}
FORECAST = {  # BFCL's dialect, as When2Call stores its tools
    "name": "get_forecast",
    "description": "Gets the forecast for a city on a date.",
    "parameters": {
        "type": "dict",
        "required": ["city", "date"],
        "properties": {"city": {"type": "string"}, "date": {"type": "string"}},
    },
}


def _ctx(text: str, *tools: Any, extra: list[dict[str, Any]] | None = None) -> GroundingContext:
    return GroundingContext(tools or (WEATHER, CURRENCY, FORECAST), [*(extra or []), user(text)])


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": "c1", "type": "tool_call"}


def _status(g: Any) -> dict[str, tuple[str, str]]:
    return {a.name: (a.status, a.how) for a in g.arguments}


# ----------------------------------------------------------------------------- the checks


@pytest.mark.parametrize(
    ("text", "args", "how"),
    [
        ("What's the weather in Paris right now?", {"city": "Paris"}, "text"),
        ("weather in NYC", {"city": "New York"}, "alias"),
        ("weather in New York", {"city": "NYC"}, "alias"),
        ("weather in paris, please", {"city": "Paris, France"}, "text"),
        ("How warm is it in san francisco", {"city": "San Francisco"}, "text"),
        ("weather for the cities of Lyon", {"city": "Lyon cities"}, "tokens"),
    ],
)
def test_stated_strings(text: str, args: dict[str, Any], how: str) -> None:
    g = _ctx(text).ground_call(call("get_weather", **args))
    assert g.grounded
    assert _status(g)["city"] == ("stated", how)


def test_numbers_and_currencies_by_value() -> None:
    g = _ctx("Convert two hundred fifty US dollars to euros.").ground_call(
        call("convert_currency", amount=250.0, from_currency="USD", to_currency="EUR")
    )
    assert g.grounded
    assert _status(g)["amount"] == ("stated", "number")
    assert _status(g)["from_currency"][0] == "stated"
    g = _ctx("Convert 1,200 pounds to yen.").ground_call(
        call("convert_currency", amount=1200, from_currency="USD", to_currency="JPY")
    )
    assert not g.grounded
    assert g.invented == ("from_currency",)
    assert _status(g)["to_currency"] == ("stated", "alias")


def test_language_codes_are_stated_by_the_language_name_only() -> None:
    translate = {
        "type": "function",
        "function": {
            "name": "translate",
            "parameters": {
                "type": "object",
                "properties": {"text": {"type": "string"}, "target": {"type": "string"}},
                "required": ["text", "target"],
            },
        },
    }

    def target(text: str, value: str) -> tuple[str, str]:
        g = _ctx(text, translate).ground_call(call("translate", text="hello", target=value))
        return _status(g)["target"]

    assert target("Translate 'hello' to German.", "de") == ("stated", "alias")
    assert target("Translate 'hello' into Spanish.", "es") == ("stated", "alias")
    assert target("Translate 'hello' to German.", "fr")[0] == "unsupported"
    # A code in the text is a word first: "it" states no Italian, "hi" no Hindi.
    assert target("Translate it: 'hello'.", "Italian")[0] == "unsupported"
    assert target("hi, translate 'hello'", "Hindi")[0] == "unsupported"


def test_dates_by_value_and_relative_days() -> None:
    stated = _ctx("Forecast for Rome on March 3rd, 2025.").ground_call(
        call("get_forecast", city="Rome", date="2025-03-03")
    )
    assert _status(stated)["date"] == ("stated", "date")
    literal = _ctx("Forecast for Rome on 2025-06-14.").ground_call(
        call("get_forecast", city="Rome", date="2025-06-14")
    )
    assert _status(literal)["date"] == ("stated", "date")
    tomorrow = _ctx("What will the weather be in Berlin tomorrow?").ground_call(
        call("get_forecast", city="Berlin", date="2024-06-12")
    )
    assert tomorrow.grounded
    assert _status(tomorrow)["date"] == ("inferable", "relative_date")
    invented = _ctx("Forecast for Berlin please").ground_call(
        call("get_forecast", city="Berlin", date="2023-10-10")
    )
    assert invented.invented == ("date",)


def test_times_of_day() -> None:
    schema = {
        "type": "function",
        "function": {
            "name": "book",
            "parameters": {
                "type": "object",
                "properties": {"time": {"type": "string"}},
                "required": ["time"],
            },
        },
    }
    ctx = _ctx("Book a table tomorrow at 7pm.", schema)
    assert ctx.ground_call(call("book", time="19:00")).grounded
    assert not ctx.ground_call(call("book", time="17:00")).grounded  # "tomorrow" names no hour


def test_inferable_values_and_missing_arguments() -> None:
    schema = {
        "type": "function",
        "function": {
            "name": "find_movies",
            "parameters": {
                "type": "object",
                "properties": {
                    "genre": {"type": "string", "enum": ["Drama", "Mystery"]},
                    "starring": {"type": "string", "default": "Any"},
                    "subtitles": {"type": "boolean"},
                    "mood": {"type": "string", "enum": ["happy", "sad"]},
                    "year": {
                        "type": "string",
                        "description": "Use 'dontcare' for no preference.",
                    },
                },
                "required": ["genre"],
            },
        },
    }
    ctx = _ctx("Find a good movie to watch?", schema)
    # A required enum argument the user never named is invented, not inferable.
    g = ctx.ground_call(
        call("find_movies", genre="Mystery", starring="Any", subtitles=True, mood="sad")
    )
    assert g.invented == ("genre",)
    assert g.needed == ("genre",)
    assert _status(g)["starring"] == ("inferable", "default")
    assert _status(g)["subtitles"] == ("inferable", "boolean")
    assert _status(g)["mood"] == ("inferable", "enum")
    assert _status(ctx.ground_call(call("find_movies", genre="Drama", year="dontcare")))[
        "year"
    ] == ("inferable", "default")
    g = ctx.ground_call(call("find_movies", starring="Tom Hanks"))
    assert g.missing == ("genre",)
    assert not g.grounded
    assert ctx.ground_call(call("find_movies", genre="")).missing == ("genre",)


def test_invented_optional_arguments_are_dropped_not_sent() -> None:
    ctx = _ctx("What's the weather in Paris?")
    message = AIMessage(
        content="", tool_calls=[call("get_weather", city="Paris", date="2023-01-01")]
    )
    g = ctx.ground(message)
    assert g.grounded
    assert g.calls[0].dropped == ("date",)
    assert grounded_message(message, g).tool_calls[0]["args"] == {"city": "Paris"}
    assert message.tool_calls[0]["args"]["date"] == "2023-01-01"  # the sample is not changed


def test_a_value_copied_from_a_tool_result() -> None:
    conversation = [
        user("What's the weather where user 42 lives?"),
        {"role": "assistant", "content": "", "tool_calls": []},
        {"role": "tool", "tool_call_id": "c0", "content": json.dumps({"city": "Osaka"})},
    ]
    ctx = GroundingContext([WEATHER], conversation)
    assert ctx.ground_call(call("get_weather", city="Osaka")).grounded
    assert not ctx.ground_call(call("get_weather", city="Kyoto")).grounded
    # The model's own words are no evidence.
    ctx = GroundingContext([WEATHER], [user("weather?"), {"role": "assistant", "content": "Oslo"}])
    assert not ctx.ground_call(call("get_weather", city="Oslo")).grounded


def test_unoffered_tools_and_schemas_in_every_dialect() -> None:
    ctx = _ctx("weather in Paris", WEATHER)
    assert not ctx.ground_call(call("get_forecast", city="Paris")).offered

    @tool
    def get_time(city: str) -> str:
        """Get the local time in a city."""
        return city

    schemas = tool_schemas([WEATHER, FORECAST, get_time, {"type": "web_search"}])
    assert set(schemas) == {"get_weather", "get_forecast", "get_time"}
    assert schemas["get_forecast"]["required"] == ["city", "date"]
    assert schemas["get_time"]["required"] == ["city"]


def test_parallel_calls_each_on_its_own_and_agreement() -> None:
    ctx = _ctx("Weather in Paris and in Rome?")
    both = AIMessage(
        content="",
        tool_calls=[call("get_weather", city="Paris"), call("get_weather", city="Rome")],
    )
    one_bad = AIMessage(
        content="",
        tool_calls=[call("get_weather", city="Paris"), call("get_weather", city="Oslo")],
    )
    assert ctx.ground(both).grounded
    assert not ctx.ground(one_bad).grounded
    swapped = AIMessage(
        content="",
        tool_calls=[call("get_weather", city="rome"), call("get_weather", city="Paris")],
    )
    groundings = [ctx.ground(m) for m in (both, swapped, one_bad, AIMessage(content="Which?"))]
    assert call_agreement(groundings) == 2  # same calls, order and case aside
    assert call_agreement([ctx.ground(AIMessage(content="hi"))]) == 0


def test_a_call_cut_off_by_max_tokens_has_nothing_to_check() -> None:
    cut = AIMessage(content='<tool_call>{"name": "get_weather", "argu')
    g = _ctx("weather in Paris").ground(cut)
    assert not g.makes_call and not g.grounded


def test_questions_built_from_the_schema() -> None:
    ctx = _ctx("What's the weather like?")
    bad = [
        ctx.ground(AIMessage(content="", tool_calls=[call("get_weather", city=c)])) for c in "AB"
    ]
    first, needed = missing_arguments(bad)
    assert first is not None and needed == ("city",)
    assert question_for(needed, first.description) == (
        "To get the current weather for a city, I need the city. Which city should I use?"
    )
    assert question_for(["visit_date", "city"], "Books a visit.") == (
        "To book a visit, I need the visit date and city. Could you tell me the visit date and "
        "city?"
    )
    # Asides and examples in the description stay out of the question.
    assert question_for(
        ["amount"], "Convert an amount of money from one currency to another (ISO codes, e.g. EUR)."
    ) == (
        "To convert an amount of money from one currency to another, I need the amount. "
        "Which amount should I use?"
    )
    assert question_for(["city"], "Get the weather for a city, e.g. Paris. Returns JSON.") == (
        "To get the weather for a city, I need the city. Which city should I use?"
    )
    # Numbers are asked for by how many or what, with the numeric parameters of the schema.
    g = _ctx("Convert some money to yen.").ground_call(
        call("convert_currency", amount=12, from_currency="USD", to_currency="JPY")
    )
    assert "amount" in g.numeric
    assert question_for(["minutes"], "Set a timer.", ["minutes"]) == (
        "To set a timer, I need the minutes. How many minutes?"
    )
    assert question_for(["amount"], None, g.numeric) == (
        "I need the amount. What amount should I use?"
    )
    assert question_for(["rate"], "Returns the exchange rate, e.g. 1.5 for EUR to USD.") == (
        "To return the exchange rate, I need the rate. Which rate should I use?"
    )
    assert question_for(["city"], "Gets the forecast, i.e. the expected weather, for a city.") == (
        "To get the forecast, for a city, I need the city. Which city should I use?"
    )
    assert (
        question_for(["status"], None, ["status"]) == "I need the status. What status should I use?"
    )
    assert question_for(["number_of_items"], None, ["number_of_items"]) == (
        "I need the number of items. What number of items should I use?"
    )
    assert question_for([], "x") is None
    assert mentions("Which dates work for you?", "visit_date")
    assert not mentions("Which city?", "visit_date")


# --------------------------------------------------------------------- the decision


def _task(belief: str = "relabel", execute: str = "grounded") -> Task:
    return tool_decision(
        cost=[[0, 1, 2], [4, 0, 2], [4, 1, 0]],
        grounding=GroundingSpec(belief=belief, execute=execute),  # type: ignore[arg-type]
    )


def _calls(*cities: str) -> list[AIMessage]:
    return [AIMessage(content="", tool_calls=[call("get_weather", city=c)]) for c in cities]


def test_grounded_task_needs_the_context() -> None:
    with pytest.raises(ConfigurationError, match="context=GroundingContext"):
        Decider(_task()).decide(_calls("Paris"))


def test_only_grounded_calls_are_sent_and_the_question_names_the_argument() -> None:
    decider = Decider(_task(belief="off"))
    ctx = GroundingContext([WEATHER], [user("What's the weather like?")])
    decision = decider.decide(_calls("London", "London", "Paris"), context=ctx)
    assert decision.action == "request_for_info"
    assert decision.fallback
    assert "every sampled call is ungrounded (they lack 'city')" in (decision.fallback_reason or "")
    assert decision.missing_arguments == ["city"]
    assert decision.message is not None
    assert decision.message.content == (
        "To get the current weather for a city, I need the city. Which city should I use?"
    )
    assert decision.n_ungrounded == 3
    assert decision.call_agreement == 2
    # execute: any sends the modal call, invented city and all.
    anyway = Decider(_task(belief="off", execute="any")).decide(
        _calls("London", "London", "Paris"), context=ctx
    )
    assert anyway.action == "tool_call"
    assert anyway.message is not None and anyway.message.tool_calls[0]["args"] == {"city": "London"}


def test_the_modal_grounded_call_is_sent() -> None:
    ctx = GroundingContext([WEATHER], [user("What's the weather in Paris or Rome?")])
    samples = [*_calls("Oslo", "Oslo", "Oslo"), *_calls("Paris", "Rome", "Rome")]
    decision = Decider(_task(belief="off")).decide(samples, context=ctx)
    assert decision.action == "tool_call"
    assert decision.message is not None
    assert decision.message.tool_calls[0]["args"] == {"city": "Rome"}


def test_a_sampled_question_naming_the_argument_is_preferred() -> None:
    ctx = GroundingContext([WEATHER], [user("What's the weather like?")])
    samples = [
        *_calls("London", "London"),
        AIMessage(content="Could you tell me more?"),
        AIMessage(content="Which city are you in?"),
    ]
    decision = Decider(_task()).decide(samples, context=ctx)
    assert decision.action == "request_for_info"
    assert decision.message is not None and decision.message.content == "Which city are you in?"
    assert decision.missing_arguments == ["city"]


def test_a_question_that_writes_a_call_out_is_never_the_reply() -> None:
    # Captured from Qwen2.5-Coder-0.5B: a call written as text, then a question after it.
    written = (
        '{"name": "get_weather", "arguments": {"city": "London", "unit": "celsius"}}\n'
        "<|endoftext|>Can you help me with that?"
    )
    ctx = GroundingContext([WEATHER], [user("What's the weather like?")])
    samples = [*_calls("London", "London"), AIMessage(content=written)]
    decision = Decider(_task()).decide(samples, context=ctx)
    assert decision.action == "request_for_info"
    assert decision.message is not None
    assert "city" in str(decision.message.content)
    assert "{" not in str(decision.message.content)


def test_relabel_and_features_beliefs() -> None:
    ctx = GroundingContext([WEATHER], [user("What's the weather like?")])
    samples = [*_calls("London", "London"), AIMessage(content="Which city?")]
    relabel = Decider(_task("relabel")).decide(samples, context=ctx)
    assert relabel.counts == {"tool_call": 0.0, "request_for_info": 3.0, "cannot_answer": 0.0}
    task = _task("features")
    assert task.outcomes == ("tool_call", "request_for_info", "cannot_answer", UNGROUNDED_CALL)
    assert task.n_features == 5  # k labels, ungrounded calls, unparsed share
    features = Decider(task).decide(samples, context=ctx)
    assert features.counts["tool_call"] == 2.0  # p̂ is g_T's
    belief = task.belief_from_outcomes(
        task.sample_outcomes(["tool_call", "tool_call", "request_for_info"], [True, True, False])
    )
    assert belief.n_ungrounded == 2
    np.testing.assert_allclose(belief.features, (np.array([0, 1, 0, 2, 0]) + 0.1) / 3.5)
    with pytest.raises(ConfigurationError, match="one 'ungrounded' flag per label"):
        task.sample_outcomes(["tool_call"], None)


def test_a_features_calibrator_reads_the_ungrounded_column() -> None:
    task = _task("features")
    rng = np.random.default_rng(0)
    X = rng.dirichlet(np.ones(5), size=60)
    y = rng.integers(0, 3, size=60)
    decider = Decider(task, MatrixScaling(n_classes=3).fit(X, y))
    assert decider.reads_features
    belief = Belief(
        [2, 1, 0],
        task.labels,
        n_unparsed=1,
        unparsed_evidence=True,
        split_label="tool_call",
        n_ungrounded=1,
    )
    assert decider.calibrator_input(belief).shape == (5,)
    with pytest.raises(ConfigurationError, match="reads 5 belief features"):
        decider.calibrator_input(Belief([2, 1, 0], task.labels, unparsed_evidence=True))


def test_carried_actions_follows_the_execution_rule() -> None:
    task = _task("off")
    samples = _calls("Paris")
    assert not carried_actions(task, samples, ["tool_call"], grounded=[False])[0]
    assert carried_actions(task, samples, ["tool_call"], grounded=[True])[0]
    with pytest.raises(ConfigurationError, match="one 'grounded' flag per sample"):
        carried_actions(task, samples, ["tool_call"])
    assert carried_actions(_task("off", "any"), samples, ["tool_call"])[0]


def test_adaptive_n_counts_ungrounded_calls_apart() -> None:
    task = _task("features")
    ctx = GroundingContext([WEATHER], [user("What's the weather like?")])
    counts = outcome_counts(task, ["tool_call", UNGROUNDED_CALL, None])
    assert counts.tolist() == [1, 0, 0, 1, 1]
    fitted = StoppingPrior(task.outcomes, (1.0,) * (len(task.outcomes) + 1), n_items=100)
    check = stop_check_messages(
        Decider(task),
        _calls("London", "London"),
        8,
        AdaptiveSampling(epsilon=0.05, prior=fitted),
        context=ctx,
    )
    assert 0.0 < check.change_probability < 1.0


def test_grounding_needs_a_tool_decision() -> None:
    with pytest.raises(ValueError, match="grounding needs a tool decision"):
        multiple_choice(["yes", "no"], grounding=GroundingSpec())


def test_a_tool_named_without_a_schema_is_offered() -> None:
    ctx = GroundingContext(["get_weather"], [user("weather in Paris")])
    assert ctx.ground_call(call("get_weather", city="Paris")).grounded
    assert not ctx.ground_call(call("get_weather", city="Oslo")).grounded


def test_no_samples_need_no_grounding_flags() -> None:
    assert carried_actions(_task("off"), [], []).tolist() == [False, True, True]


def test_a_call_sent_without_its_dropped_argument_is_a_repeat() -> None:
    from taskcal_agents.parsing._tool_turns import answered_tool_calls

    task = _task()
    conversation = [
        user("What's the weather in Paris?"),
        AIMessage(content="", tool_calls=[call("get_weather", city="Paris")]),
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]
    from langchain_core.messages import HumanMessage, ToolMessage

    turn = [
        HumanMessage("What's the weather in Paris?"),
        AIMessage(content="", tool_calls=[call("get_weather", city="Paris")]),
        ToolMessage("sunny", tool_call_id="c1"),
    ]
    samples = [
        AIMessage(content="", tool_calls=[call("get_weather", city="Paris", date="2023-01-01")])
    ] * 4
    ctx = GroundingContext([WEATHER], conversation)
    decision = Decider(task).decide(samples, context=ctx, answered_calls=answered_tool_calls(turn))
    assert decision.n_repeats == 4
    assert decision.action != "tool_call"


def test_tool_dialects_nested_objects_and_not_dates() -> None:
    anthropic = {
        "name": "get_weather",
        "description": "Get the weather.",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    }
    ctx = GroundingContext([anthropic], [user("What is the weather?")])
    assert ctx.ground_call(call("get_weather")).missing == ("city",)
    nested = {
        "type": "function",
        "function": {
            "name": "find",
            "parameters": {
                "type": "object",
                "properties": {
                    "filters": {
                        "type": "object",
                        "properties": {"genre": {"type": "string", "enum": ["Mystery", "Drama"]}},
                        "required": ["genre"],
                    },
                    "amount": {"type": "string"},
                },
                "required": ["filters"],
            },
        },
    }
    ctx = GroundingContext([nested], [user("Find me a good movie, and pay my bill today")])
    assert not ctx.ground_call(call("find", filters={"genre": "Mystery"})).grounded
    assert ctx.ground_call(call("find", filters={"genre": ""})).missing == ("filters",)
    paid = ctx.ground_call(call("find", filters={"genre": "Mystery"}, amount="12.50"))
    assert _status(paid)["amount"] == ("unsupported", "absent")  # "12.50" is no date
    assert (
        GroundingContext([nested], [user("a Drama film")])
        .ground_call(call("find", filters={"genre": "Drama"}))
        .grounded
    )


def test_a_chat_message_from_the_user_is_evidence() -> None:
    from langchain_core.messages import ChatMessage

    ctx = GroundingContext([WEATHER], [ChatMessage(role="user", content="weather in Paris")])
    assert ctx.ground_call(call("get_weather", city="Paris")).grounded
