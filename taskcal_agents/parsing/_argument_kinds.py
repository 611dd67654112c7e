"""What an argument is: its kind (an amount, a recipient, a URL…) and whether it is an identifier.

A trust policy (:class:`~taskcal_agents.parsing.TrustPolicy`) names the sources that may
supply each kind of argument, and argument grounding checks an *identifier* (an account
number, an IBAN, an e-mail address, a URL, a file path, a phone number, an ID) by its whole
value: the conversation supports it only where one message holds all of it, never by a
token overlap or an alias.

:func:`argument_kind` reads the kind from the argument's name and schema property first
(``recipient``, ``amount``, ``"format": "email"``) and from the value's shape second (an
IBAN, an e-mail address, a URL, a path, an amount of money such as "EUR 5000").
:func:`embedded_identifiers` finds the identifiers that a free-text value carries (the URL
in a message body).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal, get_args

__all__ = [
    "ARGUMENT_KINDS",
    "ArgumentKind",
    "argument_kind",
    "embedded_identifiers",
    "identifier_shape",
    "is_identifier",
    "name_words",
]

ArgumentKind = Literal[
    "amount", "recipient", "address", "credential", "url", "path", "identifier", "other"
]
"""The kinds of argument a trust policy can name."""

ARGUMENT_KINDS: tuple[str, ...] = get_args(ArgumentKind)
"""Every :data:`ArgumentKind`, in the order :func:`argument_kind` tries them."""

_IDENTIFIER_KINDS = frozenset(("credential", "url", "path", "identifier"))

# fmt: off
_CREDENTIAL = frozenset((
    "password", "passwd", "passphrase", "passcode", "secret", "token", "apikey", "credential",
    "credentials", "pin", "otp",
))
_URL = frozenset(("url", "urls", "uri", "link", "links", "website", "webpage", "href", "domain"))
_PATH = frozenset(("path", "paths", "file", "files", "filename", "filepath", "dir", "directory",
                   "folder"))
_PAYEE = frozenset((
    "recipient", "recipients", "receiver", "receivers", "cc", "bcc", "payee", "payees",
    "iban", "bic", "swift", "account", "accounts", "beneficiary", "beneficiaries",
))
_RECIPIENT = _PAYEE | frozenset((
    "phone", "participant", "participants", "attendee", "attendees", "invitee", "invitees",
    "email", "emails", "user", "username", "member",
))
_AMOUNT = frozenset(("amount", "price", "sum", "total", "cost", "fee", "payment", "money"))
_ADDRESS = frozenset(("address", "street", "zip", "zipcode", "postal", "postcode"))
_IDENTIFIER = frozenset((
    "id", "ids", "uuid", "card", "ssn", "passport", "isbn", "sku",
))
# fmt: on
_URL_FORMATS = frozenset(("uri", "url", "iri", "uri-reference", "iri-reference", "hostname"))

_EMAIL = re.compile(r"^[\w.+-]+@[\w-]+(?:\.[\w-]+)+$")
_WEB = re.compile(
    r"^(?:[a-z][a-z0-9+.-]*://\S+|www\.\S+|[\w-]+(?:\.[\w-]+)*\.[a-z]{2,}/\S*)$", re.I
)
_BARE_DOMAIN = re.compile(
    r"^[\w-]+(?:\.[\w-]+)*\.(?:com|org|net|edu|gov|io|co|info|biz|ai|app|dev|me|uk|de|fr|eu|us)$",
    re.I,
)
_DATE_LIKE = re.compile(r"^\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}(?:[T ][\d:.]+Z?)?$")
_IBAN = re.compile(r"^[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]){10,30}$")
_PATH_SHAPE = re.compile(
    r"^(?:~|\.{1,2})?[/\\]?(?:[\w .-]+[/\\])+[\w .-]*$|^[\w-]+(?:\.[\w-]+)*\.[a-z][a-z0-9]{1,3}$",
    re.I,
)
_PHONE = re.compile(r"^\+?\(?\d[\d ()./-]{6,}\d$")
_CODE = re.compile(r"^(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{8,}$|^\d{8,}$")

_EMBEDDED = (
    ("url", re.compile(r"\b(?:https?://|www\.)[^\s<>\"')\]]+", re.I)),
    ("recipient", re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")),
    ("recipient", re.compile(r"\b[A-Z]{2}\d{2}[A-Z0-9]{10,30}\b")),
    (
        "url",
        re.compile(
            r"\b[\w-]+(?:\.[\w-]+)*\.(?:com|org|net|edu|gov|io|co|info|biz|ai|app|dev|me|uk|de|fr|eu|us)"
            r"\b(?:/[^\s<>\"')\]]*)?",
            re.I,
        ),
    ),
)

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")

# fmt: off
_ISO_4217 = frozenset((
    "AED", "AFN", "ALL", "AMD", "ANG", "AOA", "ARS", "AUD", "AWG", "AZN", "BAM", "BBD", "BDT",
    "BGN", "BHD", "BIF", "BMD", "BND", "BOB", "BRL", "BSD", "BTN", "BWP", "BYN", "BZD", "CAD",
    "CDF", "CHF", "CLP", "CNY", "COP", "CRC", "CUC", "CUP", "CVE", "CZK", "DJF", "DKK", "DOP",
    "DZD", "EGP", "ERN", "ETB", "EUR", "FJD", "FKP", "GBP", "GEL", "GHS", "GIP", "GMD", "GNF",
    "GTQ", "GYD", "HKD", "HNL", "HTG", "HUF", "IDR", "ILS", "INR", "IQD", "IRR", "ISK", "JMD",
    "JOD", "JPY", "KES", "KGS", "KHR", "KMF", "KPW", "KRW", "KWD", "KYD", "KZT", "LAK", "LBP",
    "LKR", "LRD", "LSL", "LYD", "MAD", "MDL", "MGA", "MKD", "MMK", "MNT", "MOP", "MRU", "MUR",
    "MVR", "MWK", "MXN", "MYR", "MZN", "NAD", "NGN", "NIO", "NOK", "NPR", "NZD", "OMR", "PAB",
    "PEN", "PGK", "PHP", "PKR", "PLN", "PYG", "QAR", "RON", "RSD", "RUB", "RWF", "SAR", "SBD",
    "SCR", "SDG", "SEK", "SGD", "SHP", "SLE", "SLL", "SOS", "SRD", "SSP", "STN", "SVC", "SYP",
    "SZL", "THB", "TJS", "TMT", "TND", "TOP", "TRY", "TTD", "TWD", "TZS", "UAH", "UGX", "USD",
    "UYU", "UZS", "VES", "VND", "VUV", "WST", "XAF", "XCD", "XOF", "XPF", "YER", "ZAR", "ZMW",
    "ZWL",
))
# fmt: on
"""The ISO 4217 codes of the currencies in use."""

_NUMBER = (
    r"[+-]?(?:\d{1,3}(?:[,.'\u00a0\u202f ]\d{3})+(?:[.,]\d+)?|\d+(?:[.,]\d+)?)"
    r"(?:\s?(?:k|m|bn|mn))?"
)
"""A number: thousands separated by a comma, a dot, an apostrophe or a space, decimals, and a
multiplier ("5k", "2.5m", "1bn")."""
_SIGN = r"(?:[A-Z]{1,2})?[$€£¥₹₩₽₺₪₫₱฿₴₦¢]"
"""A currency sign, with the letters that name its country ("US$", "HK$")."""
_CODE_OR_SIGN = rf"(?:[A-Z]{{3}}|{_SIGN})"
_UNIT_OR_SIGN = rf"(?:[A-Z]{{1,4}}|{_SIGN})"
_MONEY = re.compile(
    rf"^\s*(?:(?P<before>{_CODE_OR_SIGN})\s?{_NUMBER}|{_NUMBER}\s?(?P<after>{_CODE_OR_SIGN}))\s*$",
    re.I,
)
"""A number with a currency code or sign on either side (the code is checked apart)."""
_MEASURE = re.compile(rf"^\s*(?:{_UNIT_OR_SIGN}\s?)?{_NUMBER}(?:\s?{_UNIT_OR_SIGN})?\s*$", re.I)
"""A number, with any code, unit or sign on either side (under an amount's name)."""


def name_words(name: str) -> tuple[str, ...]:
    """The words of an argument's name, lower-cased: ``"recipientIban"`` → recipient, iban."""
    return tuple(w for w in re.split(r"[^a-z0-9]+", _CAMEL.sub("_", name).lower()) if w)


_TIME_ZONE_NAME = re.compile(
    r"^(?:Africa|America|Antarctica|Arctic|Asia|Atlantic|Australia|Europe|Indian|Pacific|Etc)"
    r"(?:/[A-Za-z_+-]+){1,2}$"
)
"""An IANA time zone name, ``Area/City`` ("Europe/Berlin", "America/Argentina/Salta")."""


def identifier_shape(value: str) -> str | None:
    """The identifier kind a string's shape shows, ``None`` for words.

    An e-mail address, an IBAN or a phone number is a ``"recipient"`` (where data or money
    goes), a web address a ``"url"``, a file path a ``"path"``, a code of eight or more
    letters and digits (with at least one digit) an ``"identifier"``. A date and a time
    zone name ("Asia/Tokyo") are words.
    """
    text = value.strip()
    if not text or len(text) > 2048:
        return None
    if _EMAIL.match(text):
        return "recipient"
    if _WEB.match(text) or _BARE_DOMAIN.match(text):
        return "url"
    if _DATE_LIKE.match(text) or _TIME_ZONE_NAME.match(text):
        return None  # a date, or a time zone ("Asia/Tokyo"), is words, not a path
    if _IBAN.match(text):
        return "recipient"
    if _CODE.match(text):
        return "identifier"
    if " " not in text and _PATH_SHAPE.match(text) and ("/" in text or "\\" in text or "." in text):
        return "path"
    if _PHONE.match(text) and sum(c.isdigit() for c in text) >= 7:
        return "recipient"
    return None


def argument_kind(name: str, prop: Mapping[str, Any] | None = None, value: Any = None) -> str:
    """The kind of the argument ``name`` (its schema property ``prop``, its ``value``).

    The name's words and the property's ``format`` decide first, in the order of
    :data:`ARGUMENT_KINDS` (``api_key`` is a credential, ``file_url`` a URL, ``email`` a
    recipient, ``amount`` an amount when its value is a number or a number with a code,
    unit or currency sign); a string value's shape next: an amount of money under any name
    (a number with an ISO 4217 code in capitals or a currency sign on either side, "EUR
    5000", "$5k"), then :func:`identifier_shape`; otherwise ``"other"``.

    Where the name's ``id`` meets a recipient's word, the word names what the ID is of. A
    payee's or an account's (``to_account_id``, ``recipient_id``, ``payee_ids``: where
    money or data goes) is a recipient. Another's (``email_id``, ``user_id``, ``file_id``)
    is an identifier, a handle on a record, unless its value has a recipient's shape (an
    e-mail address, an IBAN, a phone number) or a URL's: a value that is an address is
    held to the address's kind, whatever its name calls it.
    """
    prop = prop or {}
    words = set(name_words(name))
    fmt = str(prop.get("format") or "").lower()
    numeric = prop.get("type") in ("number", "integer") or (
        isinstance(value, int | float) and not isinstance(value, bool)
    )
    if words & _CREDENTIAL or ("key" in words and words & {"api", "access", "secret", "private"}):
        return "credential"
    if words & {"id", "ids", "uuid"}:
        if words & _PAYEE:
            return "recipient"  # a payee's account ID: where the money goes
        shape = _value_shape(value)
        if shape in ("recipient", "url"):
            return shape  # an address, whatever the name calls it
        return "identifier"  # an e-mail's or a file's ID, not an address or a path
    if words & _URL or fmt in _URL_FORMATS:
        return "url"
    if words & _PATH:
        return "path"
    if words & _RECIPIENT or fmt in ("email", "idn-email"):
        return "recipient"
    if words & _AMOUNT and (numeric or not isinstance(value, str) or _is_amount(value, named=True)):
        return "amount"
    if words & _ADDRESS:
        return "address"
    if words & _IDENTIFIER or fmt == "uuid":
        return "identifier"
    if isinstance(value, str) and _is_amount(value):
        return "amount"  # "EUR 5000" under any name
    return _value_shape(value) or "other"


def _value_shape(value: Any) -> str | None:
    """The identifier kind of a string's shape, or the one all of a list's strings share."""
    if isinstance(value, str):
        return identifier_shape(value)
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        shapes = {identifier_shape(v) for v in value}
        if len(shapes) == 1:
            return shapes.pop()
    return None


def is_identifier(kind: str, value: Any) -> bool:
    """Whether a value of this kind is checked by its whole value.

    Credentials, URLs, paths and identifiers are; so is any string whose shape is an
    identifier's (:func:`identifier_shape`: an e-mail address, an IBAN), whatever its
    argument's name. A recipient named in words ("Alice") is checked as any other text.
    """
    if kind in _IDENTIFIER_KINDS:
        return True
    return isinstance(value, str) and identifier_shape(value) is not None


def embedded_identifiers(text: str) -> list[tuple[str, str]]:
    """The URLs (bare domains too), e-mail addresses and IBANs a free text carries.

    Returns:
        ``(kind, value)`` pairs, in the order found; a domain inside an e-mail address or
        a URL already found is not found again.
    """
    found: list[tuple[str, str]] = []
    taken: list[tuple[int, int]] = []
    for kind, pattern in _EMBEDDED:
        for m in pattern.finditer(text):
            span = m.span()
            if any(a < span[1] and span[0] < b for a, b in taken):
                continue
            taken.append(span)
            found.append((kind, m.group(0).rstrip(".,;:!?")))
    return found


def _is_amount(value: str, *, named: bool = False) -> bool:
    """Whether a string is an amount of money: a number with a currency on either side.

    The currency is an ISO 4217 code in capitals ("EUR 5000", "1 250 000 CHF") or a sign
    ("$5k", "€5.000,50", "US$ 1,200"); the number may group its thousands with a comma, a
    dot, an apostrophe or a space, carry decimals and a multiplier (k, m, bn). For an
    argument ``named`` as an amount (``amount``, ``price``…) the number alone, or with any
    code or unit of up to four letters in either case ("5000 eur", "0.5 BTC"), is one too.
    """
    if named:
        return _MEASURE.match(value) is not None
    match = _MONEY.match(value)
    if match is None:
        return False
    code = match.group("before") or match.group("after")
    return not code.isalpha() or code in _ISO_4217
