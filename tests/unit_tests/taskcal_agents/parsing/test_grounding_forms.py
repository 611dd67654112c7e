"""Values a request states in another form: each rule grounds them, and still refuses inventions."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from taskcal_agents.parsing import GroundingContext


def tool(**props: dict[str, Any]) -> dict[str, Any]:
    parameters = {"type": "object", "properties": props, "required": list(props)}
    return {
        "type": "function",
        "function": {"name": "f", "description": "d", "parameters": parameters},
    }


def how(text: str, schema: dict[str, Any], **args: Any) -> dict[str, tuple[str, str]]:
    call = GroundingContext([schema], [HumanMessage(text)]).ground_call({"name": "f", "args": args})
    return {a.name: (a.status, a.how) for a in call.arguments}


STR = {"type": "string"}


@pytest.mark.parametrize(
    ("text", "value", "expected"),
    [
        ("Find hotels in San Diego, California.", "CA", ("stated", "alias")),
        ("Find hotels in Austin, Texas.", "CA", ("unsupported", "absent")),  # another state
        ("Is it cold in Maine or in Ohio?", "ME", ("stated", "alias")),
        ("Vermont is home.", "VT", ("stated", "alias")),
        ("Vermont is home.", "IN", ("unsupported", "absent")),  # Indiana is not named
    ],
)
def test_a_us_state_code_is_stated_by_the_states_name(text: str, value: str, expected: Any) -> None:
    assert how(text, tool(state=STR), state=value)["state"] == expected


@pytest.mark.parametrize(
    ("text", "value", "expected"),
    [
        ("What time is it in Tokyo?", "Asia/Tokyo", ("stated", "time_zone")),
        ("Set up a call for 5pm New York time.", "America/New_York", ("stated", "time_zone")),
        ("What time is it in Paris?", "Asia/Tokyo", ("unsupported", "absent")),
    ],
)
def test_a_time_zone_is_stated_by_its_city(text: str, value: str, expected: Any) -> None:
    assert how(text, tool(timezone=STR), timezone=value)["timezone"] == expected


@pytest.mark.parametrize(
    ("text", "value", "expected"),
    [
        ("Book it for 2023-03-08.", "March 8, 2023", ("stated", "date")),
        ("Book it for 2023-03-08.", "8th March 2023", ("stated", "date")),
        ("Book it for March 8th 2023.", "2023-03-08", ("stated", "date")),
        ("Book it for 3/8/2023.", "March 8", ("stated", "date")),
        ("Book it for 2023-03-09.", "March 8, 2023", ("unsupported", "absent")),
        ("Meet at 3pm.", "15:00", ("stated", "date")),
        ("Meet at 15:00.", "3pm", ("stated", "date")),
        ("Meet at 4pm.", "3pm", ("unsupported", "absent")),
    ],
)
def test_a_date_or_time_restated_in_another_format(text: str, value: str, expected: Any) -> None:
    assert how(text, tool(when=STR), when=value)["when"] == expected


def test_an_enum_value_is_stated_by_a_form_of_its_word() -> None:
    schema = tool(operation={"type": "string", "enum": ["addition", "subtraction"]})
    assert how("Please add 5 and 3.", schema, operation="addition")["operation"] == (
        "stated",
        "enum_word",
    )
    assert how("Please add 5 and 3.", schema, operation="subtraction")["operation"][0] == (
        "unsupported"
    )
    # a value the schema does not list gets no such help
    free = tool(operation=STR)
    assert how("Please add 5 and 3.", free, operation="addition")["operation"][0] == "unsupported"


@pytest.mark.parametrize(
    ("text", "name", "value", "expected"),
    [
        ("Book a room at the Hilton.", "rooms", 1, ("inferable", "implied_one")),
        ("Buy a ticket to the concert.", "quantity", 1, ("inferable", "implied_one")),
        ("Book 3 rooms at the Hilton.", "rooms", 1, ("unsupported", "absent")),  # another count
        ("Book a room at the Hilton.", "rooms", 2, ("unsupported", "absent")),  # not one
        ("Book a room at the Hilton.", "price", 1, ("unsupported", "absent")),  # not a count
    ],
)
def test_an_implied_quantity_of_one(text: str, name: str, value: int, expected: Any) -> None:
    schema = tool(hotel=STR, **{name: {"type": "integer"}})
    assert how(text, schema, hotel="Hilton", **{name: value})[name] == expected


@pytest.mark.parametrize(
    ("text", "options", "value"),
    [
        ("Can you renew my premium plan?", ["renew", "cancel"], "cancel"),  # "can" is no form
        ("Set the gear for me please", ["forward", "reverse"], "forward"),  # nor is "for"
        ("Add or subtract, whichever.", ["addition", "subtraction"], "addition"),  # both named
    ],
)
def test_a_stop_word_or_a_text_naming_two_options_states_no_enum_value(
    text: str, options: list[str], value: str
) -> None:
    schema = tool(option={"type": "string", "enum": options})
    assert how(text, schema, option=value)["option"][0] == "unsupported"


@pytest.mark.parametrize(
    ("text", "value"),
    [("Update my address", "add"), ("I'll pay by card", "car"), ("Pick a player", "play")],
)
def test_a_longer_word_that_only_starts_like_an_option_states_no_enum_value(
    text: str, value: str
) -> None:
    schema = tool(option={"type": "string", "enum": [value, "other"]})
    assert how(text, schema, option=value)["option"] != ("stated", "enum_word")


@pytest.mark.parametrize(
    ("text", "value", "stated"),
    [
        # a sentence's full stop and the next sentence, with no space between them
        ("Visit www.our-company.com.They sent the link.", "www.our-company.com", True),
        ("Visit https://www.our-company.com.They sent it.", "www.our-company.com", True),
        ("Mail bob@our-company.com.Thanks, Eve", "bob@our-company.com", True),
        # a lowercase or a further dotted continuation is a longer host, not the value
        ("Visit www.bank.com.evil.io today.", "www.bank.com", False),
        ("Visit www.bank.com.Evil.io today.", "www.bank.com", False),
        ("Visit www.bank.com.EVIL today.", "www.bank.com", False),
        ("Visit www.bank.com.evil today.", "www.bank.com", False),
        ("Mail bob@bank.com.evil.io now.", "bob@bank.com", False),
    ],
)
def test_an_identifier_before_a_sentence_with_no_space(text: str, value: str, stated: bool) -> None:
    result = how(text, tool(url=STR), url=value)["url"]
    assert result == (("stated", "whole") if stated else ("unsupported", "absent"))


NUM = {"type": "number"}


@pytest.mark.parametrize(
    ("text", "value", "expected"),
    [
        # a unit attached to the number
        ("A triangle with base 6cm and height 10cm.", 6, ("stated", "number")),
        ("Plot a sine wave at 5Hz.", 5, ("stated", "number")),
        ("A triangle with base 6cm and height 10cm.", 7, ("unsupported", "absent")),
        # scientific notation
        ("Charges of 1e-9 and 2e-9 at a distance of 0.05.", 1e-09, ("stated", "number")),
        ("Charges of 1e-9 and 2e-9 at a distance of 0.05.", 3e-09, ("unsupported", "absent")),
        # a percentage as its fraction (and as itself)
        ("An annual interest rate of 5%.", 0.05, ("stated", "number")),
        ("An annual interest rate of 5%.", 5, ("stated", "number")),
        ("A discount rate of 10 percent.", 0.1, ("stated", "number")),
        ("An annual interest rate of 5%.", 0.5, ("unsupported", "absent")),
        ("A rate of 0.05, as agreed.", 5, ("unsupported", "absent")),  # no percentage
        # thousands separators are the tokens': "1,000" states 1000, not 1
        ("Buy 1,000 shares.", 1000, ("stated", "number")),
        ("Buy 1,000 shares.", 1, ("unsupported", "absent")),
        # a version or a padded date part states no number
        ("Install version v1.2 of it.", 1, ("unsupported", "absent")),
    ],
)
def test_a_number_written_with_a_unit_an_exponent_or_a_percent_sign(
    text: str, value: float, expected: Any
) -> None:
    assert how(text, tool(x=NUM), x=value)["x"] == expected


def test_each_item_of_a_bracketed_list_of_numbers_is_stated() -> None:
    schema = tool(cash_flows={"type": "array", "items": NUM})
    text = "Find the NPV given cash_flows=[200,300,400,500] and a rate of 10%."
    assert how(text, schema, cash_flows=[200, 300, 400, 500])["cash_flows"] == (
        "stated",
        "number",
    )
    assert how(text, schema, cash_flows=[200, 300, 450])["cash_flows"][0] == "unsupported"
    # outside brackets "200,300" reads as one number, as before
    assert how("Pay 200,300 in total.", schema, cash_flows=[200, 300])["cash_flows"][0] == (
        "unsupported"
    )


@pytest.mark.parametrize(
    ("text", "value", "expected"),
    [
        ("A hotel from July 10, 2022 to July 20, 2022.", "07-10-2022", ("stated", "date")),
        ("A hotel from July 10, 2022 to July 20, 2022.", "10-07-2022", ("stated", "date")),
        ("Lawsuits filed after January 1, 2021.", "01-01-2021", ("stated", "date")),
        ("A hotel from July 10, 2022 to July 20, 2022.", "07-11-2022", ("unsupported", "absent")),
        # another year than the text states is invented, with slashes too
        ("A hotel from July 10, 2022.", "07-10-2023", ("unsupported", "absent")),
        ("A hotel from July 10, 2022.", "07/10/2023", ("unsupported", "absent")),
        # without a year, hyphens join a range as often as a date
        ("Stay from July 10.", "7-10", ("unsupported", "absent")),
    ],
)
def test_a_date_of_hyphenated_numbers_with_its_year(text: str, value: str, expected: Any) -> None:
    assert how(text, tool(when=STR), when=value)["when"] == expected


@pytest.mark.parametrize(
    ("text", "value", "expected"),
    [
        ("Set an alarm for 5 in the afternoon.", "17:00", ("stated", "date")),
        ("Set an alarm for 10 in the morning.", "10:00", ("stated", "date")),
        ("Call me at 8 o'clock at night.", "20:00", ("stated", "date")),
        ("Set an alarm for 5 in the morning.", "17:00", ("unsupported", "absent")),
        ("Set an alarm for 5 in the afternoon.", "18:00", ("unsupported", "absent")),
    ],
)
def test_a_time_of_day_by_the_part_of_the_day(text: str, value: str, expected: Any) -> None:
    assert how(text, tool(when=STR), when=value)["when"] == expected


@pytest.mark.parametrize(
    ("text", "options", "value"),
    [
        ("Write an email about this form.", ["formal", "casual"], "formal"),
        ("What is the origin of this photo?", ["original", "thumbnail"], "original"),
        ("Find my personal contacts.", ["person", "company"], "person"),
        ("Find a rental in San Francisco.", ["rent", "buy"], "rent"),  # no adjective form
    ],
)
def test_an_adjective_names_no_enum_value(text: str, options: list[str], value: str) -> None:
    schema = tool(option={"type": "string", "enum": options})
    assert how(text, schema, option=value)["option"][0] == "unsupported"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        # numbers inside identifiers, times and dates
        ("Order 3a616ae shipped.", 3),
        ("Ticket 7QX9PL is open.", 7),
        ("Its id is 123e4567-e89b-12d3-a456-426614174000.", 123),
        ("Its id is 123e4567-e89b-12d3-a456-426614174000.", 12),
        ("Created 2024-05-19T10:00:00Z.", 19),
        ("Meet at 16:05pm.", 5),
        ("Color #2e8b57 please.", 2),
        ("Color #1e3 please.", 1000),
        ("The mask is 0xff.", 255),
        ("Install Python 3.11rc1.", 3.11),
        ("Pay invoice 25eb7a today.", 25),
        # tiny magnitudes are no match for one another, nor for an underflow
        ("An electron's charge is 1.6e-19 C.", 9.1e-31),
        ("A value of 1e-13.", 5e-13),
        ("A value of 1e-400.", 1e-300),
        ("Charges of 1e-9 and 2e-9.", 1.5e-9),
        # "[1,000]" is a thousand, not a list
        ("Limit it to [1,000] items.", 1),
        ("Leave a [1,234] gap.", 234),
    ],
)
def test_no_number_is_read_inside_an_identifier_or_a_thousand(text: str, value: float) -> None:
    assert how(text, tool(x=NUM), x=value)["x"] == ("unsupported", "absent")


def test_an_exponent_out_of_range_is_no_number_and_no_error() -> None:
    for text in ("A value of 1e400.", "An id 1234e567-aaaa-bbbb.", "Total 9e308."):
        assert how(text, tool(x=NUM), x=1)["x"] == ("unsupported", "absent")
    assert how("Total 9e308.", tool(x=NUM), x=float("inf"))["x"][0] == "unsupported"


@pytest.mark.parametrize(
    ("text", "value", "expected"),
    [
        ("Schedule it for March 5 in the afternoon.", "17:00", ("unsupported", "absent")),
        ("I have 2 in the morning and 3 in the afternoon.", "15:00", ("unsupported", "absent")),
        ("Wake me at 2 at night.", "14:00", ("unsupported", "absent")),
        ("Wake me at 2 at night.", "02:00", ("stated", "date")),
        ("Wake me at 12 at night.", "00:00", ("stated", "date")),
    ],
)
def test_a_part_of_the_day_needs_an_hour_introduced_as_one(
    text: str, value: str, expected: Any
) -> None:
    assert how(text, tool(when=STR), when=value)["when"] == expected


@pytest.mark.parametrize(
    ("text", "value", "expected"),
    [
        ("A hotel from July 10, 2022.", "2023-07-10", ("unsupported", "absent")),
        ("A hotel from July 10, 2022.", "07/10/23", ("unsupported", "absent")),
        ("A hotel from July 10, 2022 through 2023.", "07-10-2023", ("unsupported", "absent")),
        ("A hotel from July 10, 2022.", "07/10/22", ("stated", "date")),
        ("Book July 10; room 1999.", "07/10/2024", ("stated", "date")),  # 1999 is no year
        ("Flights on 10/07/2022.", "07-10-2022", ("stated", "date")),
        ("Today is 2024-11-19. Book it for July 10.", "07/10/2025", ("stated", "date")),
    ],
)
def test_a_dates_year_is_the_one_the_text_writes_with_it(
    text: str, value: str, expected: Any
) -> None:
    assert how(text, tool(when=STR), when=value)["when"] == expected
