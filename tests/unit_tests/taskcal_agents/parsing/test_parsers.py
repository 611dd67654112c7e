from __future__ import annotations

import re
import sys

import pytest
from langchain_core.messages import AIMessage
from pydantic import BaseModel

from taskcal_agents.errors import ConfigurationError
from taskcal_agents.parsing._labels import (
    AnswerOrAbstainParser,
    ChoiceParser,
    Parser,
    RatingParser,
    ToolDecisionParser,
    unparsed_reason,
    with_offered_tools,
)
from taskcal_agents.parsing._registry import (
    SchemaParser,
    builtin_parser_names,
    get_parser,
    register_parser,
    registered_parser_names,
)
from taskcal_agents.parsing._text import message_text, normalize_text
from taskcal_agents.parsing._tool_calls import canonical_tool_calls, extract_tool_calls


def ai(content: str = "", **kwargs: object) -> AIMessage:
    return AIMessage(content=content, **kwargs)  # type: ignore[arg-type]


# ----------------------------------------------------------------------- tool calls


def test_extract_native_tool_calls_win() -> None:
    msg = ai('{"name": "other", "arguments": {}}', tool_calls=[
        {"name": "get_weather", "args": {"city": "Paris"}, "id": "c1"}
    ])  # fmt: skip
    calls = extract_tool_calls(msg)
    assert [(c["name"], c["args"], c["id"]) for c in calls] == [
        ("get_weather", {"city": "Paris"}, "c1")
    ]


@pytest.mark.parametrize(
    "content",
    [
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}',  # no closing tag
        '<tool_call>[{"name": "get_weather", "arguments": {"city": "Paris"}}]</tool_call>',
        'Sure!\n```json\n{"name": "get_weather", "parameters": {"city": "Paris"}}\n```',
        'I will call it now: {"name": "get_weather", "args": {"city": "Paris"}}',
        '{"function": {"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}}',
        '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}',
    ],
)
def test_extract_tool_calls_from_content(content: str) -> None:
    calls = extract_tool_calls(ai(content))
    assert len(calls) == 1
    assert calls[0]["name"] == "get_weather"
    assert calls[0]["args"] == {"city": "Paris"}
    assert re.fullmatch(r"call_[0-9a-f]{24}", calls[0]["id"] or "")


@pytest.mark.parametrize(
    "content",
    [
        "",
        "The weather in Paris is sunny.",
        '{"answer": "Paris", "confidence": 0.9}',  # JSON but not a tool call
        '{"name": "get_weather", "arguments": "not json"}',
        '{"name": "", "arguments": {}}',
        "{broken json",
        '[{"name": "a", "arguments": {}}, 5]',  # a list with a non-call
        # a call followed by prose is quoted, not made
        'I will call {"name": "get_weather", "args": {"city": "Paris"}} now.',
    ],
)
def test_extract_tool_calls_none(content: str) -> None:
    assert extract_tool_calls(ai(content)) == []


def test_extract_tool_call_ids_are_deterministic() -> None:
    content = '<tool_call>{"name": "f", "arguments": {"b": 1, "a": 2}}</tool_call>'
    assert extract_tool_calls(ai(content))[0]["id"] == extract_tool_calls(ai(content))[0]["id"]


def test_canonical_tool_calls_ignores_key_order_and_ids() -> None:
    a = [{"name": "f", "args": {"x": 1, "y": 2}, "id": "1"}]
    b = [{"name": "f", "args": {"y": 2, "x": 1}, "id": "2"}]
    c = [{"name": "f", "args": {"x": 2, "y": 2}, "id": "1"}]
    assert canonical_tool_calls(a) == canonical_tool_calls(b)  # type: ignore[arg-type]
    assert canonical_tool_calls(a) != canonical_tool_calls(c)  # type: ignore[arg-type]


