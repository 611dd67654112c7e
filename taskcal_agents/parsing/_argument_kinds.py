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
from collections.abc import Callable, Mapping
from typing import Any, Literal, NamedTuple, get_args

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
_DOMAIN = re.compile(r"^(?:[A-Za-z0-9][\w-]*\.)+(?P<tld>[A-Za-z]{2,24})$")
# fmt: off
_GENERIC_TLDS = frozenset((
    "com", "org", "net", "edu", "gov", "mil", "int", "info", "biz", "mobi", "pro", "app", "dev",
    "xyz", "top", "online", "site", "website", "club", "shop", "store", "live", "icu", "buzz",
    "click", "tech", "space", "fun", "world", "cloud", "digital", "network", "support",
    "services", "agency", "solutions", "company", "group", "news", "blog", "guru", "vip",
    "work", "bank", "finance", "money", "pay", "secure",
))
"""The generic top-level domains a bare domain may end with; any two letters (a country's
code) may too, unless they are a file's extension."""
_FILE_EXTENSIONS = frozenset((
    "txt", "pdf", "doc", "docx", "xls", "xlsx", "ppt", "pptx", "odt", "ods", "rtf", "csv",
    "tsv", "json", "xml", "yaml", "yml", "toml", "ini", "cfg", "conf", "log", "md", "rst",
    "tex", "html", "htm", "css", "js", "ts", "jsx", "tsx", "py", "ipynb", "rb", "go", "rs",
    "java", "kt", "cpp", "hpp", "cs", "cc", "php", "pl", "sh", "ps", "bat", "exe", "dll", "so",
    "bin", "zip", "tar", "gz", "tgz", "xz", "rar", "png", "jpg", "jpeg", "gif", "bmp", "svg",
    "webp", "ico", "tif", "tiff", "mp3", "mp4", "wav", "mov", "avi", "mkv", "db", "sql",
    "sqlite", "bak", "tmp", "eml", "ics", "vcf", "pem", "crt", "lock", "env", "dat", "pkl",
))
"""Endings that make a dotted name a file's name ("notes.md", "main.py"), not a domain."""
# fmt: on
_EXTENSION_TLDS = frozenset(("md", "py", "rs", "sh", "so", "ps", "pl", "cc", "zip", "mov"))
"""File extensions that are top-level domains too: with a path ("evil.sh/x"), a domain."""
_DATE_LIKE = re.compile(r"^\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}(?:[T ][\d:.]+Z?)?$")
_IBAN = re.compile(r"^[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]){10,30}$", re.I)
_PATH_SHAPE = re.compile(
    r"^(?:~|\.{1,2})?[/\\]?(?:[\w .-]+[/\\])+[\w .-]*$|^[\w-]+(?:\.[\w-]+)*\.[a-z][a-z0-9]{1,3}$",
    re.I,
)
_PHONE = re.compile(r"^\+?\(?\d[\d ()./-]{6,}\d$")
_CODE = re.compile(r"^(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{8,}$|^\d{8,}$")