def test_message_text_and_normalize() -> None:
    msg = AIMessage(content=[{"type": "text", "text": " Which city? "}, {"type": "image"}])
    assert message_text(msg) == "Which city?"
    assert normalize_text("  Which   CITY?\n") == "which city"


# -------------------------------------------------------------------- tool_decision

TOOL_CASES = [
    ("Which city do you mean?", "request_for_info"),
    ("Could you please provide the date of your trip?", "request_for_info"),
    ("Please provide your account number.", "request_for_info"),
    ("I need more information about the order.", "request_for_info"),
    ("I can't check the weather without a location. Which city are you in?", "request_for_info"),
    ("I'm sorry, but I can't help with that.", "cannot_answer"),
    ("I cannot book flights. Is there anything else I can help you with?", "cannot_answer"),
    ("I am unable to access real-time data.", "cannot_answer"),
    ("As an AI, I do not have access to your calendar.", "cannot_answer"),
    ("I don't have access to the internet. Would you like me to explain instead?", "cannot_answer"),
    ("I don't know.", "cannot_answer"),
    ("The weather in Paris is sunny and 20 degrees.", None),
    ("", None),
    ("   ", None),
]


@pytest.mark.parametrize(("content", "label"), TOOL_CASES)
def test_tool_decision_text(content: str, label: str | None) -> None:
    assert ToolDecisionParser()(ai(content)) == label


def test_tool_decision_direct_answer() -> None:
    parser = ToolDecisionParser(direct_answer=True)
    assert parser.labels == ("tool_call", "request_for_info", "cannot_answer", "direct_answer")
    assert parser(ai("Paris is the capital of France.")) == "direct_answer"
    assert parser(ai("")) is None
    assert parser(ai("Which one?")) == "request_for_info"


def test_tool_decision_tool_calls() -> None:
    parser = ToolDecisionParser()
    native = ai(tool_calls=[{"name": "get_weather", "args": {}, "id": "1"}])
    hermes = ai('<tool_call>\n{"name": "get_weather", "arguments": {}}\n</tool_call>')
    assert parser(native) == "tool_call"
    assert parser(hermes) == "tool_call"
    assert parser.labels == ("tool_call", "request_for_info", "cannot_answer")


def test_tool_decision_tool_names_filter() -> None:
    parser = ToolDecisionParser(tool_names=("get_weather",))
    assert parser(ai(tool_calls=[{"name": "get_weather", "args": {}, "id": "1"}])) == "tool_call"
    assert parser(ai(tool_calls=[{"name": "search", "args": {}, "id": "1"}])) is None


def test_tool_decision_extra_patterns() -> None:
    parser = ToolDecisionParser(
        refusal_patterns=(r"\bnope\b",), question_patterns=(r"\btell me\b",)
    )
    assert parser(ai("Nope.")) == "cannot_answer"
    assert parser(ai("Tell me your name.")) == "request_for_info"


# ---------------------------------------------------------------- answer_or_abstain


@pytest.mark.parametrize(
    ("content", "label"),
    [
        ("Paris", "answer"),
        ("The answer is 42.", "answer"),
        ("I don't know.", "abstain"),
        ("I'm not sure.", "abstain"),
        ("I cannot answer that question.", "abstain"),
        ("There is not enough information to tell.", "abstain"),
        ("Unknown", "abstain"),
        ("I'm not sure, but I think it is Paris.", "answer"),
        ("I'm not entirely sure. Can you please provide more details?", "abstain"),
        ("The answer is currently unknown.", "abstain"),
        ("The answer is not provided.", "abstain"),
        ("The answer is unknowable to most, but it is 1955.", "answer"),
        ("", None),
    ],
)
def test_answer_or_abstain(content: str, label: str | None) -> None:
    assert AnswerOrAbstainParser()(ai(content)) == label


def test_answer_or_abstain_custom_labels_and_patterns() -> None:
    parser = AnswerOrAbstainParser(
        answer_label="yes", abstain_label="no", abstain_patterns=("skip",)
    )
    assert parser.labels == ("yes", "no")
    assert parser(ai("skip")) == "no"
    assert parser(ai("Rome")) == "yes"


# --------------------------------------------------------------------------- rating


@pytest.mark.parametrize(
    ("content", "label"),
    [
        ("4", "4"),
        ("Rating: 4", "4"),
        ("**Score:** 2", "2"),
        ("I would give it a four.", "4"),
        ("On a scale of 1 to 5, I'd rate it 3.", "3"),
        ("3/5", "3"),
        ("4 out of 5 stars", "4"),
        ("It deserves 5 stars out of 5.", "5"),
        ("4.5", None),
        ("I rate it 7", None),
        ("Rating: 9. Actually 2.", "2"),
        ("1. Both are cat-related words.\n2. The difference lies", None),  # a list
        ("Sentence 1 describes a cat, while Sentence 2 describes", None),
        ("The two sentences differ. Sentence 1 is longer. I'd say 3.", "3"),
        ("A group of four people eat cake", None),
        ("Two (somewhat similar)", "2"),
        ("Four.", "4"),
        ("3\n\nBoth sentences convey a sense of eating", "3"),
        ("no number here", None),
        ("", None),
    ],
)
def test_rating(content: str, label: str | None) -> None:
    assert RatingParser(k=5)(ai(content)) == label


def test_rating_custom_labels() -> None:
    parser = RatingParser(k=3, labels=("bad", "ok", "good"))
    assert parser(ai("2")) == "ok"
    assert parser.labels == ("bad", "ok", "good")


def test_rating_bad_options() -> None:
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "RatingParser option 'k' must be an integer >= 2, got 1; pass k=5 for a 1-5 scale."
        ),
    ):
        RatingParser(k=1)
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "RatingParser option 'labels' must have k=3 entries, got 2: ['a', 'b']; pass one "
            "label per rating level."
        ),
    ):
        RatingParser(k=3, labels=("a", "b"))


# --------------------------------------------------------------------------- choice


@pytest.mark.parametrize(
    ("content", "label"),
    [
        ("B", "B"),
        ("(C)", "C"),
        ("**D.**", "D"),
        ("The answer is (C).", "C"),
        ("Answer: B", "B"),
        ("A) Paris", "A"),
        ("A good choice would be option D.", "D"),
        ("I think the right one is (B) because...", "B"),
        ("It is London.", "B"),
        ("A or B", None),
        ("Paris or London", None),
        ("", None),
    ],
)
def test_choice(content: str, label: str | None) -> None:
    parser = ChoiceParser(texts=("Paris", "London", "Rome", "Berlin"))
    assert parser(ai(content)) == label


def test_choice_bad_options() -> None:
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "ChoiceParser option 'labels' must hold at least two distinct labels, got ['A', 'A']."
        ),
    ):
        ChoiceParser(labels=("A", "A"))
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "ChoiceParser option 'texts' must have one text per label (2), got 1: ['x']."
        ),
    ):
        ChoiceParser(labels=("A", "B"), texts=("x",))


# --------------------------------------------------------------------------- schema


class Verdict(BaseModel):
    label: str
    reason: str = ""


def test_schema_from_content_tool_call_and_parsed() -> None:
    parser = SchemaParser()
    assert parser.labels is None
    assert parser(ai('```json\n{"label": "spam", "reason": "ads"}\n```')) == "spam"
    assert (
        parser(ai(tool_calls=[{"name": "Verdict", "args": {"label": "ham"}, "id": "1"}])) == "ham"
    )
    assert parser(ai("", additional_kwargs={"parsed": Verdict(label="spam")})) == "spam"
    assert parser(ai("no json")) is None
    assert parser(ai('{"other": 1}')) is None
    assert parser(ai('{"label": {"nested": 1}}')) is None