_STOP = r"[^\s<>\"')\]]"
"""A character a web address in a text goes on with (it ends at a space, a quote, a bracket)."""
_URL_IN_TEXT = re.compile(rf"\b(?:[a-z][a-z0-9+.-]*://|www\.){_STOP}+", re.I)
_EMAIL_IN_TEXT = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_IBAN_IN_TEXT = re.compile(
    r"\b[A-Za-z]{2}\d{2}(?:[A-Za-z0-9]{10,30}|(?: [A-Za-z0-9]{4}){2,7}(?: [A-Za-z0-9]{1,4})?)\b"
)
_DOMAIN_IN_TEXT = re.compile(
    rf"(?<![\w.@/\\-])(?:[A-Za-z0-9][\w-]*\.)+(?P<tld>[A-Za-z]{{2,24}})\b(?P<path>/{_STOP}*)?"
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

    An e-mail address, an IBAN (in capitals, or in any case with valid mod-97 check digits)
    or a phone number is a ``"recipient"`` (where data or money goes), a web address (a
    bare domain as :func:`embedded_identifiers` reads one) a ``"url"``, a file path a
    ``"path"``, a code of eight or more letters and digits (with at least one digit) an
    ``"identifier"``. A date and a time zone name ("Asia/Tokyo") are words.
    """
    text = value.strip()
    if not text or len(text) > 2048:
        return None
    if _EMAIL.match(text):
        return "recipient"
    if _WEB.match(text) or _is_domain(text):
        return "url"
    if _DATE_LIKE.match(text) or _TIME_ZONE_NAME.match(text):
        return None  # a date, or a time zone ("Asia/Tokyo"), is words, not a path
    if _IBAN.match(text) and (text.isupper() or _iban_checks(text)):
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
    recipient, ``amount`` an amount whatever its value reads like: "five thousand" is one);
    a string value's shape next: an amount of money under any name
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
    if words & _AMOUNT:
        return "amount"  # named as an amount: one, whatever its value reads like (fail closed)
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

    A URL with any scheme or ``www.``; a domain with a path whatever its top-level domain
    ("secure-login.xyz/reset"), and without one where the top-level domain is a common
    generic one or two letters (a country's code); never a file's name ("notes.md",
    "main.py", "Node.js/Express", unless its extension is a top-level domain too and a path
    follows: "evil.sh/x") and never after a path's slash ("docs/setup.guide");
    an IBAN written in capitals, compact or in groups of four ("US13 3000 0000 1234 5678
    90"), or in any case where its ISO 7064 mod-97 check digits hold ("gb29 nwbk 6016 1331
    9268 19"; "ab12cdefghijklmn" is no IBAN).

    Returns:
        ``(kind, value)`` pairs, in the order found; a domain inside an e-mail address or
        a URL already found is not found again. An IBAN that begins in a URL's path or
        query is found beside the URL where it goes on past the URL's end
        ("https://x.com/DE89 3704 …") or its check digits hold ("x.com/pay?iban=DE89…").
    """
    found: list[tuple[str, str]] = []
    taken: list[_Span] = []
    for kind, pattern in _EMBEDDED:
        for m in pattern.finditer(text):
            value = _EMBEDDED_CHECK.get(pattern, _as_found)(m)
            if value is None:
                continue
            iban = value if pattern is _IBAN_IN_TEXT else None
            span = _Span(m.start(), m.start() + len(value), _path_start(pattern, m), iban)
            if any(span.overlaps(t) and not span.beside(t) for t in taken):
                continue
            taken.append(span)
            found.append((kind, value.rstrip(".,;:!?")))
    return found


class _Span(NamedTuple):
    """Where an identifier lies in a text; for a URL, where its path begins."""

    start: int
    end: int
    path: int | None
    """Where a URL's path (or query) begins; ``None`` for an identifier that is no URL."""
    iban: str | None
    """The IBAN found here; ``None`` for another identifier."""

    def overlaps(self, other: _Span) -> bool:
        return self.start < other.end and other.start < self.end

    def beside(self, other: _Span) -> bool:
        """Whether both are found though they overlap: a URL and an IBAN in its path.

        The IBAN begins in the URL's path or query and goes on past the URL's end
        ("x.com/DE89 3704 …"), or its check digits hold; never one in the URL's host, nor
        a code in a path that only looks like an IBAN ("x.com/AB12CDEF34567890").
        """
        url, iban = (self, other) if self.path is not None else (other, self)
        if url.path is None or iban.iban is None:
            return False
        return iban.start >= url.path and (iban.end > url.end or _iban_checks(iban.iban))


def _path_start(pattern: re.Pattern[str], match: re.Match[str]) -> int | None:
    """Where a URL's path or query begins in the text (its end if it has none), else None."""
    if pattern is _DOMAIN_IN_TEXT:
        return match.start("path") if match.group("path") is not None else match.end()
    if pattern is not _URL_IN_TEXT:
        return None
    found = match.group(0)
    host = found.find("://") + 3 if "://" in found else 0
    ends = [i for i in (found.find(c, host) for c in "/?#") if i >= 0]
    return match.start() + min(ends, default=len(found))


def _as_found(match: re.Match[str]) -> str:
    return match.group(0)


def _domain_in_text(match: re.Match[str]) -> str | None:
    """A domain found in a text, if it is one (see :func:`embedded_identifiers`)."""
    if match.group("path") is not None:
        tld = match.group("tld").lower()
        file = tld in _FILE_EXTENSIONS and tld not in _EXTENSION_TLDS  # "Node.js/Express"
        return None if file else match.group(0)
    return match.group(0) if _is_domain(match.group(0)) else None


def _iban_in_text(match: re.Match[str]) -> str | None:
    """An IBAN found in a text, without a word that follows its groups ("... 90 NOW")."""
    groups = match.group(0).split(" ")
    while len(groups) > 1 and not any(c.isdigit() for c in groups[-1]):
        groups.pop()
    for n in range(len(groups), 0, -1):  # the longest run of groups whose check digits hold
        if _iban_checks(" ".join(groups[:n])):
            return " ".join(groups[:n])
    value = " ".join(groups)
    compact = value.replace(" ", "")
    return value if value.isupper() and 14 <= len(compact) <= 34 else None


_EMBEDDED: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("url", _URL_IN_TEXT),
    ("recipient", _EMAIL_IN_TEXT),
    ("recipient", _IBAN_IN_TEXT),
    ("url", _DOMAIN_IN_TEXT),
)
_EMBEDDED_CHECK: dict[re.Pattern[str], Callable[[re.Match[str]], str | None]] = {
    _IBAN_IN_TEXT: _iban_in_text,
    _DOMAIN_IN_TEXT: _domain_in_text,
}


def _is_domain(text: str) -> bool:
    """Whether ``text`` is a bare domain: its top-level domain a generic one or two letters.

    Never a file's name ("notes.md", "bill.txt") nor a word with a dot ("e.g.", "v3.beta").
    """
    match = _DOMAIN.match(text)
    if match is None:
        return False
    tld = match.group("tld").lower()
    if tld in _GENERIC_TLDS:
        return True
    return len(tld) == 2 and tld not in _FILE_EXTENSIONS


def _iban_checks(value: str) -> bool:
    """Whether ``value`` is an IBAN whose ISO 7064 mod-97 check digits hold."""
    compact = value.replace(" ", "").upper()
    if not (15 <= len(compact) <= 34 and compact.isalnum() and compact.isascii()):
        return False
    if not (compact[:2].isalpha() and compact[2:4].isdigit()):
        return False
    digits = "".join(str(int(c, 36)) for c in compact[4:] + compact[:4])
    return int(digits) % 97 == 1


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