def test_schema_with_model_and_mapping() -> None:
    parser = SchemaParser(field="label", model=Verdict, mapping={"spam": "bad", "ham": "good"})
    assert parser.labels == ("bad", "good")
    assert parser(ai('{"label": "spam"}')) == "bad"
    assert parser(ai('{"label": "eggs"}')) is None
    assert parser(ai('{"label": 3, "reason": []}')) is None  # fails validation


def test_schema_model_registered_name() -> None:
    register_parser(f"{__name__}:Verdict", Verdict)
    parser = get_parser("schema", model=f"{__name__}:Verdict")
    assert isinstance(parser, SchemaParser)
    assert parser.model is Verdict


def test_schema_bad_model() -> None:
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "SchemaParser option 'model' must be a pydantic model class or the name of one "
            "registered with register_parser, got 5."
        ),
    ):
        SchemaParser(model=5)


# ------------------------------------------------------------------------- registry


def test_builtins_are_parsers() -> None:
    assert builtin_parser_names() == (
        "tool_decision",
        "answer_or_abstain",
        "rating",
        "choice",
        "schema",
    )
    for name in builtin_parser_names():
        assert isinstance(get_parser(name), Parser)


def test_get_parser_lists_become_tuples() -> None:
    parser = get_parser("tool_decision", tool_names=["a", "b"])
    assert isinstance(parser, ToolDecisionParser)
    assert parser.tool_names == ("a", "b")


def test_get_parser_unknown_name() -> None:
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "parser name 'nope' is not a built-in parser and was not registered; a task file "
            "cannot make taskcal import code. Built-in parsers: ['answer_or_abstain', "
            "'choice', 'rating', 'schema', 'tool_decision']. Register yours in your code "
            "first: taskcal_agents.parsing.register_parser('nope', obj)."
        ),
    ):
        get_parser("nope")


def test_get_parser_unknown_option() -> None:
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "parser 'rating' got unknown option(s) ['n']; accepted options are "
            "['k', 'labels', 'low']."
        ),
    ):
        get_parser("rating", n=3)


def test_get_parser_bad_regex() -> None:
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "parser 'tool_decision' got an invalid regular expression in its options: "
        ),
    ):
        get_parser("tool_decision", refusal_patterns=["("])


def custom_factory(word: str = "yes") -> object:
    def parse(message: AIMessage) -> str | None:
        return "yes" if word in message_text(message) else None

    return parse


def test_get_parser_registered_name() -> None:
    register_parser(f"{__name__}:custom_factory", custom_factory)
    assert f"{__name__}:custom_factory" in registered_parser_names()
    parser = get_parser(f"{__name__}:custom_factory", word="ok")
    assert parser(ai("ok then")) == "yes"


def test_get_parser_never_imports_a_named_module() -> None:
    assert "json.tool" not in sys.modules
    with pytest.raises(ConfigurationError, match=re.escape("was not registered")):
        get_parser("json.tool:main")
    assert "json.tool" not in sys.modules  # refused before any import


def test_register_parser_rejects() -> None:
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "register_parser parameter 'name' must be a non-empty string other than the "
            "built-in parser names ['answer_or_abstain', 'choice', 'rating', 'schema', "
            "'tool_decision'], got 'rating'."
        ),
    ):
        register_parser("rating", custom_factory)
    with pytest.raises(
        ConfigurationError,
        match=re.escape("register_parser parameter 'obj' for 'x' must be callable, got 5."),
    ):
        register_parser("x", 5)


def test_rating_zero_based_scale() -> None:
    parser = RatingParser(k=6, low=0)
    assert parser.labels == ("0", "1", "2", "3", "4", "5")
    assert parser(ai("Similarity: 0")) == "0"
    assert parser(ai("I'd say 5 out of 5")) == "5"
    assert parser(ai("6")) is None
    assert parser(ai("Zero (completely different)")) == "0"
    assert parser(ai("0\n\nBoth sentences convey a sense of eating")) == "0"
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "RatingParser option 'low' must be an integer (the lowest level), got '0'; pass "
            "low=0 for a 0…k−1 scale."
        ),
    ):
        RatingParser(k=6, low="0")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "content",
    [
        "See https://api.example.com/v2.json?status=open for the list",
        "Run `curl host/x?y=1` and read the output",
        "```python\nx = a if b else c  # why?x\nprint('ok?')\n```",
    ],
)
def test_question_marks_in_urls_and_code_are_no_question(content: str) -> None:
    assert ToolDecisionParser().asks(content) is False


def test_question_at_end_of_sentence_still_asks() -> None:
    assert ToolDecisionParser().asks("Which city do you mean?") is True
    assert ToolDecisionParser().asks('He said "which city?" to me') is True


# ------------------------------------------------------- truncated and unoffered calls

TRUNCATED = [
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par',
    '<tool_call>{"name": "get_weather", "argu',
    '<tool_call>\n[{"name": "get_weather"',
    '{"name": "get_weather", "arguments": {"city": "Paris"',
    '```json\n{"name": "get_weather", "parameters": {"city": ',
    'Sure. {"function": {"name": "get_weather", "arguments": "{\\"city',
    '{"name": "get_weather", "arguments": {"user": {"name": "Bob"}',  # nested object
]


@pytest.mark.parametrize("content", TRUNCATED)
def test_truncated_call_states_intent_but_is_never_extracted(content: str) -> None:
    message = ai(content, response_metadata={"finish_reason": "length"})
    assert extract_tool_calls(message) == []
    assert ToolDecisionParser()(message) == "tool_call"
    assert ToolDecisionParser(tool_names=("get_weather",))(message) == "tool_call"
    assert ToolDecisionParser(tool_names=("search",))(message) is None
    assert ToolDecisionParser(partial_calls=False)(message) is None
    assert unparsed_reason(message, tool_names=("search",)) == "unoffered_tool"
    assert unparsed_reason(message) == "length"


def test_truncated_call_after_a_complete_one_keeps_the_complete_one() -> None:
    content = '[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"x": '
    calls = extract_tool_calls(ai(content))
    assert [c["name"] for c in calls] == ["a"]


def test_broken_object_that_is_no_call_is_no_intent() -> None:
    # no tag, no argument key, not cut right after the name, name not offered
    message = ai('{"name": "Bob", "age": 3, "city": "Par')
    assert ToolDecisionParser()(message) is None
    assert ToolDecisionParser(tool_names=("get_weather",))(message) is None
    assert unparsed_reason(message, tool_names=("get_weather",)) == "other"


@pytest.mark.parametrize(
    "content",
    [
        '{"name": "get_weather", "city": "Par',  # flat arguments: not recognisably a call
        '{"name": "get_weather", "description": "Get the weather", "parameters": {"ty',
        '```json\n{"name": "get_weather", "parameters": {"type": "object", "required": ["ci',
        'var calls = [\n  {\n    "name": "get_weather",\n    "description": "Get the',
    ],
)
def test_echoed_tool_definitions_and_other_objects_are_no_intent(content: str) -> None:
    message = ai(content, response_metadata={"finish_reason": "length"})
    assert ToolDecisionParser(tool_names=("get_weather",))(message) is None
    assert unparsed_reason(message, tool_names=("get_weather",)) == "length"


def test_invalid_tool_call_with_an_offered_name_is_intent() -> None:
    invalid = {"name": "get_weather", "args": '{"city": "Par', "id": "c", "error": "bad json"}
    message = ai(invalid_tool_calls=[invalid])
    assert extract_tool_calls(message) == []
    assert ToolDecisionParser(tool_names=("get_weather",))(message) == "tool_call"
    assert ToolDecisionParser(tool_names=("search",))(message) is None
    assert unparsed_reason(message, tool_names=("search",)) == "unoffered_tool"


def test_call_to_unoffered_tool_is_unparsed_even_with_a_question_in_its_arguments() -> None:
    message = ai('{"name": "search", "arguments": {"query": "what is the weather?"}}')
    parser = ToolDecisionParser(tool_names=("get_weather",))
    assert parser(message) is None
    assert unparsed_reason(message, tool_names=("get_weather",)) == "unoffered_tool"
    assert ToolDecisionParser()(message) == "tool_call"


def test_with_tool_names_narrows_the_offered_tools() -> None:
    call = ai(tool_calls=[{"name": "search", "args": {}, "id": "1"}])
    parser = ToolDecisionParser()
    assert parser.with_tool_names(["search"])(call) == "tool_call"
    assert parser.with_tool_names(["get_weather"])(call) is None
    assert parser.with_tool_names(["search"]) is parser.with_tool_names(("search",))  # cached
    own = ToolDecisionParser(tool_names=("search", "lookup"))
    assert own.with_tool_names(["lookup", "get_weather"]).tool_names == ("lookup",)
    assert with_offered_tools(parser, None) is parser
    assert with_offered_tools(parser, ["search"]).tool_names == ("search",)
    rating = RatingParser()
    assert with_offered_tools(rating, ["search"]) is rating  # not tool-aware: unchanged
    listed = ToolDecisionParser(refusal_patterns=[r"\bnope\b"])  # type: ignore[arg-type]
    assert listed.with_tool_names(["search"])(ai("Nope.")) == "cannot_answer"


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (ai("", response_metadata={"finish_reason": "length"}), "length"),
        (ai("The weather is", response_metadata={"finish_reason": "length"}), "length"),
        (ai(""), "empty"),
        (ai("  "), "empty"),
        (ai("Bananas.", response_metadata={"finish_reason": "stop"}), "other"),
        (ai(tool_calls=[{"name": "search", "args": {}, "id": "1"}]), "unoffered_tool"),
    ],
)
def test_unparsed_reason(message: AIMessage, reason: str) -> None:
    assert unparsed_reason(message, tool_names=("get_weather",)) == reason


@pytest.mark.parametrize(
    ("content", "label"),
    [
        ("You cannot help with that.", "cannot_answer"),
        ("I cannot help with that", "cannot_answer"),
        ("Sorry, can't help you with that.", "cannot_answer"),
        ("抱歉，我无法帮助您。", "cannot_answer"),
        ("我不能完成这个请求。", "cannot_answer"),
        ("很遗憾，这个工具做不到。", "cannot_answer"),
        ("您想查询哪个城市的天气？", "request_for_info"),
        ("请提供您的账号。", "request_for_info"),
        ("You can help me by telling me the city?", "request_for_info"),
        ("Help is on the way.", None),
        ("I'm sorry for the misunderstanding. There is no counselor in Los Gatos.", None),
        ("I'm sorry for any confusion, but I can't book that.", "cannot_answer"),
        ("I'm afraid there are no free venues in London.", None),
        ("I'm afraid I can't do that.", "cannot_answer"),
        ("I'm not equipped to order food.", "cannot_answer"),
        ("That is not possible.", "cannot_answer"),
        ("They have options, which is not possible for a web API.", None),
        ("I'm sorry, I can't order. Would you like to explore other options?", "cannot_answer"),
        ("Please, provide the details of your order.", "request_for_info"),
    ],
)
def test_tool_decision_refusals_and_chinese(content: str, label: str | None) -> None:
    assert ToolDecisionParser()(ai(content)) == label


def test_tool_names_of_reads_every_tool_form() -> None:
    from langchain_core.tools import tool

    from taskcal_agents.parsing._labels import tool_names_of

    @tool
    def get_weather(city: str) -> str:
        """Weather in a city."""
        return city

    def book(day: str) -> str:
        """Book a day."""
        return day

    openai = {"type": "function", "function": {"name": "lookup", "parameters": {}}}
    assert tool_names_of(["raw", get_weather, book, openai, {"type": "web_search"}]) == (
        "raw",
        "get_weather",
        "book",
        "lookup",
    )
